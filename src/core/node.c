/* IR nodes: creation, structural hashing, release. */
#include <stdatomic.h>
#include <string.h>
/* Inlined: a node's hash is one short XXH3 call on the tracing path. */
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "lt_buffer.h"
#include "lt_caller.h"
#include "lt_dtype.h"
#include "lt_alloc.h"
#include "lt_error.h"
#include "lt_node.h"
#include "lt_node_rules.h"
#include "lt_shape.h"

static _Atomic uint32_t g_epoch;

uint32_t lt__node_epoch(void) { return atomic_fetch_add(&g_epoch, 1) + 1; }

int64_t lt__numel(const int64_t *shape, int ndim) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  return n;
}

/* docs/DESIGN.md, rule 1: the hash covers op, attributes, dtype, shape and the
 * operands' hashes, never device data. One XXH3 call over the words, in this
 * order: a header (op, dtype, rank, counts), the shape, the attributes, the
 * float attribute, then each operand's hash and output index (nodes with
 * more words than kHashWords stream them). */
enum { kHashWords = 32 };

/* The words of a node's hash, hashed in one call when they fit in w, else
 * streamed (st set) kHashWords at a time. */
typedef struct hash_words {
  uint64_t w[kHashWords];
  size_t k;
  XXH3_state_t *st;
} hash_words;

static inline void hash_put(hash_words *h, uint64_t v) {
  h->w[h->k++] = v;
  if (h->k == kHashWords && h->st) {
    XXH3_64bits_update(h->st, h->w, sizeof h->w);
    h->k = 0;
  }
}

static inline void node_words(const lt_node *n, hash_words *h) {
  hash_put(h, (uint64_t)n->op | (uint64_t)n->dtype << 16 | (uint64_t)n->ndim << 24 |
                  (uint64_t)n->nattrs << 32 | (uint64_t)n->noperands << 48);
  for (int i = 0; i < n->ndim; i++) hash_put(h, (uint64_t)n->shape[i]);
  for (int i = 0; i < n->nattrs; i++) hash_put(h, (uint64_t)n->attrs[i]);
  uint64_t fbits;
  memcpy(&fbits, &n->fattr, sizeof fbits);
  hash_put(h, fbits);
  for (int i = 0; i < n->noperands; i++) {
    hash_put(h, n->operands[i].node->hash);
    hash_put(h, n->operands[i].index);
  }
}

/* Out of line: the common small node keeps a small stack frame. */
__attribute__((noinline)) static uint64_t node_hash_streamed(const lt_node *n) {
  XXH3_state_t st;
  XXH3_64bits_reset(&st);
  hash_words h; /* w is written before it is read: no initializer to zero it */
  h.k = 0;
  h.st = &st;
  node_words(n, &h);
  XXH3_64bits_update(&st, h.w, h.k * sizeof h.w[0]);
  return XXH3_64bits_digest(&st);
}

static uint64_t node_hash(const lt_node *n) {
  size_t nwords = 2 + (size_t)n->ndim + n->nattrs + 2 * (size_t)n->noperands;
  if (nwords > kHashWords) return node_hash_streamed(n);
  hash_words h;
  h.k = 0;
  h.st = NULL;
  node_words(n, &h);
  return XXH3_64bits(h.w, h.k * sizeof h.w[0]);
}

/* The op table's arity and result dtype rule, checked for every node made:
 * a builder that breaks them is a bug in the library, reported as an error
 * rather than handed to kernels that index operands unchecked. */
static int check_row(lt_op op, lt_dtype dt, lt_node *const *operands, int noperands) {
  if ((unsigned)op >= LT_OP_COUNT)
    return lt__err(LT_EINVAL, "internal: node of unknown op %d", (int)op);
  if (!lt__op_arity_ok(op, (uint32_t)noperands))
    return lt__err(LT_EINVAL, "internal: op %s given %d operands", lt__op_name(op), noperands);
  lt_dtype want =
      noperands ? lt__op_result_dtype(op, (lt_dtype)operands[lt__op_dtype_operand(op)]->dtype, dt)
                : dt;
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

/* Copied into each new node: a constant-size copy is a few vector stores,
 * where a memset of the struct is a slow-starting string instruction; the
 * short shape and attribute copies below are loops for the same reason. */
static const lt_node kFreshNode = {.refs = 1, .order = -1};

/* A node and its operand and attribute arrays are one block. */
static size_t node_size(int noperands, int nattrs) {
  return sizeof(lt_node) + (size_t)noperands * sizeof(lt_operand) +
         (size_t)nattrs * sizeof(int64_t);
}

lt_node *lt__node_new(lt_op op, lt_dtype dt, const int64_t *shape, int ndim,
                      lt_node *const *operands, int noperands, const int64_t *attrs, int nattrs,
                      double fattr) {
  if (check_row(op, dt, operands, noperands) != LT_OK) return NULL;
  if (check_node_shape(op, shape, ndim) != LT_OK) return NULL;
  lt_node *n = lt__slab_alloc(node_size(noperands, nattrs));
  if (!n) return NULL;
  *n = kFreshNode;
  n->op = (uint16_t)op;
  n->dtype = (uint8_t)dt;
  n->ndim = (uint8_t)ndim;
  n->noperands = (uint16_t)noperands;
  n->nattrs = (uint16_t)nattrs;
  n->fattr = fattr;
  for (int i = 0; i < ndim; i++) n->shape[i] = shape[i];
  n->operands = (lt_operand *)(n + 1);
  n->attrs = (int64_t *)(n->operands + noperands);
  for (int i = 0; i < noperands; i++) {
    n->operands[i].node = lt__node_retain(operands[i]);
    n->operands[i].index = 0;
  }
  for (int i = 0; i < nattrs; i++) n->attrs[i] = attrs[i];
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
  lt__slab_free(n, node_size(n->noperands, n->nattrs));
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
  int64_t tagged[2]; /* an index op built inside a caller scope names its caller */
  attrs = lt__caller_attrs(op, attrs, &nattrs, tagged);
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
  lt__reduce_shape(x->shape, x->ndim, mask, keepdim, shape, &nd);
  int64_t attrs[2] = {mask, keepdim ? 1 : 0};
  return lt__node_make(op, (lt_dtype)x->dtype, shape, nd, &x, 1, attrs, 2, 0.0);
}
