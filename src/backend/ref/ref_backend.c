/* The ref backend: buffers in host memory, "compilation" into a flat list of
 * instructions, and an interpreter that runs them one at a time. */
#include <stdio.h>
#include <string.h>
#include <xxhash.h>

#include "../../core/lt_alloc.h"
#include "../../core/lt_collective.h"
#include "../../core/lt_error.h"
#include "../../core/lt_node_rules.h"
#include "../bytes.h"
#include "ref.h"

struct lt_executable {
  int ninstr;
  lt_instr *instr;
  int *last_use; /* per instruction: the last instruction reading it */
  int nparams;
  int nroots;
  int *roots;
  int *alias; /* per root: the donated parameter written in place, or -1 */
};

static uint64_t ref_env_hash(void) {
  static const char kEnv[] = "lazytensor-ref " LT_VERSION_STRING;
  return XXH3_64bits(kEnv, sizeof kEnv - 1);
}

static void ref_executable_free(lt_executable *e) {
  if (!e) return;
  for (int i = 0; i < e->ninstr; i++) {
    lt__free(e->instr[i].operands, (size_t)e->instr[i].noperands * sizeof(int));
    lt__free(e->instr[i].attrs, (size_t)e->instr[i].nattrs * sizeof(int64_t));
  }
  lt__free(e->instr, (size_t)e->ninstr * sizeof(lt_instr));
  lt__free(e->last_use, (size_t)e->ninstr * sizeof(int));
  lt__free(e->roots, (size_t)e->nroots * sizeof(int));
  lt__free(e->alias, (size_t)e->nroots * sizeof(int));
  lt__free(e, sizeof *e);
}

static bool same_type(const lt_instr *a, const lt_instr *b) {
  return a->dtype == b->dtype && a->ndim == b->ndim &&
         memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof(int64_t)) == 0;
}

/* Root r may be computed in the storage of parameter p when nothing reads p
 * after the root's instruction, and the instruction itself, if it reads p,
 * is elementwise (it reads element k before writing element k). */
static bool in_place_safe(const lt_executable *e, int root_instr, int p) {
  const lt_instr *ri = &e->instr[root_instr];
  bool elementwise = lt__op_is_elementwise(ri->op);
  for (int d = 0; d < e->ninstr; d++) {
    if (e->instr[d].op != LT_OP_DATA || e->instr[d].param != p) continue;
    for (int j = d + 1; j < e->ninstr; j++) {
      const lt_instr *u = &e->instr[j];
      for (int k = 0; k < u->noperands; k++) {
        if (u->operands[k] != d) continue;
        if (j > root_instr) return false;
        if (j == root_instr && (!elementwise || !same_type(&e->instr[d], ri))) return false;
      }
    }
  }
  return true;
}

static void pair_donors(lt_executable *e, const lt_graph *g) {
  for (int r = 0; r < e->nroots; r++) e->alias[r] = -1;
  for (int k = 0; k < g->ndonors; k++) {
    int p = g->donors[k], d = -1;
    for (int i = 0; i < e->ninstr && d < 0; i++)
      if (e->instr[i].op == LT_OP_DATA && e->instr[i].param == p) d = i;
    if (d < 0) continue;
    for (int r = 0; r < e->nroots; r++) {
      bool taken = false;
      for (int q = 0; q < e->nroots; q++) taken |= e->alias[q] >= 0 && e->roots[q] == e->roots[r];
      if (e->alias[r] >= 0 || taken || !same_type(&e->instr[d], &e->instr[e->roots[r]])) continue;
      if (!in_place_safe(e, e->roots[r], p)) continue;
      e->alias[r] = p;
      break;
    }
  }
}

