/* Debug output of the executor.
 *
 * LT_SAVE_GRAPHS=path appends every synced graph to path: as text (default, or
 * LT_SAVE_GRAPHS_FORMAT=text), one header line and one line per node in
 * post-order; or as one Graphviz digraph per graph (LT_SAVE_GRAPHS_FORMAT=dot).
 *
 * LT_DEBUG=1 explains each compile on stderr: the graph is compared with the
 * closest graph compiled earlier that has as many roots (fewest differing
 * nodes, aligned by post-order index), and the first differences are named.
 * Syncs that hit the cache get a one-line summary.
 *
 * A replica of a world of more than one rank (in process or over MPI) writes
 * its graphs to path.<rank> and prefixes its LT_DEBUG lines with its rank,
 * as the reference writes one file per ordinal: the replicas of one step
 * trace the same graphs at the same time, and one shared file would
 * interleave them.
 *
 * The variables are read once per process. The history of compiled graphs
 * lives as long as the process, outliving any allocator a program installs
 * with lt_set_allocator, so it uses the C library directly; the text of one
 * dump or explanation (an lt_strbuf, through the library's allocator) is
 * freed before the call returns. Nothing here can fail an execution: a failed
 * write or allocation only loses debug output, and the error an allocation
 * failure records is put back as it was. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/lt_collective.h"
#include "../core/lt_error.h"
#include "../core/lt_strbuf.h"
#include "coll_fingerprint.h"
#include "debug.h"

/* ---- configuration ------------------------------------------------------------------- */

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static struct {
  bool active;    /* anything to do at all (read without the lock after g_once) */
  bool save, dot; /* save is cleared under g_mu after a write failure */
  int debug;      /* LT_DEBUG level; 0 = off */
  char path[4096];
} g_cfg;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

static void read_env(void) {
  const char *path = getenv("LT_SAVE_GRAPHS");
  if (path && *path) {
    if (strlen(path) < sizeof g_cfg.path) {
      memcpy(g_cfg.path, path, strlen(path) + 1);
      g_cfg.save = true;
    } else {
      fputs("lazytensor: LT_SAVE_GRAPHS is too long a path; graphs are not saved\n", stderr);
    }
  }
  const char *fmt = getenv("LT_SAVE_GRAPHS_FORMAT");
  if (fmt && *fmt) {
    if (strcmp(fmt, "dot") == 0)
      g_cfg.dot = true;
    else if (strcmp(fmt, "text") != 0)
      fprintf(stderr, "lazytensor: LT_SAVE_GRAPHS_FORMAT=%s is not text or dot; using text\n", fmt);
  }
  const char *dbg = getenv("LT_DEBUG");
  if (dbg && *dbg && strcmp(dbg, "0") != 0) {
    g_cfg.debug = atoi(dbg);
    if (g_cfg.debug <= 0) g_cfg.debug = 1;
  }
  g_cfg.active = g_cfg.save || g_cfg.debug > 0;
}

/* ---- formatting helpers ---------------------------------------------------------------- */

static void key_hex(lt_graph_key key, char out[33]) {
  snprintf(out, 33, "%016llx%016llx", (unsigned long long)key.hi, (unsigned long long)key.lo);
}

/* "[2, 3]" */
static void sb_ints(lt_strbuf *s, const int64_t *v, int n) {
  lt__sb_printf(s, "[");
  for (int i = 0; i < n; i++) lt__sb_printf(s, i ? ", %lld" : "%lld", (long long)v[i]);
  lt__sb_printf(s, "]");
}

/* Shortest text that reads back as the same double. */
static void sb_double(lt_strbuf *s, double v) {
  char buf[40];
  snprintf(buf, sizeof buf, "%.15g", v);
  if (strtod(buf, NULL) != v) snprintf(buf, sizeof buf, "%.17g", v);
  lt__sb_append(s, buf, strlen(buf));
}

static const char *dtype_name(int dt) { return lt_dtype_name((lt_dtype)dt); }

static const char *plural(long n) { return n == 1 ? "" : "s"; }

/* The post-order index of operand k of n, or -1 when its order is stale. */
static int operand_index(const lt_graph *g, const lt_node *n, int k) {
  const lt_node *o = n->operands[k].node;
  int idx = o->order;
  return idx >= 0 && idx < g->nnodes && g->nodes[idx] == o ? idx : -1;
}

