/* LRU cache of compiled executables. */
#include <pthread.h>
#include <stdlib.h>

#include "../core/lt_alloc.h"
#include "cache.h"
#include "lt_metrics.h"

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static lt_cache_entry **g_buckets;
static size_t g_nbuckets; /* power of two */
static int64_t g_count, g_capacity;
static lt_cache_entry *g_lru_head, *g_lru_tail; /* head = most recent */

static int cache_init_locked(void) {
  if (g_buckets) return 1;
  const char *env = getenv("LT_COMPILATION_CACHE_SIZE");
  long cap = env ? strtol(env, NULL, 10) : 2048;
  g_capacity = cap > 0 ? cap : 2048;
  size_t nb = 64;
  while ((int64_t)nb < g_capacity * 2 && nb < ((size_t)1 << 24)) nb *= 2;
  g_buckets = lt__calloc(nb * sizeof *g_buckets);
  if (!g_buckets) return 0;
  g_nbuckets = nb;
  return 1;
}

static size_t bucket_of(lt_graph_key k) { return (size_t)(k.lo ^ k.hi) & (g_nbuckets - 1); }

static void lru_unlink(lt_cache_entry *e) {
  if (e->lru_prev)
    e->lru_prev->lru_next = e->lru_next;
  else
    g_lru_head = e->lru_next;
  if (e->lru_next)
    e->lru_next->lru_prev = e->lru_prev;
  else
    g_lru_tail = e->lru_prev;
  e->lru_prev = e->lru_next = NULL;
}

static void lru_push_front(lt_cache_entry *e) {
  e->lru_prev = NULL;
  e->lru_next = g_lru_head;
  if (g_lru_head) g_lru_head->lru_prev = e;
  g_lru_head = e;
  if (!g_lru_tail) g_lru_tail = e;
}

static lt_cache_entry *find_locked(lt_graph_key key) {
  for (lt_cache_entry *e = g_buckets[bucket_of(key)]; e; e = e->bucket_next)
    if (e->key.lo == key.lo && e->key.hi == key.hi) return e;
  return NULL;
}

static void remove_locked(lt_cache_entry *e) {
  lt_cache_entry **p = &g_buckets[bucket_of(e->key)];
  while (*p != e) p = &(*p)->bucket_next;
  *p = e->bucket_next;
  lru_unlink(e);
  g_count--;
}

void lt__cache_entry_release(lt_cache_entry *e) {
  if (e && atomic_fetch_sub(&e->refs, 1) == 1) {
    e->backend->executable_free(e->exe);
    lt__free(e, sizeof *e);
  }
}

lt_cache_entry *lt__cache_get(lt_graph_key key) {
  pthread_mutex_lock(&g_lock);
  lt_cache_entry *e = cache_init_locked() ? find_locked(key) : NULL;
  if (e) {
    lru_unlink(e);
    lru_push_front(e);
    atomic_fetch_add(&e->refs, 1);
  }
  pthread_mutex_unlock(&g_lock);
  return e;
}

lt_cache_entry *lt__cache_put(lt_graph_key key, const lt_backend *be, lt_executable *exe) {
  lt_cache_entry *fresh = lt__calloc(sizeof *fresh);
  if (!fresh) {
    be->executable_free(exe);
    return NULL;
  }
  atomic_init(&fresh->refs, 2); /* the cache's and the caller's */
  fresh->key = key;
  fresh->backend = be;
  fresh->exe = exe;
  lt_cache_entry *victims = NULL;
  pthread_mutex_lock(&g_lock);
  if (!cache_init_locked()) {
    pthread_mutex_unlock(&g_lock);
    be->executable_free(exe);
    lt__free(fresh, sizeof *fresh);
    return NULL;
  }
  lt_cache_entry *old = find_locked(key);
  if (old) { /* another thread compiled the same graph first: keep one */
    atomic_fetch_add(&old->refs, 1);
    pthread_mutex_unlock(&g_lock);
    be->executable_free(exe);
    lt__free(fresh, sizeof *fresh);
    return old;
  }
  size_t b = bucket_of(key);
  fresh->bucket_next = g_buckets[b];
  g_buckets[b] = fresh;
  lru_push_front(fresh);
  g_count++;
  while (g_count > g_capacity) {
    lt_cache_entry *v = g_lru_tail;
    remove_locked(v);
    v->bucket_next = victims;
    victims = v;
    lt__count(LT_CTR_CACHE_EVICTION, 1);
  }
  pthread_mutex_unlock(&g_lock);
  while (victims) { /* free outside the lock */
    lt_cache_entry *next = victims->bucket_next;
    lt__cache_entry_release(victims);
    victims = next;
  }
  return fresh;
}

int64_t lt__cache_size(void) {
  pthread_mutex_lock(&g_lock);
  int64_t n = g_count;
  pthread_mutex_unlock(&g_lock);
  return n;
}

void lt__cache_clear(void) {
  pthread_mutex_lock(&g_lock);
  lt_cache_entry *all = NULL;
  while (g_lru_head) {
    lt_cache_entry *e = g_lru_head;
    remove_locked(e);
    e->bucket_next = all;
    all = e;
  }
  pthread_mutex_unlock(&g_lock);
  while (all) {
    lt_cache_entry *next = all->bucket_next;
    lt__cache_entry_release(all);
    all = next;
  }
}

int64_t lt_cache_entries(void) { return lt__cache_size(); }
void lt_cache_clear(void) { lt__cache_clear(); }
