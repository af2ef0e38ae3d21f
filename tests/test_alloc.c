/* The per-thread free lists of small objects (lt__slab_alloc, src/core/alloc.c)
 * that make node and tensor creation allocation-free on the tracing path, and
 * the node hash and tensor ids made on that path.
 *
 * The free lists serve only the default allocator; lt__slab_set_with_hook(true)
 * lets them serve under the counting hook below too, so that these tests can
 * see which allocations reach the allocator and make a refill fail. */
#include <pthread.h>

#include "test_util.h"
#include "../src/core/lt_alloc.h"
#include "../src/core/lt_node.h"
#include "../src/core/lt_tensor.h"

/* ---- a hook that counts, and fails every allocation once its budget is spent ---- */

static atomic_long g_allocs; /* new blocks handed out */
static atomic_long g_live;   /* blocks handed out and not yet freed */
static atomic_long g_budget = -1;

static void *counting_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
  (void)ud;
  (void)osize;
  if (nsize == 0) {
    if (ptr) atomic_fetch_sub(&g_live, 1);
    free(ptr);
    return NULL;
  }
  long b = atomic_load(&g_budget);
  while (b > 0 && !atomic_compare_exchange_weak(&g_budget, &b, b - 1)) {
  }
  if (b == 0) return NULL;
  void *q = realloc(ptr, nsize);
  if (q && !ptr) {
    atomic_fetch_add(&g_allocs, 1);
    atomic_fetch_add(&g_live, 1);
  }
  return q;
}

static void hook_on(void) {
  atomic_store(&g_allocs, 0);
  atomic_store(&g_live, 0);
  atomic_store(&g_budget, -1);
  lt__slab_set_with_hook(true);
  lt_set_allocator(counting_alloc, NULL); /* also empties this thread's lists */
}

/* Back to the default allocator; the lists' objects go back to the hook that
 * made them, so every block the hook handed out has come back. */
static void hook_off(void) {
  atomic_store(&g_budget, -1);
  lt_set_allocator(NULL, NULL);
  lt__slab_set_with_hook(false);
}

/* n elementwise ops over a and b (the shape of bench/trace_overhead's chain). */
static lt_tensor *chain(lt_tensor *a, lt_tensor *b, int n) {
  lt_tensor *t = a;
  for (int i = 0; i < n; i++) {
    switch (i % 4) {
    case 0:
      t = lt_add(t, b);
      break;
    case 1:
      t = lt_mul(t, b);
      break;
    case 2:
      t = lt_sub(t, a);
      break;
    default:
      t = lt_maximum(t, a);
      break;
    }
  }
  return t;
}

/* Two leaves already read by a graph: their data nodes exist, so tracing over
 * them makes exactly one node and one tensor per op. */
static void warm_leaves(lt_tensor **a, lt_tensor **b) {
  *a = tu_f32(SHAPE(4), 1, ((float[]){1, 2, 3, 4}));
  *b = tu_f32(SHAPE(4), 1, ((float[]){0.5f, 0.5f, 0.5f, 0.5f}));
  double v[4];
  tu_read(lt_add(*a, *b), v, 4);
}

static void test_freed_block_is_reused_by_its_size_class(void **state) {
  (void)state;
  hook_on();
  void *p = lt__slab_alloc(150);
  assert_non_null(p);
  assert_int_equal(atomic_load(&g_allocs), 1);
  memset(p, 0xab, 150);
  lt__slab_free(p, 150);
  assert_int_equal(lt__slab_cached(), 1);
  void *q = lt__slab_alloc(155); /* the same 16-byte class (145..160) */
  assert_ptr_equal(q, p);
  assert_int_equal(atomic_load(&g_allocs), 1);
  assert_int_equal(lt__slab_cached(), 0);
  void *r = lt__slab_alloc(100); /* another class: a refill from the hook */
  assert_non_null(r);
  assert_ptr_not_equal(r, q);
  assert_int_equal(atomic_load(&g_allocs), 2);
  void *big = lt__slab_alloc(4096); /* past the classes: the hook, both ways */
  assert_non_null(big);
  lt__slab_free(big, 4096);
  lt__slab_free(q, 155);
  lt__slab_free(r, 100);
  assert_int_equal(lt__slab_cached(), 2);
  assert_int_equal(atomic_load(&g_live), 2);
  hook_off();
  assert_int_equal(atomic_load(&g_live), 0);
  assert_int_equal(atomic_load(&g_allocs), 3);
}

/* A thread's lists hold at most 1 MiB: past that, frees go to the allocator. */
static void test_lists_are_bounded(void **state) {
  (void)state;
  enum { SIZE = 512, N = 2200 }; /* 1.07 MiB */
  static void *p[N];
  hook_on();
  for (int i = 0; i < N; i++) assert_non_null(p[i] = lt__slab_alloc(SIZE));
  for (int i = 0; i < N; i++) lt__slab_free(p[i], SIZE);
  size_t cached = lt__slab_cached();
  long live = atomic_load(&g_live);
  hook_off();
  assert_int_equal(cached, (1 << 20) / SIZE);
  assert_int_equal(live, (long)cached); /* the rest went back to the hook */
  assert_int_equal(atomic_load(&g_live), 0);
}