static int ref_compile(const lt_graph *g, lt_executable **out) {
  lt_executable *e = lt__calloc(sizeof *e);
  if (!e) return LT_ENOMEM;
  e->instr = lt__calloc((size_t)g->nnodes * sizeof(lt_instr));
  e->last_use = lt__malloc((size_t)g->nnodes * sizeof(int));
  e->roots = lt__malloc((size_t)g->nroots * sizeof(int));
  e->alias = lt__malloc((size_t)g->nroots * sizeof(int));
  if (!e->instr || !e->last_use || !e->roots || !e->alias) goto oom;
  e->ninstr = g->nnodes;
  e->nparams = g->nparams;
  e->nroots = g->nroots;
  memcpy(e->roots, g->roots, (size_t)g->nroots * sizeof(int));
  for (int i = 0; i < g->nnodes; i++) {
    const lt_node *n = g->nodes[i];
    lt_instr *in = &e->instr[i];
    if (!lt__ref_has_kernel((lt_op)n->op)) { /* refused before anything runs */
      ref_executable_free(e);
      return lt__err(LT_ECOMPILE, "ref: no kernel for op %s", lt__op_name((lt_op)n->op));
    }
    in->op = n->op;
    in->dtype = n->dtype;
    in->ndim = n->ndim;
    memcpy(in->shape, n->shape, sizeof in->shape);
    in->fattr = n->fattr;
    in->param = g->param_of[i];
    e->last_use[i] = i;
    if (n->noperands) {
      in->operands = lt__malloc((size_t)n->noperands * sizeof(int));
      if (!in->operands) goto oom;
      in->noperands = n->noperands;
      for (int k = 0; k < n->noperands; k++) {
        int src = n->operands[k].node->order;
        in->operands[k] = src;
        e->last_use[src] = i;
      }
    }
    if (n->nattrs) {
      in->attrs = lt__malloc((size_t)n->nattrs * sizeof(int64_t));
      if (!in->attrs) goto oom;
      in->nattrs = n->nattrs;
      memcpy(in->attrs, n->attrs, (size_t)n->nattrs * sizeof(int64_t));
    }
  }
  for (int r = 0; r < g->nroots; r++) e->last_use[g->roots[r]] = g->nnodes; /* kept */
  pair_donors(e, g);
  *out = e;
  return LT_OK;
oom:
  ref_executable_free(e);
  return LT_ENOMEM;
}

/* Leaves: a constant fills its value; a data leaf is a parameter, never run. */
int lt__ref_leaf(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in) {
  (void)in;
  if (ins->op != LT_OP_CONST)
    return lt__err(LT_EEXEC, "ref: %s is a parameter, not a kernel", lt__op_name((lt_op)ins->op));
  for (int64_t k = 0; k < out->numel; k++) ref_setf(out, k, ins->fattr);
  return LT_OK;
}

/* The kernel of each op, from the op table's REF column. */
typedef int (*ref_kernel_fn)(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in);
#define REF_KERNEL_ROW(E, name, fam, arity, res, grad, ref, cpu) [LT_OP_##E] = lt__ref_##ref,
static const ref_kernel_fn kKernels[LT_OP_COUNT] = {LT_OP_TABLE(REF_KERNEL_ROW)};
#undef REF_KERNEL_ROW

static int run_kernel(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in) {
  if (ins->op >= LT_OP_COUNT || !kKernels[ins->op])
    return lt__err(LT_EEXEC, "ref: no kernel for op %s", lt__op_name((lt_op)ins->op));
  return kKernels[ins->op](ins, out, in);
}

/* Whether the family kernel of op has a case for it: the kernels that switch
 * on the op say (elementwise, reductions); the others serve every op of
 * their rows. */
static bool kernel_has_case(lt_op op) {
  if (kKernels[op] == lt__ref_elementwise) return lt__ref_elementwise_has_case(op);
  if (kKernels[op] == lt__ref_reduce) return lt__ref_reduce_has_case(op);
  return true;
}

bool lt__ref_has_kernel(lt_op op) {
  return op < LT_OP_COUNT && kKernels[op] != NULL && kernel_has_case(op);
}

/* The ref backend runs every op; as the executor's fallback it runs single
 * instructions for other backends. */
static bool ref_supports_op(lt_op op) { return lt__ref_has_kernel(op); }
static int ref_run_instr(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in) {
  return run_kernel(ins, out, in);
}

