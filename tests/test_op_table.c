/* The op table (src/core/lt_op_table.h) is the one description of every IR
 * op. These tests walk it: every op must have a ref kernel, a cpu path or a
 * declared fallback the fallback backend can run (a NATIVE row: a kernel in
 * cpu_native.c, and the fallback for the dtypes it leaves), and a gradient
 * rule or a declared "none"; and a change of the table must change the compile
 * environment key, so that no cache entry written for another op set is
 * ever loaded. */
#include "test_util.h"

#include "../src/autograd/ag.h"
#include "../src/backend/cpu/cpu_api.h"
#include "../src/backend/cpu/cpu_native.h"
#include "../src/backend/ref/ref_api.h"
#include "../src/exec/exec_internal.h"

static int64_t ctr(const char *name) { return tu_counter(name); }

/* ---- completeness of every row ----------------------------------------------------------- */

/* Where the checker looks things up, so that a test can hand it a doctored
 * view and see each gap reported. */
typedef struct op_oracle {
  bool (*ref_has)(lt_op op);      /* the ref backend has a kernel */
  bool (*cpu_has)(lt_op op);      /* the cpu backend has a path of its own */
  bool (*fallback_has)(lt_op op); /* the executor's fallback backend runs it */
  bool (*native_has)(lt_op op);   /* the cpu backend has a hand-written kernel (some dtypes) */
  ag_vjp_fn (*rule)(lt_op op);    /* autograd's rule */
} op_oracle;

static bool real_cpu_has(lt_op op) { return lt__cpu_backend.supports_op(op); }
static bool real_fallback_has(lt_op op) {
  const lt_backend *fb = lt__backend_fallback();
  return fb && fb->run_instr && fb->supports_op(op);
}
static bool real_native_has(lt_op op) { return cpu_native_has(op); }
static const op_oracle kReal = {lt__ref_has_kernel, real_cpu_has, real_fallback_has,
                                real_native_has, lt__ag_rule};

static int family_arity(lt_op_family f) {
  switch (f) {
  case LT_FAM_LEAF:
    return 0;
  case LT_FAM_UNARY:
    return 1;
  case LT_FAM_BINARY:
  case LT_FAM_COMPARE:
    return 2;
  case LT_FAM_TERNARY:
    return 3;
  default:
    return -2; /* the row's own arity */
  }
}

/* What is wrong with row op (info), or NULL. */
static const char *op_problem(lt_op op, const lt_op_info *info, const op_oracle *o) {
  if (!info->name || !info->name[0]) return "no name";
  if (!o->ref_has(op)) return "no ref kernel";
  switch ((lt_op_cpu_path)info->cpu) {
  case LT_CPU_FALLBACK:
    if (!o->fallback_has(op)) return "declares the cpu fallback, which cannot run it";
    if (o->native_has(op)) return "declares the cpu fallback, but a native cpu kernel exists";
    if (o->cpu_has(op)) return "declares the cpu fallback, but the cpu backend claims a path";
    break;
  case LT_CPU_NATIVE:
    /* a native kernel lacking a dtype leaves the node to the fallback */
    if (!o->native_has(op)) return "declares a native cpu kernel that does not exist";
    if (!o->fallback_has(op)) return "declares a native cpu kernel, but its fallback cannot run it";
    if (!o->cpu_has(op)) return "declares a cpu path the cpu backend does not have";
    break;
  case LT_CPU_LEAF:
  case LT_CPU_LOOP:
  case LT_CPU_REDUCE:
  case LT_CPU_GEMM:
  case LT_CPU_VIEW:
  case LT_CPU_RNG:
    if (!o->cpu_has(op)) return "declares a cpu path the cpu backend does not have";
    break;
  default:
    return "no cpu path and no declared fallback";
  }
  ag_vjp_fn f = o->rule(op);
  if (!f) return "no gradient rule and no declared 'none'";
  bool declared_none = strcmp(info->grad, "none") == 0;
  if (declared_none != (f == ag_rule_none)) return "its gradient declaration and rule disagree";
  if (declared_none == lt__op_has_grad(op)) return "lt__op_has_grad contradicts the table";
  int want = family_arity((lt_op_family)info->family);
  if (want != -2 && info->arity != want) return "arity does not match its family";
  if (info->arity < -1) return "bad arity";
  return NULL;
}

static void test_every_op_is_complete(void **state) {
  (void)state;
  lt__backends_init(); /* the executor names the fallback */
  assert_non_null(lt__backend_fallback());
  for (int op = 0; op < LT_OP_COUNT; op++) {
    const char *why = op_problem((lt_op)op, &lt__op_info[op], &kReal);
    if (why) fail_msg("op %d (%s): %s", op, lt__op_name((lt_op)op), why);
    for (int other = 0; other < op; other++)
      if (strcmp(lt__op_info[op].name, lt__op_info[other].name) == 0)
        fail_msg("ops %d and %d share the name %s", other, op, lt__op_info[op].name);
    int a = lt__op_info[op].arity;
    assert_true(lt__op_arity_ok(op, a < 0 ? 1 : (uint32_t)a));
    assert_false(lt__op_arity_ok(op, a < 0 ? 0 : (uint32_t)a + 1));
  }
  assert_false(lt__op_arity_ok(LT_OP_COUNT, 0));
  assert_string_equal(lt__op_name(LT_OP_COUNT), "?");
}

