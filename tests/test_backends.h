/* The two backends for tests that run the same body on each (ref first: its
 * answer is the one cpu is held to). */
#ifndef LT_TEST_BACKENDS_H
#define LT_TEST_BACKENDS_H

#include "test_util.h"

#include "../src/backend/cpu/cpu_api.h"
#include "../src/backend/ref/ref_api.h"

static const lt_backend *const tu_backends[2] = {&lt__ref_backend, &lt__cpu_backend};

/* Runs body on each backend that this run allows (tu_nbackends), each time
 * inside a scope of its own. */
static inline void tu_on_both(void (*body)(void)) {
  for (int i = 0; i < tu_nbackends(); i++) {
    print_message("  backend %s\n", tu_backends[i]->name);
    lt__backend_force(tu_backends[i]);
    lt_scope_begin();
    body();
    lt_scope_end();
    lt__backend_force(NULL);
  }
}

/* Defines the cmocka test name, whose body (the block after the macro) runs
 * on each backend through tu_on_both. */
#define TU_BOTH(name)              \
  static void name##_body(void);   \
  static void name(void **state) { \
    (void)state;                   \
    tu_on_both(name##_body);       \
  }                                \
  static void name##_body(void)

/* t's gradient read as n doubles (zeros when t has none). */
static inline void tu_read_grad(lt_tensor *t, double *out, int64_t n) {
  lt_tensor *g = lt_grad(t);
  if (!g) {
    for (int64_t i = 0; i < n; i++) out[i] = 0;
    return;
  }
  tu_read(g, out, n);
}

#endif