/* The parameter whose storage instruction i writes in place, or -1. */
static int in_place_param(const lt_executable *e, int i) {
  for (int r = 0; r < e->nroots; r++)
    if (e->roots[r] == i && e->alias[r] >= 0) return e->alias[r];
  return -1;
}

/* Puts the value of the donor of in-place instruction i back: its storage,
 * held by v, gets the snapshot copied over it and returns to the donor. */
static void give_back(const lt_executable *e, int i, lt_buffer *v, lt_buffer **pre,
                      lt_buffer *const *args) {
  lt_buffer *snap = pre[2 * e->ninstr + i];
  if (v->nbytes) memcpy(v->data, snap->data, v->nbytes);
  lt__buffer_give_back(args[in_place_param(e, i)], v);
}

/* Runs instruction i into its buffer (allocated beforehand: see ref_execute),
 * or in place in a donated parameter's storage, whose value it first copies
 * to its snapshot. */
static int run_instr(const lt_executable *e, int i, lt_buffer **vals, lt_buffer **pre,
                     lt_buffer *const *args, lt_buffer **in) {
  const lt_instr *ins = &e->instr[i];
  if (ins->op == LT_OP_DATA) {
    lt_buffer *a = args[ins->param];
    if (a->dtype != ins->dtype || a->ndim != ins->ndim ||
        memcmp(a->shape, ins->shape, (size_t)ins->ndim * sizeof(int64_t)) != 0)
      return lt__err(LT_EEXEC, "ref: parameter %d does not match the compiled graph",
                     ins->param); /* defensive: the graph key makes this impossible */
    vals[i] = lt__buffer_retain(a);
    return LT_OK;
  }
  lt_buffer *out = pre[i];
  pre[i] = NULL;
  int donor = -1;
  if (!out && pre[e->ninstr + i]) { /* the root written in place */
    donor = in_place_param(e, i);
    lt__buffer_take_data(out = pre[e->ninstr + i], args[donor]);
    pre[e->ninstr + i] = NULL;
    if (out->nbytes) memcpy(pre[2 * e->ninstr + i]->data, out->data, out->nbytes);
  } else if (!out) { /* nothing donated in this executable: allocate as we go */
    int rc = lt__buffer_alloc(&lt__ref_backend, lt_cpu(0), (lt_dtype)ins->dtype, ins->shape,
                              ins->ndim, &out);
    if (rc != LT_OK) return rc;
  }
  for (int k = 0; k < ins->noperands; k++) {
    in[k] = vals[ins->operands[k]];
    if (donor >= 0 && in[k] == args[donor]) in[k] = out; /* same storage, read in place */
  }
  int rc = run_kernel(ins, out, in);
  if (rc != LT_OK) {
    if (donor >= 0)
      vals[i] = out; /* the donor's storage: ref_execute gives it back */
    else
      lt__buffer_release(out);
    return rc;
  }
  vals[i] = out;
  return LT_OK;
}

/* Gives root value v to the placeholder out: its storage when this execution
 * made it and no other root reads it, else a copy into out's storage, which
 * ref_execute allocated beforehand. */
static int fill_output(lt_buffer *out, lt_buffer *v, bool move) {
  if (move) {
    lt__buffer_take_data(out, v);
    return LT_OK;
  }
  int rc = out->data ? LT_OK : lt__buffer_materialize(out);
  if (rc == LT_OK && out->nbytes) memcpy(out->data, v->data, out->nbytes);
  return rc;
}

/* True when root r gets a copy (its value is a parameter, or a later root
 * reads the same value) rather than the value's own storage. */
static bool root_copies(const lt_executable *e, int r) {
  int i = e->roots[r];
  for (int q = r + 1; q < e->nroots; q++)
    if (e->roots[q] == i) return true;
  return e->instr[i].op == LT_OP_DATA;
}

