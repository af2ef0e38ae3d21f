/* Saved programs (docs/DEPLOY.md has the file format): lt_program_save
 * writes a program's graph, signature, captured constants and the backend's
 * object code to one checksummed file; lt_program_load rebuilds the graph
 * from the file and makes a program of it in this process.
 *
 * The IR is the portable part: a loader always rebuilds the graph from it
 * (the graph key, and so the program, depend on it alone). The object code
 * is a shortcut: it is used only when the file was written under this
 * process's compile environment (library version, op table, backend, CPU),
 * and otherwise the rebuilt graph is compiled again.
 *
 * A reader trusts nothing: sizes, magic, version, length and checksum are
 * checked before any section is parsed, every count and index is checked
 * against what remains, and a failure leaves no trace but the error. */
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "../core/lt_alloc.h"
#include "../core/lt_dtype.h"
#include "../core/lt_error.h"
#include "../core/lt_node_rules.h"
#include "../core/lt_shape.h"
#include "program_file.h"
#include "program_internal.h"

#ifndef PATH_MAX
#define PATH_MAX 4096
#endif

static const char kMagic[4] = {'L', 'T', 'P', 'G'};
static const uint32_t kTags[LT_PGM_NSECTIONS] = {LT_PGM_SEC_SIGN, LT_PGM_SEC_GRAPH,
                                                 LT_PGM_SEC_CONST, LT_PGM_SEC_CODE};
/* Bounds a reader checks before it allocates by a count from the file. */
enum { kMaxNameLen = 255, kMaxAttrs = 64 };

static _Atomic uint64_t g_env_salt; /* test hook: a different environment */

void lt__program_file_set_env_salt(uint64_t salt) { g_env_salt = salt; }

uint32_t lt__program_file_lib_version(void) {
  return ((uint32_t)LT_VERSION_MAJOR << 16) | ((uint32_t)LT_VERSION_MINOR << 8) |
         (uint32_t)LT_VERSION_PATCH;
}

static uint64_t env_key(const lt_backend *be) { return lt__backend_env_key(be) ^ g_env_salt; }

/* ---- a growing byte buffer (writer) --------------------------------------------- */

typedef struct wbuf {
  uint8_t *p;
  size_t n, cap;
  bool oom;
} wbuf;