/* For each node, the roots it gives (a linked list through next; -1 ends). */
typedef struct root_map {
  int *head, *next;
} root_map;

static bool root_map_init(root_map *m, const lt_graph *g) {
  m->head = malloc(sizeof(int) * (size_t)(g->nnodes ? g->nnodes : 1));
  m->next = malloc(sizeof(int) * (size_t)(g->nroots ? g->nroots : 1));
  if (!m->head || !m->next) {
    free(m->head);
    free(m->next);
    return false;
  }
  for (int i = 0; i < g->nnodes; i++) m->head[i] = -1;
  for (int r = g->nroots - 1; r >= 0; r--) {
    int i = g->roots[r];
    m->next[r] = -1;
    if (i < 0 || i >= g->nnodes) continue;
    m->next[r] = m->head[i];
    m->head[i] = r;
  }
  return true;
}

static void root_map_free(root_map *m) {
  free(m->head);
  free(m->next);
}

/* "<prefix>root 0,3" when node i gives roots 0 and 3; nothing when none. */
static void sb_roots_of(lt_strbuf *s, const root_map *m, int i, const char *prefix) {
  if (m->head[i] < 0) return;
  lt__sb_printf(s, "%sroot", prefix);
  for (int r = m->head[i], first = 1; r >= 0; r = m->next[r], first = 0)
    lt__sb_printf(s, first ? " %d" : ",%d", r);
}

/* ---- graph dumps ------------------------------------------------------------------------- */

static void dump_text(lt_strbuf *s, const lt_graph *g, const char *khex, const char *reason,
                      const root_map *roots) {
  lt__sb_printf(s, "graph %s reason=\"%s\" nodes=%d params=%d roots=%d", khex, reason, g->nnodes,
                g->nparams, g->nroots);
  if (g->ndonors > 0) {
    lt__sb_printf(s, " donors=");
    for (int d = 0; d < g->ndonors; d++) lt__sb_printf(s, d ? ",%d" : "%d", g->donors[d]);
  }
  lt__sb_printf(s, "\n");
  for (int i = 0; i < g->nnodes; i++) {
    const lt_node *n = g->nodes[i];
    lt__sb_printf(s, "  %d %s %s", i, lt__op_name((lt_op)n->op), dtype_name(n->dtype));
    sb_ints(s, n->shape, n->ndim);
    if (n->noperands) {
      lt__sb_printf(s, " (");
      for (int k = 0; k < n->noperands; k++) {
        lt__sb_printf(s, k ? ", %d" : "%d", operand_index(g, n, k));
        if (n->operands[k].index) lt__sb_printf(s, ".%u", (unsigned)n->operands[k].index);
      }
      lt__sb_printf(s, ")");
    }
    if (n->nattrs) {
      lt__sb_printf(s, " attrs=");
      sb_ints(s, n->attrs, n->nattrs);
    }
    if (n->op == LT_OP_CONST || n->op == LT_OP_PAD) {
      lt__sb_printf(s, " value=");
      sb_double(s, n->fattr);
    }
    if (g->param_of && g->param_of[i] >= 0) lt__sb_printf(s, " param %d", g->param_of[i]);
    sb_roots_of(s, roots, i, " ");
    lt__sb_printf(s, "\n");
  }
  lt__sb_printf(s, "\n");
}

static void dump_dot(lt_strbuf *s, const lt_graph *g, const char *khex, const char *reason,
                     const root_map *roots) {
  lt__sb_printf(s, "digraph \"graph_%s\" {\n", khex);
  lt__sb_printf(s, "  label=\"%s (%s): %d node%s, %d param%s, %d root%s\";\n", khex, reason,
                g->nnodes, plural(g->nnodes), g->nparams, plural(g->nparams), g->nroots,
                plural(g->nroots));
  lt__sb_printf(s, "  node [shape=box, fontname=monospace];\n");
  for (int i = 0; i < g->nnodes; i++) {
    const lt_node *n = g->nodes[i];
    lt__sb_printf(s, "  n%d [label=\"%d: %s\\n%s", i, i, lt__op_name((lt_op)n->op),
                  dtype_name(n->dtype));
    sb_ints(s, n->shape, n->ndim);
    if (n->nattrs) {
      lt__sb_printf(s, "\\nattrs ");
      sb_ints(s, n->attrs, n->nattrs);
    }
    if (n->op == LT_OP_CONST || n->op == LT_OP_PAD) {
      lt__sb_printf(s, "\\nvalue ");
      sb_double(s, n->fattr);
    }
    if (g->param_of && g->param_of[i] >= 0) lt__sb_printf(s, "\\nparam %d", g->param_of[i]);
    if (roots->head[i] >= 0) {
      sb_roots_of(s, roots, i, "\\n");
      lt__sb_printf(s, "\", style=bold, peripheries=2];\n");
    } else {
      lt__sb_printf(s, "\"];\n");
    }
  }
  for (int i = 0; i < g->nnodes; i++) {
    const lt_node *n = g->nodes[i];
    for (int k = 0; k < n->noperands; k++) {
      int o = operand_index(g, n, k);
      if (o < 0) continue;
      if (n->noperands > 1)
        lt__sb_printf(s, "  n%d -> n%d [label=\"%d\"];\n", o, i, k);
      else
        lt__sb_printf(s, "  n%d -> n%d;\n", o, i);
    }
  }
  lt__sb_printf(s, "}\n\n");
}

