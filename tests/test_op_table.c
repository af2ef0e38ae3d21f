/* The op table (src/core/lt_op_table.h) is the one description of every IR
 * op. These tests walk it: every op must have a ref kernel, a cpu path or a
 * declared fallback the fallback backend can run (a NATIVE row: a kernel in
 * cpu_native.c, and the fallback for the dtypes it leaves), and a gradient
 * rule or a declared "none"; and a change of the table must change the compile
 * environment key, so that no cache entry written for another op set is
 * ever loaded. */
#include <strings.h>

#include "test_util.h"

#include "../src/autograd/ag.h"
#include "../src/backend/cpu/cpu_api.h"
#include "../src/backend/cpu/cpu_native.h"
#include "../src/backend/ref/ref_api.h"
#include "../src/exec/exec_internal.h"
#include "lazytensor_dist.h"

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
static bool real_native_has(lt_op op) { return lt__cpu_native_has(op); }
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
  if (declared_none != (f == lt__ag_rule_none)) return "its gradient declaration and rule disagree";
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
static ag_vjp_fn none_for_mul(lt_op op) {
  return op == LT_OP_MUL ? lt__ag_rule_none : lt__ag_rule(op);
}

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

/* ---- every op computes a finite value on every backend --------------------------------
 * Each op of the table is built as one node on probe operands inside its
 * domain (positive floats: log, sqrt, pow and division all have finite
 * answers there), run on ref and on cpu, and must give a finite value that
 * both backends agree on. Elementwise rows need nothing but their row; the
 * others get operands and attributes from kProbes below, and an op without
 * either fails the test by name, so a new row cannot slip past. */

enum { kMaxProbeIn = 4, kMaxProbeOut = 64 };

typedef struct probe {
  lt_node *in[kMaxProbeIn]; /* borrowed from tensors of the open scope */
  int nin;
  lt_dtype dt;
  int ndim;
  int64_t shape[LT_MAX_DIMS];
  int64_t attrs[16];
  int nattrs;
  double fattr;
} probe;

/* An f32 operand holding 0.5, 0.75, ... (shifted by seed), all in (0, 2.25]. */
static lt_node *pin_f32(const int64_t *shape, int ndim, int seed) {
  float v[kMaxProbeOut];
  int64_t n = lt__numel(shape, ndim);
  assert_true(n <= kMaxProbeOut);
  for (int64_t i = 0; i < n; i++) v[i] = 0.5f + 0.25f * (float)((i + seed) % 8);
  return lt__tensor_ir(tu_f32(shape, ndim, v));
}
/* An i64 operand holding i % mod (indices in range), or value for a 0-d seed. */
static lt_node *pin_i64(const int64_t *shape, int ndim, int64_t mod) {
  int64_t v[kMaxProbeOut];
  int64_t n = lt__numel(shape, ndim);
  assert_true(n <= kMaxProbeOut);
  for (int64_t i = 0; i < n; i++) v[i] = ndim ? (i * 2 + 1) % mod : mod;
  return lt__tensor_ir(tu_i64(shape, ndim, v));
}
static lt_node *pin_bool(const int64_t *shape, int ndim) {
  uint8_t v[kMaxProbeOut];
  int64_t n = lt__numel(shape, ndim);
  for (int64_t i = 0; i < n; i++) v[i] = (uint8_t)(i % 2);
  return lt__tensor_ir(tu_bool(shape, ndim, v));
}

static void set_out(probe *p, lt_dtype dt, const int64_t *shape, int ndim) {
  p->dt = dt;
  p->ndim = ndim;
  memcpy(p->shape, shape, (size_t)ndim * sizeof *shape);
}
static void set_attrs(probe *p, const int64_t *attrs, int n) {
  memcpy(p->attrs, attrs, (size_t)n * sizeof *attrs);
  p->nattrs = n;
}
static void add_in(probe *p, lt_node *n) { p->in[p->nin++] = n; }