/* The tracing path's objects come back from the lists: a second trace of the
 * same ops asks the allocator for nothing (before the lists, each op made two
 * allocations, a node and a tensor). */
static void test_retrace_allocates_nothing(void **state) {
  (void)state;
  lt_tensor *a, *b;
  warm_leaves(&a, &b);
  enum { N = 64 };
  hook_on();
  lt_scope_begin();
  /* released tensors wait in the quarantine (lt_tensor.h) before they reach
   * the lists: a trace longer by its size fills it first */
  assert_non_null(chain(a, b, LT_TENSOR_QUARANTINE + N));
  lt_scope_end(); /* N nodes and N tensors (and more) go to the lists */
  assert_true(lt__slab_cached() >= 2 * N);
  long allocs0 = atomic_load(&g_allocs);
  size_t cached0 = lt__slab_cached();
  lt_scope_begin();
  lt_tensor *y = chain(a, b, N);
  long allocs1 = atomic_load(&g_allocs);
  size_t cached1 = lt__slab_cached();
  double v[4];
  tu_read(y, v, 4);
  lt_scope_end();
  hook_off();
  assert_int_equal(allocs1 - allocs0, 0);
  assert_int_equal(cached0 - cached1, 2 * N);
  /* and the value is right, computed the same way in f32 */
  for (int e = 0; e < 4; e++) {
    float x = (float)(e + 1), t = x;
    for (int i = 0; i < N; i++) {
      switch (i % 4) {
      case 0:
        t = t + 0.5f;
        break;
      case 1:
        t = t * 0.5f;
        break;
      case 2:
        t = t - x;
        break;
      default:
        t = t > x ? t : x;
        break;
      }
    }
    assert_true(v[e] == (double)t);
  }
}

/* A refill that fails is an ordinary allocation failure: NULL, LT_ENOMEM with
 * its message, and an op that needed it fails cleanly and loses nothing. */
static void test_failed_refill_is_a_clean_error(void **state) {
  (void)state;
  lt_tensor *a, *b;
  warm_leaves(&a, &b);
  hook_on();
  lt_clear_error();
  atomic_store(&g_budget, 0);
  assert_null(lt__slab_alloc(64));
  assert_int_equal(lt_last_status(), LT_ENOMEM);
  assert_non_null(strstr(lt_last_error(), "out of memory"));
  atomic_store(&g_budget, -1);
  /* Each allocation of a small expression fails in turn, with empty lists,
   * so node and tensor creation reach their refills. */
  int failures = 0, successes = 0;
  for (long k = 0; k < 32; k++) {
    lt__slab_flush();
    lt_clear_error();
    lt_scope_begin();
    atomic_store(&g_budget, k);
    lt_tensor *s = lt_sub(lt_mul(a, b), lt_neg(a));
    atomic_store(&g_budget, -1);
    if (s) {
      successes++;
      double v[4];
      tu_read(s, v, 4);
      assert_true(v[0] == 1.5 && v[3] == 6.0);
    } else {
      failures++;
      assert_int_equal(lt_last_status(), LT_ENOMEM);
      assert_non_null(strstr(lt_last_error(), "out of memory"));
    }
    lt_scope_end();
  }
  hook_off();
  assert_true(failures >= 3); /* at least the three nodes' or tensors' refills */
  assert_true(successes > 0);
  double v[4];
  tu_read(a, v, 4);
  assert_true(v[0] == 1 && v[3] == 4);
  tu_read(b, v, 4);
  assert_true(v[0] == 0.5 && v[3] == 0.5);
}

/* Setting an allocator first returns this thread's cached objects to the
 * allocator that made them. */
static void test_set_allocator_empties_the_lists(void **state) {
  (void)state;
  lt_tensor *a, *b;
  warm_leaves(&a, &b);
  lt_scope_begin();
  assert_non_null(chain(a, b, LT_TENSOR_QUARANTINE + 8)); /* past the tensor quarantine */
  lt_scope_end();
  assert_true(lt__slab_cached() >= 16);
  hook_on();
  assert_int_equal(lt__slab_cached(), 0);
  hook_off();
}

typedef struct tracer {
  lt_tensor *a, *b;
  size_t cached; /* the thread's lists after its trace, before it exits */
} tracer;

static void *trace_and_exit(void *p) {
  tracer *tr = p;
  lt_scope_begin();
  lt_tensor *y = chain(tr->a, tr->b, LT_TENSOR_QUARANTINE + 32); /* past the quarantine */
  lt_scope_end();
  tr->cached = y ? lt__slab_cached() : 0;
  return NULL;
}

