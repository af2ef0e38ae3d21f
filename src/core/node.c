/* IR nodes: creation, structural hashing, release. */
#include <stdatomic.h>
#include <string.h>
#include <xxhash.h>

#include "lt_buffer.h"
#include "lt_dtype.h"
#include "lt_alloc.h"
#include "lt_error.h"
#include "lt_node.h"
#include "lt_shape.h"

static _Atomic uint32_t g_epoch;

uint32_t lt__node_epoch(void) { return atomic_fetch_add(&g_epoch, 1) + 1; }

int64_t lt__numel(const int64_t *shape, int ndim) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  return n;
}

/* docs/DESIGN.md, rule 1: the hash covers op, attributes, dtype, shape and the
 * operands' hashes, never device data. */
static uint64_t node_hash(const lt_node *n) {
  uint64_t words[2 + LT_MAX_DIMS + 64];
  int k = 0;
  words[k++] = (uint64_t)n->op | (uint64_t)n->dtype << 16 | (uint64_t)n->ndim << 24 |
               (uint64_t)n->nattrs << 32 | (uint64_t)n->noperands << 48;
  for (int i = 0; i < n->ndim; i++) words[k++] = (uint64_t)n->shape[i];
  for (int i = 0; i < n->nattrs && k < (int)(sizeof words / sizeof words[0]) - 1; i++)
    words[k++] = (uint64_t)n->attrs[i];
  uint64_t fbits;
  memcpy(&fbits, &n->fattr, sizeof fbits);
  words[k++] = fbits;
  uint64_t h = XXH3_64bits(words, (size_t)k * sizeof words[0]);
  for (int i = 0; i < n->noperands; i++) {
    uint64_t pair[2] = {n->operands[i].node->hash, n->operands[i].index};
    h = XXH3_64bits_withSeed(pair, sizeof pair, h);
  }
  return h;
}

/* The op table's arity and result dtype rule, checked for every node made:
 * a builder that breaks them is a bug in the library, reported as an error
 * rather than handed to kernels that index operands unchecked. */
static int check_row(lt_op op, lt_dtype dt, lt_node *const *operands, int noperands) {
  if ((unsigned)op >= LT_OP_COUNT)
    return lt__err(LT_EINVAL, "internal: node of unknown op %d", (int)op);
  if (!lt__op_arity_ok(op, (uint32_t)noperands))
    return lt__err(LT_EINVAL, "internal: op %s given %d operands", lt__op_name(op), noperands);
  lt_dtype want = dt;
  switch (lt__op_result(op)) {
  case LT_RES_SAME:
    want = (lt_dtype)operands[lt__op_family(op) == LT_FAM_TERNARY ? 1 : 0]->dtype;
    break;
  case LT_RES_BOOL:
    want = LT_BOOL;
    break;
  case LT_RES_INDEX:
    want = LT_I64;
    break;
  case LT_RES_NODE:
    break;
  }
  if (want != dt)
    return lt__err(LT_EINVAL, "internal: op %s made a %s result where the op table says %s",
                   lt__op_name(op), lt_dtype_name(dt), lt_dtype_name(want));
  return LT_OK;
}

/* Every node's shape, whichever builder made it: a rank the node can hold,
 * dims >= 0 (else a library bug), and an element count within the one size
 * limit (else the user asked for too much), so that no byte count or stride
 * computed from a node wraps on any backend. */
static int check_node_shape(lt_op op, const int64_t *shape, int ndim) {
  if (ndim < 0 || ndim > LT_MAX_DIMS || (ndim > 0 && !shape))
    return lt__err(LT_EINVAL, "internal: op %s given rank %d", lt__op_name(op), ndim);
  char s[LT_SHAPE_STR_MAX];
  for (int i = 0; i < ndim; i++)
    if (shape[i] < 0)
      return lt__err(LT_EINVAL, "internal: op %s given shape %s", lt__op_name(op),
                     lt__shape_str(shape, ndim, s, sizeof s));
  if (!lt__shape_fits(shape, ndim))
    return lt__err(LT_ESHAPE, "%s: result shape %s is too large (more than %lld elements)",
                   lt__op_name(op), lt__shape_str(shape, ndim, s, sizeof s),
                   (long long)LT_MAX_NUMEL);
  return LT_OK;
}

