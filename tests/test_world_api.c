/* The world API's process-level queries (lazytensor_dist.h) that need no MPI
 * job: lt_world_rank of in-process worlds and NULL. The MPI world itself is
 * tested under mpirun (tests/mpi/mpi_world.c). */
#include "test_util.h"

#include "lazytensor_dist.h"

static void test_rank_of_local_world(void **state) {
  (void)state;
  assert_int_equal(lt_world_rank(NULL), -1);
  lt_world *w = NULL;
  assert_int_equal(lt_world_local(2, &w), LT_OK);
  assert_int_equal(lt_world_rank(w), 0); /* every rank lives here: rank 0 prints */
  assert_int_equal(lt_world_size(w), 2);
  assert_int_equal(lt_world_device(w, 1).index, 1);
  assert_int_equal(lt_world_device(w, 2).index, -1);
  /* CPU:0 is taken: an MPI world (or another local one) cannot have it */
  lt_world *w2 = NULL;
  assert_int_equal(lt_world_local(1, &w2), LT_EINVAL);
  assert_null(w2);
  lt_world_free(w);
}

/* LT_COLLECTIVE_TIMEOUT_MS is whole milliseconds: anything else fails the
 * world's creation with a message naming the variable and its value, where
 * it was read as 2 ms ("2s") or silently as the default ("abc"). */
static void test_timeout_env_is_strict(void **state) {
  (void)state;
  static const char *bad[] = {"2s", "abc", "-5", "0", " 100", "1e3", "+7", "99999999999999999999"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    setenv("LT_COLLECTIVE_TIMEOUT_MS", bad[i], 1);
    lt_world *w = (lt_world *)&w; /* set to NULL on failure */
    assert_int_equal(lt_world_local(1, &w), LT_EINVAL);
    assert_null(w);
    assert_non_null(strstr(lt_last_error(), "lt_world_local"));
    assert_non_null(strstr(lt_last_error(), "LT_COLLECTIVE_TIMEOUT_MS"));
    assert_non_null(strstr(lt_last_error(), bad[i]));
  }
  setenv("LT_COLLECTIVE_TIMEOUT_MS", "2000", 1);
  lt_world *w = NULL;
  assert_int_equal(lt_world_local(1, &w), LT_OK);
  lt_world_free(w);
  setenv("LT_COLLECTIVE_TIMEOUT_MS", "", 1); /* empty: unset, the default */
  assert_int_equal(lt_world_local(1, &w), LT_OK);
  lt_world_free(w);
  unsetenv("LT_COLLECTIVE_TIMEOUT_MS");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rank_of_local_world),
      cmocka_unit_test(test_timeout_env_is_strict),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