/* The checker itself must see each kind of gap: a doctored view per gap. */
static bool no_kernel_for_add(lt_op op) { return op != LT_OP_ADD && lt__ref_has_kernel(op); }
static bool fallback_runs_nothing(lt_op op) {
  (void)op;
  return false;
}
static bool cpu_has_nothing(lt_op op) {
  (void)op;
  return false;
}
static ag_vjp_fn no_rule_for_exp(lt_op op) { return op == LT_OP_EXP ? NULL : lt__ag_rule(op); }
static ag_vjp_fn none_for_mul(lt_op op) { return op == LT_OP_MUL ? ag_rule_none : lt__ag_rule(op); }

static void expect_problem(lt_op op, const lt_op_info *info, const op_oracle *o,
                           const char *needle) {
  const char *why = op_problem(op, info, o);
  if (!why) fail_msg("op %s: the gap '%s' went unnoticed", lt__op_name(op), needle);
  tu_expect_substr(why, needle);
}

static void test_the_check_sees_each_gap(void **state) {
  (void)state;
  lt__backends_init();
  op_oracle o = kReal;
  o.ref_has = no_kernel_for_add;
  expect_problem(LT_OP_ADD, &lt__op_info[LT_OP_ADD], &o, "no ref kernel");

  o = kReal;
  o.fallback_has = fallback_runs_nothing;
  lt_op_info row = lt__op_info[LT_OP_CONCAT];
  row.cpu = LT_CPU_FALLBACK;
  expect_problem(LT_OP_CONCAT, &row, &o, "fallback, which cannot run it");
  expect_problem(LT_OP_CONCAT, &lt__op_info[LT_OP_CONCAT], &o, "its fallback cannot run it");

  row = lt__op_info[LT_OP_MATMUL];
  row.cpu = 99; /* a path that does not exist */
  expect_problem(LT_OP_MATMUL, &row, &kReal, "no cpu path and no declared fallback");
  row = lt__op_info[LT_OP_MATMUL];
  row.cpu = LT_CPU_FALLBACK; /* says fallback while the cpu backend has GEMM */
  expect_problem(LT_OP_MATMUL, &row, &kReal, "claims a path");
  row = lt__op_info[LT_OP_GATHER];
  row.cpu = LT_CPU_FALLBACK; /* says fallback while the cpu backend has a native kernel */
  expect_problem(LT_OP_GATHER, &row, &kReal, "a native cpu kernel exists");
  row = lt__op_info[LT_OP_MATMUL];
  row.cpu = LT_CPU_NATIVE; /* says native where cpu_native.c has no kernel */
  expect_problem(LT_OP_MATMUL, &row, &kReal, "native cpu kernel that does not exist");
  o = kReal;
  o.cpu_has = cpu_has_nothing; /* a cpu backend without paths of its own */
  row = lt__op_info[LT_OP_ADD];
  row.cpu = LT_CPU_LOOP;
  expect_problem(LT_OP_ADD, &row, &o, "does not have");
  expect_problem(LT_OP_CONCAT, &lt__op_info[LT_OP_CONCAT], &o, "does not have");

  o = kReal;
  o.rule = no_rule_for_exp;
  expect_problem(LT_OP_EXP, &lt__op_info[LT_OP_EXP], &o, "no gradient rule");
  o.rule = none_for_mul;
  expect_problem(LT_OP_MUL, &lt__op_info[LT_OP_MUL], &o, "disagree");

  row = lt__op_info[LT_OP_WHERE];
  row.arity = 2;
  expect_problem(LT_OP_WHERE, &row, &kReal, "arity");
}

/* Every node made is checked against its row: arity and result dtype rule. */
static void test_nodes_follow_their_row(void **state) {
  (void)state;
  lt_node *a = lt__node_const(LT_F32, SHAPE(2), 1, 1.0),
          *b = lt__node_const(LT_F32, SHAPE(2), 1, 2.0);
  lt_node *ab[2] = {a, b};
  lt_node *ok = lt__node_new(LT_OP_EQ, LT_BOOL, SHAPE(2), 1, ab, 2, NULL, 0, 0.0);
  assert_non_null(ok);
  lt__node_release(ok);
  assert_null(lt__node_new(LT_OP_EQ, LT_F32, SHAPE(2), 1, ab, 2, NULL, 0, 0.0));
  assert_int_equal(lt_last_status(), LT_EINVAL);
  tu_expect_substr(lt_last_error(), "op table says bool");
  assert_null(lt__node_new(LT_OP_ADD, LT_F64, SHAPE(2), 1, ab, 2, NULL, 0, 0.0));
  tu_expect_substr(lt_last_error(), "op table says f32");
  assert_null(lt__node_new(LT_OP_ADD, LT_F32, SHAPE(2), 1, ab, 1, NULL, 0, 0.0));
  tu_expect_substr(lt_last_error(), "given 1 operands");
  assert_null(lt__node_new(LT_OP_ARGMAX, LT_I32, SHAPE(1), 1, ab, 1, NULL, 0, 0.0));
  tu_expect_substr(lt_last_error(), "op table says i64");
  assert_null(lt__node_new(LT_OP_COUNT, LT_F32, SHAPE(2), 1, ab, 2, NULL, 0, 0.0));
  tu_expect_substr(lt_last_error(), "unknown op");
  lt_clear_error();
  lt__node_release(a);
  lt__node_release(b);
}