#define X23 pin_f32(SHAPE(2, 3), 2, 0)
static void pr_reduce(probe *p) { /* over axis 1 */
  add_in(p, X23);
  set_out(p, LT_F32, SHAPE(2), 1);
  set_attrs(p, SHAPE(2, 0), 2);
}
static void pr_argext(probe *p) {
  add_in(p, X23);
  set_out(p, LT_I64, SHAPE(2), 1);
  set_attrs(p, SHAPE(1, 0), 2);
}
static void pr_softmax(probe *p) {
  add_in(p, X23);
  set_out(p, LT_F32, SHAPE(2, 3), 2);
  set_attrs(p, SHAPE(1), 1);
}
static void pr_scan(probe *p) {
  pr_softmax(p);
  set_attrs(p, SHAPE(1, 0), 2);
}
static void pr_argsort(probe *p) {
  pr_scan(p);
  p->dt = LT_I64;
}
static void pr_matmul(probe *p) {
  add_in(p, X23);
  add_in(p, pin_f32(SHAPE(3, 2), 2, 3));
  set_out(p, LT_F32, SHAPE(2, 2), 2);
}
static void pr_attention(probe *p) {
  for (int k = 0; k < 3; k++) add_in(p, pin_f32(SHAPE(1, 2, 3), 3, k));
  set_out(p, LT_F32, SHAPE(1, 2, 3), 3);
  set_attrs(p, SHAPE(0, 0), 2); /* not causal, no mask */
  p->fattr = 0.5;
}
#define CONV_ATTRS SHAPE(1, 1, 0, 0, 1, 1, 1), 7 /* stride 1, no padding, dilation 1, 1 group */
static void pr_conv(probe *p) {
  add_in(p, pin_f32(SHAPE(1, 1, 3, 3), 4, 0));
  add_in(p, pin_f32(SHAPE(1, 1, 2, 2), 4, 1));
  set_out(p, LT_F32, SHAPE(1, 1, 2, 2), 4);
  set_attrs(p, CONV_ATTRS);
}
static void pr_conv_bias(probe *p) {
  pr_conv(p);
  add_in(p, pin_f32(SHAPE(1), 1, 2));
}
static void pr_conv_grad_input(probe *p) { /* (gy, w) -> x's shape */
  add_in(p, pin_f32(SHAPE(1, 1, 2, 2), 4, 0));
  add_in(p, pin_f32(SHAPE(1, 1, 2, 2), 4, 1));
  set_out(p, LT_F32, SHAPE(1, 1, 3, 3), 4);
  set_attrs(p, CONV_ATTRS);
}
static void pr_conv_grad_weight(probe *p) { /* (x, gy) -> w's shape */
  add_in(p, pin_f32(SHAPE(1, 1, 3, 3), 4, 0));
  add_in(p, pin_f32(SHAPE(1, 1, 2, 2), 4, 1));
  set_out(p, LT_F32, SHAPE(1, 1, 2, 2), 4);
  set_attrs(p, CONV_ATTRS);
}
static void pr_max_pool(probe *p) { /* 2x2 windows, stride 1 */
  add_in(p, pin_f32(SHAPE(1, 1, 3, 3), 4, 0));
  set_out(p, LT_I64, SHAPE(1, 1, 2, 2), 4);
  set_attrs(p, SHAPE(2, 2, 1, 1, 0, 0, 1, 1), 8);
}
static void pr_pool_gather(probe *p) {
  add_in(p, pin_f32(SHAPE(1, 1, 3, 3), 4, 0));
  add_in(p, pin_i64(SHAPE(1, 1, 4), 3, 9));
  set_out(p, LT_F32, SHAPE(1, 1, 4), 3);
}
static void pr_pool_scatter(probe *p) {
  add_in(p, pin_f32(SHAPE(1, 1, 4), 3, 0));
  add_in(p, pin_i64(SHAPE(1, 1, 4), 3, 9));
  set_out(p, LT_F32, SHAPE(1, 1, 3, 3), 4);
}
static void pr_reshape(probe *p) {
  add_in(p, X23);
  set_out(p, LT_F32, SHAPE(3, 2), 2);
}
static void pr_permute(probe *p) {
  pr_reshape(p);
  set_attrs(p, SHAPE(1, 0), 2);
}
static void pr_expand(probe *p) {
  add_in(p, pin_f32(SHAPE(1, 3), 2, 0));
  set_out(p, LT_F32, SHAPE(2, 3), 2);
}
static void pr_slice(probe *p) { /* columns 1.. of each row */
  add_in(p, X23);
  set_out(p, LT_F32, SHAPE(2, 2), 2);
  set_attrs(p, SHAPE(0, 1, 1, 1), 4);
}
static void pr_concat(probe *p) {
  add_in(p, X23);
  add_in(p, pin_f32(SHAPE(2, 3), 2, 5));
  set_out(p, LT_F32, SHAPE(4, 3), 2);
  set_attrs(p, SHAPE(0), 1);
}
static void pr_pad(probe *p) {
  add_in(p, X23);
  set_out(p, LT_F32, SHAPE(2, 5), 2);
  set_attrs(p, SHAPE(0, 0, 1, 1), 4);
  p->fattr = 0.25;
}
static void pr_gather(probe *p) {
  add_in(p, X23);
  add_in(p, pin_i64(SHAPE(2, 3), 2, 3));
  set_out(p, LT_F32, SHAPE(2, 3), 2);
  set_attrs(p, SHAPE(1), 1);
}
static void pr_index_select(probe *p) {
  add_in(p, X23);
  add_in(p, pin_i64(SHAPE(2), 1, 3));
  set_out(p, LT_F32, SHAPE(2, 2), 2);
  set_attrs(p, SHAPE(1), 1);
}
static void pr_one_hot(probe *p) {
  add_in(p, pin_i64(SHAPE(3), 1, 4));
  set_out(p, LT_I64, SHAPE(3, 4), 2);
  set_attrs(p, SHAPE(4), 1);
}
static void pr_rng(probe *p) {
  add_in(p, pin_i64(NULL, 0, 1234)); /* the seed */
  set_out(p, LT_F32, SHAPE(2, 3), 2);
}
static void pr_randperm(probe *p) {
  add_in(p, pin_i64(NULL, 0, 1234));
  set_out(p, LT_I64, SHAPE(5), 1);
}
static void pr_scatter_add(probe *p) { pr_gather(p); }
static void pr_index_add(probe *p) { /* (src [2, 2], index [2]) into [2, 3] along axis 1 */
  add_in(p, pin_f32(SHAPE(2, 2), 2, 0));
  add_in(p, pin_i64(SHAPE(2), 1, 3));
  set_out(p, LT_F32, SHAPE(2, 3), 2);
  set_attrs(p, SHAPE(1), 1);
}
static void pr_unslice(probe *p) { /* the transpose of pr_slice */
  add_in(p, pin_f32(SHAPE(2, 2), 2, 0));
  set_out(p, LT_F32, SHAPE(2, 3), 2);
  set_attrs(p, SHAPE(0, 1, 1, 1), 4);
}
/* collectives in a world of one replica (CPU:0): sum, axis 0, size 1 */
static void pr_coll(probe *p, const int64_t *attrs, int n) {
  add_in(p, X23);
  set_out(p, LT_F32, SHAPE(2, 3), 2);
  set_attrs(p, attrs, n);
}
static void pr_all_reduce(probe *p) { pr_coll(p, SHAPE(0), 1); }
static void pr_all_gather(probe *p) { pr_coll(p, SHAPE(0, 1), 2); }
static void pr_reduce_scatter(probe *p) { pr_coll(p, SHAPE(0, 0, 1), 3); }
static void pr_broadcast(probe *p) { pr_coll(p, SHAPE(0), 1); }
static void pr_spmd_all_reduce(probe *p) { pr_coll(p, SHAPE(0, 1), 2); }
static void pr_spmd_copy(probe *p) { pr_coll(p, SHAPE(1), 1); }
static void pr_all_to_all(probe *p) { pr_coll(p, SHAPE(0, 1, 1), 3); }
static void pr_collective_permute(probe *p) { pr_coll(p, SHAPE(1, 0, 0), 3); }

