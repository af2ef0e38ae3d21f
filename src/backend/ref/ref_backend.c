/* The ref backend: buffers in host memory, "compilation" into a flat list of
 * instructions, and an interpreter that runs them one at a time. */
#include <string.h>
#include <xxhash.h>

#include "../../core/lt_alloc.h"
#include "../../core/lt_error.h"
#include "ref.h"

struct lt_executable {
  int ninstr;
  ref_instr *instr;
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

static int ref_data_alloc(lt_buffer *b) {
  b->data = lt__malloc(b->nbytes);
  return b->data ? LT_OK : LT_ENOMEM;
}

static void ref_data_free(lt_buffer *b) {
  lt__free(b->data, b->nbytes);
  b->data = NULL;
}

static int ref_to_device(lt_buffer *dst, const void *src, size_t nbytes) {
  if (nbytes != dst->nbytes)
    return lt__err(LT_EINVAL, "ref: copy of %zu bytes into a buffer of %zu", nbytes,
                   dst->nbytes);
  if (nbytes) memcpy(dst->data, src, nbytes);
  return LT_OK;
}

static int ref_from_device(const lt_buffer *src, void *dst, size_t nbytes) {
  if (nbytes < src->nbytes)
    return lt__err(LT_EINVAL, "ref: reading %zu bytes into room for %zu", src->nbytes, nbytes);
  if (src->nbytes) memcpy(dst, src->data, src->nbytes);
  return LT_OK;
}

static void ref_executable_free(lt_executable *e) {
  if (!e) return;
  for (int i = 0; i < e->ninstr; i++) {
    lt__free(e->instr[i].operands, (size_t)e->instr[i].noperands * sizeof(int));
    lt__free(e->instr[i].attrs, (size_t)e->instr[i].nattrs * sizeof(int64_t));
  }
  lt__free(e->instr, (size_t)e->ninstr * sizeof(ref_instr));
  lt__free(e->last_use, (size_t)e->ninstr * sizeof(int));
  lt__free(e->roots, (size_t)e->nroots * sizeof(int));
  lt__free(e->alias, (size_t)e->nroots * sizeof(int));
  lt__free(e, sizeof *e);
}

static bool same_type(const ref_instr *a, const ref_instr *b) {
  return a->dtype == b->dtype && a->ndim == b->ndim &&
         memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof(int64_t)) == 0;
}

/* Root r may be computed in the storage of parameter p when nothing reads p
 * after the root's instruction, and the instruction itself, if it reads p,
 * is elementwise (it reads element k before writing element k). */
