/* A program's graph for tools (program_graph.h). */
#include "program_graph.h"

#include "../backend/backend.h"
#include "../core/lt_error.h"
#include "program_internal.h"

lt_node *lt__program_root(const lt_program *p, int i) {
  return p && i >= 0 && i < p->nout ? p->roots[i] : NULL;
}

bool lt__program_is_input(const lt_program *p, int i, const lt_node *n) {
  return p && n && i >= 0 && i < p->nin && n->op == LT_OP_DATA && n->data == p->in_buf[i];
}

int lt__program_read_leaf(const lt_node *n, void *dst, size_t nbytes) {
  if (!n || n->op != LT_OP_DATA || !n->data)
    return lt__err(LT_EINVAL, "lt__program_read_leaf: not a DATA leaf");
  size_t want = (size_t)lt__numel(n->shape, n->ndim) * lt_dtype_size((lt_dtype)n->dtype);
  if (nbytes != want)
    return lt__err(LT_EINVAL, "lt__program_read_leaf: %zu bytes given, the leaf holds %zu", nbytes,
                   want);
  lt_buffer *buf = n->data;
  int rc = lt__buffer_wait(buf);
  return rc != LT_OK ? rc : buf->backend->from_device(buf, dst, nbytes);
}
