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
};

enum { kDataOffset = (sizeof(lt_buffer) + 63) / 64 * 64 };

static uint64_t ref_env_hash(void) {
  static const char kEnv[] = "lazytensor-ref " LT_VERSION_STRING;
  return XXH3_64bits(kEnv, sizeof kEnv - 1);
}

static int ref_buffer_alloc(lt_device dev, lt_dtype dt, const int64_t *shape, int ndim,
                            lt_buffer **out) {
  /* Header and data in one block (one allocation per intermediate). */
  int64_t numel = lt__numel(shape, ndim);
  size_t nbytes = (size_t)numel * lt_dtype_size(dt);
  lt_buffer *b = lt__malloc(kDataOffset + nbytes);
  if (!b) return LT_ENOMEM;
  memset(b, 0, sizeof *b);
  b->numel = numel;
  b->nbytes = nbytes;
  b->data = (char *)b + kDataOffset;
  atomic_init(&b->refs, 1);
  b->dtype = (uint8_t)dt;
  b->ndim = (uint8_t)ndim;
  b->dev = dev;
  if (ndim) memcpy(b->shape, shape, (size_t)ndim * sizeof(int64_t));
  b->backend = &lt__ref_backend;
  b->param_index = -1;
  *out = b;
  return LT_OK;
}

static void ref_buffer_free(lt_buffer *b) { lt__free(b, kDataOffset + b->nbytes); }

static int ref_to_device(lt_buffer *dst, const void *src, size_t nbytes) {
  if (nbytes != dst->nbytes)
    return lt__err(LT_EINVAL, "ref: copy of %zu bytes into a buffer of %zu", nbytes, dst->nbytes);
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
  lt__free(e, sizeof *e);
}

static int ref_compile(const lt_graph *g, lt_executable **out) {
  lt_executable *e = lt__calloc(sizeof *e);
  if (!e) return LT_ENOMEM;
  e->instr = lt__calloc((size_t)g->nnodes * sizeof(ref_instr));
  e->last_use = lt__malloc((size_t)g->nnodes * sizeof(int));
  e->roots = lt__malloc((size_t)g->nroots * sizeof(int));
  if (!e->instr || !e->last_use || !e->roots) goto oom;
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
  return lt__err(LT_EEXEC, "ref: no kernel for op %s", lt__op_name((lt_op)ins->op));
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
  /* Results are placed on CPU:0; the executor stamps the real device on outputs. */
  int rc = ref_buffer_alloc(lt_cpu(0), (lt_dtype)ins->dtype, ins->shape, ins->ndim, &out);
  if (rc != LT_OK) return rc;
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
    for (int k = 0; k < ins->noperands; k++) in[k] = vals[ins->operands[k]];
    rc = run_kernel(ins, out, in);
    if (in != in_small) lt__free(in, (size_t)ins->noperands * sizeof *in);
    if (rc != LT_OK) {
      lt__buffer_release(out);
      return rc;
    }
  }
  vals[i] = out;
  return LT_OK;
}

static int ref_execute(lt_executable *e, lt_buffer *const *args, int nargs, lt_buffer **outs,
                       int nouts) {
  if (nargs != e->nparams || nouts != e->nroots)
    return lt__err(LT_EEXEC, "ref: executable takes %d arguments and gives %d results, got %d/%d",
                   e->nparams, e->nroots, nargs, nouts);
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
  if (rc == LT_OK)
    for (int r = 0; r < e->nroots; r++) outs[r] = lt__buffer_retain(vals[e->roots[r]]);
  for (int i = 0; i < e->ninstr; i++) lt__buffer_release(vals[i]);
  lt__free(vals, (size_t)e->ninstr * sizeof *vals);
  return rc;
}

const lt_backend lt__ref_backend = {
    .name = "ref",
    .env_hash = ref_env_hash,
    .buffer_alloc = ref_buffer_alloc,
    .buffer_free = ref_buffer_free,
    .to_device = ref_to_device,
    .from_device = ref_from_device,
    .compile = ref_compile,
    .execute = ref_execute,
    .executable_free = ref_executable_free,
};
