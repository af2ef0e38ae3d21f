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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rank_of_local_world),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
