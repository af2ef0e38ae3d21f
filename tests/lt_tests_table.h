/* The table of tests in lt_tests (tests/lt_tests.c); CMakeLists.txt generates
 * its contents (lt_tests_table.c in the build folder) from tests/test_*.c. */
#ifndef LT_TESTS_TABLE_H
#define LT_TESTS_TABLE_H
#include <stddef.h>

struct lt_test_entry {
  const char *name;               /* test_foo: the file's name, the link's name */
  int (*main_void)(void);         /* the file's `int main(void)`, or NULL */
  int (*main_args)(int, char **); /* the file's `int main(int argc, char **argv)`, or NULL */
};

extern const struct lt_test_entry lt_test_entries[];
extern const size_t lt_test_count;
#endif
