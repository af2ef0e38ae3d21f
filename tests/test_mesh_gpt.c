/* Issue #31, must-show 2: a GPT trained on a 2 x 2 mesh of 4 in-process
 * replicas (data x model: tests/mesh_gpt.h) matches the same GPT on one
 * device at the same global batch: the losses of the MG_STEPS steps within
 * 1e-4 at every step, on every replica. */
#include "test_util.h"

#include "mesh_gpt.h"

typedef struct mg_ctx {
  const mg_problem *pb;
  const lt_mesh *mesh;
  double losses[4][MG_STEPS];
  char err[4][300];
} mg_ctx;

static int replica(int r, lt_device dev, void *arg) {
  mg_ctx *c = arg;
  int rc = mg_train(dev, c->pb, c->mesh, r, c->losses[r]);
  if (rc != LT_OK) snprintf(c->err[r], sizeof c->err[r], "%s", lt_last_error());
  return rc;
}

static void test_gpt_on_a_2x2_mesh_matches_one_device(void **state) {
  (void)state;
  mg_problem *pb = calloc(1, sizeof *pb);
  mg_ctx *c = calloc(1, sizeof *c);
  mg_make_problem(pb);
  c->pb = pb;
  double want[MG_STEPS];
  if (mg_train(lt_cpu(4), pb, NULL, 0, want) != LT_OK) /* a device of no world */
    fail_msg("one device: %s", lt_last_error());

  lt_world *w = NULL;
  lt_mesh *m = NULL;
  assert_int_equal(lt_world_local(4, &w), LT_OK);
  const char *names[2] = {"data", "model"};
  assert_int_equal(lt_mesh_new(w, 2, (const int[]){2, 2}, names, &m), LT_OK);
  c->mesh = m;
  int rc = lt_world_run(w, replica, c);
  for (int r = 0; r < 4; r++)
    if (c->err[r][0]) fail_msg("rank %d: %s", r, c->err[r]);
  if (rc != LT_OK) fail_msg("%s", lt_last_error());
  lt_mesh_free(m);
  lt_world_free(w);

  double worst = 0;
  for (int t = 0; t < MG_STEPS; t++)
    for (int r = 0; r < 4; r++) {
      double d = fabs(c->losses[r][t] - want[t]);
      if (!(d <= 1e-4))
        fail_msg("step %d rank %d: loss %.7f on the mesh, %.7f on one device", t, r,
                 c->losses[r][t], want[t]);
      if (d > worst) worst = d;
    }
  print_message("losses %.5f -> %.5f; largest difference from one device %.2g\n", want[0],
                want[MG_STEPS - 1], worst);
  assert_true(want[MG_STEPS - 1] < want[0] - 0.1); /* and it trained */
  mg_free_problem(pb);
  free(pb);
  free(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gpt_on_a_2x2_mesh_matches_one_device),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