/* The rank of a world of more than one replica that device dev belongs to;
 * -1 when it is alone. */
static int world_rank(int dev) {
  lt_coll_binding b;
  return lt__coll_binding(dev, &b) && b.size > 1 ? b.rank : -1;
}

/* Under g_mu. */
static void save_graph(const lt_graph *g, const char *khex, const char *reason,
                       const root_map *roots, int rank) {
  lt_strbuf s = {0};
  if (g_cfg.dot)
    dump_dot(&s, g, khex, reason, roots);
  else
    dump_text(&s, g, khex, reason, roots);
  if (s.oom) { /* out of memory: lose this graph only */
    lt__sb_free(&s);
    return;
  }
  char ranked[sizeof g_cfg.path + 16];
  const char *path = g_cfg.path;
  if (rank >= 0) {
    snprintf(ranked, sizeof ranked, "%s.%d", g_cfg.path, rank);
    path = ranked;
  }
  FILE *f = fopen(path, "a");
  int err = f ? 0 : errno;
  if (f) {
    if (fwrite(s.s, 1, s.len, f) != s.len) err = errno ? errno : EIO;
    if (fclose(f) != 0 && !err) err = errno ? errno : EIO;
  }
  lt__sb_free(&s);
  if (err) {
    g_cfg.save = false;
    fprintf(stderr,
            "lazytensor: cannot write LT_SAVE_GRAPHS=%s (%s): %s; graphs are no longer saved\n",
            g_cfg.path, path, strerror(err));
  }
}

/* ---- compile explanations ------------------------------------------------------------------ */

/* A compact copy of a compiled graph: what the node hash covers, plus where
 * each node reads its operands and which parameter a leaf is. */
typedef struct sig_node {
  uint16_t op;
  uint8_t dtype, ndim;
  uint16_t noperands, nattrs;
  int32_t param;
  uint32_t pool; /* shape[ndim], attrs[nattrs], operands[noperands] in sig.pool */
  double fattr;
} sig_node;

typedef struct sig {
  lt_graph_key key;
  char reason[32];
  int nnodes, nroots, ndonors;
  sig_node *nodes;
  int64_t *pool; /* also the roots (nroots) and donors (ndonors) at its end */
  size_t bytes;
} sig;

enum { kHistory = 64, kMaxShown = 6 };
static const size_t kHistoryBytes = (size_t)64 << 20;

static sig *g_hist[kHistory]; /* ring, g_hist_next is the oldest slot */
static int g_hist_next;
static size_t g_hist_bytes;

static void sig_free(sig *s) {
  if (!s) return;
  free(s->nodes);
  free(s->pool);
  free(s);
}

static const int64_t *sig_shape(const sig *s, int i) { return s->pool + s->nodes[i].pool; }
static const int64_t *sig_attrs(const sig *s, int i) { return sig_shape(s, i) + s->nodes[i].ndim; }
static const int64_t *sig_operands(const sig *s, int i) {
  return sig_attrs(s, i) + s->nodes[i].nattrs;
}
static const int64_t *sig_roots(const sig *s) {
  return s->nnodes ? sig_operands(s, s->nnodes - 1) + s->nodes[s->nnodes - 1].noperands : s->pool;
}
static const int64_t *sig_donors(const sig *s) { return sig_roots(s) + s->nroots; }