/* ---- the op table in the compile environment key ---------------------------------------- */

/* The table's text with one row inserted before ADD, as a build with a new op
 * in the middle of the enum would have (malloc'd). */
static char *table_with_inserted_row(void) {
  const char *text = lt__op_table_text();
  const char *at = strstr(text, "\nADD ");
  assert_non_null(at);
  static const char kRow[] = "\nFOO \"foo\" BINARY 2 SAME binary elementwise LOOP";
  size_t head = (size_t)(at - text), n = strlen(text);
  char *out = malloc(n + sizeof kRow);
  assert_non_null(out);
  memcpy(out, text, head);
  memcpy(out + head, kRow, sizeof kRow - 1);
  memcpy(out + head + sizeof kRow - 1, at, n - head + 1);
  return out;
}

static void test_table_change_changes_env_key(void **state) {
  (void)state;
  char *changed = table_with_inserted_row();
  uint64_t h0 = lt__op_table_hash();
  for (int b = 0; b < tu_nbackends(); b++) {
    const lt_backend *be = b ? &lt__cpu_backend : &lt__ref_backend;
    uint64_t k0 = lt__backend_env_key(be);
    lt__op_table_set_text(changed);
    assert_int_not_equal(lt__op_table_hash(), h0);
    uint64_t k1 = lt__backend_env_key(be);
    lt__op_table_set_text(NULL);
    assert_int_not_equal(k1, k0);
    assert_int_equal(lt__backend_env_key(be), k0);
  }
  assert_int_equal(lt__op_table_hash(), h0);
  free(changed);
}

static char g_dir[64];

/* sum(x * 3 + 1) over fresh data: one small graph, the same every call. */
static double run_small_graph(void) {
  lt_scope_begin();
  float v[6] = {1, 2, 3, 4, 5, 6};
  lt_tensor *x = tu_f32(SHAPE(2, 3), 2, v);
  lt_tensor *three = lt_scalar(CPU0, LT_F32, 3.0), *one = lt_scalar(CPU0, LT_F32, 1.0);
  lt_tensor *y = lt_sum(lt_add(lt_mul(x, three), one), NULL, 0, false);
  double out[1];
  tu_read(y, out, 1);
  lt_scope_end();
  return out[0];
}

static void disk_entry_not_loaded_after_table_change(const lt_backend *be) {
  lt__backend_force(be);
  tu_reset_executor();
  assert_non_null(tu_mkdtemp(g_dir, sizeof g_dir, "lt_op_table"));
  assert_int_equal(lt_set_persistent_cache(g_dir, false), LT_OK);
  char *changed = table_with_inserted_row();

  assert_true(run_small_graph() == 69.0); /* written to disk under today's table */
  assert_int_equal(ctr("UncachedCompile"), 1);
  assert_int_equal(ctr("PersistentCacheMiss"), 1);

  lt_cache_clear();
  lt__op_table_set_text(changed); /* as a library built with another op set */
  assert_true(run_small_graph() == 69.0);
  assert_int_equal(ctr("PersistentCacheHit"), 0); /* the entry was not loaded */
  assert_int_equal(ctr("UncachedCompile"), 2);

  lt_cache_clear();
  lt__op_table_set_text(NULL); /* back to the table the first entry was written for */
  assert_true(run_small_graph() == 69.0);
  assert_int_equal(ctr("PersistentCacheHit"), 1);
  assert_int_equal(ctr("UncachedCompile"), 2);

  lt_wait_device_ops(CPU0);
  lt_set_persistent_cache(NULL, false);
  lt_cache_clear();
  lt__backend_force(NULL);
  tu_rm_tree(g_dir);
  free(changed);
}

static void test_disk_entry_not_loaded_after_table_change_ref(void **state) {
  (void)state;
  disk_entry_not_loaded_after_table_change(&lt__ref_backend);
}
static void test_disk_entry_not_loaded_after_table_change_cpu(void **state) {
  (void)state;
  if (!tu_cpu_allowed()) skip();
  disk_entry_not_loaded_after_table_change(&lt__cpu_backend);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      TU_TEST(test_every_op_is_complete),
      TU_TEST(test_the_check_sees_each_gap),
      TU_TEST(test_nodes_follow_their_row),
      TU_TEST(test_table_change_changes_env_key),
      TU_TEST(test_disk_entry_not_loaded_after_table_change_ref),
      TU_TEST(test_disk_entry_not_loaded_after_table_change_cpu),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
