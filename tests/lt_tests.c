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
 *
 * `lt_tests --forked JOBS TEST...` runs each named test in a child of one
 * process (fork without exec), JOBS at a time, and fails if any child does;
 * a child's output goes to a temporary file, printed if the child fails.
 * Each test still gets a fresh process, but the start-up (the static LLVM
 * and oneDNN constructors) runs once: under valgrind, which emulates every
 * instruction and follows a fork, that start-up cost about 3 s per test.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

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

static int run_test(const struct lt_test_entry *test, int argc, char **argv) {
  return test->main_void ? test->main_void() : test->main_args(argc, argv);
}

struct forked_child {
  pid_t pid;    /* 0 once reaped */
  char log[32]; /* its stdout and stderr */
  const char *name;
};

static void print_file(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return;
  char buf[4096];
  size_t got;
  while ((got = fread(buf, 1, sizeof buf, f)) > 0) fwrite(buf, 1, got, stdout);
  fclose(f);
}

/* Waits for one child of --forked, reports it by name; returns 1 if it failed. */
static int reap_one(struct forked_child *children, int n) {
  int status;
  pid_t pid;
  while ((pid = wait(&status)) < 0 && errno == EINTR) {
  }
  if (pid < 0) return 1;
  for (int i = 0; i < n; i++) {
    struct forked_child *c = &children[i];
    if (c->pid != pid) continue;
    c->pid = 0;
    int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (ok) {
      printf("passed: %s\n", c->name);
    } else {
      print_file(c->log);
      if (WIFEXITED(status))
        printf("FAILED: %s (pid %d, exit status %d)\n", c->name, (int)pid, WEXITSTATUS(status));
      else
        printf("FAILED: %s (pid %d, signal %d)\n", c->name, (int)pid,
               WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    }
    unlink(c->log);
    fflush(stdout);
    return !ok;
  }
  return 1; /* not one of ours */
}

static int run_forked(int jobs, int count, char **names) {
  for (int i = 0; i < count; i++) {
    if (!find_test(names[i])) {
      fprintf(stderr, "lt_tests --forked: no test named %s\n", names[i]);
      return 2;
    }
  }
  struct forked_child *children = calloc((size_t)count, sizeof *children);
  if (!children) return 2;
  int running = 0, failed = 0;
  for (int i = 0; i < count; i++) {
    if (running == jobs) {
      failed += reap_one(children, count);
      running--;
    }
    struct forked_child *c = &children[i];
    c->name = names[i];
    snprintf(c->log, sizeof c->log, "/tmp/lt-forked.XXXXXX");
    int log_fd = mkstemp(c->log);
    if (log_fd < 0) {
      perror("lt_tests --forked: mkstemp");
      failed++;
      continue;
    }
    fflush(NULL); /* the child must not write the parent's buffered output again */
    pid_t pid = fork();
    if (pid < 0) {
      perror("lt_tests --forked: fork");
      close(log_fd);
      unlink(c->log);
      failed++;
      continue;
    }
    if (pid == 0) {
      dup2(log_fd, STDOUT_FILENO);
      dup2(log_fd, STDERR_FILENO);
      close(log_fd);
      char *child_argv[] = {names[i], NULL};
      exit(run_test(find_test(names[i]), 1, child_argv));
    }
    close(log_fd);
    c->pid = pid;
    running++;
  }
  while (running-- > 0) failed += reap_one(children, count);
  free(children);
  printf("lt_tests --forked: %d of %d tests failed\n", failed, count);
  return failed ? 1 : 0;
}

int main(int argc, char **argv) {
  if (argc > 2 && strcmp(argv[1], "--forked") == 0) {
    int jobs = atoi(argv[2]);
    return run_forked(jobs > 0 ? jobs : 1, argc - 3, argv + 3);
  }
  const struct lt_test_entry *test = argc > 0 ? find_test(base_name(argv[0])) : NULL;
  if (!test && argc > 1 && (test = find_test(base_name(argv[1]))) != NULL) {
    argc--; /* `lt_tests test_foo ARGS`: test_foo sees argv[0] = "test_foo" */
    argv++;
  }
  if (!test) {
    fprintf(stderr,
            "lt_tests: no test named by argv[0] or argv[1]; usage: lt_tests TEST [ARGS],\n"
            "or lt_tests --forked JOBS TEST... (or run through a link named after the test).\n"
            "Tests:\n");
    for (size_t i = 0; i < lt_test_count; i++) fprintf(stderr, "  %s\n", lt_test_entries[i].name);
    return 2;
  }
  return run_test(test, argc, argv);
}