static sig *sig_make(const lt_graph *g, lt_graph_key key, const char *reason) {
  size_t npool = (size_t)g->nroots + (size_t)(g->ndonors > 0 ? g->ndonors : 0);
  for (int i = 0; i < g->nnodes; i++)
    npool += (size_t)g->nodes[i]->ndim + g->nodes[i]->nattrs + g->nodes[i]->noperands;
  sig *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->nodes = malloc(sizeof(sig_node) * (size_t)(g->nnodes ? g->nnodes : 1));
  s->pool = malloc(sizeof(int64_t) * (npool ? npool : 1));
  if (!s->nodes || !s->pool) {
    sig_free(s);
    return NULL;
  }
  s->key = key;
  snprintf(s->reason, sizeof s->reason, "%s", reason);
  s->nnodes = g->nnodes;
  s->nroots = g->nroots;
  s->ndonors = g->ndonors > 0 ? g->ndonors : 0;
  s->bytes = sizeof *s + sizeof(sig_node) * (size_t)g->nnodes + sizeof(int64_t) * npool;
  size_t k = 0;
  for (int i = 0; i < g->nnodes; i++) {
    const lt_node *n = g->nodes[i];
    s->nodes[i] = (sig_node){.op = n->op,
                             .dtype = n->dtype,
                             .ndim = n->ndim,
                             .noperands = n->noperands,
                             .nattrs = n->nattrs,
                             .param = g->param_of ? g->param_of[i] : -1,
                             .pool = (uint32_t)k,
                             .fattr = n->fattr};
    for (int d = 0; d < n->ndim; d++) s->pool[k++] = n->shape[d];
    for (int a = 0; a < n->nattrs; a++) s->pool[k++] = n->attrs[a];
    for (int o = 0; o < n->noperands; o++)
      s->pool[k++] = (int64_t)n->operands[o].index << 32 | (uint32_t)operand_index(g, n, o);
  }
  for (int r = 0; r < g->nroots; r++) s->pool[k++] = g->roots[r];
  for (int d = 0; d < s->ndonors; d++) s->pool[k++] = g->donors[d];
  return s;
}

static void history_add(sig *s) {
  sig **slot = &g_hist[g_hist_next];
  if (*slot) {
    g_hist_bytes -= (*slot)->bytes;
    sig_free(*slot);
  }
  *slot = s;
  g_hist_bytes += s->bytes;
  g_hist_next = (g_hist_next + 1) % kHistory;
  /* Keep the memory bounded too: drop the oldest graphs (never the newest). */
  for (int k = 0; k < kHistory - 1 && g_hist_bytes > kHistoryBytes; k++) {
    sig **old = &g_hist[(g_hist_next + k) % kHistory];
    if (*old && *old != s) {
      g_hist_bytes -= (*old)->bytes;
      sig_free(*old);
      *old = NULL;
    }
  }
}

enum {
  kDiffOp = 1,
  kDiffDtype = 2,
  kDiffShape = 4,
  kDiffConst = 8,
  kDiffAttrs = 16,
  kDiffOperands = 32,
  kDiffParam = 64
};

static bool same_ints(const int64_t *a, int na, const int64_t *b, int nb) {
  return na == nb && (na == 0 || memcmp(a, b, sizeof(int64_t) * (size_t)na) == 0);
}

/* What differs between node i of a and node i of b (bit mask of kDiff*). */
static int node_diff(const sig *a, const sig *b, int i) {
  const sig_node *x = &a->nodes[i], *y = &b->nodes[i];
  if (x->op != y->op) return kDiffOp;
  int m = 0;
  if (x->dtype != y->dtype) m |= kDiffDtype;
  if (!same_ints(sig_shape(a, i), x->ndim, sig_shape(b, i), y->ndim)) m |= kDiffShape;
  if ((x->op == LT_OP_CONST || x->op == LT_OP_PAD) &&
      memcmp(&x->fattr, &y->fattr, sizeof x->fattr) != 0)
    m |= kDiffConst;
  if (!same_ints(sig_attrs(a, i), x->nattrs, sig_attrs(b, i), y->nattrs)) m |= kDiffAttrs;
  if (!same_ints(sig_operands(a, i), x->noperands, sig_operands(b, i), y->noperands))
    m |= kDiffOperands;
  if (x->param != y->param) m |= kDiffParam;
  return m;
}

