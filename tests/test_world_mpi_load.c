/* lt_world_mpi loads libmpi at run time (liblazytensor does not link it):
 * when the library cannot be loaded, or is not an MPI library, the call
 * fails with LT_EINVAL and a message naming lt_world_mpi, the library and
 * the reason, and CPU:0 stays free for another world. Each case runs in a
 * child process, since a process loads MPI once. The loaded library at
 * work is tested under mpirun (tests/mpi/mpi_world.c). */
#include "test_util.h"

#include "lazytensor_dist.h"

/* In a child: lt_world_mpi with LT_MPI_LIBRARY=lib must fail saying `reason`.
 * Returns 0, 77 when this lazytensor was built without MPI, else the check
 * that failed. */
static int load_fails(const char *lib, const char *reason) {
  setenv("LT_MPI_LIBRARY", lib, 1);
  for (int attempt = 0; attempt < 2; attempt++) { /* the failure stays the same */
    lt_world *w = (lt_world *)&w;
    int rc = lt_world_mpi(&w);
    const char *msg = lt_last_error();
    fprintf(stderr, "lt_world_mpi -> %d: %s\n", rc, msg);
    if (strstr(msg, "built without MPI")) return 77;
    if (rc != LT_EINVAL) return 1;
    if (w != NULL) return 2;
    if (!strstr(msg, "lt_world_mpi: ") || !strstr(msg, lib) || !strstr(msg, reason)) return 3;
  }
  lt_world *w = NULL; /* nothing was bound */
  if (lt_world_local(1, &w) != LT_OK) return 4;
  lt_world_free(w);
  return 0;
}

static void check_in_child(const char *lib, const char *reason) {
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) _exit(load_fails(lib, reason));
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  if (WEXITSTATUS(status) == 77) skip();
  assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_missing_library(void **state) {
  (void)state;
  check_in_child("/nonexistent/libmpi.so.40", "cannot load the MPI library");
}

/* libm loads, but has no MPI_Init_thread */
static void test_not_an_mpi_library(void **state) {
  (void)state;
  check_in_child("libm.so.6", "has no symbol MPI_");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_missing_library),
      cmocka_unit_test(test_not_an_mpi_library),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