lt_node *lt__node_new(lt_op op, lt_dtype dt, const int64_t *shape, int ndim,
                      lt_node *const *operands, int noperands, const int64_t *attrs, int nattrs,
                      double fattr) {
  if (check_row(op, dt, operands, noperands) != LT_OK) return NULL;
  if (check_node_shape(op, shape, ndim) != LT_OK) return NULL;
  size_t size =
      sizeof(lt_node) + (size_t)noperands * sizeof(lt_operand) + (size_t)nattrs * sizeof(int64_t);
  lt_node *n = lt__malloc(size);
  if (!n) return NULL;
  memset(n, 0, sizeof *n);
  n->refs = 1;
  n->op = (uint16_t)op;
  n->dtype = (uint8_t)dt;
  n->ndim = (uint8_t)ndim;
  n->noperands = (uint16_t)noperands;
  n->nattrs = (uint16_t)nattrs;
  n->fattr = fattr;
  n->order = -1;
  if (ndim) memcpy(n->shape, shape, (size_t)ndim * sizeof(int64_t));
  n->operands = (lt_operand *)(n + 1);
  n->attrs = (int64_t *)(n->operands + noperands);
  for (int i = 0; i < noperands; i++) {
    n->operands[i].node = lt__node_retain(operands[i]);
    n->operands[i].index = 0;
  }
  if (nattrs) memcpy(n->attrs, attrs, (size_t)nattrs * sizeof(int64_t));
  n->hash = node_hash(n);
  return n;
}

lt_node *lt__node_data(lt_buffer *buf) {
  lt_node *n =
      lt__node_new(LT_OP_DATA, (lt_dtype)buf->dtype, buf->shape, buf->ndim, NULL, 0, NULL, 0, 0.0);
  if (n) n->data = lt__buffer_retain(buf);
  return n;
}

lt_node *lt__node_const(lt_dtype dt, const int64_t *shape, int ndim, double value) {
  return lt__node_new(LT_OP_CONST, dt, shape, ndim, NULL, 0, NULL, 0, value);
}

static void node_free(lt_node *n) {
  if (n->data) lt__buffer_release(n->data);
  lt__free(n, sizeof(lt_node) + (size_t)n->noperands * sizeof(lt_operand) +
                  (size_t)n->nattrs * sizeof(int64_t));
}

void lt__node_set_origin(lt_node *data, lt_node *origin) {
  lt_node *old = data->origin;
  data->origin = lt__node_retain(origin);
  lt__node_release(old);
}

void lt__node_release(lt_node *n) {
  /* Iterative, so that releasing a graph thousands of nodes deep cannot
   * overflow the stack. Operand pointers already freed are never touched:
   * each node is pushed only when its count reaches zero. */
  if (!n || --n->refs > 0) return;
  lt_node *small[64];
  lt_node **stack = small;
  size_t cap = 64, top = 0;
  stack[top++] = n;
  while (top) {
    lt_node *cur = stack[--top];
    /* The operands, then the origin (eager mode's history): one more edge. */
    for (int i = 0; i <= cur->noperands; i++) {
      lt_node *op = i < cur->noperands ? cur->operands[i].node : cur->origin;
      if (!op || --op->refs > 0) continue;
      if (top == cap) {
        lt_node **grown = lt__malloc(cap * 2 * sizeof *grown);
        if (!grown) { /* defensive: fall back to recursion for this branch */
          op->refs = 1;
          lt__node_release(op);
          continue;
        }
        memcpy(grown, stack, top * sizeof *grown);
        if (stack != small) lt__free(stack, cap * sizeof *stack);
        stack = grown;
        cap *= 2;
      }
      stack[top++] = op;
    }
    node_free(cur);
  }
  if (stack != small) lt__free(stack, cap * sizeof *stack);
}

lt_node *lt__node_make(lt_op op, lt_dtype dt, const int64_t *shape, int ndim, lt_node **operands,
                       int noperands, const int64_t *attrs, int nattrs, double fattr) {
  lt_node *n = NULL;
  int ok = 1;
  for (int i = 0; i < noperands; i++) ok &= operands[i] != NULL;
  if (ok) n = lt__node_new(op, dt, shape, ndim, operands, noperands, attrs, nattrs, fattr);
  for (int i = 0; i < noperands; i++) lt__node_release(operands[i]);
  return n;
}