/* When the executable writes a donated argument in place, every allocation
 * happens before the first instruction runs: an allocation failure then
 * leaves every argument whole, so their tensors keep their values. Each
 * in-place instruction first copies its donor's value to a snapshot, and a
 * failure at any later instruction (or in it: an index out of range) copies
 * it back and returns the storage to the donor. The oracle does not ask
 * which kernels can fail: every donor gets a snapshot (the cpu backend copies
 * only those written before a kernel that can fail). Without donation nothing
 * can be lost, and buffers are allocated as instructions run, reusing freed
 * memory. */
static void ref_signature(const lt_executable *e, int *nparams, int *nroots) {
  *nparams = e->nparams;
  *nroots = e->nroots;
}

static int ref_execute(lt_executable *e, lt_buffer *const *args, int nargs, lt_buffer *const *outs,
                       int nouts) {
  (void)nargs; /* the executor checked the counts and that every argument is READY */
  (void)nouts;
  int n = e->ninstr, maxops = 1;
  lt_buffer **vals = lt__calloc((size_t)n * sizeof *vals);
  /* own buffers, in-place headers, snapshots of donors */
  lt_buffer **pre = lt__calloc((size_t)(3 * n + 1) * sizeof *pre);
  int rc = vals && pre ? LT_OK : LT_ENOMEM;
  bool in_place = false;
  for (int r = 0; r < e->nroots; r++) in_place |= e->alias[r] >= 0;
  for (int i = 0; i < n && rc == LT_OK; i++) {
    const lt_instr *ins = &e->instr[i];
    if (ins->noperands > maxops) maxops = ins->noperands;
    if (ins->op == LT_OP_DATA || !in_place) continue;
    int donor = in_place_param(e, i);
    if (donor >= 0 && atomic_load(&args[donor]->state) == LT_BUF_READY) {
      pre[n + i] = lt__buffer_new(&lt__ref_backend, args[donor]->dev, (lt_dtype)ins->dtype,
                                  ins->shape, ins->ndim);
      rc = pre[n + i] ? lt__buffer_alloc(&lt__ref_backend, lt_cpu(0), (lt_dtype)ins->dtype,
                                         ins->shape, ins->ndim, &pre[2 * n + i])
                      : LT_ENOMEM;
    } else {
      rc = lt__buffer_alloc(&lt__ref_backend, lt_cpu(0), (lt_dtype)ins->dtype, ins->shape,
                            ins->ndim, &pre[i]);
    }
  }
  for (int r = 0; r < e->nroots && rc == LT_OK && in_place; r++)
    if (root_copies(e, r)) rc = lt__buffer_materialize(outs[r]);
  lt_buffer **in = rc == LT_OK ? lt__malloc((size_t)maxops * sizeof *in) : NULL;
  if (rc == LT_OK && !in) rc = LT_ENOMEM;
  for (int i = 0; i < n && rc == LT_OK; i++) {
    rc = run_instr(e, i, vals, pre, args, in);
    if (rc != LT_OK) break;
    /* Free each intermediate after its last reader, as a real backend would. */
    for (int k = 0; k < e->instr[i].noperands; k++) {
      int src = e->instr[i].operands[k];
      if (e->last_use[src] == i && vals[src]) {
        lt__buffer_release(vals[src]);
        vals[src] = NULL;
      }
    }
  }
  for (int r = 0; r < e->nroots && rc == LT_OK; r++)
    rc = fill_output(outs[r], vals[e->roots[r]], !root_copies(e, r));
  bool abandoned = lt__coll_take_abandoned();
  for (int i = 0; rc != LT_OK && vals && pre && i < n; i++) {
    if (!pre[2 * n + i] || pre[n + i] || !vals[i]) continue; /* no donor storage taken */
    lt_buffer *donor = args[in_place_param(e, i)];
    if (!abandoned) {
      give_back(e, i, vals[i], pre, args);
    } else if (lt__buffer_materialize(donor) == LT_OK) {
      /* MPI may still write the storage it took: fresh storage instead */
      if (donor->nbytes) memcpy(donor->data, pre[2 * n + i]->data, donor->nbytes);
      lt__buffer_publish(donor);
    }
  }
  if (abandoned) {
    /* a collective gave up with MPI still holding pointers into these
     * buffers: leak them all rather than let anything else reuse them */
    for (int p = 0; p < e->nparams; p++) lt__buffer_retain(args[p]);
    for (int r = 0; r < e->nroots; r++) lt__buffer_retain(outs[r]);
  }
  for (int i = 0; vals && i < n && !abandoned; i++) lt__buffer_release(vals[i]);
  for (int i = 0; pre && i < 3 * n && !abandoned; i++) lt__buffer_release(pre[i]);
  lt__free(in, (size_t)maxops * sizeof *in);
  lt__free(vals, (size_t)n * sizeof *vals);
  lt__free(pre, (size_t)(3 * n + 1) * sizeof *pre);
  return rc;
}

