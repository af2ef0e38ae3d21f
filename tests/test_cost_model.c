/* The arithmetic of the data-parallel cost model (bench/cost_model.h, used by
 * bench/allreduce and docs/COST_MODEL.md) against values worked out by hand. */
#include "test_util.h"

#include "../bench/cost_model.h"

static void test_fit_recovers_an_exact_line(void **state) {
  (void)state;
  const double S[3] = {0, 100, 1000}, t[3] = {10, 60, 510};
  double a = 0, b = 0;
  assert_true(cost_fit_line(S, t, 3, &a, &b));
  assert_float_equal(a, 10, 1e-9);
  assert_float_equal(b, 0.5, 1e-12);
}

/* (0, 1), (1, 2), (2, 4) with weights 1, 1/4, 1/16: sums 21/16, 3/8, 7/4,
 * 1/2, 1; b = 14/11, a = 32/33 (unweighted least squares would give 3/2 and
 * 5/6: the weighting is what keeps the small messages' latency). */
static void test_fit_weights_relative_errors(void **state) {
  (void)state;
  const double S[3] = {0, 1, 2}, t[3] = {1, 2, 4};
  double a = 0, b = 0;
  assert_true(cost_fit_line(S, t, 3, &a, &b));
  assert_float_equal(b, 14.0 / 11.0, 1e-12);
  assert_float_equal(a, 32.0 / 33.0, 1e-12);
}

static void test_fit_refuses_degenerate_points(void **state) {
  (void)state;
  double a = -7, b = -7;
  const double S[2] = {4, 4}, t[2] = {1, 2}, S2[2] = {4, 16}, t0[2] = {1, 0};
  assert_false(cost_fit_line(S, t, 1, &a, &b));   /* one point */
  assert_false(cost_fit_line(S, t, 2, &a, &b));   /* one size */
  assert_false(cost_fit_line(S2, t0, 2, &a, &b)); /* a time of 0 */
  assert_float_equal(a, -7, 0);                   /* outputs untouched */
  assert_float_equal(b, -7, 0);
}

/* A 2-rank line a + S b is 2 ring steps of latency and S bytes at beta. */
static void test_net_from_two_rank_fit(void **state) {
  (void)state;
  cost_net n = cost_net_from_fit("x", 30, 0.5);
  assert_float_equal(n.alpha_us, 15, 0);
  assert_float_equal(n.beta_us_per_byte, 0.5, 0);
  /* and back: the model at p = 2 is the fitted line */
  assert_float_equal(cost_allreduce_us(&n, 2, 1000, 1), 30 + 1000 * 0.5, 1e-9);
}

/* alpha 10 us, beta 1 ns/byte: p = 4, 1 MB in 3 calls: 3 x 2 x 3 x 10 = 180
 * us of latency + 2 x 3/4 x 1e6 x 0.001 = 1500 us of bandwidth. */
static void test_ring_allreduce(void **state) {
  (void)state;
  cost_net n = {"x", 10, 0.001};
  assert_float_equal(cost_allreduce_us(&n, 4, 1e6, 3), 1680, 1e-9);
  assert_float_equal(cost_allreduce_us(&n, 2, 1e6, 1), 20 + 1000, 1e-9);
  assert_float_equal(cost_allreduce_us(&n, 1, 1e6, 3), 0, 0);
  /* many hosts: the bandwidth term tends to 2 S beta, latency grows */
  assert_float_equal(cost_allreduce_us(&n, 64, 1e6, 1), 2 * 63 * 10 + 2.0 * 63 / 64 * 1000, 1e-9);
}

static void test_step_modes(void **state) {
  (void)state;
  cost_net n = {"x", 10, 0.001};
  cost_workload w = {.name = "w",
                     .compute_us = 1000,
                     .grad_bytes = 1e6,
                     .tensors = 3,
                     .calls = 3,
                     .last_bytes = 1e5,
                     .last_calls = 1,
                     .batch = 128};
  /* no overlap: 1000 + 1680 */
  double s = cost_step_us(&w, &n, 4, COST_NO_OVERLAP);
  assert_float_equal(s, 2680, 1e-9);
  assert_float_equal(cost_samples_per_s(&w, 4, s), 4 * 128 / 2680e-6, 1e-6);
  assert_float_equal(cost_efficiency(&w, s), 1000.0 / 2680.0, 1e-12);
  /* fused: one call's latency, 60, + 1500 */
  assert_float_equal(cost_step_us(&w, &n, 4, COST_FUSED), 1000 + 60 + 1500, 1e-9);
  /* overlap, communication-bound: the rest (2 calls, 9e5 bytes) is 120 +
   * 1350 = 1470 > 1000, then the last bucket (1 call, 1e5 bytes) 60 + 150 */
  assert_float_equal(cost_step_us(&w, &n, 4, COST_OVERLAP), 1470 + 210, 1e-9);
  /* overlap, compute-bound: 5000 + 210 */
  w.compute_us = 5000;
  assert_float_equal(cost_step_us(&w, &n, 4, COST_OVERLAP), 5000 + 210, 1e-9);
  /* one host: the compute alone, efficiency 1 */
  s = cost_step_us(&w, &n, 1, COST_NO_OVERLAP);
  assert_float_equal(s, 5000, 0);
  assert_float_equal(cost_efficiency(&w, s), 1, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fit_recovers_an_exact_line),
      cmocka_unit_test(test_fit_weights_relative_errors),
      cmocka_unit_test(test_fit_refuses_degenerate_points),
      cmocka_unit_test(test_net_from_two_rank_fit),
      cmocka_unit_test(test_ring_allreduce),
      cmocka_unit_test(test_step_modes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
