/*
 * lt_tests: every tests/test_*.c in one program, so that the test build links
 * the library, LLVM and oneDNN once rather than once per test. Each test file
 * is compiled with -Dmain=lt_test_main_<name> (CMakeLists.txt), and the table
 * of those functions (lt_tests_table.c) is generated at configure time.
 *
 * The program picks its test busybox-style from the name it was started by:
 * the build folder has a symbolic link test_foo -> lt_tests for each test, so
 * `build/test_foo`, `ctest -R test_foo` and a test that runs itself again
 * (exec of /proc/self/exe with argv[0] "test_foo") reach test_foo's main.
 * `lt_tests test_foo ARGS...` does the same; `lt_tests` alone lists the tests.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "lt_tests_table.h"

static const struct lt_test_entry *find_test(const char *name) {
  for (size_t i = 0; i < lt_test_count; i++)
    if (strcmp(lt_test_entries[i].name, name) == 0) return &lt_test_entries[i];
  return NULL;
}

static const char *base_name(const char *path) {
  const char *slash = strrchr(path, '/');
  return slash ? slash + 1 : path;
}

int main(int argc, char **argv) {
  const struct lt_test_entry *test = argc > 0 ? find_test(base_name(argv[0])) : NULL;
  if (!test && argc > 1 && (test = find_test(base_name(argv[1]))) != NULL) {
    argc--; /* `lt_tests test_foo ARGS`: test_foo sees argv[0] = "test_foo" */
    argv++;
  }
  if (!test) {
    fprintf(stderr,
            "lt_tests: no test named by argv[0] or argv[1]; usage: lt_tests TEST [ARGS]\n"
            "(or run through a link named after the test). Tests:\n");
    for (size_t i = 0; i < lt_test_count; i++) fprintf(stderr, "  %s\n", lt_test_entries[i].name);
    return 2;
  }
  return test->main_void ? test->main_void() : test->main_args(argc, argv);
}