static uint8_t *w_room(wbuf *w, size_t n) {
  if (w->oom) return NULL;
  if (w->n + n > w->cap) {
    size_t nc = w->cap ? w->cap : 4096;
    while (nc < w->n + n) nc *= 2;
    uint8_t *q = lt__realloc(w->p, w->cap, nc);
    if (!q) {
      w->oom = true;
      return NULL;
    }
    w->p = q;
    w->cap = nc;
  }
  uint8_t *r = w->p + w->n;
  w->n += n;
  return r;
}
static void w_bytes(wbuf *w, const void *src, size_t n) {
  uint8_t *d = w_room(w, n);
  if (d && n) memcpy(d, src, n);
}
static void w_u8(wbuf *w, uint8_t v) { w_bytes(w, &v, 1); }
static void w_u16(wbuf *w, uint16_t v) {
  uint8_t b[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
  w_bytes(w, b, 2);
}
static void w_u32(wbuf *w, uint32_t v) {
  uint8_t b[4];
  for (int i = 0; i < 4; i++) b[i] = (uint8_t)(v >> (8 * i));
  w_bytes(w, b, 4);
}
static void w_u64(wbuf *w, uint64_t v) {
  uint8_t b[8];
  for (int i = 0; i < 8; i++) b[i] = (uint8_t)(v >> (8 * i));
  w_bytes(w, b, 8);
}
static void put_u64_at(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* ---- a bounded reader ------------------------------------------------------------ */

typedef struct rbuf {
  const uint8_t *p;
  size_t n, pos;
  bool bad; /* read past the end */
} rbuf;

static const uint8_t *r_take(rbuf *r, size_t n) {
  if (r->bad || n > r->n - r->pos) {
    r->bad = true;
    return NULL;
  }
  const uint8_t *q = r->p + r->pos;
  r->pos += n;
  return q;
}
static uint64_t r_le(rbuf *r, int bytes) {
  const uint8_t *q = r_take(r, (size_t)bytes);
  uint64_t v = 0;
  for (int i = 0; q && i < bytes; i++) v |= (uint64_t)q[i] << (8 * i);
  return v;
}
#define r_u8(r) ((uint8_t)r_le(r, 1))
#define r_u16(r) ((uint16_t)r_le(r, 2))
#define r_u32(r) ((uint32_t)r_le(r, 4))
#define r_u64(r) (r_le(r, 8))

/* ---- save ------------------------------------------------------------------------- */

/* Pointer -> index, open addressing (the graph's nodes in post order). */
typedef struct node_map {
  lt_node **keys;
  uint32_t *vals;
  size_t cap;
} node_map;

static size_t ptr_slot(const node_map *m, const lt_node *n) {
  uint64_t h = (uint64_t)(uintptr_t)n * 0x9E3779B97F4A7C15ull;
  size_t i = (size_t)(h >> 17) & (m->cap - 1);
  while (m->keys[i] && m->keys[i] != n) i = (i + 1) & (m->cap - 1);
  return i;
}

typedef struct save_graph {
  lt_node **order; /* post order */
  size_t nnodes, cap_order;
  node_map map;
  lt_buffer **consts; /* captured buffers in the order first read */
  size_t nconsts, cap_consts;
} save_graph;

static void save_graph_free(save_graph *g) {
  lt__free(g->order, g->cap_order * sizeof *g->order);
  lt__free(g->map.keys, g->map.cap * sizeof *g->map.keys);
  lt__free(g->map.vals, g->map.cap * sizeof *g->map.vals);
  lt__free(g->consts, g->cap_consts * sizeof *g->consts);
}

static bool map_grow(node_map *m) {
  size_t nc = m->cap ? m->cap * 2 : 256;
  node_map n = {lt__calloc(nc * sizeof *n.keys), lt__calloc(nc * sizeof *n.vals), nc};
  if (!n.keys || !n.vals) {
    lt__free(n.keys, nc * sizeof *n.keys);
    lt__free(n.vals, nc * sizeof *n.vals);
    return false;
  }
  for (size_t i = 0; i < m->cap; i++)
    if (m->keys[i]) {
      size_t s = ptr_slot(&n, m->keys[i]);
      n.keys[s] = m->keys[i];
      n.vals[s] = m->vals[i];
    }
  lt__free(m->keys, m->cap * sizeof *m->keys);
  lt__free(m->vals, m->cap * sizeof *m->vals);
  *m = n;
  return true;
}

static bool map_has(const node_map *m, const lt_node *n) {
  return m->cap && m->keys[ptr_slot(m, n)] == n;
}

/* Post order of the program's graph without recursion (graphs can be deep);
 * the map marks nodes pushed (value UINT32_MAX) and then placed. */
static int order_graph(const lt_program *p, save_graph *g) {
  typedef struct frame {
    lt_node *n;
    uint32_t next;
  } frame;
  frame *st = NULL;
  size_t sp = 0, cap = 0;
  int rc = LT_OK;
  for (int r = 0; r < p->nout && rc == LT_OK; r++) {
    lt_node *root = p->roots[r];
    if (map_has(&g->map, root)) continue;
    size_t push_n = 1;
    lt_node *push = root;
    while (push_n || sp) {
      if (push_n) {
        if ((g->nnodes + sp + 2) * 2 > g->map.cap && !map_grow(&g->map)) goto oom;
        if (sp == cap) {
          size_t nc = cap ? cap * 2 : 64;
          frame *q = lt__realloc(st, cap * sizeof *st, nc * sizeof *st);
          if (!q) goto oom;
          st = q;
          cap = nc;
        }
        size_t s = ptr_slot(&g->map, push);
        g->map.keys[s] = push;
        g->map.vals[s] = UINT32_MAX;
        st[sp++] = (frame){push, 0};
        push_n = 0;
        continue;
      }
      frame *top = &st[sp - 1];
      if (top->next < top->n->noperands) {
        lt_node *c = top->n->operands[top->next++].node;
        if (!map_has(&g->map, c)) {
          push = c;
          push_n = 1;
        }
        continue;
      }
      lt_node *n = top->n;
      sp--;
      if (g->nnodes == g->cap_order) {
        size_t nc = g->cap_order ? g->cap_order * 2 : 256;
        lt_node **q = lt__realloc(g->order, g->cap_order * sizeof *q, nc * sizeof *q);
        if (!q) goto oom;
        g->order = q;
        g->cap_order = nc;
      }
      g->map.vals[ptr_slot(&g->map, n)] = (uint32_t)g->nnodes;
      g->order[g->nnodes++] = n;
    }
  }
  lt__free(st, cap * sizeof *st);
  return rc;
oom:
  lt__free(st, cap * sizeof *st);
  return lt__err(LT_ENOMEM, "lt_program_save: out of memory");
}

/* The file's parameter number of a data leaf: its input, or nin + its
 * position among the captured constants (added on first sight). */
static int leaf_param(const lt_program *p, save_graph *g, const lt_buffer *b, uint32_t *out) {
  for (int i = 0; i < p->nin; i++)
    if (p->in_buf[i] == b) {
      *out = (uint32_t)i;
      return LT_OK;
    }
  for (size_t c = 0; c < g->nconsts; c++)
    if (g->consts[c] == b) {
      *out = (uint32_t)(p->nin + (int)c);
      return LT_OK;
    }
  bool captured = false;
  for (int k = 0; k < p->nparams && !captured; k++) captured = p->captured[k] == b;
  if (!captured)
    return lt__err(LT_EINVAL,
                   "lt_program_save: a leaf of the graph is neither an input nor "
                   "a captured value of the program");
  if (g->nconsts == g->cap_consts) {
    size_t nc = g->cap_consts ? g->cap_consts * 2 : 16;
    lt_buffer **q = lt__realloc(g->consts, g->cap_consts * sizeof *q, nc * sizeof *q);
    if (!q) return lt__err(LT_ENOMEM, "lt_program_save: out of memory");
    g->consts = q;
    g->cap_consts = nc;
  }
  g->consts[g->nconsts] = (lt_buffer *)b;
  *out = (uint32_t)(p->nin + (int)g->nconsts++);
  return LT_OK;
}

static void w_sig(wbuf *w, const lt__shape_sig *s) {
  w_u8(w, s->dtype);
  w_u8(w, s->ndim);
  w_u16(w, 0); /* name length: names are not recorded yet */
  w_u32(w, 0);
  for (int d = 0; d < s->ndim; d++) w_u64(w, (uint64_t)s->shape[d]);
}

/* Starts a section; returns the offset of its length field. */
static size_t w_section(wbuf *w, uint32_t tag) {
  w_u32(w, tag);
  w_u32(w, 0);
  size_t at = w->n;
  w_u64(w, 0);
  return at;
}
static void w_section_end(wbuf *w, size_t at) {
  if (!w->oom) put_u64_at(w->p + at, (uint64_t)(w->n - at - 8));
}

static int write_graph(wbuf *w, const lt_program *p, save_graph *g) {
  size_t at = w_section(w, LT_PGM_SEC_GRAPH);
  w_u32(w, (uint32_t)g->nnodes);
  w_u32(w, (uint32_t)p->nout);
  /* the ops used, by name: a loader maps them to its own table's numbers */
  bool used[LT_OP_COUNT] = {false};
  uint32_t nused = 0;
  for (size_t i = 0; i < g->nnodes; i++)
    if (!used[g->order[i]->op]) used[g->order[i]->op] = true, nused++;
  w_u32(w, nused);
  for (int op = 0; op < LT_OP_COUNT; op++) {
    if (!used[op]) continue;
    const char *name = lt__op_name((lt_op)op);
    size_t len = strlen(name);
    w_u16(w, (uint16_t)op);
    w_u8(w, (uint8_t)len);
    w_bytes(w, name, len);
  }
  for (size_t i = 0; i < g->nnodes; i++) {
    const lt_node *n = g->order[i];
    w_u16(w, n->op);
    w_u8(w, n->dtype);
    w_u8(w, n->ndim);
    w_u16(w, n->noperands);
    w_u16(w, n->nattrs);
    uint64_t bits;
    memcpy(&bits, &n->fattr, sizeof bits);
    w_u64(w, bits);
    for (int d = 0; d < n->ndim; d++) w_u64(w, (uint64_t)n->shape[d]);
    for (int k = 0; k < n->noperands; k++)
      w_u32(w, g->map.vals[ptr_slot(&g->map, n->operands[k].node)]);
    for (int k = 0; k < n->nattrs; k++) w_u64(w, (uint64_t)n->attrs[k]);
    if (n->op == LT_OP_DATA) {
      uint32_t param = 0;
      int rc = leaf_param(p, g, n->data, &param);
      if (rc != LT_OK) return rc;
      w_u32(w, param);
    }
  }
  for (int r = 0; r < p->nout; r++) w_u32(w, g->map.vals[ptr_slot(&g->map, p->roots[r])]);
  w_section_end(w, at);
  return LT_OK;
}

static int write_consts(wbuf *w, const save_graph *g) {
  size_t at = w_section(w, LT_PGM_SEC_CONST);
  w_u32(w, (uint32_t)g->nconsts);
  for (size_t c = 0; c < g->nconsts; c++) {
    lt_buffer *b = g->consts[c];
    int rc = lt__buffer_wait(b);
    if (rc != LT_OK) return rc;
    lt__shape_sig s = {b->dtype, b->ndim, {0}};
    memcpy(s.shape, b->shape, sizeof s.shape);
    w_sig(w, &s);
    w_u64(w, (uint64_t)b->nbytes);
    uint8_t *d = w_room(w, b->nbytes);
    if (d && b->nbytes) {
      rc = b->backend->from_device(b, d, b->nbytes);
      if (rc != LT_OK) return rc;
    }
  }
  w_section_end(w, at);
  return LT_OK;
}

/* The backend's bytes for the program's executable; none when the backend
 * cannot serialize or the cache has evicted it (the loader compiles then). */
static void write_code(wbuf *w, const lt_program *p, const lt_backend *be) {
  size_t at = w_section(w, LT_PGM_SEC_CODE);
  lt_cache_entry *e = lt__cache_get(p->key);
  if (e && e->backend == be && be->serialize) {
    void *bytes = NULL;
    size_t n = 0;
    if (be->serialize(e->exe, &bytes, &n) == LT_OK) {
      w_bytes(w, bytes, n);
      lt__free(bytes, n);
    } else {
      lt_clear_error(); /* a shortcut lost, not a failure */
    }
  }
  lt__cache_entry_release(e);
  w_section_end(w, at);
}

static int write_file(const char *path, const uint8_t *buf, size_t n) {
  char tmp[PATH_MAX + 32];
  if (strlen(path) + 16 >= sizeof tmp) return lt__err(LT_EINVAL, "lt_program_save: path too long");
  snprintf(tmp, sizeof tmp, "%s.tmp.XXXXXX", path);
  int fd = mkstemp(tmp);
  if (fd < 0)
    return lt__err(LT_EINVAL, "lt_program_save: cannot create %s: %s", tmp, strerror(errno));
  (void)fchmod(fd, 0644);
  const uint8_t *q = buf;
  size_t left = n;
  int err = 0;
  while (left && !err) {
    ssize_t k = write(fd, q, left);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) {
      err = k < 0 ? errno : EIO;
      break;
    }
    q += k;
    left -= (size_t)k;
  }
  if (!err && fsync(fd) != 0) err = errno;
  if (close(fd) != 0 && !err) err = errno;
  if (!err && rename(tmp, path) != 0) err = errno;
  if (err) {
    unlink(tmp);
    return lt__err(LT_EINVAL, "lt_program_save: cannot write %s: %s", path, strerror(err));
  }
  return LT_OK;
}

int lt_program_save(const lt_program *p, const char *path) {
  const char *fn = "lt_program_save";
  if (!p || !path) return lt__err_null(fn);
  if (!p->roots) return lt__err(LT_EINVAL, "%s: the program holds no graph", fn);
  const lt_backend *be = lt__backend_for(p->dev);
  if (!be) return lt__err(LT_EDEVICE, "%s: no backend for the program's device", fn);
  wbuf w = {0};
  save_graph g = {0};
  /* header; the length fields are filled in at the end */
  w_bytes(&w, kMagic, 4);
  w_u32(&w, LT_PGM_FORMAT_VERSION);
  w_u32(&w, lt__program_file_lib_version());
  w_u32(&w, 0);
  w_u64(&w, lt__op_table_hash());
  w_u64(&w, env_key(be));
  char name[LT_PGM_BACKEND_NAME_LEN] = {0};
  snprintf(name, sizeof name, "%s", be->name);
  w_bytes(&w, name, sizeof name);
  w_u64(&w, p->key.lo);
  w_u64(&w, p->key.hi);
  w_u64(&w, 0); /* total length */
  w_u32(&w, LT_PGM_NSECTIONS);
  w_u32(&w, 0);
  size_t at = w_section(&w, LT_PGM_SEC_SIGN);
  w_u32(&w, (uint32_t)p->nin);
  w_u32(&w, (uint32_t)p->nout);
  for (int i = 0; i < p->nin; i++) w_sig(&w, &p->in_sig[i]);
  for (int i = 0; i < p->nout; i++) w_sig(&w, &p->out_sig[i]);
  w_section_end(&w, at);
  int rc = order_graph(p, &g);
  if (rc == LT_OK) rc = write_graph(&w, p, &g);
  if (rc == LT_OK) rc = write_consts(&w, &g);
  if (rc == LT_OK) write_code(&w, p, be);
  if (rc == LT_OK) {
    w_room(&w, LT_PGM_CHECKSUM_BYTES);
    if (w.oom) {
      rc = lt__err(LT_ENOMEM, "%s: out of memory", fn);
    } else {
      put_u64_at(w.p + LT_PGM_OFF_LENGTH, (uint64_t)w.n);
      put_u64_at(w.p + w.n - LT_PGM_CHECKSUM_BYTES, XXH3_64bits(w.p, w.n - LT_PGM_CHECKSUM_BYTES));
      rc = write_file(path, w.p, w.n);
    }
  }
  save_graph_free(&g);
  lt__free(w.p, w.cap);
  return rc;
}

/* ---- load -------------------------------------------------------------------------- */

typedef struct load_state {
  lt_device dev;
  const lt_backend *be;
  int nin, nout;
  lt__shape_sig *in_sig, *out_sig;
  uint32_t nnodes;
  lt_node **nodes;
  uint32_t nconsts;
  lt_tensor **params; /* nin inputs, then the constants */
  lt_tensor **outs;
  int16_t *opmap; /* the file's op number -> this library's op, or -1 */
} load_state;

static void load_state_free(load_state *s) {
  lt__free(s->opmap, 65536 * sizeof *s->opmap);
  if (s->nodes)
    for (uint32_t i = 0; i < s->nnodes; i++) lt__node_release(s->nodes[i]);
  lt__free(s->nodes, (size_t)s->nnodes * sizeof *s->nodes);
  size_t np = (size_t)s->nin + s->nconsts;
  if (s->params)
    for (size_t i = np; i-- > 0;) lt__tensor_discard(s->params[i]);
  lt__free(s->params, (np + 1) * sizeof *s->params);
  if (s->outs)
    for (int i = s->nout; i-- > 0;) lt__tensor_discard(s->outs[i]);
  lt__free(s->outs, (size_t)(s->nout + 1) * sizeof *s->outs);
  lt__free(s->in_sig, (size_t)(s->nin + 1) * sizeof *s->in_sig);
  lt__free(s->out_sig, (size_t)(s->nout + 1) * sizeof *s->out_sig);
}

static bool sig_equal(const lt__shape_sig *a, const lt__shape_sig *b) {
  return a->dtype == b->dtype && a->ndim == b->ndim &&
         memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof a->shape[0]) == 0;
}