/* Operands and attributes of every row that is not elementwise (nor a
 * leaf): the one hand-written list, checked against the table below. */
static void (*const kProbes[LT_OP_COUNT])(probe *p) = {
    [LT_OP_SUM] = pr_reduce,
    [LT_OP_MEAN] = pr_reduce,
    [LT_OP_MAX] = pr_reduce,
    [LT_OP_MIN] = pr_reduce,
    [LT_OP_PROD] = pr_reduce,
    [LT_OP_LOGSUMEXP] = pr_reduce,
    [LT_OP_ARGMAX] = pr_argext,
    [LT_OP_ARGMIN] = pr_argext,
    [LT_OP_SOFTMAX] = pr_softmax,
    [LT_OP_LOG_SOFTMAX] = pr_softmax,
    [LT_OP_CUMSUM] = pr_scan,
    [LT_OP_ARGSORT] = pr_argsort,
    [LT_OP_MATMUL] = pr_matmul,
    [LT_OP_ATTENTION] = pr_attention,
    [LT_OP_CONV2D] = pr_conv,
    [LT_OP_CONV2D_BIAS] = pr_conv_bias,
    [LT_OP_CONV2D_GRAD_INPUT] = pr_conv_grad_input,
    [LT_OP_CONV2D_GRAD_WEIGHT] = pr_conv_grad_weight,
    [LT_OP_MAX_POOL2D_ARGMAX] = pr_max_pool,
    [LT_OP_POOL_GATHER] = pr_pool_gather,
    [LT_OP_POOL_SCATTER_ADD] = pr_pool_scatter,
    [LT_OP_RESHAPE] = pr_reshape,
    [LT_OP_PERMUTE] = pr_permute,
    [LT_OP_EXPAND] = pr_expand,
    [LT_OP_SLICE] = pr_slice,
    [LT_OP_CONCAT] = pr_concat,
    [LT_OP_PAD] = pr_pad,
    [LT_OP_GATHER] = pr_gather,
    [LT_OP_INDEX_SELECT] = pr_index_select,
    [LT_OP_ONE_HOT] = pr_one_hot,
    [LT_OP_RNG_UNIFORM] = pr_rng,
    [LT_OP_RNG_NORMAL] = pr_rng,
    [LT_OP_RANDPERM] = pr_randperm,
    [LT_OP_SCATTER_ADD] = pr_scatter_add,
    [LT_OP_INDEX_ADD] = pr_index_add,
    [LT_OP_UNSLICE] = pr_unslice,
    [LT_OP_ALL_REDUCE] = pr_all_reduce,
    [LT_OP_ALL_GATHER] = pr_all_gather,
    [LT_OP_REDUCE_SCATTER] = pr_reduce_scatter,
    [LT_OP_BROADCAST] = pr_broadcast,
    [LT_OP_SHARD] = pr_all_gather, /* {axis 0, size 1} */
    [LT_OP_SPMD_ALL_GATHER] = pr_all_gather,
    [LT_OP_SPMD_ALL_REDUCE] = pr_spmd_all_reduce,
    [LT_OP_SPMD_COPY] = pr_spmd_copy,
    [LT_OP_ALL_TO_ALL] = pr_all_to_all,                 /* {split 0, concat 1, size 1} */
    [LT_OP_COLLECTIVE_PERMUTE] = pr_collective_permute, /* {size 1, 0 -> 0} */
};

