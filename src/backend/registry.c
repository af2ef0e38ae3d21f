/* The backend registry: backends register a table of entry points; the
 * executor picks one per device and names the fallback for unsupported ops. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "../core/lt_error.h"
#include "backend.h"

enum { kMaxBackends = 8 };
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static const lt_backend *_Atomic g_backends[kMaxBackends];
static _Atomic int g_count;
static const lt_backend *_Atomic g_forced;
/* The process's choice: lt__backend_choose's (lt_set_backend), else the one
 * LT_BACKEND names or the default, fixed at the first selection. */
static const lt_backend *_Atomic g_chosen;
static const lt_backend *_Atomic g_fallback;

int lt__backend_register(const lt_backend *be) {
  if (!be || !be->name || !be->supports_op || !be->env_hash || !be->data_alloc || !be->data_free ||
      !be->to_device || !be->from_device || !be->compile || !be->execute || !be->signature ||
      !be->executable_free)
    return lt__err(LT_EINVAL, "backend registration: %s lacks a required entry point",
                   be && be->name ? be->name : "a backend");
  pthread_mutex_lock(&g_lock);
  int n = atomic_load(&g_count), rc = LT_OK;
  for (int i = 0; i < n && rc == LT_OK; i++)
    if (strcmp(atomic_load(&g_backends[i])->name, be->name) == 0)
      rc = lt__err(LT_EINVAL, "backend registration: '%s' is already registered", be->name);
  if (rc == LT_OK && n == kMaxBackends)
    rc = lt__err(LT_ENOMEM, "backend registration: no room for '%s' (%d registered)", be->name,
                 kMaxBackends);
  if (rc == LT_OK) {
    atomic_store(&g_backends[n], be);
    atomic_store(&g_count, n + 1); /* published after its slot */
  }
  pthread_mutex_unlock(&g_lock);
  return rc;
}

int lt__backend_count(void) { return atomic_load(&g_count); }

const lt_backend *lt__backend_at(int i) {
  return i >= 0 && i < atomic_load(&g_count) ? atomic_load(&g_backends[i]) : NULL;
}

const lt_backend *lt__backend_find(const char *name) {
  int n = atomic_load(&g_count);
  for (int i = 0; name && i < n; i++) {
    const lt_backend *be = atomic_load(&g_backends[i]);
    if (strcmp(be->name, name) == 0) return be;
  }
  return NULL;
}

void lt__backend_force(const lt_backend *be) { atomic_store(&g_forced, be); }
const lt_backend *lt__backend_forced(void) { return atomic_load(&g_forced); }

const lt_backend *lt__backend_select(lt_device dev, const char *dflt) {
  (void)dev; /* every device of a process is served alike today */
  const lt_backend *forced = atomic_load(&g_forced);
  if (forced) return forced;
  const lt_backend *be = atomic_load(&g_chosen);
  if (be) return be;
  const char *want = getenv("LT_BACKEND");
  be = want && *want ? lt__backend_find(want) : NULL;
  if (!be && want && *want) {
    static _Atomic int warned;
    if (!atomic_exchange(&warned, 1))
      fprintf(stderr, "lazytensor: LT_BACKEND=%s names no backend; using %s\n", want, dflt);
  }
  if (!be) be = lt__backend_find(dflt);
  /* A choice made meanwhile (lt__backend_choose) wins over the default. */
  const lt_backend *none = NULL;
  if (be && !atomic_compare_exchange_strong(&g_chosen, &none, be)) be = none;
  return be;
}

void lt__backend_choose(const lt_backend *be) { atomic_store(&g_chosen, be); }

int lt__backend_names(char *buf, size_t n) {
  size_t len = 0;
  int count = atomic_load(&g_count);
  if (n) buf[0] = '\0';
  for (int i = 0; i < count; i++) {
    int w = snprintf(len < n ? buf + len : NULL, len < n ? n - len : 0, "%s%s", i ? ", " : "",
                     atomic_load(&g_backends[i])->name);
    if (w < 0) return w;
    len += (size_t)w;
  }
  return (int)len;
}

void lt__backend_set_fallback(const lt_backend *be) { atomic_store(&g_fallback, be); }
const lt_backend *lt__backend_fallback(void) { return atomic_load(&g_fallback); }

int lt__backend_run_fallback(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in) {
  const lt_backend *fb = atomic_load(&g_fallback);
  if (!fb || !fb->run_instr)
    return lt__err(LT_EEXEC, "no fallback backend runs op %s", lt__op_name((lt_op)ins->op));
  return fb->run_instr(ins, out, in);
}

uint64_t lt__backend_env_key(const lt_backend *be) {
  uint64_t w[2] = {be->env_hash(), lt__op_table_hash()};
  return XXH3_64bits(w, sizeof w);
}
