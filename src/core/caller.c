/* Caller scopes (lt_caller.h). */
#include "lt_caller.h"

#include "lt_node.h"

static _Thread_local int tl_caller; /* lt_caller; NONE outside any scope */

int lt__caller_begin(lt_caller c) {
  int outer = tl_caller;
  if (outer == LT_CALLER_NONE) tl_caller = c;
  return outer;
}

void lt__caller_end(int token) { tl_caller = token; }

/* The index ops whose kernels check index values (each has one attribute:
 * the axis, or one_hot's class count). */
static bool checks_indices(int op) {
  return op == LT_OP_GATHER || op == LT_OP_INDEX_SELECT || op == LT_OP_ONE_HOT ||
         op == LT_OP_SCATTER_ADD || op == LT_OP_INDEX_ADD;
}

const int64_t *lt__caller_attrs(int op, const int64_t *attrs, int *nattrs, int64_t room[2]) {
  if (tl_caller == LT_CALLER_NONE || *nattrs != 1 || !checks_indices(op)) return attrs;
  room[0] = attrs[0];
  room[1] = tl_caller;
  *nattrs = 2;
  return room;
}

#define LT_CALLER_NAME_ROW(id, e, fn, noun) [id] = {fn, noun},
static const struct { const char *fn, *noun; } kCallers[] = {LT_CALLER_TABLE(LT_CALLER_NAME_ROW)};
#undef LT_CALLER_NAME_ROW

bool lt__caller_known(int64_t id) {
  return id > 0 && id < (int64_t)(sizeof kCallers / sizeof *kCallers) && kCallers[id].fn;
}

const char *lt__caller_who(const int64_t *attrs, int nattrs, const char *op_name,
                           const char **noun) {
  int64_t id = nattrs >= 2 && attrs ? attrs[1] : 0;
  bool known = lt__caller_known(id);
  *noun = known ? kCallers[id].noun : "index";
  return known ? kCallers[id].fn : op_name;
}