/* The probe of op from its row alone (elementwise ops, constants), else from
 * kProbes; false when there is none. */
static bool make_probe(lt_op op, probe *p) {
  memset(p, 0, sizeof *p);
  const lt_op_info *info = &lt__op_info[op];
  lt_op_family fam = (lt_op_family)info->family;
  bool elementwise =
      fam == LT_FAM_UNARY || fam == LT_FAM_BINARY || fam == LT_FAM_COMPARE || fam == LT_FAM_TERNARY;
  if (op == LT_OP_CONST) {
    set_out(p, LT_F32, SHAPE(2, 3), 2);
    p->fattr = 1.5;
    return true;
  }
  if (!elementwise) {
    if (!kProbes[op]) return false;
    kProbes[op](p);
    return true;
  }
  if (fam == LT_FAM_TERNARY) add_in(p, pin_bool(SHAPE(2, 3), 2)); /* where's condition */
  int nvalues = fam == LT_FAM_TERNARY ? 2 : info->arity;
  for (int k = 0; k < nvalues; k++) add_in(p, pin_f32(SHAPE(2, 3), 2, 3 * k));
  lt_dtype dt = info->result == LT_RES_BOOL   ? LT_BOOL
                : info->result == LT_RES_NODE ? LT_F64
                                              : LT_F32;
  set_out(p, dt, SHAPE(2, 3), 2);
  return true;
}

typedef struct probe_result {
  lt_dtype dt;
  int64_t n;
  double v[kMaxProbeOut];
  double scale;   /* the largest magnitude among operands and results (1 at least) */
  int64_t nterms; /* operand elements: a bound on the terms of any one result */
} probe_result;

/* Runs op's probe on be into r; for an op with a gradient (ref only) also
 * asks its rule for the operands' gradients. */
