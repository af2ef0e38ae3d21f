/* Execution of a cpu executable: the slot table (parameters, outputs,
 * temporaries in one arena), then each kernel in order. */
#include <string.h>

#include "../../core/lt_alloc.h"
#include "../../core/lt_buffer_pool.h"
#include "../../core/lt_collective.h"
#include "../../core/lt_error.h"
#include "../../core/lt_shape.h"
#include "cpu.h"
#include "cpu_native.h"

static lt_buffer view_buffer(const cpu_view *v, void **table) {
  lt_buffer b;
  memset(&b, 0, sizeof b);
  b.dtype = v->dtype;
  b.ndim = v->ndim;
  memcpy(b.shape, v->shape, sizeof b.shape);
  b.numel = lt__numel(v->shape, v->ndim);
  b.nbytes = (size_t)b.numel * lt_dtype_size((lt_dtype)v->dtype);
  /* an empty temporary has no storage (no arena): no offset into NULL */
  b.data = table[v->slot]
               ? (char *)table[v->slot] + (size_t)v->offset * lt_dtype_size((lt_dtype)v->dtype)
               : NULL;
  atomic_init(&b.state, LT_BUF_READY);
  return b;
}

static int run_fallback(const cpu_kernel *k, void **table) {
  lt_buffer out = view_buffer(&k->out, table);
  lt_buffer bufs[8], *in_small[8];
  lt_buffer *bs = bufs, **in = in_small;
  int n = k->ins.noperands;
  if (n > 8) {
    bs = lt__malloc((size_t)n * sizeof *bs);
    in = lt__malloc((size_t)n * sizeof *in);
    if (!bs || !in) {
      if (bs != bufs) lt__free(bs, (size_t)n * sizeof *bs);
      if (in != in_small) lt__free(in, (size_t)n * sizeof *in);
      return LT_ENOMEM;
    }
  }
  for (int j = 0; j < n; j++) {
    bs[j] = view_buffer(&k->in[j], table);
    in[j] = &bs[j];
  }
  /* Ops with a hand-written kernel run it (cpu_native.c); other ops, nodes
   * whose dtypes neither it nor the fused loops cover, and nodes a kernel
   * declines (an index out of range: the fallback reports it, in its words)
   * run on the executor's fallback backend. */
  cpu_native_fn native = lt__cpu_native_find(k->ins.op, k->ins.dtype, n ? k->in[0].dtype : -1);
  int rc = native ? native(&k->ins, &out, in) : CPU_NATIVE_DECLINED;
  if (rc == CPU_NATIVE_DECLINED) rc = lt__backend_run_fallback(&k->ins, &out, in);
  if (bs != bufs) lt__free(bs, (size_t)n * sizeof *bs);
  if (in != in_small) lt__free(in, (size_t)n * sizeof *in);
  return rc;
}

static int run_kernel(const cpu_kernel *k, const cpu_kernel *next, void **table) {
  switch (k->kind) {
  case CK_LOOP:
    lt__cpu_loop_run(k, table);
    return LT_OK;
  case CK_BLAS:
    return lt__cpu_gemm(k, next, table);
  case CK_REF:
    return run_fallback(k, table);
  case CK_MEMCPY:
    if (k->nbytes) memcpy(table[k->out_slot], table[k->src.slot], k->nbytes);
    return LT_OK;
  }
  return LT_OK;
}

/* The last kernel that can fail, or -1: ref kernels (an index out of range,
 * a collective, memory). Loops, copies and products (lt__cpu_gemm falls back to
 * plain loops rather than fail) cannot. */
static int last_fallible(const lt_executable *e) {
  int last = -1;
  for (int i = 0; i < e->nkernels; i++)
    if (e->kernels[i].kind == CK_REF) last = i;
  return last;
}

/* Whether root r writes its donor's storage at or before a kernel that can
 * fail: then the donor's value is copied aside first, so that a failure can
 * put it back. A donor written only after the last such kernel needs no
 * copy: once it is written, nothing can fail any more. */
static bool needs_snapshot(const lt_executable *e, int r, int fallible) {
  int p = e->alias[r];
  return p >= 0 && e->slots[p].first >= 0 && e->slots[p].first <= fallible;
}

/* After a run that failed at kernel `failed`: every donor gets its value
 * back (docs/ARCHITECTURE.md, "A failed step loses nothing"). Its storage is
 * unwritten, or its snapshot is copied back over it. When a collective was
 * abandoned, MPI may still write this run's memory, so the donor gets fresh
 * storage instead, and keeps nothing if none can be had. (A donor written
 * without a snapshot before the failing kernel would mean a kernel failed
 * that last_fallible says cannot: it keeps nothing rather than a wrong
 * value, and reading it reports the loss.) */
