/* The op table as data: names, properties, arity checks, and the hash that
 * ties compiled executables to the op set they were compiled for. */
#include <stdatomic.h>
#include <string.h>
#include <xxhash.h>

#include "lt_node.h"

#define LT_OP_INFO_ROW(E, name_, fam, arity_, res, grad_, ref_, cpu_) \
  [LT_OP_##E] = {.name = name_,                                       \
                 .family = LT_FAM_##fam,                              \
                 .arity = arity_,                                     \
                 .result = LT_RES_##res,                              \
                 .cpu = LT_CPU_##cpu_,                                \
                 .grad = #grad_,                                      \
                 .ref = #ref_},
const lt_op_info lt__op_info[LT_OP_COUNT] = {LT_OP_TABLE(LT_OP_INFO_ROW)};
#undef LT_OP_INFO_ROW

/* Every row must have filled its slot: a row whose enum entry went missing
 * would leave a hole with a NULL name. */
#define LT_OP_COUNT_ROW(E, name, fam, arity, res, grad, ref, cpu) +1
_Static_assert(0 LT_OP_TABLE(LT_OP_COUNT_ROW) == LT_OP_COUNT, "one table row per op");
#undef LT_OP_COUNT_ROW

const char *lt__op_name(lt_op op) {
  return (unsigned)op < LT_OP_COUNT ? lt__op_info[op].name : "?";
}

bool lt__op_has_grad(int op) {
  return (unsigned)op < LT_OP_COUNT && strcmp(lt__op_info[op].grad, "none") != 0;
}

lt_dtype lt__op_result_dtype(int op, lt_dtype operand_dt, lt_dtype own) {
  switch (lt__op_result(op)) {
  case LT_RES_SAME:
    return operand_dt;
  case LT_RES_BOOL:
    return LT_BOOL;
  case LT_RES_INDEX:
    return LT_I64;
  case LT_RES_ACC:
    return operand_dt == LT_BF16 && own == LT_F32 ? LT_F32 : operand_dt;
  case LT_RES_NODE:
    break;
  }
  return own;
}

bool lt__op_arity_ok(int op, uint32_t n) {
  if ((unsigned)op >= LT_OP_COUNT) return false;
  int a = lt__op_info[op].arity;
  return a < 0 ? n >= 1 && n <= UINT16_MAX : n == (uint32_t)a;
}

/* The table's own text, every column of every row in order: any change to
 * the op set (a row added, moved, or given another kernel or rule) changes
 * the hash. */
#define LT_OP_TEXT_ROW(E, name, fam, arity, res, grad, ref, cpu) \
#E " " name " " #fam " " #arity " " #res " " #grad " " #ref " " #cpu "\n"
static const char kTableText[] = LT_OP_TABLE(LT_OP_TEXT_ROW);
#undef LT_OP_TEXT_ROW

static const char *_Atomic g_text_override; /* tests: a changed op table */

void lt__op_table_set_text(const char *text) { atomic_store(&g_text_override, text); }

uint64_t lt__op_table_hash(void) {
  const char *t = atomic_load(&g_text_override);
  if (t) return XXH3_64bits(t, strlen(t));
  static _Atomic uint64_t cached; /* every graph key folds it in: hash once */
  uint64_t h = atomic_load_explicit(&cached, memory_order_relaxed);
  if (!h) {
    h = XXH3_64bits(kTableText, sizeof kTableText - 1) | 1;
    atomic_store_explicit(&cached, h, memory_order_relaxed);
  }
  return h;
}

const char *lt__op_table_text(void) { return kTableText; }
