/* Caller scopes: which public function index ops are being built for.
 *
 * An index value is data, so an index out of range is found by a kernel when
 * the graph runs, and the kernel knows only its op. A public function that
 * builds index ops for its caller (a loss gathering its targets, an
 * embedding selecting rows) opens a scope around them; each GATHER,
 * INDEX_SELECT, ONE_HOT, SCATTER_ADD or INDEX_ADD node made inside it carries
 * the function's id as one attribute more (after its own attrs[0]), so that
 * the kernel's error names that function and what the caller passed (a
 * loss's "target"). As an attribute the id enters the node's hash (a graph
 * built by another function is another program) and the executable's bytes
 * (one loaded from the disk cache reports the same). The ids are fixed
 * numbers: a row may be added, never renumbered. */
#ifndef LT_CALLER_H
#define LT_CALLER_H

#include <stdbool.h>
#include <stdint.h>

/* id, enum name, public function, what its index operand is to the caller */
#define LT_CALLER_TABLE(X)                                      \
  X(1, NN_CROSS_ENTROPY, "lt_nn_cross_entropy", "target")       \
  X(2, NN_CROSS_ENTROPY_EX, "lt_nn_cross_entropy_ex", "target") \
  X(3, NN_NLL_LOSS, "lt_nn_nll_loss", "target")                 \
  X(4, EMBEDDING, "lt_embedding", "index")                      \
  X(5, SCATTER, "lt_scatter", "index")                          \
  X(6, SCATTER_ADD, "lt_scatter_add", "index")

#define LT_CALLER_ENUM_ROW(id, e, fn, noun) LT_CALLER_##e = id,
typedef enum lt_caller { LT_CALLER_NONE = 0, LT_CALLER_TABLE(LT_CALLER_ENUM_ROW) } lt_caller;
#undef LT_CALLER_ENUM_ROW

/* Opens a scope for c on this thread, unless one is open already (the
 * outermost public function is the one the caller used). Returns what
 * lt__caller_end takes to close it. */
int lt__caller_begin(lt_caller c);
void lt__caller_end(int token);

/* The attributes a node of op gets when built now: attrs itself, or a copy
 * in room (2 words) with the open scope's id after attrs[0] (when op is an
 * index op with its one attribute). *nattrs is updated. */
const int64_t *lt__caller_attrs(int op, const int64_t *attrs, int *nattrs, int64_t room[2]);

/* Whether id is a row of the caller table (a loaded node's attribute is checked). */
bool lt__caller_known(int64_t id);

/* Who reports an index error of an instruction with these attributes: the
 * function recorded in attrs[1] with its noun, or op_name and "index". */
const char *lt__caller_who(const int64_t *attrs, int nattrs, const char *op_name,
                           const char **noun);

#endif