/* A dtype and shape; false when out of range. */
static bool r_sig(rbuf *r, lt__shape_sig *s) {
  s->dtype = r_u8(r);
  s->ndim = r_u8(r);
  uint16_t namelen = r_u16(r);
  (void)r_u32(r);
  if (r->bad || !lt__dtype_valid(s->dtype) || s->ndim > LT_MAX_DIMS || namelen > kMaxNameLen)
    return false;
  for (int d = 0; d < s->ndim; d++) {
    s->shape[d] = (int64_t)r_u64(r);
    if (s->shape[d] < 0) return false;
  }
  return r_take(r, namelen) != NULL; /* the name: not used yet */
}

/* The section of the expected tag at r's position; its bytes in *sec. */
static const char *r_section(rbuf *r, uint32_t tag, rbuf *sec) {
  uint32_t t = r_u32(r);
  (void)r_u32(r);
  uint64_t len = r_u64(r);
  if (r->bad) return "truncated in a section header";
  if (t != tag) return "sections out of order or unknown";
  if (len > r->n - r->pos) return "a section runs past the end of the file";
  *sec = (rbuf){r->p + r->pos, (size_t)len, 0, false};
  r->pos += (size_t)len;
  return NULL;
}

static const char *parse_sign(rbuf *r, load_state *s) {
  uint32_t nin = r_u32(r), nout = r_u32(r);
  /* each signature takes at least 8 bytes: counts beyond that are lies */
  if (r->bad || nout == 0 || nin > (r->n - r->pos) / 8 || nout > (r->n - r->pos) / 8)
    return "bad signature counts";
  s->nin = (int)nin;
  s->nout = (int)nout;
  s->in_sig = lt__calloc((nin + 1) * sizeof *s->in_sig);
  s->out_sig = lt__calloc((nout + 1) * sizeof *s->out_sig);
  if (!s->in_sig || !s->out_sig) return "out of memory";
  for (uint32_t i = 0; i < nin; i++)
    if (!r_sig(r, &s->in_sig[i])) return "bad input signature";
  for (uint32_t i = 0; i < nout; i++)
    if (!r_sig(r, &s->out_sig[i])) return "bad output signature";
  if (r->pos != r->n) return "bytes left over in the signature section";
  return NULL;
}