static void undo_donations(const lt_executable *e, lt_buffer *const *args, lt_buffer *const *outs,
                           const char *snap, int fallible, int failed, bool abandoned) {
  size_t off = 0;
  for (int r = 0; r < e->nroots; r++) {
    int p = e->alias[r];
    if (p < 0) continue;
    size_t n = outs[r]->nbytes;
    const char *saved = needs_snapshot(e, r, fallible) ? snap + off : NULL;
    if (saved) off += n;
    if (!saved && e->slots[p].first >= 0 && e->slots[p].first <= failed) continue;
    if (!abandoned) {
      if (saved && n) memcpy(outs[r]->data, saved, n);
      lt__buffer_give_back(args[p], outs[r]);
    } else if (lt__buffer_materialize(args[p]) == LT_OK) {
      if (n) memcpy(args[p]->data, saved ? saved : outs[r]->data, n);
      lt__buffer_publish(args[p]);
    }
  }
}

int lt__cpu_run(const lt_executable *e, lt_buffer *const *args, lt_buffer *const *outs) {
  /* the slots, then each loop function's own (cpu_loop_args) */
  void *small[128];
  void **table = small;
  size_t ntable = (size_t)e->nslots + (size_t)e->nargs;
  if (ntable > 128) {
    table = lt__malloc(ntable * sizeof *table);
    if (!table) return LT_ENOMEM;
  }
  char *arena_raw = NULL, *arena = NULL, *snap = NULL;
  int rc = LT_OK, fallible = last_fallible(e);
  size_t snap_bytes = 0;
  for (int r = 0; r < e->nroots; r++)
    if (needs_snapshot(e, r, fallible)) snap_bytes += outs[r]->nbytes;
  for (int p = 0; p < e->nparams; p++) table[p] = args[p]->data;
  /* Every allocation comes before any donated storage is taken: a failure
   * here leaves the donors whole, so their tensors keep their values. */
  for (int r = 0; r < e->nroots && rc == LT_OK; r++)
    if (e->alias[r] < 0) rc = lt__buffer_materialize(outs[r]);
  if (rc == LT_OK && e->arena_bytes) {
    arena_raw = lt__buffer_pool_alloc(e->arena_bytes + 64, false); /* touched by earlier runs */
    if (!arena_raw) rc = LT_ENOMEM;
    arena = arena_raw + ((64 - ((uintptr_t)arena_raw & 63)) & 63);
  }
  if (rc == LT_OK && snap_bytes && !(snap = lt__malloc(snap_bytes))) rc = LT_ENOMEM;
  /* outputs: a donated parameter's storage (its value copied aside when a
   * kernel that can fail runs after its first write), or the fresh one above */
  bool donated = rc == LT_OK;
  size_t snap_off = 0;
  for (int r = 0; r < e->nroots && rc == LT_OK; r++) {
    if (e->alias[r] >= 0) {
      lt__buffer_take_data(outs[r], args[e->alias[r]]);
      table[e->alias[r]] = outs[r]->data;
      if (needs_snapshot(e, r, fallible) && outs[r]->nbytes) {
        memcpy(snap + snap_off, outs[r]->data, outs[r]->nbytes);
        snap_off += outs[r]->nbytes;
      }
    }
    table[e->nparams + r] = outs[r]->data;
  }
  for (int s = e->nparams + e->nroots; s < e->nslots && rc == LT_OK; s++)
    table[s] = arena ? arena + e->slots[s].offset : NULL; /* no arena: every temporary is empty */
  for (int a = 0; a < e->nargs && rc == LT_OK; a++) table[e->nslots + a] = table[e->args[a]];
  bool prof = lt__cpu_profile_on();
  int failed = -1; /* the kernel that failed, or -1 (allocation before any kernel) */
  for (int i = 0; i < e->nkernels && rc == LT_OK; i++) {
    const cpu_kernel *k = &e->kernels[i], *next = i + 1 < e->nkernels ? k + 1 : NULL;
    uint64_t t0 = prof ? lt__cpu_profile_now() : 0;
    rc = run_kernel(k, next, table);
    if (prof) lt__cpu_profile_add(e, i, lt__cpu_profile_now() - t0);
    if (rc != LT_OK) failed = i;
    if (lt__cpu_gemm_takes_next(k, next)) i++; /* it ran as k's epilogue */
    if (rc != LT_OK && failed < i) failed = i; /* the epilogue too may have written */
  }
  bool abandoned = lt__coll_take_abandoned();
  if (rc != LT_OK && donated) undo_donations(e, args, outs, snap, fallible, failed, abandoned);
  if (abandoned) {
    /* a collective gave up with MPI still holding pointers into this run's
     * memory: leak it all rather than let anything else reuse it */
    for (int p = 0; p < e->nparams; p++) lt__buffer_retain(args[p]);
    for (int r = 0; r < e->nroots; r++) lt__buffer_retain(outs[r]);
    arena_raw = NULL;
  }
  lt__free(snap, snap_bytes);
  if (arena_raw) lt__buffer_pool_free(arena_raw, e->arena_bytes + 64);
  if (table != small) lt__free(table, ntable * sizeof *table);
  return rc;
}
