/* Parameter files: see the format in lazytensor_nn.h (lt_nn_params_save). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "nn.h"

#define NN_MAGIC "LTPARAMS"
#define NN_VERSION_PLAIN 1u /* tensors only */
#define NN_VERSION 2u       /* tensors, then sections */
#define NN_OPTIM_TAG "OPTM"
#define NN_OPTIM_VERSION 1u

static uint64_t fnv1a(uint64_t h, const void *p, size_t n) {
  const uint8_t *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
  return h;
}
#define FNV_INIT 0xcbf29ce484222325ull

static bool little_endian(void) {
  const uint16_t one = 1;
  return *(const uint8_t *)&one == 1;
}

typedef struct writer {
  FILE *f;
  uint64_t h;
  bool ok;
} writer;

static void put(writer *w, const void *p, size_t n) {
  if (!w->ok) return;
  w->h = fnv1a(w->h, p, n);
  if (fwrite(p, 1, n, w->f) != n) w->ok = false;
}

/* dtype, ndim, shape and data of t (synced by the read); LT_OK or a status. */
static int put_tensor(writer *w, lt_tensor *t, bool header) {
  uint32_t dt = (uint32_t)lt_get_dtype(t), nd = (uint32_t)lt_ndim(t);
  if (header) {
    put(w, &dt, 4);
    put(w, &nd, 4);
    if (nd) put(w, lt_shape(t), nd * sizeof(int64_t));
  }
  size_t bytes = (size_t)lt_numel(t) * lt_dtype_size((lt_dtype)dt);
  void *buf = lt__malloc(bytes ? bytes : 1);
  if (!buf) return LT_ENOMEM;
  int rc = lt_to_data(t, buf, bytes);
  if (rc == LT_OK) put(w, buf, bytes);
  lt__free(buf, bytes ? bytes : 1);
  return rc;
}

/* Bytes of the OPTM payload of o. */
static uint64_t optim_payload_bytes(const lt_nn_optim *o) {
  uint64_t b = 16 + 6 * 8 + 8;
  for (int i = 0; i < o->n; i++) {
    lt_tensor *p = o->params[i];
    b += 8 + 8 * (uint64_t)lt_ndim(p) + 8 +
         (uint64_t)nn_optim_nstate(o) * (uint64_t)lt_numel(p) * lt_dtype_size(lt_get_dtype(p));
  }
  return b;
}

/* The OPTM section of o (layout in lazytensor_nn.h). */
static int put_optim(writer *w, const lt_nn_optim *o) {
  const lt_nn_optim_config *c = &o->cfg;
  uint32_t nsec = 1, ver = NN_OPTIM_VERSION;
  uint64_t len = optim_payload_bytes(o);
  put(w, &nsec, 4);
  put(w, NN_OPTIM_TAG, 4);
  put(w, &ver, 4);
  put(w, &len, 8);
  uint32_t head[4] = {(uint32_t)c->kind, (uint32_t)o->n, (uint32_t)nn_optim_nstate(o),
                      c->nesterov ? 1u : 0u};
  double hyper[6] = {c->lr, c->momentum, c->weight_decay, c->beta1, c->beta2, c->eps};
  put(w, head, sizeof head);
  put(w, hyper, sizeof hyper);
  put(w, &o->steps, 8);
  int rc = LT_OK;
  for (int i = 0; i < o->n && rc == LT_OK; i++) {
    lt_tensor *p = o->params[i];
    uint32_t dt = (uint32_t)lt_get_dtype(p), nd = (uint32_t)lt_ndim(p);
    put(w, &dt, 4);
    put(w, &nd, 4);
    if (nd) put(w, lt_shape(p), nd * sizeof(int64_t));
    put(w, &o->pstep[i], 8);
    lt_tensor *st[2] = {o->s1[i], o->s2[i]};
    for (int k = 0; k < nn_optim_nstate(o) && rc == LT_OK; k++) rc = put_tensor(w, st[k], false);
  }
  return rc;
}

/* lt_nn_checkpoint_save, and lt_nn_params_save when o is NULL; fn is the
 * function called, for the messages. */