static void run_probe(lt_op op, const lt_backend *be, probe_result *r) {
  const char *name = lt__op_name(op);
  lt__backend_force(be);
  lt_scope_begin();
  probe p;
  if (!make_probe(op, &p)) fail_msg("op %s: no probe operands (give it a kProbes entry)", name);
  r->scale = 1;
  r->nterms = 1;
  for (int k = 0; k < p.nin; k++) {
    assert_non_null(p.in[k]);
    r->nterms += lt__numel(p.in[k]->shape, p.in[k]->ndim);
  }
  lt_node *n = lt__node_new(op, p.dt, p.shape, p.ndim, p.in, p.nin, p.attrs, p.nattrs, p.fattr);
  if (!n) fail_msg("op %s: the probe node is refused: %s", name, lt_last_error());
  if (lt__op_has_grad(op) && be == &lt__ref_backend) {
    lt_node *out[kMaxProbeIn] = {0};
    lt_node *g = lt__node_const((lt_dtype)n->dtype, n->shape, n->ndim, 1.0);
    int rc = lt__ag_rule(op)(n, g, out);
    if (rc != LT_OK) fail_msg("op %s: its gradient rule fails: %s", name, lt_last_error());
    for (int k = 0; k < kMaxProbeIn; k++) lt__node_release(out[k]);
    lt__node_release(g);
  }
  lt_tensor *t = lt__tensor_from_node(CPU0, n);
  assert_non_null(t);
  r->dt = lt_get_dtype(t);
  r->n = lt_numel(t);
  assert_true(r->n <= kMaxProbeOut);
  size_t nb = (size_t)r->n * lt_dtype_size(r->dt);
  void *raw = malloc(nb + 8);
  int rc = lt_to_data(t, raw, nb);
  if (rc != LT_OK) fail_msg("op %s on %s: %s", name, be->name, lt_last_error());
  free(raw);
  tu_read(t, r->v, kMaxProbeOut);
  for (int64_t i = 0; i < r->n; i++) {
    if (!isfinite(r->v[i]))
      fail_msg("op %s on %s: element %lld is %g on a probe whose answer is finite", name, be->name,
               (long long)i, r->v[i]);
    r->scale = fmax(r->scale, fabs(r->v[i]));
  }
  r->scale = fmax(r->scale, 2.25 * 2.25); /* operands are at most 2.25; products of two */
  lt_scope_end();
  lt__backend_force(NULL);
}

static void test_every_op_runs_finite_on_every_backend(void **state) {
  (void)state;
  lt__backends_init();
  /* the collectives run in a world of one replica on CPU:0 */
  lt_world *w = NULL;
  int nskipped = 0;
  if (lt_world_local(1, &w) != LT_OK) w = NULL;
  int ran = 0;
  for (int op = 0; op < LT_OP_COUNT; op++) {
    if (op == LT_OP_DATA) continue; /* a parameter: every probe's operands are DATA leaves */
    if (!w && lt__op_family(op) == LT_FAM_COLLECTIVE) {
      nskipped++;
      continue;
    }
    probe_result r[2];
    for (int b = 0; b < tu_nbackends(); b++)
      run_probe((lt_op)op, b ? &lt__cpu_backend : &lt__ref_backend, &r[b]);
    for (int b = 1; b < tu_nbackends(); b++) {
      assert_int_equal(r[b].dt, r[0].dt);
      assert_int_equal(r[b].n, r[0].n);
      bool f32 = r[0].dt == LT_F32, f64 = r[0].dt == LT_F64;
      /* any order of accumulation, any instruction set: a few ulp per term
       * at the largest magnitude in play; integers and bools exactly */
      double tol = f32   ? 8.0 * (double)r[0].nterms * 0x1p-23 * r[0].scale
                   : f64 ? 8.0 * (double)r[0].nterms * 0x1p-52 * r[0].scale
                         : 0.0;
      for (int64_t i = 0; i < r[0].n; i++)
        if (fabs(r[b].v[i] - r[0].v[i]) > tol)
          fail_msg("op %s: cpu gives %.9g at element %lld, ref %.9g (tolerance %.3g)",
                   lt__op_name((lt_op)op), r[b].v[i], (long long)i, r[0].v[i], tol);
    }
    ran++;
  }
  lt_world_free(w);
  printf("op probes: %d ops run on %d backend(s); %d collectives skipped (no world of one)\n", ran,
         tu_nbackends(), nskipped);
  assert_int_equal(nskipped, 0);
  assert_int_equal(ran, LT_OP_COUNT - 1);
}

/* A gradient rule reached by an op it has no case for names the op (it used
 * to give LT_ENOMEM with an empty message). */