static bool in_place_safe(const lt_executable *e, int root_instr, int p) {
  const ref_instr *ri = &e->instr[root_instr];
  bool elementwise = ri->op >= LT_OP_NEG && ri->op <= LT_OP_WHERE;
  for (int d = 0; d < e->ninstr; d++) {
    if (e->instr[d].op != LT_OP_DATA || e->instr[d].param != p) continue;
    for (int j = d + 1; j < e->ninstr; j++) {
      const ref_instr *u = &e->instr[j];
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
  e->instr = lt__calloc((size_t)g->nnodes * sizeof(ref_instr));
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
    ref_instr *in = &e->instr[i];
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

static int run_kernel(const ref_instr *ins, lt_buffer *out, lt_buffer *const *in) {
  if (ins->op >= LT_OP_NEG && ins->op <= LT_OP_WHERE) return ref_elementwise(ins, out, in);
  if (ins->op >= LT_OP_SUM && ins->op <= LT_OP_LOG_SOFTMAX) return ref_reduce(ins, out, in);
  if (ins->op == LT_OP_MATMUL) return ref_matmul(ins, out, in);
  if (ins->op >= LT_OP_RESHAPE && ins->op <= LT_OP_PAD) return ref_shape(ins, out, in);
  if (ins->op >= LT_OP_GATHER && ins->op <= LT_OP_ONE_HOT) return ref_index(ins, out, in);
  if (ins->op >= LT_OP_RNG_UNIFORM && ins->op <= LT_OP_RANDPERM) return ref_random(ins, out, in);
  if (ins->op >= LT_OP_SCATTER_ADD && ins->op <= LT_OP_UNSLICE) return ref_grad_ops(ins, out, in);
  return lt__err(LT_EEXEC, "ref: no kernel for op %s", lt__op_name((lt_op)ins->op));
}

/* The parameter whose storage instruction i writes in place, or -1. */
static int in_place_param(const lt_executable *e, int i) {
  for (int r = 0; r < e->nroots; r++)
    if (e->roots[r] == i && e->alias[r] >= 0) return e->alias[r];
  return -1;
}

static int run_instr(const lt_executable *e, int i, lt_buffer **vals, lt_buffer *const *args) {
  const ref_instr *ins = &e->instr[i];
  if (ins->op == LT_OP_DATA) {
    lt_buffer *a = args[ins->param];
    if (a->dtype != ins->dtype || a->ndim != ins->ndim ||
        memcmp(a->shape, ins->shape, (size_t)ins->ndim * sizeof(int64_t)) != 0)
      return lt__err(LT_EEXEC, "ref: parameter %d does not match the compiled graph",
                     ins->param); /* defensive: the graph key makes this impossible */
    vals[i] = lt__buffer_retain(a);
    return LT_OK;
  }
  lt_buffer *out = NULL;
  int donor = in_place_param(e, i);
  if (donor >= 0 && atomic_load(&args[donor]->state) == LT_BUF_READY) {
    out = lt__buffer_new(&lt__ref_backend, args[donor]->dev, (lt_dtype)ins->dtype, ins->shape,
                         ins->ndim);
    if (!out) return LT_ENOMEM;
    lt__buffer_take_data(out, args[donor]);
  } else {
    donor = -1;
    int rc = lt__buffer_alloc(&lt__ref_backend, lt_cpu(0), (lt_dtype)ins->dtype, ins->shape,
                              ins->ndim, &out);
    if (rc != LT_OK) return rc;
  }
  int rc = LT_OK;
  if (ins->op == LT_OP_CONST) {
    for (int64_t k = 0; k < out->numel; k++) ref_setf(out, k, ins->fattr);
  } else {
    lt_buffer *in_small[8];
    lt_buffer **in = in_small;
    if (ins->noperands > 8) {
      in = lt__malloc((size_t)ins->noperands * sizeof *in);
      if (!in) {
        lt__buffer_release(out);
        return LT_ENOMEM;
      }
    }
    for (int k = 0; k < ins->noperands; k++) {
      in[k] = vals[ins->operands[k]];
      if (donor >= 0 && in[k] == args[donor]) in[k] = out; /* same storage, read in place */
    }
    rc = run_kernel(ins, out, in);
    if (in != in_small) lt__free(in, (size_t)ins->noperands * sizeof *in);
  }
  if (rc != LT_OK) {
    lt__buffer_release(out);
    return rc;
  }
  vals[i] = out;
  return LT_OK;
}

/* Gives root value v to the placeholder out: its storage when this execution
 * made it and no other root took it yet, else a copy. */
static int fill_output(lt_buffer *out, lt_buffer *v, bool owned) {
  if (owned && v->data && atomic_load(&v->state) == LT_BUF_READY) {
    lt__buffer_take_data(out, v);
    return LT_OK;
  }
  int rc = lt__buffer_materialize(out);
  if (rc == LT_OK && out->nbytes) memcpy(out->data, v->data, out->nbytes);
  return rc;
}

static int ref_execute(lt_executable *e, lt_buffer *const *args, int nargs,
                       lt_buffer *const *outs, int nouts) {
  if (nargs != e->nparams || nouts != e->nroots)
    return lt__err(LT_EEXEC, "ref: executable takes %d arguments and gives %d results, got %d/%d",
                   e->nparams, e->nroots, nargs, nouts);
  for (int a = 0; a < nargs; a++)
    if (atomic_load(&args[a]->state) != LT_BUF_READY)
      return lt__err(LT_EEXEC, "ref: argument %d holds no value", a); /* defensive */
  lt_buffer **vals = lt__calloc((size_t)e->ninstr * sizeof *vals);
  if (!vals) return LT_ENOMEM;
  int rc = LT_OK;
  for (int i = 0; i < e->ninstr && rc == LT_OK; i++) {
    rc = run_instr(e, i, vals, args);
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
  for (int r = 0; r < e->nroots && rc == LT_OK; r++) {
    int i = e->roots[r];
    bool shared_later = false; /* another root reads the same value: copy for this one */
    for (int q = r + 1; q < e->nroots; q++) shared_later |= e->roots[q] == i;
    rc = fill_output(outs[r], vals[i], e->instr[i].op != LT_OP_DATA && !shared_later);
  }
  for (int i = 0; i < e->ninstr; i++) lt__buffer_release(vals[i]);
  lt__free(vals, (size_t)e->ninstr * sizeof *vals);
  return rc;
}

const lt_backend lt__ref_backend = {
    .name = "ref",
    .env_hash = ref_env_hash,
    .data_alloc = ref_data_alloc,
    .data_free = ref_data_free,
    .to_device = ref_to_device,
    .from_device = ref_from_device,
    .compile = ref_compile,
    .execute = ref_execute,
    .executable_free = ref_executable_free,
    .serialize = NULL, /* the interpreter's executables are cheap to rebuild */
    .deserialize = NULL,
};
