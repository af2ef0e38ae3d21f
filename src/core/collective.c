/* Device-to-world bindings and the dispatch of collective kernels to their
 * world's transport (lt_collective.h). */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "lt_collective.h"
#include "lt_error.h"

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static lt_coll_binding g_bind[LT_MAX_DEVICES];
static uint64_t g_seq[LT_MAX_DEVICES]; /* collectives run per device since it was bound */
static _Thread_local int tl_current = -1;
static _Thread_local bool tl_abandoned;
static _Thread_local uint64_t tl_graph;
static int g_nbound; /* devices bound to a world (under g_lock) */

int lt__coll_bind(int dev, const lt_transport *t, void *state, int rank, int size) {
  if (dev < 0 || dev >= LT_MAX_DEVICES || !t || rank < 0 || rank >= size)
    return lt__err(LT_EINVAL, "collectives: bad binding of device %d (rank %d of %d)", dev, rank,
                   size);
  pthread_mutex_lock(&g_lock);
  bool taken = g_bind[dev].transport != NULL;
  if (!taken) {
    g_bind[dev] = (lt_coll_binding){t, state, rank, size};
    g_seq[dev] = 0;
    g_nbound++;
  }
  pthread_mutex_unlock(&g_lock);
  if (taken) return lt__err(LT_EINVAL, "CPU:%d already belongs to a world", dev);
  return LT_OK;
}

void lt__coll_unbind(int dev) {
  if (dev < 0 || dev >= LT_MAX_DEVICES) return;
  pthread_mutex_lock(&g_lock);
  if (g_bind[dev].transport) g_nbound--;
  g_bind[dev] = (lt_coll_binding){0};
  pthread_mutex_unlock(&g_lock);
}

bool lt__coll_binding(int dev, lt_coll_binding *out) {
  if (dev < 0 || dev >= LT_MAX_DEVICES) return false;
  pthread_mutex_lock(&g_lock);
  lt_coll_binding b = g_bind[dev];
  pthread_mutex_unlock(&g_lock);
  if (out) *out = b;
  return b.transport != NULL;
}

bool lt__coll_any_bound(void) {
  pthread_mutex_lock(&g_lock);
  bool any = g_nbound > 0;
  pthread_mutex_unlock(&g_lock);
  return any;
}

uint64_t lt__coll_count(int dev) {
  if (dev < 0 || dev >= LT_MAX_DEVICES) return 0;
  pthread_mutex_lock(&g_lock);
  uint64_t n = g_seq[dev];
  pthread_mutex_unlock(&g_lock);
  return n;
}

void lt__coll_abandon(void) { tl_abandoned = true; }

bool lt__coll_take_abandoned(void) {
  bool a = tl_abandoned;
  tl_abandoned = false;
  return a;
}

void lt__coll_set_current(int dev) { tl_current = dev; }
int lt__coll_current(void) { return tl_current; }
void lt__coll_set_graph(uint64_t fp) { tl_graph = fp; }

int lt__coll_run(const char *fn, lt_coll_call *call) {
  int dev = tl_current;
  if (dev < 0 || dev >= LT_MAX_DEVICES)
    return lt__err(LT_EEXEC, "%s: no device is executing on this thread", fn);
  pthread_mutex_lock(&g_lock);
  lt_coll_binding b = g_bind[dev];
  call->seq = g_seq[dev]++;
  call->graph = tl_graph;
  pthread_mutex_unlock(&g_lock);
  if (!b.transport)
    return lt__err(LT_EEXEC,
                   "%s on CPU:%d: the device belongs to no world (create one with "
                   "lt_world_local first)",
                   fn, dev);
  return b.transport->run(b.state, b.rank, call);
}

const char *lt__coll_kind_name(int kind) {
  static const char *names[] = {"all_reduce", "all_gather", "reduce_scatter",
                                "broadcast",  "all_to_all", "collective_permute"};
  return kind >= 0 && kind < (int)(sizeof names / sizeof *names) ? names[kind] : "?";
}

const char *lt__coll_redop_name(int redop) {
  static const char *names[] = {"sum", "mean", "max", "min"};
  return redop >= 0 && redop < 4 ? names[redop] : "?";
}

void lt__coll_copy_box(void *dst, const int64_t *dshape, int daxis, int64_t doff, const void *src,
                       const int64_t *sshape, int saxis, int64_t soff, const int64_t *box, int ndim,
                       size_t esz) {
  int64_t rows = 1, idx[LT_MAX_DIMS] = {0};
  for (int d = 0; d < ndim - 1; d++) rows *= box[d];
  size_t row = (size_t)box[ndim - 1] * esz;
  if (!row) return;
  for (int64_t k = 0; k < rows; k++) {
    /* the row's first element in each tensor (row-major offsets) */
    int64_t so = 0, dof = 0;
    for (int d = 0; d < ndim; d++) {
      so = so * sshape[d] + idx[d] + (d == saxis ? soff : 0);
      dof = dof * dshape[d] + idx[d] + (d == daxis ? doff : 0);
    }
    memcpy((char *)dst + (size_t)dof * esz, (const char *)src + (size_t)so * esz, row);
    for (int d = ndim - 2; d >= 0; d--) { /* next row: odometer over the box's outer axes */
      if (++idx[d] < box[d]) break;
      idx[d] = 0;
    }
  }
}

int lt__coll_pairs_str(const int8_t *from, char *buf, size_t n) {
  size_t k = 0;
  int w = snprintf(buf, n, " pairs {");
  k = w > 0 ? (size_t)w : 0;
  bool first = true;
  for (int r = 0; r < LT_MAX_DEVICES && k < n; r++) {
    if (from[r] < 0) continue;
    w = snprintf(buf + k, n - k, "%s%d->%d", first ? "" : ", ", from[r], r);
    k += w > 0 ? (size_t)w : 0;
    first = false;
  }
  if (k < n) {
    w = snprintf(buf + k, n - k, "}");
    k += w > 0 ? (size_t)w : 0;
  }
  return (int)(k < n ? k : n ? n - 1 : 0);
}