lt_node *lt__node_cast(lt_node *n, lt_dtype dt) {
  if (!n || n->dtype == dt) return n;
  if (n->op == LT_OP_CONST) { /* fold: a constant simply changes type */
    lt_node *c = lt__node_const(dt, n->shape, n->ndim, lt__dtype_round(dt, n->fattr));
    lt__node_release(n);
    return c;
  }
  return lt__node_make(LT_OP_CAST, dt, n->shape, n->ndim, &n, 1, NULL, 0, 0.0);
}

lt_node *lt__node_reshape(lt_node *n, const int64_t *shape, int ndim) {
  if (!n) return NULL;
  if (n->ndim == ndim && memcmp(n->shape, shape, (size_t)ndim * sizeof(int64_t)) == 0) return n;
  if (n->op == LT_OP_CONST) {
    lt_node *c = lt__node_const((lt_dtype)n->dtype, shape, ndim, n->fattr);
    lt__node_release(n);
    return c;
  }
  return lt__node_make(LT_OP_RESHAPE, (lt_dtype)n->dtype, shape, ndim, &n, 1, NULL, 0, 0.0);
}

/* Releases the nodes given (the failure path of a consuming helper). */
static lt_node *release3(lt_node *a, lt_node *b, lt_node *c) {
  lt__node_release(a);
  lt__node_release(b);
  lt__node_release(c);
  return NULL;
}

lt_node *lt__node_un(lt_op op, lt_node *a) {
  if (!a) return NULL;
  lt_dtype dt = lt__op_result(op) == LT_RES_BOOL ? LT_BOOL : (lt_dtype)a->dtype;
  return lt__node_make(op, dt, a->shape, a->ndim, &a, 1, NULL, 0, 0.0);
}

lt_node *lt__node_bin(lt_op op, lt_node *a, lt_node *b) {
  if (!a || !b) return release3(a, b, NULL);
  int64_t shape[LT_MAX_DIMS];
  int nd;
  if (!lt__broadcast_shape(a->shape, a->ndim, b->shape, b->ndim, shape, &nd)) {
    lt__err(LT_ESHAPE, "internal: %s operands do not broadcast", lt__op_name(op));
    return release3(a, b, NULL);
  }
  lt_dtype dt = (lt_dtype)a->dtype;
  if (op == LT_OP_AND || op == LT_OP_OR) { /* truthiness is exact in bool */
    dt = LT_BOOL;
    a = lt__node_cast(a, dt);
  }
  lt_node *ops[2] = {a, lt__node_cast(b, dt)};
  lt_dtype res = lt__op_result(op) == LT_RES_BOOL ? LT_BOOL : dt;
  return lt__node_make(op, res, shape, nd, ops, 2, NULL, 0, 0.0);
}

lt_node *lt__node_where(lt_node *cond, lt_node *a, lt_node *b) {
  if (!cond || !a || !b) return release3(cond, a, b);
  int64_t s1[LT_MAX_DIMS], shape[LT_MAX_DIMS];
  int n1, nd;
  if (!lt__broadcast_shape(cond->shape, cond->ndim, a->shape, a->ndim, s1, &n1) ||
      !lt__broadcast_shape(s1, n1, b->shape, b->ndim, shape, &nd)) {
    lt__err(LT_ESHAPE, "internal: where operands do not broadcast");
    return release3(cond, a, b);
  }
  lt_dtype dt = (lt_dtype)a->dtype;
  lt_node *ops[3] = {lt__node_cast(cond, LT_BOOL), a, lt__node_cast(b, dt)};
  return lt__node_make(LT_OP_WHERE, dt, shape, nd, ops, 3, NULL, 0, 0.0);
}

lt_node *lt__node_reduce(lt_op op, lt_node *x, int64_t mask, bool keepdim) {
  if (!x) return NULL;
  int64_t shape[LT_MAX_DIMS];
  int nd = 0;
  for (int d = 0; d < x->ndim; d++) {
    if (!((mask >> d) & 1))
      shape[nd++] = x->shape[d];
    else if (keepdim)
      shape[nd++] = 1;
  }
  int64_t attrs[2] = {mask, keepdim ? 1 : 0};
  return lt__node_make(op, (lt_dtype)x->dtype, shape, nd, &x, 1, attrs, 2, 0.0);
}
