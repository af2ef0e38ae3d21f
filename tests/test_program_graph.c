/* A program's graph as tools read it (src/exec/program_graph.h, used by
 * tools/aot): the output roots, which DATA leaf is the input and which a
 * captured constant, and a constant's value; on a created program and on the
 * same program saved and loaded (what lazytensor-aot reads). */
#include "test_util.h"
#include "../src/core/lt_node.h"
#include "../src/exec/program_graph.h"

static const float kW[3] = {0.5f, -2.0f, 7.25f};

/* y = x * w, x the input, w a captured constant. */
static lt_program *make_program(void) {
  lt_tensor *x = tu_f32(SHAPE(3), 1, (const float[]){1, 2, 3});
  lt_tensor *w = tu_f32(SHAPE(3), 1, kW);
  lt_tensor *y = lt_mul(x, w);
  lt_program *p = lt_program_create(&y, 1, &x, 1);
  assert_non_null(p);
  lt_release(y);
  lt_release(w);
  lt_release(x);
  return p;
}

static void check_graph(const lt_program *p) {
  lt_node *root = lt__program_root(p, 0);
  assert_non_null(root);
  assert_int_equal(root->op, LT_OP_MUL);
  assert_int_equal(root->noperands, 2);
  assert_null(lt__program_root(p, 1));
  assert_null(lt__program_root(p, -1));
  assert_null(lt__program_root(NULL, 0));

  lt_node *a = root->operands[0].node, *b = root->operands[1].node;
  assert_int_equal(a->op, LT_OP_DATA);
  assert_int_equal(b->op, LT_OP_DATA);
  assert_true(lt__program_is_input(p, 0, a));
  assert_false(lt__program_is_input(p, 0, b)); /* the constant */
  assert_false(lt__program_is_input(p, 1, a)); /* no input 1 */
  assert_false(lt__program_is_input(p, 0, root));

  float v[3] = {0};
  assert_int_equal(lt__program_read_leaf(b, v, sizeof v), LT_OK);
  for (int i = 0; i < 3; i++) assert_true(v[i] == kW[i]);
  assert_int_equal(lt__program_read_leaf(b, v, sizeof v - 1), LT_EINVAL);
  tu_expect_substr(lt_last_error(), "lt__program_read_leaf");
  assert_int_equal(lt__program_read_leaf(root, v, sizeof v), LT_EINVAL);
  assert_int_equal(lt__program_read_leaf(NULL, v, sizeof v), LT_EINVAL);
}

static void test_created_program(void **state) {
  (void)state;
  lt_program *p = make_program();
  check_graph(p);
  lt_program_free(p);
}

static void test_loaded_program(void **state) {
  (void)state;
  char dir[128], path[192];
  assert_non_null(tu_mkdtemp(dir, sizeof dir, "lt-program-graph"));
  snprintf(path, sizeof path, "%s/p.ltp", dir);
  lt_program *p = make_program();
  assert_int_equal(lt_program_save(p, path), LT_OK);
  lt_program_free(p);
  p = lt_program_load(path);
  assert_non_null(p);
  check_graph(p);
  lt_program_free(p);
  tu_rm_tree(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_created_program),
      cmocka_unit_test(test_loaded_program),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
