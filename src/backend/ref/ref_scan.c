/* ref kernels for the ops along one axis whose result has the operand's
 * shape: the scan LT_OP_CUMSUM (lt__ref_scan; attrs[0] = axis, attrs[1] =
 * reverse) and LT_OP_ARGSORT (lt__ref_sort; attrs[0] = axis, attrs[1] =
 * descending). Both walk the operand as lines along the axis.
 *
 * cumsum: out[..., j, ...] = in[..., 0, ...] + ... + in[..., j, ...] along the axis
 * (reverse: the sum from j to the end). The builder gives the operand the
 * result's dtype (PyTorch's rule: bool and integers accumulate in i64), so
 * floats add in double and integers in uint64 (two's complement wrap instead
 * of the undefined signed overflow, as lt__ref_reduce's sums). NaN and infinities
 * propagate along the rest of the line as in any running sum. */
#include <math.h>
#include <stdlib.h>

#include "../../core/lt_alloc.h"
#include "../../core/lt_error.h"
#include "ref.h"

/* The operand seen as [outer, n, inner] around the scanned axis. */
typedef struct line_plan {
  int64_t outer, n, inner;
} line_plan;

/* Checks a one-axis instruction whose result has its operand's shape (the
 * attrs come from a serialized executable too, so every one is checked). */
static int plan_line(const char *what, const lt_instr *ins, const lt_buffer *out,
                     const lt_buffer *in, line_plan *p) {
  if (ins->noperands != 1 || ins->nattrs < 2)
    return lt__err(LT_EEXEC, "%s: malformed instruction (%d operands, %d attrs)", what,
                   ins->noperands, ins->nattrs);
  int64_t axis = ins->attrs[0];
  if (axis < 0 || axis >= in->ndim)
    return lt__err(LT_EEXEC, "%s: axis %lld out of range for rank %d", what, (long long)axis,
                   in->ndim);
  bool same = out->ndim == in->ndim && out->numel == in->numel;
  for (int d = 0; same && d < in->ndim; d++) same = out->shape[d] == in->shape[d];
  if (!same) return lt__err(LT_EEXEC, "%s: result shape differs from the operand's", what);
  p->outer = p->inner = 1;
  for (int d = 0; d < in->ndim; d++) {
    if (d < axis) p->outer *= in->shape[d];
    if (d > axis) p->inner *= in->shape[d];
  }
  p->n = in->shape[axis];
  return LT_OK;
}

/* Scans the line starting at flat index base with stride inner. */
static void scan_line(const lt_buffer *in, lt_buffer *out, const line_plan *p, int64_t base,
                      bool reverse) {
  bool fl = ref_is_float(out->dtype);
  double accf = 0.0;
  uint64_t acci = 0;
  for (int64_t k = 0; k < p->n; k++) {
    int64_t j = reverse ? p->n - 1 - k : k;
    int64_t i = base + j * p->inner;
    if (fl) {
      accf += ref_getf(in, i);
      ref_setf(out, i, accf);
    } else {
      acci += (uint64_t)ref_geti(in, i);
      ref_seti(out, i, (int64_t)acci);
    }
  }
}

int lt__ref_scan(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in) {
  if (ins->op != LT_OP_CUMSUM)
    return lt__err(LT_EEXEC, "ref: the scan kernel has no case for op %s",
                   lt__op_name((lt_op)ins->op));
  line_plan p;
  int rc = plan_line("cumsum", ins, out, in[0], &p);
  if (rc != LT_OK) return rc;
  if (out->numel == 0) return LT_OK;
  for (int64_t o = 0; o < p.outer; o++)
    for (int64_t i = 0; i < p.inner; i++)
      scan_line(in[0], out, &p, o * p.n * p.inner + i, ins->attrs[1] != 0);
  return LT_OK;
}

/* ---- argsort ------------------------------------------------------------------------------ */

/* One element of a line: its key (double for float dtypes, int64 otherwise,
 * so that i64 keys keep every bit) and its index along the axis. */
typedef struct sort_item {
  union {
    double f;
    int64_t i;
  } key;
  int64_t idx;
} sort_item;

/* PyTorch's order: NaN is larger than every number (so it comes last
 * ascending and first descending); -0.0 equals 0.0. */
static int cmp_double(double a, double b) {
  if (isnan(a) || isnan(b)) return isnan(a) - isnan(b);
  return (a > b) - (a < b);
}
static int cmp_int(int64_t a, int64_t b) { return (a > b) - (a < b); }

/* Equal keys keep their order along the axis whichever the direction: the
 * sort is stable (torch.sort(stable=True)), and qsort is made so by the
 * index tie-break. */
static int tie(const sort_item *a, const sort_item *b) { return cmp_int(a->idx, b->idx); }

static int float_up(const void *x, const void *y) {
  const sort_item *a = x, *b = y;
  int c = cmp_double(a->key.f, b->key.f);
  return c ? c : tie(a, b);
}
static int float_down(const void *x, const void *y) {
  const sort_item *a = x, *b = y;
  int c = cmp_double(b->key.f, a->key.f);
  return c ? c : tie(a, b);
}
static int int_up(const void *x, const void *y) {
  const sort_item *a = x, *b = y;
  int c = cmp_int(a->key.i, b->key.i);
  return c ? c : tie(a, b);
}
static int int_down(const void *x, const void *y) {
  const sort_item *a = x, *b = y;
  int c = cmp_int(b->key.i, a->key.i);
  return c ? c : tie(a, b);
}

/* Sorts the line starting at flat index base (stride inner) and writes the
 * positions along the axis, in sorted order, to the same line of out. */
static void sort_line(const lt_buffer *in, lt_buffer *out, const line_plan *p, int64_t base,
                      bool descending, sort_item *items) {
  bool fl = ref_is_float(in->dtype);
  for (int64_t j = 0; j < p->n; j++) {
    int64_t i = base + j * p->inner;
    if (fl)
      items[j].key.f = ref_getf(in, i);
    else
      items[j].key.i = ref_geti(in, i);
    items[j].idx = j;
  }
  int (*cmp)(const void *, const void *) =
      fl ? (descending ? float_down : float_up) : (descending ? int_down : int_up);
  qsort(items, (size_t)p->n, sizeof *items, cmp);
  for (int64_t j = 0; j < p->n; j++) ref_seti(out, base + j * p->inner, items[j].idx);
}

int lt__ref_sort(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in) {
  if (ins->op != LT_OP_ARGSORT)
    return lt__err(LT_EEXEC, "ref: the sort kernel has no case for op %s",
                   lt__op_name((lt_op)ins->op));
  line_plan p;
  int rc = plan_line("argsort", ins, out, in[0], &p);
  if (rc != LT_OK) return rc;
  if (out->numel == 0) return LT_OK;
  if ((uint64_t)p.n > SIZE_MAX / sizeof(sort_item))
    return lt__err(LT_ENOMEM, "argsort: a line of %lld elements is too long to sort",
                   (long long)p.n);
  size_t bytes = (size_t)p.n * sizeof(sort_item);
  sort_item *items = lt__malloc(bytes);
  if (!items) return LT_ENOMEM;
  for (int64_t o = 0; o < p.outer; o++)
    for (int64_t i = 0; i < p.inner; i++)
      sort_line(in[0], out, &p, o * p.n * p.inner + i, ins->attrs[1] != 0, items);
  lt__free(items, bytes);
  return LT_OK;
}