/* A file holds whole states; a sharded optimizer holds one replica's chunk. */
static int sharded_refused(const char *fn) {
  return lt__err(LT_EINVAL,
                 "%s: the optimizer's state is sharded over the replicas (lt_dp_optim_create "
                 "with shard_optimizer); files hold whole states: use a replicated optimizer",
                 fn);
}

static int save_file(const char *fn, lt_tensor *const *ts, int n, const lt_nn_optim *o,
                     const char *path) {
  if (!path || n < 0 || (n > 0 && !ts)) return lt__err(LT_EINVAL, "%s: bad arguments", fn);
  if (!little_endian()) return lt__err(LT_EINVAL, "%s: big-endian hosts are not supported", fn);
  for (int i = 0; i < n; i++)
    if (!ts[i]) return lt__err(LT_EINVAL, "%s: tensor %d is NULL", fn, i);
  if (o && o->shard_size) return sharded_refused(fn);
  errno = 0;
  FILE *f = fopen(path, "wb");
  if (!f) return lt__err(LT_EINVAL, "%s: cannot create %s: %s", fn, path, strerror(errno));
  writer w = {f, FNV_INIT, true};
  /* version 1 when there is no section: older builds read such files */
  uint32_t ver = o ? NN_VERSION : NN_VERSION_PLAIN, count = (uint32_t)n;
  put(&w, NN_MAGIC, 8);
  put(&w, &ver, 4);
  put(&w, &count, 4);
  int rc = LT_OK;
  for (int i = 0; i < n && rc == LT_OK && w.ok; i++) rc = put_tensor(&w, ts[i], true);
  if (rc == LT_OK && o) rc = put_optim(&w, o);
  uint64_t h = w.h;
  if (rc == LT_OK) put(&w, &h, 8);
  if (fclose(f) != 0) w.ok = false;
  if (rc == LT_OK && !w.ok)
    rc = lt__err(LT_EINVAL, "%s: writing %s failed: %s", fn, path, strerror(errno));
  if (rc != LT_OK) remove(path);
  return rc;
}

int lt_nn_checkpoint_save(lt_tensor *const *ts, int n, const lt_nn_optim *o, const char *path) {
  return save_file("lt_nn_checkpoint_save", ts, n, o, path);
}

int lt_nn_params_save(lt_tensor *const *ts, int n, const char *path) {
  return save_file("lt_nn_params_save", ts, n, NULL, path);
}

/* The whole file in memory. */
static int slurp(const char *fn, const char *path, uint8_t **data, size_t *size) {
  errno = 0;
  FILE *f = fopen(path, "rb");
  if (!f) return lt__err(LT_EINVAL, "%s: cannot open %s: %s", fn, path, strerror(errno));
  size_t cap = 1 << 16, n = 0;
  uint8_t *b = lt__malloc(cap);
  while (b) {
    if (n == cap) {
      uint8_t *g = lt__realloc(b, cap, cap * 2);
      if (!g) {
        lt__free(b, cap);
        b = NULL;
        break;
      }
      b = g;
      cap *= 2;
    }
    size_t r = fread(b + n, 1, cap - n, f);
    n += r;
    if (r == 0) break;
  }
  bool err = ferror(f);
  fclose(f);
  if (!b) return LT_ENOMEM;
  if (err) {
    lt__free(b, cap);
    return lt__err(LT_EINVAL, "%s: reading %s failed", fn, path);
  }
  /* shrink the bookkeeping to a known size for lt__free */
  uint8_t *exact = lt__realloc(b, cap, n ? n : 1);
  if (!exact) {
    lt__free(b, cap);
    return LT_ENOMEM;
  }
  *data = exact;
  *size = n;
  return LT_OK;
}

/* A bounds-checked cursor over a file's bytes; the first failure sticks. */
typedef struct reader {
  const uint8_t *d;
  size_t size, pos;
  const char *fn, *path;
  int rc;
} reader;