/* A parameter of the rebuilt graph as a tensor over a device buffer. A
 * constant gets its bytes; an input gets a READY buffer without storage: it
 * only stands for the caller's input (compiling reads no data, and a run
 * binds the caller's buffers), so a file cannot make the loader allocate
 * more than the file's own bytes. */
static lt_tensor *make_param(const lt_backend *be, lt_device dev, const lt__shape_sig *sig,
                             const void *bytes) {
  if (!lt__shape_fits(sig->shape, sig->ndim)) {
    lt__err(LT_EINVAL, "a shape with too many elements");
    return NULL;
  }
  lt_buffer *b = NULL;
  if (bytes) {
    if (lt__buffer_alloc(be, dev, (lt_dtype)sig->dtype, sig->shape, sig->ndim, &b) != LT_OK)
      return NULL;
    if (b->nbytes && be->to_device(b, bytes, b->nbytes) != LT_OK) {
      lt__buffer_release(b);
      return NULL;
    }
  } else {
    b = lt__buffer_new(be, dev, (lt_dtype)sig->dtype, sig->shape, sig->ndim);
    if (!b) {
      lt__err(LT_ENOMEM, "out of memory");
      return NULL;
    }
    lt__buffer_publish(b);
  }
  return lt__tensor_from_buffer(dev, b);
}