static void test_gradient_rule_without_case_names_the_op(void **state) {
  (void)state;
  lt_node *a = lt__node_const(LT_F32, SHAPE(2), 1, 1.0),
          *b = lt__node_const(LT_F32, SHAPE(2), 1, 2.0);
  lt_node *ab[2] = {a, b};
  lt_node *add = lt__node_new(LT_OP_ADD, LT_F32, SHAPE(2), 1, ab, 2, NULL, 0, 0.0);
  lt_node *neg = lt__node_new(LT_OP_NEG, LT_F32, SHAPE(2), 1, ab, 1, NULL, 0, 0.0);
  assert_non_null(add);
  assert_non_null(neg);
  lt_node *out[2] = {0};
  lt_clear_error();
  assert_int_equal(lt__ag_rule_unary(add, a, out), LT_EINVAL);
  tu_expect_substr(lt_last_error(), "no case for op add");
  assert_null(out[0]);
  lt_clear_error();
  assert_int_equal(lt__ag_rule_binary(neg, a, out), LT_EINVAL);
  tu_expect_substr(lt_last_error(), "no case for op neg");
  lt_clear_error();
  lt__node_release(add);
  lt__node_release(neg);
  lt__node_release(a);
  lt__node_release(b);
}

/* ---- the public op table (include/lazytensor_ops.h) against the IR's ------------------- */

typedef struct public_row {
  const char *name, *build, *ir, *grad;
} public_row;
#define PUBLIC_ROW(name, build, ir, dtype, domain, grad) {#name, #build, #ir, #grad},
static const public_row kPublicUnary[] = {LT_UNARY_OPS(PUBLIC_ROW)};
#define NPUBLIC (sizeof kPublicUnary / sizeof *kPublicUnary)

/* The IR op whose enum name (as in lt_op_table.h, "GELU_TANH") is ir, or LT_OP_COUNT. */
static lt_op ir_op_named(const char *ir) {
  for (int op = 0; op < LT_OP_COUNT; op++)
    if (strcasecmp(lt__op_name((lt_op)op), ir) == 0) return (lt_op)op;
  return LT_OP_COUNT;
}

/* What is wrong between the public unary rows and the IR table, or NULL;
 * *what names the op. Every unary IR op but CAST (lt_cast) is some row's IR
 * op; a NODE row's op is unary; GRAD DIFF exactly where the IR row has a
 * gradient rule. */
static const char *public_unary_problem(const public_row *rows, size_t n, const char **what) {
  for (int op = 0; op < LT_OP_COUNT; op++) {
    if (lt__op_family((lt_op)op) != LT_FAM_UNARY || op == LT_OP_CAST) continue;
    bool found = false;
    for (size_t i = 0; i < n && !found; i++) found = ir_op_named(rows[i].ir) == (lt_op)op;
    *what = lt__op_name((lt_op)op);
    if (!found) return "unary IR op without a row in LT_UNARY_OPS (include/lazytensor_ops.h)";
  }
  for (size_t i = 0; i < n; i++) {
    *what = rows[i].name;
    if (strcmp(rows[i].build, "NODE") != 0) continue;
    lt_op op = ir_op_named(rows[i].ir);
    if (op == LT_OP_COUNT || lt__op_family(op) != LT_FAM_UNARY)
      return "NODE row whose IR op is not unary";
    if (lt__op_has_grad(op) != (strcmp(rows[i].grad, "DIFF") == 0))
      return "GRAD column disagrees with the IR row's gradient rule";
  }
  return NULL;
}

static void test_public_unary_ops_match_the_ir(void **state) {
  (void)state;
  const char *what = NULL, *p = public_unary_problem(kPublicUnary, NPUBLIC, &what);
  if (p) fail_msg("%s: %s", what, p);
  /* and the check sees each gap: a row left out, a wrong GRAD */
  public_row rows[NPUBLIC];
  memcpy(rows, kPublicUnary, sizeof rows);
  size_t sin_row = NPUBLIC;
  for (size_t i = 0; i < NPUBLIC; i++)
    if (strcmp(rows[i].name, "sin") == 0) sin_row = i;
  assert_true(sin_row < NPUBLIC);
  rows[sin_row].grad = "NODIFF";
  tu_expect_substr(public_unary_problem(rows, NPUBLIC, &what), "GRAD column");
  assert_string_equal(what, "sin");
  rows[sin_row] = rows[NPUBLIC - 1];
  tu_expect_substr(public_unary_problem(rows, NPUBLIC - 1, &what), "without a row");
  assert_string_equal(what, "sin");
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
      TU_TEST(test_every_op_runs_finite_on_every_backend),
      TU_TEST(test_gradient_rule_without_case_names_the_op),
      TU_TEST(test_public_unary_ops_match_the_ir),
      TU_TEST(test_table_change_changes_env_key),
      TU_TEST(test_disk_entry_not_loaded_after_table_change_ref),
      TU_TEST(test_disk_entry_not_loaded_after_table_change_cpu),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