static bool need(reader *r, uint64_t k, const char *what) {
  if (r->rc == LT_OK && r->size - r->pos < k)
    r->rc = lt__err(LT_EINVAL, "%s: %s is truncated (%zu bytes; ends inside %s)", r->fn, r->path,
                    r->size, what);
  return r->rc == LT_OK;
}

static void take(reader *r, void *out, size_t k, const char *what) {
  if (need(r, k, what)) {
    memcpy(out, r->d + r->pos, k);
    r->pos += k;
  } else {
    memset(out, 0, k);
  }
}

/* A tensor header (dtype, ndim, shape) that must match t's; `what` names the
 * tensor in messages ("tensor 3", "optimizer parameter 3"). */
static void take_header(reader *r, lt_tensor *t, const char *what) {
  uint32_t dt = 0, nd = 0;
  take(r, &dt, 4, "a tensor header");
  take(r, &nd, 4, "a tensor header");
  if (r->rc != LT_OK) return;
  if (nd > LT_MAX_DIMS) {
    r->rc = lt__err(LT_EINVAL, "%s: %s: %s has %u dims (corrupt file)", r->fn, r->path, what, nd);
    return;
  }
  int64_t shape[LT_MAX_DIMS];
  take(r, shape, nd * 8, "a shape");
  if (r->rc != LT_OK) return;
  char b1[128], b2[128];
  bool same = (int)nd == lt_ndim(t) && dt == (uint32_t)lt_get_dtype(t);
  for (uint32_t k = 0; same && k < nd; k++) same = shape[k] == lt_shape(t)[k];
  if (!same)
    r->rc = lt__err(LT_EINVAL, "%s: %s: %s is %s %s, the model's is %s %s", r->fn, r->path, what,
                    lt_dtype_name((lt_dtype)dt), lt__shape_str(shape, (int)nd, b1, sizeof b1),
                    lt_dtype_name(lt_get_dtype(t)),
                    lt__shape_str(lt_shape(t), lt_ndim(t), b2, sizeof b2));
}

/* Skips t's data, recording where it starts. */
static size_t skip_data(reader *r, lt_tensor *t) {
  size_t at = r->pos, bytes = (size_t)lt_numel(t) * lt_dtype_size(lt_get_dtype(t));
  if (need(r, bytes, "tensor data")) r->pos += bytes;
  return at;
}

/* What the OPTM payload holds, checked against o; data offsets into the file. */
typedef struct optim_file {
  lt_nn_optim_config cfg;
  int64_t steps;
  int64_t *pstep; /* o->n */
  size_t *offs;   /* o->n * 2 */
} optim_file;

static void take_optim(reader *r, lt_nn_optim *o, uint64_t len, optim_file *of) {
  size_t end = r->pos + len;
  uint32_t head[4];
  double hyper[6];
  take(r, head, sizeof head, "the optimizer state");
  take(r, hyper, sizeof hyper, "the optimizer state");
  take(r, &of->steps, 8, "the optimizer state");
  if (r->rc != LT_OK) return;
  int nstate = nn_optim_nstate(o);
  if (head[0] != (uint32_t)o->cfg.kind || head[1] != (uint32_t)o->n ||
      head[2] != (uint32_t)nstate) {
    r->rc = lt__err(LT_EINVAL,
                    "%s: %s holds the state of optimizer kind %u over %u parameters with %u state "
                    "tensors each; this optimizer is kind %d over %d with %d",
                    r->fn, r->path, head[0], head[1], head[2], (int)o->cfg.kind, o->n, nstate);
    return;
  }
  of->cfg = o->cfg;
  of->cfg.nesterov = head[3] != 0;
  of->cfg.lr = hyper[0];
  of->cfg.momentum = hyper[1];
  of->cfg.weight_decay = hyper[2];
  of->cfg.beta1 = hyper[3];
  of->cfg.beta2 = hyper[4];
  of->cfg.eps = hyper[5];
  if (lt__nn_optim_check_config(r->fn, &of->cfg) != LT_OK || of->steps < 0) {
    char why[256]; /* the message is rewritten below: copy it first */
    snprintf(why, sizeof why, "%s", of->steps < 0 ? "negative step count" : lt_last_error());
    r->rc = lt__err(LT_EINVAL, "%s: %s: corrupt optimizer state (%s)", r->fn, r->path, why);
    return;
  }
  for (int i = 0; i < o->n && r->rc == LT_OK; i++) {
    char what[64];
    snprintf(what, sizeof what, "optimizer parameter %d", i);
    take_header(r, o->params[i], what);
    take(r, &of->pstep[i], 8, "the optimizer state");
    if (r->rc == LT_OK && of->pstep[i] < 0)
      r->rc = lt__err(LT_EINVAL, "%s: %s: corrupt optimizer state (negative step count)", r->fn,
                      r->path);
    for (int k = 0; k < nstate && r->rc == LT_OK; k++)
      of->offs[2 * i + k] = skip_data(r, o->params[i]);
  }
  if (r->rc == LT_OK && r->pos != end)
    r->rc = lt__err(LT_EINVAL, "%s: %s: the optimizer section's size is wrong (corrupt file)",
                    r->fn, r->path);
}