static const char *parse_consts(rbuf *r, load_state *s, char *why, size_t nwhy) {
  uint32_t n = r_u32(r);
  if (r->bad || n > (r->n - r->pos) / 16) return "bad constant count";
  size_t np = (size_t)s->nin + n;
  s->params = lt__calloc((np + 1) * sizeof *s->params);
  if (!s->params) return "out of memory";
  s->nconsts = n;
  for (int i = 0; i < s->nin; i++)
    if (!(s->params[i] = make_param(s->be, s->dev, &s->in_sig[i], NULL))) return lt_last_error();
  for (uint32_t c = 0; c < n; c++) {
    lt__shape_sig sig;
    if (!r_sig(r, &sig)) return "bad constant signature";
    uint64_t nbytes = r_u64(r);
    if (r->bad || !lt__shape_fits(sig.shape, sig.ndim) ||
        nbytes != (uint64_t)lt__numel(sig.shape, sig.ndim) * lt_dtype_size((lt_dtype)sig.dtype)) {
      snprintf(why, nwhy, "constant %u: its byte count does not match its shape", c);
      return why;
    }
    const uint8_t *bytes = r_take(r, (size_t)nbytes);
    if (!bytes) return "a constant runs past its section";
    if (!(s->params[s->nin + c] = make_param(s->be, s->dev, &sig, bytes))) return lt_last_error();
  }
  if (r->pos != r->n) return "bytes left over in the constants section";
  return NULL;
}