/* Differing nodes, plus the node count difference, roots and donors. */
static long sig_distance(const sig *a, const sig *b) {
  int common = a->nnodes < b->nnodes ? a->nnodes : b->nnodes;
  long d = labs((long)a->nnodes - b->nnodes);
  for (int i = 0; i < common; i++) d += node_diff(a, b, i) != 0;
  for (int r = 0; r < a->nroots; r++) d += sig_roots(a)[r] != sig_roots(b)[r];
  d += !same_ints(sig_donors(a), a->ndonors, sig_donors(b), b->ndonors);
  return d;
}

static void sb_operands(lt_strbuf *s, const sig *g, int i) {
  const int64_t *o = sig_operands(g, i);
  lt__sb_printf(s, "(");
  for (int k = 0; k < g->nodes[i].noperands; k++) {
    lt__sb_printf(s, k ? ", %d" : "%d", (int)(int32_t)(uint32_t)o[k]);
    if (o[k] >> 32) lt__sb_printf(s, ".%lld", (long long)(o[k] >> 32));
  }
  lt__sb_printf(s, ")");
}

/* One line naming what differs at node i, b (earlier) before a (now). */
static void explain_node(lt_strbuf *s, const sig *a, const sig *b, int i, int mask) {
  const sig_node *x = &a->nodes[i], *y = &b->nodes[i];
  lt__sb_printf(s, "    node %d (%s): ", i, lt__op_name((lt_op)x->op));
  const char *sep = "";
  if (mask & kDiffOp) {
    lt__sb_printf(s, "op %s vs %s", lt__op_name((lt_op)y->op), lt__op_name((lt_op)x->op));
    sep = "; ";
  }
  if (mask & kDiffDtype) {
    lt__sb_printf(s, "%sdtype %s vs %s", sep, dtype_name(y->dtype), dtype_name(x->dtype));
    sep = "; ";
  }
  if (mask & kDiffShape) {
    lt__sb_printf(s, "%sshape ", sep);
    sb_ints(s, sig_shape(b, i), y->ndim);
    lt__sb_printf(s, " vs ");
    sb_ints(s, sig_shape(a, i), x->ndim);
    sep = "; ";
  }
  if (mask & kDiffConst) {
    lt__sb_printf(s, "%s%s ", sep, x->op == LT_OP_CONST ? "constant" : "value");
    sb_double(s, y->fattr);
    lt__sb_printf(s, " vs ");
    sb_double(s, x->fattr);
    sep = "; ";
  }
  if (mask & kDiffAttrs) {
    lt__sb_printf(s, "%sattrs ", sep);
    sb_ints(s, sig_attrs(b, i), y->nattrs);
    lt__sb_printf(s, " vs ");
    sb_ints(s, sig_attrs(a, i), x->nattrs);
    sep = "; ";
  }
  if (mask & kDiffOperands) {
    lt__sb_printf(s, "%soperands ", sep);
    sb_operands(s, b, i);
    lt__sb_printf(s, " vs ");
    sb_operands(s, a, i);
    sep = "; ";
  }
  if (mask & kDiffParam) lt__sb_printf(s, "%sparameter %d vs %d", sep, y->param, x->param);
  lt__sb_printf(s, "\n");
}

static void explain_diff(lt_strbuf *s, const sig *a, const sig *b) {
  int shown = 0, more = 0;
  if (a->nnodes != b->nnodes) {
    lt__sb_printf(s, "    node count %d vs %d\n", b->nnodes, a->nnodes);
    shown++;
  }
  int common = a->nnodes < b->nnodes ? a->nnodes : b->nnodes;
  for (int i = 0; i < common; i++) {
    int m = node_diff(a, b, i);
    if (!m) continue;
    if (shown < kMaxShown) {
      explain_node(s, a, b, i, m);
      shown++;
    } else {
      more++;
    }
  }
  for (int r = 0; r < a->nroots; r++) {
    int64_t x = sig_roots(a)[r], y = sig_roots(b)[r];
    if (x == y) continue;
    if (shown < kMaxShown) {
      lt__sb_printf(s, "    root %d: node %lld vs %lld\n", r, (long long)y, (long long)x);
      shown++;
    } else {
      more++;
    }
  }
  if (!same_ints(sig_donors(a), a->ndonors, sig_donors(b), b->ndonors)) {
    if (shown < kMaxShown) {
      lt__sb_printf(s, "    donated parameters ");
      sb_ints(s, sig_donors(b), b->ndonors);
      lt__sb_printf(s, " vs ");
      sb_ints(s, sig_donors(a), a->ndonors);
      lt__sb_printf(s, "\n");
      shown++;
    } else {
      more++;
    }
  }
  if (more) lt__sb_printf(s, "    ... and %d more\n", more);
}