/* ---- serialization (the persistent cache) ----------------------------------------------
 * Little-endian, versioned:
 *   u32 magic "LTRF", u32 version, u32 ninstr, u32 nparams, u32 nroots,
 *   per instruction: u16 op, u8 dtype, u8 ndim, i64 shape[ndim], f64 fattr (bits),
 *     i32 param, u32 noperands, u32 operands[noperands], u32 nattrs, i64 attrs[nattrs],
 *   u32 roots[nroots], i32 alias[nroots].
 * last_use is recomputed. deserialize checks every field (op, dtype, ndim, shape,
 * parameter, operand, root and alias indices, operand counts per op) and every
 * count against the bytes left, in time linear in the bytes: any input gives
 * LT_EINVAL or a structurally sound executable. Each instruction is held to
 * the IR's contract with its operands (lt__node_rules_check, the loader's
 * check of a program file's nodes): a program file's checksum can be made
 * right by whoever changed its bytes. */
enum { kRefMagic = 0x4652544c /* "LTRF" */, kRefFormat = 1 };

static int ref_serialize(const lt_executable *e, void **bytes, size_t *nbytes) {
  lt_wbuf w = {0};
  lt__wb_int(&w, kRefMagic, 4);
  lt__wb_int(&w, kRefFormat, 4);
  lt__wb_int(&w, (uint32_t)e->ninstr, 4);
  lt__wb_int(&w, (uint32_t)e->nparams, 4);
  lt__wb_int(&w, (uint32_t)e->nroots, 4);
  for (int i = 0; i < e->ninstr; i++) {
    const lt_instr *in = &e->instr[i];
    lt__instr_write_head(&w, in);
    lt__wb_int(&w, (uint32_t)in->param, 4);
    lt__wb_int(&w, (uint32_t)in->noperands, 4);
    for (int k = 0; k < in->noperands; k++) lt__wb_int(&w, (uint32_t)in->operands[k], 4);
    lt__wb_int(&w, (uint32_t)in->nattrs, 4);
    for (int k = 0; k < in->nattrs; k++) lt__wb_int(&w, (uint64_t)in->attrs[k], 8);
  }
  for (int r = 0; r < e->nroots; r++) lt__wb_int(&w, (uint32_t)e->roots[r], 4);
  for (int r = 0; r < e->nroots; r++) lt__wb_int(&w, (uint32_t)e->alias[r], 4);
  return lt__wb_finish(&w, bytes, nbytes, "ref");
}

static int bad_bytes(lt_executable *e, const char *what) {
  ref_executable_free(e);
  return lt__err(LT_EINVAL, "ref: bad serialized executable: %s", what);
}

/* Whether instruction in breaks the IR's contract with its operands (why in
 * buf); operands are earlier instructions, already checked. */
static bool check_instr(const lt_executable *e, const lt_instr *in, char *buf, size_t n) {
  lt_rule_operand sigs[8], *sigv = sigs;
  if (in->noperands > 8 && !(sigv = lt__malloc((size_t)in->noperands * sizeof *sigv))) {
    snprintf(buf, n, "out of memory");
    return true;
  }
  for (int k = 0; k < in->noperands; k++) {
    const lt_instr *src = &e->instr[in->operands[k]];
    sigv[k] = (lt_rule_operand){src->dtype, src->ndim, src->shape};
  }
  char why[320];
  const char *bad =
      lt__node_rules_check((lt_op)in->op, (lt_dtype)in->dtype, in->shape, in->ndim, sigv,
                           in->noperands, in->attrs, in->nattrs, why, sizeof why);
  if (sigv != sigs) lt__free(sigv, (size_t)in->noperands * sizeof *sigv);
  if (bad) snprintf(buf, n, "instruction %s: %s", lt__op_name((lt_op)in->op), bad);
  return bad != NULL;
}

