/* The public op tables (include/lazytensor_ops.h) as names the library hands
 * to bindings: the Python binding binds exactly the ops of the library it
 * loaded, with no list of its own to fall out of step. */
#include "lt_ops.h"

#define NAME_OF_ROW(name, ...) #name,

static const char *const kUnary[] = {LT_UNARY_OPS(NAME_OF_ROW)};
static const char *const kBinary[] = {LT_BINARY_OPS(NAME_OF_ROW)};
static const char *const kReduce[] = {LT_REDUCE_OPS(NAME_OF_ROW)};

static const char *nth(const char *const *names, size_t n, int i) {
  return i >= 0 && (size_t)i < n ? names[i] : NULL;
}

const char *lt_unary_op_name(int i) { return nth(kUnary, sizeof kUnary / sizeof *kUnary, i); }
const char *lt_binary_op_name(int i) { return nth(kBinary, sizeof kBinary / sizeof *kBinary, i); }
const char *lt_reduce_op_name(int i) { return nth(kReduce, sizeof kReduce / sizeof *kReduce, i); }