/* Under g_mu. */
static void explain_compile(lt_strbuf *s, const char *who, const lt_graph *g, lt_graph_key key,
                            const char *khex, const char *reason) {
  lt__sb_printf(s, "%s: compile %s (%s): %d node%s, %d param%s, %d root%s\n", who, khex, reason,
                g->nnodes, plural(g->nnodes), g->nparams, plural(g->nparams), g->nroots,
                plural(g->nroots));
  sig *now = sig_make(g, key, reason);
  if (!now) {
    lt__sb_printf(s, "  (out of memory: no comparison with earlier graphs)\n");
    return;
  }
  const sig *best = NULL;
  long best_d = 0;
  for (int k = 1; k <= kHistory; k++) { /* newest first: ties go to the most recent */
    const sig *h = g_hist[(g_hist_next - k + kHistory) % kHistory];
    if (!h || h->nroots != now->nroots) continue;
    if (h->key.lo == key.lo && h->key.hi == key.hi) {
      best = h;
      best_d = -1;
      break;
    }
    long d = sig_distance(now, h);
    if (!best || d < best_d) {
      best = h;
      best_d = d;
    }
  }
  if (!best) {
    lt__sb_printf(s, "  the first graph with %d root%s: nothing earlier to compare with\n",
                  now->nroots, plural(now->nroots));
  } else {
    char bhex[33];
    key_hex(best->key, bhex);
    if (best_d < 0) {
      lt__sb_printf(
          s,
          "  compiled before with the same key: it was evicted from the compilation cache "
          "(LT_COMPILATION_CACHE_SIZE) or the cache was cleared\n");
    } else if (best_d == 0) {
      lt__sb_printf(
          s,
          "  same nodes as graph %s (%s), but another key: the sync kind (%s vs %s) or the "
          "backend environment differs\n",
          bhex, best->reason, best->reason, reason);
    } else {
      int common = now->nnodes < best->nnodes ? now->nnodes : best->nnodes, ndiff = 0;
      for (int i = 0; i < common; i++) ndiff += node_diff(now, best, i) != 0;
      lt__sb_printf(s, "  closest earlier graph %s (%s): %d of %d nodes differ (earlier vs now):\n",
                    bhex, best->reason, ndiff + abs(now->nnodes - best->nnodes),
                    now->nnodes > best->nnodes ? now->nnodes : best->nnodes);
      explain_diff(s, now, best);
    }
  }
  history_add(now);
}

/* ---- entry point ------------------------------------------------------------------------------
 */

void lt__debug_graph(const lt_graph *g, lt_graph_key key, const char *reason, bool compiled,
                     int dev) {
  lt__coll_fp_note(g, key.lo); /* every sync passes here with its graph */
  pthread_once(&g_once, read_env);
  if (!g_cfg.active || !g) return;
  if (!reason) reason = "sync";
  char khex[33];
  key_hex(key, khex);
  /* The text's allocations record LT_ENOMEM when they fail: the caller's error
   * state is kept aside and put back. */
  int status = lt_last_status();
  char message[512];
  snprintf(message, sizeof message, "%s", lt_last_error());
  int rank = world_rank(dev);
  pthread_mutex_lock(&g_mu);
  if (g_cfg.save) {
    root_map roots;
    if (root_map_init(&roots, g)) {
      save_graph(g, khex, reason, &roots, rank);
      root_map_free(&roots);
    }
  }
  if (g_cfg.debug > 0) {
    char who[32] = "lazytensor";
    if (rank >= 0) snprintf(who, sizeof who, "lazytensor[rank %d]", rank);
    lt_strbuf s = {0};
    if (compiled)
      explain_compile(&s, who, g, key, khex, reason);
    else
      lt__sb_printf(&s, "%s: sync: cache hit, %d node%s, %s, key %s\n", who, g->nnodes,
                    plural(g->nnodes), reason, khex);
    if (!s.oom && s.len) fwrite(s.s, 1, s.len, stderr);
    lt__sb_free(&s);
  }
  pthread_mutex_unlock(&g_mu);
  if (lt_last_status() != status || strcmp(lt_last_error(), message) != 0)
    lt__err(status, "%s", message);
}