static int ref_deserialize(const void *bytes, size_t nbytes, lt_executable **out) {
  if (!bytes || !out) return lt__err(LT_EINVAL, "ref: deserialize: NULL argument");
  char problem_buf[400];
  lt_rbuf r = {bytes, nbytes, 0, false};
  if (lt__rb_int(&r, 4) != kRefMagic) return bad_bytes(NULL, "not a ref executable");
  if (lt__rb_int(&r, 4) != kRefFormat) return bad_bytes(NULL, "unknown format version");
  uint32_t ninstr = (uint32_t)lt__rb_int(&r, 4), nparams = (uint32_t)lt__rb_int(&r, 4),
           nroots = (uint32_t)lt__rb_int(&r, 4);
  if (r.bad) return bad_bytes(NULL, "truncated header");
  /* Each instruction takes at least 20 bytes and each root 8: no count may
   * promise more than the bytes left (this bounds every allocation). */
  if (ninstr == 0 || ninstr > lt__rb_left(&r) / 20 || nroots > lt__rb_left(&r) / 8 ||
      nparams > ninstr || ninstr >= (1u << 30))
    return bad_bytes(NULL, "counts larger than the bytes");
  lt_executable *e = lt__calloc(sizeof *e);
  if (!e) return LT_ENOMEM;
  e->instr = lt__calloc((size_t)ninstr * sizeof(lt_instr));
  e->last_use = lt__malloc((size_t)ninstr * sizeof(int));
  e->roots = lt__malloc((size_t)nroots * sizeof(int));
  e->alias = lt__malloc((size_t)nroots * sizeof(int));
  if (!e->instr || !e->last_use || !e->roots || !e->alias) {
    lt__free(e->instr, (size_t)ninstr * sizeof(lt_instr));
    lt__free(e->last_use, (size_t)ninstr * sizeof(int));
    lt__free(e->roots, (size_t)nroots * sizeof(int));
    lt__free(e->alias, (size_t)nroots * sizeof(int));
    lt__free(e, sizeof *e);
    return LT_ENOMEM;
  }
  e->ninstr = (int)ninstr;
  e->nparams = (int)nparams;
  e->nroots = (int)nroots;
  for (uint32_t i = 0; i < ninstr; i++) {
    lt_instr *in = &e->instr[i];
    const char *problem = lt__instr_read_head(&r, in);
    if (problem) return bad_bytes(e, problem);
    int op = in->op;
    if (!lt__ref_has_kernel((lt_op)op)) return bad_bytes(e, "an op this build has no kernel for");
    in->param = (int32_t)(uint32_t)lt__rb_int(&r, 4);
    uint32_t nops = (uint32_t)lt__rb_int(&r, 4);
    if (r.bad) return bad_bytes(e, "truncated instruction");
    if (op == LT_OP_DATA ? (in->param < 0 || (uint32_t)in->param >= nparams) : in->param != -1)
      return bad_bytes(e, "bad parameter index");
    if (nops > lt__rb_left(&r) / 4 || !lt__op_arity_ok(op, nops))
      return bad_bytes(e, "bad operand count");
    if (nops) {
      in->operands = lt__malloc((size_t)nops * sizeof(int));
      if (!in->operands) {
        ref_executable_free(e);
        return LT_ENOMEM;
      }
      in->noperands = (int)nops;
    }
    for (uint32_t k = 0; k < nops; k++) {
      uint32_t src = (uint32_t)lt__rb_int(&r, 4);
      if (src >= i) return bad_bytes(e, "operand is not an earlier instruction");
      in->operands[k] = (int)src;
    }
    uint32_t nattrs = (uint32_t)lt__rb_int(&r, 4);
    if (r.bad) return bad_bytes(e, "truncated instruction");
    if (nattrs > lt__rb_left(&r) / 8 || nattrs > UINT16_MAX) return bad_bytes(e, "bad attr count");
    if (nattrs) {
      in->attrs = lt__malloc((size_t)nattrs * sizeof(int64_t));
      if (!in->attrs) {
        ref_executable_free(e);
        return LT_ENOMEM;
      }
      in->nattrs = (int)nattrs;
    }
    for (uint32_t k = 0; k < nattrs; k++) in->attrs[k] = (int64_t)lt__rb_int(&r, 8);
    if (r.bad) return bad_bytes(e, "truncated instruction");
    /* the kernels read shapes and attrs unchecked: each instruction must keep
     * the IR's contract with its operands (the cache's checksum does not
     * vouch for bytes a program file carries) */
    if (check_instr(e, in, problem_buf, sizeof problem_buf)) return bad_bytes(e, problem_buf);
  }
  for (uint32_t q = 0; q < nroots; q++) {
    uint32_t root = (uint32_t)lt__rb_int(&r, 4);
    if (!r.bad && root >= ninstr) return bad_bytes(e, "root out of range");
    e->roots[q] = (int)root;
  }
  /* A root written in place needs a parameter of its own dtype and shape, and
   * no other root aliasing the same parameter or instruction. mark[p]: the
   * first DATA instruction of parameter p (+1), and bit 30 once p is taken;
   * mark[nparams + i]: instruction i is written in place. */
  size_t nmark = (size_t)nparams + ninstr;
  int *mark = lt__calloc(nmark * sizeof(int));
  if (!mark) {
    ref_executable_free(e);
    return LT_ENOMEM;
  }
  for (uint32_t d = ninstr; d-- > 0;)
    if (e->instr[d].op == LT_OP_DATA) mark[e->instr[d].param] = (int)d + 1;
  const char *bad = NULL;
  for (uint32_t q = 0; q < nroots && !bad; q++) {
    int32_t a = (int32_t)(uint32_t)lt__rb_int(&r, 4);
    e->alias[q] = a;
    if (r.bad)
      bad = "truncated roots";
    else if (a < -1 || a >= (int32_t)nparams)
      bad = "alias out of range";
    if (bad || a < 0) continue;
    int first = (mark[a] & ~(1 << 30)) - 1, *taken = &mark[nparams + (uint32_t)e->roots[q]];
    if (first < 0 || !same_type(&e->instr[first], &e->instr[e->roots[q]]))
      bad = "alias of a different type";
    else if ((mark[a] & (1 << 30)) || *taken)
      bad = "parameter aliased twice";
    mark[a] |= 1 << 30;
    *taken = 1;
  }
  lt__free(mark, nmark * sizeof(int));
  if (bad) return bad_bytes(e, bad);
  if (r.pos != r.len) return bad_bytes(e, "trailing bytes");
  for (int i = 0; i < e->ninstr; i++) {
    e->last_use[i] = i;
    for (int k = 0; k < e->instr[i].noperands; k++) e->last_use[e->instr[i].operands[k]] = i;
  }
  for (int q = 0; q < e->nroots; q++) e->last_use[e->roots[q]] = e->ninstr; /* kept */
  *out = e;
  return LT_OK;
}

const lt_backend lt__ref_backend = {
    .name = "ref",
    .env_hash = ref_env_hash,
    .supports_op = ref_supports_op,
    .run_instr = ref_run_instr,
    .data_alloc = lt__host_data_alloc,
    .data_free = lt__host_data_free,
    .to_device = lt__host_to_device,
    .host_storage = true,
    .from_device = lt__host_from_device,
    .compile = ref_compile,
    .signature = ref_signature,
    .execute = ref_execute,
    .executable_free = ref_executable_free,
    .serialize = ref_serialize,
    .deserialize = ref_deserialize,
};