/* The sections of a version 2 file; the optimizer's is read into of when o
 * is given. */
static void take_sections(reader *r, lt_nn_optim *o, optim_file *of, bool *have_optim) {
  uint32_t nsec = 0;
  take(r, &nsec, 4, "the section count");
  for (uint32_t i = 0; i < nsec && r->rc == LT_OK; i++) {
    char tag[4];
    uint32_t ver = 0;
    uint64_t len = 0;
    take(r, tag, 4, "a section header");
    take(r, &ver, 4, "a section header");
    take(r, &len, 8, "a section header");
    if (!need(r, len, "a section")) break;
    if (memcmp(tag, NN_OPTIM_TAG, 4) != 0) { /* another section: not ours to read */
      r->pos += len;
      continue;
    }
    if (ver != NN_OPTIM_VERSION) {
      r->rc = lt__err(LT_EINVAL, "%s: %s has optimizer state version %u; this build reads %u",
                      r->fn, r->path, ver, NN_OPTIM_VERSION);
      break;
    }
    *have_optim = true;
    if (o)
      take_optim(r, o, len, of);
    else
      r->pos += len;
  }
}

static void optim_file_free(optim_file *of, int n) {
  lt__free(of->pstep, (size_t)(n ? n : 1) * sizeof(int64_t));
  lt__free(of->offs, (size_t)(n ? n : 1) * 2 * sizeof(size_t));
}

/* Assigns the file's values: the n tensors, then o's state (lazily). */
static int assign_all(const uint8_t *d, lt_tensor *const *ts, int n, const size_t *offs,
                      lt_nn_optim *o, const optim_file *of) {
  int rc = LT_OK;
  nn_own_begin();
  for (int i = 0; i < n && rc == LT_OK; i++) {
    lt_tensor *h = lt_from_data(lt_get_device(ts[i]), lt_get_dtype(ts[i]), lt_shape(ts[i]),
                                lt_ndim(ts[i]), d + offs[i]);
    rc = h ? lt_assign(ts[i], h) : (lt_last_status() ? lt_last_status() : LT_ENOMEM);
  }
  for (int i = 0; o && i < o->n && rc == LT_OK; i++) {
    lt_tensor *st[2] = {o->s1[i], o->s2[i]}, *p = o->params[i];
    for (int k = 0; k < nn_optim_nstate(o) && rc == LT_OK; k++) {
      lt_tensor *h = lt_from_data(lt_get_device(p), lt_get_dtype(p), lt_shape(p), lt_ndim(p),
                                  d + of->offs[2 * i + k]);
      rc = h ? lt_assign(st[k], h) : (lt_last_status() ? lt_last_status() : LT_ENOMEM);
    }
  }
  nn_own_end();
  if (rc == LT_OK && o) {
    o->cfg = of->cfg;
    o->steps = of->steps;
    memcpy(o->pstep, of->pstep, (size_t)o->n * sizeof(int64_t));
  }
  return rc;
}