/* A thread's lists are freed when it exits: nothing it cached is lost. */
static void test_thread_exit_frees_its_lists(void **state) {
  (void)state;
  tracer tr;
  warm_leaves(&tr.a, &tr.b);
  hook_on();
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, trace_and_exit, &tr), 0);
  assert_int_equal(pthread_join(th, NULL), 0);
  long live = atomic_load(&g_live);
  hook_off();
  assert_true(tr.cached >= 64);
  assert_int_equal(live, 0);
}

typedef struct id_maker {
  int64_t ids[3000];
} id_maker;

/* Own leaves: node reference counts belong to one thread at a time. */
static void *make_ids(void *p) {
  id_maker *m = p;
  lt_scope_begin();
  lt_tensor *a = lt_full(CPU0, LT_F32, SHAPE(2), 1, 1.0);
  lt_tensor *b = lt_full(CPU0, LT_F32, SHAPE(2), 1, 2.0);
  for (int i = 0; i < 3000; i++) m->ids[i] = lt_id(lt_add(a, b));
  lt_scope_end();
  return NULL;
}

static int cmp_i64(const void *x, const void *y) {
  int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
  return (a > b) - (a < b);
}

/* Ids are taken a block at a time per thread: still unique and positive
 * across threads tracing at once (more than one block each). */
static void test_ids_unique_across_threads(void **state) {
  (void)state;
  static id_maker m[2];
  pthread_t th[2];
  for (int i = 0; i < 2; i++) assert_int_equal(pthread_create(&th[i], NULL, make_ids, &m[i]), 0);
  for (int i = 0; i < 2; i++) assert_int_equal(pthread_join(th[i], NULL), 0);
  static int64_t all[6001];
  memcpy(all, m[0].ids, sizeof m[0].ids);
  memcpy(all + 3000, m[1].ids, sizeof m[1].ids);
  all[6000] = lt_id(lt_scalar(CPU0, LT_F32, 3.0));
  qsort(all, 6001, sizeof all[0], cmp_i64);
  assert_true(all[0] > 0);
  for (int i = 1; i < 6001; i++) assert_true(all[i] != all[i - 1]);
}

/* Every attribute and operand enters a node's hash, also for nodes too large
 * to hash in one call (streamed): before, attributes past the 72nd were
 * dropped, so two such nodes differing only there hashed alike. */
static void test_node_hash_covers_large_nodes(void **state) {
  (void)state;
  enum { NA = 80, NOPS = 24 };
  int64_t attrs[NA];
  for (int i = 0; i < NA; i++) attrs[i] = i;
  lt_node *x = lt__node_new(LT_OP_CONST, LT_F32, NULL, 0, NULL, 0, attrs, NA, 1.0);
  lt_node *y = lt__node_new(LT_OP_CONST, LT_F32, NULL, 0, NULL, 0, attrs, NA, 1.0);
  attrs[NA - 1] = -1;
  lt_node *z = lt__node_new(LT_OP_CONST, LT_F32, NULL, 0, NULL, 0, attrs, NA, 1.0);
  assert_true(x && y && z);
  assert_true(x->hash == y->hash);
  assert_true(x->hash != z->hash);
  /* a concat whose last operand differs (its 2 + 2 * NOPS words stream) */
  lt_node *ops1[NOPS], *ops2[NOPS];
  for (int i = 0; i < NOPS; i++) {
    ops1[i] = lt__node_const(LT_F32, SHAPE(1), 1, 0.0);
    ops2[i] = lt__node_const(LT_F32, SHAPE(1), 1, i == NOPS - 1 ? 1.0 : 0.0);
  }
  int64_t axis = 0;
  lt_node *c1 = lt__node_new(LT_OP_CONCAT, LT_F32, SHAPE(NOPS), 1, ops1, NOPS, &axis, 1, 0.0);
  lt_node *c2 = lt__node_new(LT_OP_CONCAT, LT_F32, SHAPE(NOPS), 1, ops2, NOPS, &axis, 1, 0.0);
  lt_node *c3 = lt__node_new(LT_OP_CONCAT, LT_F32, SHAPE(NOPS), 1, ops1, NOPS, &axis, 1, 0.0);
  assert_true(c1 && c2 && c3);
  assert_true(c1->hash != c2->hash);
  assert_true(c1->hash == c3->hash);
  for (int i = 0; i < NOPS; i++) {
    lt__node_release(ops1[i]);
    lt__node_release(ops2[i]);
  }
  lt__node_release(c1);
  lt__node_release(c2);
  lt__node_release(c3);
  lt__node_release(x);
  lt__node_release(y);
  lt__node_release(z);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      TU_TEST(test_freed_block_is_reused_by_its_size_class),
      TU_TEST(test_lists_are_bounded),
      TU_TEST(test_retrace_allocates_nothing),
      TU_TEST(test_failed_refill_is_a_clean_error),
      TU_TEST(test_set_allocator_empties_the_lists),
      TU_TEST(test_thread_exit_frees_its_lists),
      TU_TEST(test_ids_unique_across_threads),
      TU_TEST(test_node_hash_covers_large_nodes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