/* "node i (op): ..." in why; op < 0: no op name. */
__attribute__((format(printf, 5, 6))) static const char *node_err(char *why, size_t nwhy,
                                                                  uint32_t i, int op,
                                                                  const char *fmt, ...) {
  char detail[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(detail, sizeof detail, fmt, ap);
  va_end(ap);
  if (op < 0)
    snprintf(why, nwhy, "node %u: %s", i, detail);
  else
    snprintf(why, nwhy, "node %u (%s): %s", i, lt__op_name((lt_op)op), detail);
  return why;
}

/* Node i of the graph section, checked against the IR's contract (its
 * operands come before it and exist already) and made in s->nodes[i]; NULL,
 * or why not, naming the node and the field. */
static const char *parse_node(rbuf *r, load_state *s, uint32_t i, char *why, size_t nwhy) {
  uint16_t num = r_u16(r);
  int op = s->opmap[num];
  uint8_t dt = r_u8(r), ndim = r_u8(r);
  uint16_t nops = r_u16(r), nattrs = r_u16(r);
  uint64_t bits = r_u64(r);
  if (r->bad) return node_err(why, nwhy, i, -1, "truncated");
  if (op < 0) {
    snprintf(why, nwhy, "node %u: op number %u is not in the file's op table", i, num);
    return why;
  }
  if (!lt__dtype_valid(dt)) return node_err(why, nwhy, i, op, "dtype %u unknown", dt);
  if (ndim > LT_MAX_DIMS) return node_err(why, nwhy, i, op, "rank %u above %d", ndim, LT_MAX_DIMS);
  if (nattrs > kMaxAttrs)
    return node_err(why, nwhy, i, op, "%u attrs, above %d", nattrs, kMaxAttrs);
  if (!lt__op_arity_ok(op, nops))
    return node_err(why, nwhy, i, op, "%u operands where the op takes %d", nops,
                    lt__op_info[op].arity);
  int64_t shape[LT_MAX_DIMS] = {0};
  for (int d = 0; d < ndim; d++) shape[d] = (int64_t)r_u64(r);
  if (nops > (r->n - r->pos) / 4) return node_err(why, nwhy, i, op, "truncated operands");
  lt_node *ops[8];
  lt_node **opv = ops;
  lt_node **heap = NULL;
  if (nops > 8) {
    heap = lt__malloc((size_t)nops * sizeof *heap);
    if (!heap) return "out of memory";
    opv = heap;
  }
  const char *bad = NULL;
  for (uint16_t k = 0; k < nops && !bad; k++) {
    uint32_t j = r_u32(r);
    if (j >= i) /* operands come before their users */
      bad = node_err(why, nwhy, i, op, "operand %u refers to node %u, not an earlier node", k, j);
    else
      opv[k] = s->nodes[j];
  }
  int64_t attrs[kMaxAttrs];
  for (uint16_t k = 0; k < nattrs; k++) attrs[k] = (int64_t)r_u64(r);
  if (!bad && r->bad) bad = node_err(why, nwhy, i, op, "truncated");
  if (!bad && op == LT_OP_DATA) {
    uint32_t param = r_u32(r);
    size_t np = (size_t)s->nin + s->nconsts;
    if (r->bad || param >= np) {
      bad = node_err(why, nwhy, i, op, "parameter %u of %zu", param, np);
    } else {
      lt_buffer *b = s->params[param]->buf;
      lt__shape_sig a = {b->dtype, b->ndim, {0}}, want = {dt, ndim, {0}};
      memcpy(a.shape, b->shape, sizeof a.shape);
      memcpy(want.shape, shape, sizeof want.shape);
      if (!sig_equal(&a, &want) || nattrs)
        bad = node_err(why, nwhy, i, op, "dtype, shape or attrs differ from parameter %u", param);
      else
        s->nodes[i] = lt__node_data(b);
    }
  } else if (!bad) {
    char rule[320];
    double fattr;
    memcpy(&fattr, &bits, sizeof fattr);
    lt_rule_operand sigs[8];
    lt_rule_operand *sigv = nops > 8 ? lt__malloc((size_t)nops * sizeof *sigv) : sigs;
    if (!sigv) {
      lt__free(heap, (size_t)nops * sizeof *heap);
      return "out of memory";
    }
    for (uint16_t k = 0; k < nops; k++)
      sigv[k] = (lt_rule_operand){opv[k]->dtype, opv[k]->ndim, opv[k]->shape};
    const char *broken = lt__node_rules_check((lt_op)op, (lt_dtype)dt, shape, ndim, sigv, nops,
                                              attrs, nattrs, rule, sizeof rule);
    if (sigv != sigs) lt__free(sigv, (size_t)nops * sizeof *sigv);
    if (broken)
      bad = node_err(why, nwhy, i, op, "%s", broken);
    else
      s->nodes[i] =
          lt__node_new((lt_op)op, (lt_dtype)dt, shape, ndim, opv, nops, attrs, nattrs, fattr);
  }
  lt__free(heap, (size_t)nops * sizeof *heap);
  if (!bad && !s->nodes[i]) bad = node_err(why, nwhy, i, op, "%s", lt_last_error());
  return bad;
}

/* Rebuilds the nodes (the constants exist already: leaves read them). */
static const char *parse_graph(rbuf *r, load_state *s, char *why, size_t nwhy) {
  uint32_t nnodes = r_u32(r), nroots = r_u32(r);
  if (nroots != (uint32_t)s->nout) return "root count differs from the output count";
  /* the file's op numbers, by name, to this library's */
  uint32_t nused = r_u32(r);
  if (r->bad || nused == 0 || nused > LT_OP_COUNT) return "bad op name count";
  for (uint32_t k = 0; k < nused; k++) {
    uint16_t num = r_u16(r);
    uint8_t len = r_u8(r);
    const uint8_t *name = r_take(r, len);
    if (!name) return "truncated op name table";
    int found = -1;
    for (int op = 0; op < LT_OP_COUNT && found < 0; op++) {
      const char *mine = lt__op_name((lt_op)op);
      if (strlen(mine) == len && memcmp(mine, name, len) == 0) found = op;
    }
    if (found < 0) {
      snprintf(why, nwhy, "op '%.*s' is unknown to this library", (int)len, (const char *)name);
      return why;
    }
    if (s->opmap[num] >= 0) return "an op number named twice";
    s->opmap[num] = (int16_t)found;
  }
  if (r->bad || nnodes == 0 || nnodes > (r->n - r->pos) / 16) return "bad node count";
  s->nodes = lt__calloc((size_t)nnodes * sizeof *s->nodes);
  if (!s->nodes) return "out of memory";
  s->nnodes = nnodes;
  for (uint32_t i = 0; i < nnodes; i++) {
    const char *bad = parse_node(r, s, i, why, nwhy);
    if (bad) return bad;
  }
  s->outs = lt__calloc((size_t)(s->nout + 1) * sizeof *s->outs);
  if (!s->outs) return "out of memory";
  for (int o = 0; o < s->nout; o++) {
    uint32_t j = r_u32(r);
    if (r->bad || j >= nnodes) return "bad root index";
    lt_node *n = s->nodes[j];
    lt__shape_sig a = {n->dtype, n->ndim, {0}};
    memcpy(a.shape, n->shape, sizeof a.shape);
    if (!sig_equal(&a, &s->out_sig[o])) return "an output's signature differs from its root";
    if (!(s->outs[o] = lt__tensor_from_node(s->dev, lt__node_retain(n)))) return lt_last_error();
  }
  if (r->pos != r->n) return "bytes left over in the graph section";
  return NULL;
}

/* Why the file's outer frame is unusable, or NULL. */
static const char *check_frame(const uint8_t *b, size_t size, char *why, size_t n) {
  size_t min = LT_PGM_HEADER_BYTES + LT_PGM_CHECKSUM_BYTES;
  if (size < 4 || memcmp(b, kMagic, 4) != 0) return "not a lazytensor program file (bad magic)";
  if (size < min) {
    snprintf(why, n, "truncated (%zu bytes, a header alone takes %zu)", size, min);
    return why;
  }
  rbuf r = {b, size, LT_PGM_OFF_VERSION, false};
  uint32_t version = r_u32(&r);
  if (version != LT_PGM_FORMAT_VERSION) {
    snprintf(why, n, "format version %u, this library reads version %d", version,
             LT_PGM_FORMAT_VERSION);
    return why;
  }
  r.pos = LT_PGM_OFF_LENGTH;
  uint64_t len = r_u64(&r);
  if (len != size) {
    snprintf(why, n, "%s (%zu bytes, its header promises %llu)",
             len > size ? "truncated" : "trailing bytes", size, (unsigned long long)len);
    return why;
  }
  r.pos = size - LT_PGM_CHECKSUM_BYTES;
  if (XXH3_64bits(b, size - LT_PGM_CHECKSUM_BYTES) != r_u64(&r))
    return "checksum mismatch (the file is corrupted)";
  r.pos = LT_PGM_OFF_NSECTIONS;
  if (r_u32(&r) != LT_PGM_NSECTIONS) return "unexpected section count";
  return NULL;
}

lt_program *lt__program_load_bytes(const uint8_t *b, size_t size, const char *what) {
  const char *fn = "lt_program_load";
  char whybuf[640];
  const char *why = check_frame(b, size, whybuf, sizeof whybuf);
  if (why) {
    lt__err(LT_EINVAL, "%s: %s: %s", fn, what, why);
    return NULL;
  }
  lt_device dev = lt_cpu(0);
  const lt_backend *be = lt__backend_for(dev);
  if (!be) {
    lt__err(LT_EDEVICE, "%s: no backend for the cpu device", fn);
    return NULL;
  }
  rbuf r = {b, size - LT_PGM_CHECKSUM_BYTES, LT_PGM_OFF_LIBVERSION, false};
  uint32_t libv = r_u32(&r);
  r.pos = LT_PGM_OFF_OPHASH;
  uint64_t ophash = r_u64(&r), env = r_u64(&r);
  char name[LT_PGM_BACKEND_NAME_LEN + 1] = {0};
  memcpy(name, b + LT_PGM_OFF_BACKEND, LT_PGM_BACKEND_NAME_LEN);
  r.pos = LT_PGM_OFF_KEY;
  lt_graph_key key;
  key.lo = r_u64(&r);
  key.hi = r_u64(&r);
  /* the object code is this process's only when everything it depends on matches */
  bool same_env = libv == lt__program_file_lib_version() && ophash == lt__op_table_hash() &&
                  strcmp(name, be->name) == 0 && env == env_key(be);
  r.pos = LT_PGM_HEADER_BYTES;
  load_state s = {.dev = dev, .be = be};
  rbuf sec[LT_PGM_NSECTIONS];
  for (int i = 0; i < LT_PGM_NSECTIONS && !why; i++) why = r_section(&r, kTags[i], &sec[i]);
  if (!why && r.pos != r.n) why = "bytes after the last section";
  if (!why) why = parse_sign(&sec[0], &s);
  if (!why) why = parse_consts(&sec[2], &s, whybuf, sizeof whybuf);
  if (!why && !(s.opmap = lt__malloc(65536 * sizeof *s.opmap))) why = "out of memory";
  if (!why) memset(s.opmap, 0xff, 65536 * sizeof *s.opmap);
  if (!why) why = parse_graph(&sec[1], &s, whybuf, sizeof whybuf);
  lt_program *p = NULL;
  if (!why) {
    if (same_env && sec[3].n && be->deserialize) {
      lt_executable *exe = NULL;
      lt_cache_entry *e = lt__cache_get(key);
      if (!e && be->deserialize(sec[3].p, sec[3].n, &exe) == LT_OK)
        e = lt__cache_put(key, be, exe); /* lt_program_create finds it: no compile */
      lt__cache_entry_release(e);
      lt_clear_error(); /* unusable code only means compiling from the IR */
    }
    p = lt_program_create(s.outs, s.nout, s.params, s.nin);
    if (!p) {
      snprintf(whybuf, sizeof whybuf, "%s", lt_last_error());
      why = whybuf;
    }
  }
  if (why) {
    char msg[700];
    snprintf(msg, sizeof msg, "%s", why); /* why may be the error buffer itself */
    lt__err(lt_last_status() == LT_ENOMEM ? LT_ENOMEM : LT_EINVAL, "%s: %s: %s", fn, what, msg);
  }
  load_state_free(&s);
  return p;
}

lt_program *lt_program_load(const char *path) {
  const char *fn = "lt_program_load";
  if (!path) {
    lt__err_null(fn);
    return NULL;
  }
  /* Only a regular file is read: opening a FIFO for reading would wait for
   * a writer, and a device could block or have side effects. stat refuses
   * those before any open; O_NONBLOCK keeps an open from waiting should the
   * path be swapped for a FIFO in between, and fstat checks what was opened. */
  struct stat st;
  if (stat(path, &st) != 0) {
    lt__err(errno == ENOENT ? LT_ENOTFOUND : LT_EINVAL, "%s: cannot open %s: %s", fn, path,
            strerror(errno));
    return NULL;
  }
  if (!S_ISREG(st.st_mode)) {
    lt__err(LT_EINVAL, "%s: %s is not a regular file", fn, path);
    return NULL;
  }
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    lt__err(errno == ENOENT ? LT_ENOTFOUND : LT_EINVAL, "%s: cannot open %s: %s", fn, path,
            strerror(errno));
    return NULL;
  }
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > SIZE_MAX / 2) {
    close(fd);
    lt__err(LT_EINVAL, "%s: %s is not a regular file of a readable size", fn, path);
    return NULL;
  }
  size_t size = (size_t)st.st_size;
  uint8_t *buf = lt__malloc(size + 1);
  if (!buf) {
    close(fd);
    lt__err(LT_ENOMEM, "%s: out of memory reading %s", fn, path);
    return NULL;
  }
  size_t got = 0;
  while (got < size) {
    ssize_t k = read(fd, buf + got, size - got);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) break;
    got += (size_t)k;
  }
  close(fd);
  lt_program *p = NULL;
  if (got != size)
    lt__err(LT_EINVAL, "%s: cannot read %s", fn, path);
  else
    p = lt__program_load_bytes(buf, size, path);
  lt__free(buf, size + 1);
  return p;
}