/* lt_nn_checkpoint_load, and lt_nn_params_load when o is NULL (save_file). */
static int load_file(const char *fn, lt_tensor *const *ts, int n, lt_nn_optim *o,
                     const char *path) {
  if (!path || n < 0 || (n > 0 && !ts)) return lt__err(LT_EINVAL, "%s: bad arguments", fn);
  if (!little_endian()) return lt__err(LT_EINVAL, "%s: big-endian hosts are not supported", fn);
  for (int i = 0; i < n; i++)
    if (!ts[i]) return lt__err(LT_EINVAL, "%s: tensor %d is NULL", fn, i);
  if (o && o->shard_size) return sharded_refused(fn);
  uint8_t *d = NULL;
  size_t size = 0;
  int rc = slurp(fn, path, &d, &size);
  if (rc != LT_OK) return rc;
  int on = o ? o->n : 0;
  size_t *offs = lt__calloc((size_t)(n ? n : 1) * sizeof(size_t));
  optim_file of = {.pstep = lt__calloc((size_t)(on ? on : 1) * sizeof(int64_t)),
                   .offs = lt__calloc((size_t)(on ? on : 1) * 2 * sizeof(size_t))};
  reader r = {d, size, 0, fn, path, LT_OK};
  if (!offs || !of.pstep || !of.offs) r.rc = LT_ENOMEM;
  need(&r, 16, "the header");
  if (r.rc == LT_OK && memcmp(d, NN_MAGIC, 8) != 0)
    r.rc = lt__err(LT_EINVAL, "%s: %s is not a lazytensor parameter file (bad magic)", fn, path);
  uint32_t ver = 0, count = 0;
  if (r.rc == LT_OK) {
    memcpy(&ver, d + 8, 4);
    memcpy(&count, d + 12, 4);
    r.pos = 16;
    if (ver != NN_VERSION_PLAIN && ver != NN_VERSION)
      r.rc = lt__err(LT_EINVAL, "%s: %s has format version %u; this build reads 1 and 2", fn, path,
                     ver);
    else if (count != (uint32_t)n)
      r.rc = lt__err(LT_EINVAL, "%s: %s holds %u tensors, the model has %d", fn, path, count, n);
  }
  for (int i = 0; i < n && r.rc == LT_OK; i++) {
    char what[32];
    snprintf(what, sizeof what, "tensor %d", i);
    take_header(&r, ts[i], what);
    if (r.rc == LT_OK) offs[i] = skip_data(&r, ts[i]);
  }
  bool have_optim = false;
  if (r.rc == LT_OK && ver == NN_VERSION) take_sections(&r, o, &of, &have_optim);
  if (r.rc == LT_OK && o && !have_optim)
    r.rc = lt__err(LT_EINVAL, "%s: %s holds no optimizer state (saved with lt_nn_params_save?)", fn,
                   path);
  need(&r, 8, "the checksum");
  if (r.rc == LT_OK && size - r.pos != 8)
    r.rc = lt__err(LT_EINVAL, "%s: %s has %zu bytes after its checksum (wrong size)", fn, path,
                   size - r.pos - 8);
  if (r.rc == LT_OK) {
    uint64_t want, got = fnv1a(FNV_INIT, d, r.pos);
    memcpy(&want, d + r.pos, 8);
    if (want != got)
      r.rc = lt__err(LT_EINVAL, "%s: %s fails its checksum (corrupt file)", fn, path);
  }
  rc = r.rc;
  if (rc == LT_OK) rc = assign_all(d, ts, n, offs, o, &of);
  optim_file_free(&of, on);
  lt__free(offs, (size_t)(n ? n : 1) * sizeof(size_t));
  lt__free(d, size ? size : 1);
  return rc;
}

int lt_nn_checkpoint_load(lt_tensor *const *ts, int n, lt_nn_optim *o, const char *path) {
  return load_file("lt_nn_checkpoint_load", ts, n, o, path);
}

int lt_nn_params_load(lt_tensor *const *ts, int n, const char *path) {
  return load_file("lt_nn_params_load", ts, n, NULL, path);
}
