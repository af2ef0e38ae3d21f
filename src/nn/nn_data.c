/* Data: IDX files (gzip via zlib), labelled image sets, and the shuffling
 * batch iterator. Host memory only; batches become host tensors that upload
 * at the next step barrier. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "lt_tensor.h"
#include "nn.h"

/* ---- IDX -------------------------------------------------------------------- */

void lt_nn_idx_free(lt_nn_idx *x) {
  if (!x) return;
  if (x->data) lt__free(x->data, (size_t)x->size);
  memset(x, 0, sizeof *x);
}

/* Reads exactly n bytes; returns the count read (short on EOF), -1 on error. */
static int64_t gz_read_full(gzFile f, void *dst, int64_t n) {
  int64_t got = 0;
  while (got < n) {
    int64_t want = n - got;
    unsigned chunk = want > (1 << 30) ? 1u << 30 : (unsigned)want;
    int r = gzread(f, (char *)dst + got, chunk);
    if (r < 0) return -1;
    if (r == 0) break;
    got += r;
  }
  return got;
}

static int gz_fail(gzFile f, const char *path, const char *what) {
  int zerr = 0;
  const char *msg = gzerror(f, &zerr);
  int rc = lt__err(LT_EINVAL, "lt_nn_idx_read: %s: %s (%s)", path, what,
                   zerr == Z_ERRNO ? strerror(errno) : msg);
  gzclose(f);
  return rc;
}

int lt_nn_idx_read(const char *path, lt_nn_idx *out) {
  const char *fn = "lt_nn_idx_read";
  if (!path || !out) return lt__err(LT_EINVAL, "%s: path or out is NULL", fn);
  memset(out, 0, sizeof *out);
  errno = 0;
  gzFile f = gzopen(path, "rb"); /* reads plain files too (transparent mode) */
  if (!f)
    return lt__err(LT_EINVAL, "%s: cannot open %s: %s", fn, path,
                   errno ? strerror(errno) : "out of memory");
  gzbuffer(f, 1 << 17);
  uint8_t head[4];
  int64_t r = gz_read_full(f, head, 4);
  if (r < 0) return gz_fail(f, path, "read error");
  if (r < 4) {
    gzclose(f);
    return lt__err(LT_EINVAL, "%s: %s is truncated: %lld bytes, shorter than the IDX header", fn,
                   path, (long long)r);
  }
  if (head[0] != 0 || head[1] != 0 || head[3] == 0 || head[3] > LT_MAX_DIMS) {
    gzclose(f);
    return lt__err(LT_EINVAL,
                   "%s: %s is not an IDX file (magic %02x %02x %02x %02x; want 00 00 type ndim "
                   "with 1 <= ndim <= %d)",
                   fn, path, head[0], head[1], head[2], head[3], LT_MAX_DIMS);
  }
  if (head[2] != 0x08) {
    gzclose(f);
    return lt__err(LT_EINVAL, "%s: %s has IDX data type 0x%02x; only 0x08 (unsigned byte) is read",
                   fn, path, head[2]);
  }
  int ndim = head[3];
  uint8_t dimb[4 * LT_MAX_DIMS];
  r = gz_read_full(f, dimb, 4 * ndim);
  if (r < 0) return gz_fail(f, path, "read error");
  if (r < 4 * ndim) {
    gzclose(f);
    return lt__err(LT_EINVAL, "%s: %s is truncated inside its header (%d dims)", fn, path, ndim);
  }
  int64_t size = 1;
  for (int d = 0; d < ndim; d++) {
    const uint8_t *b = dimb + 4 * d;
    out->dims[d] = ((int64_t)b[0] << 24) | ((int64_t)b[1] << 16) | ((int64_t)b[2] << 8) | b[3];
    if (out->dims[d] != 0 && size > ((int64_t)1 << 40) / out->dims[d]) {
      gzclose(f);
      return lt__err(LT_EINVAL, "%s: %s declares more than 2^40 elements", fn, path);
    }
    size *= out->dims[d];
  }
  out->ndim = ndim;
  out->data = lt__malloc((size_t)size);
  if (!out->data) {
    gzclose(f);
    return LT_ENOMEM;
  }
  out->size = size;
  r = gz_read_full(f, out->data, size);
  if (r < 0) {
    lt_nn_idx_free(out);
    return gz_fail(f, path, "read error");
  }
  if (r < size) {
    gzclose(f);
    lt_nn_idx_free(out);
    return lt__err(LT_EINVAL,
                   "%s: %s is truncated: %lld of the %lld data bytes its header declares", fn, path,
                   (long long)r, (long long)size);
  }
  uint8_t extra[256];
  r = gz_read_full(f, extra, sizeof extra);
  if (r < 0) {
    lt_nn_idx_free(out);
    return gz_fail(f, path, "read error");
  }
  gzclose(f);
  if (r > 0) {
    lt_nn_idx_free(out);
    return lt__err(LT_EINVAL, "%s: %s has bytes beyond the %lld its header declares (wrong size)",
                   fn, path, (long long)size);
  }
  return LT_OK;
}

/* ---- datasets --------------------------------------------------------------- */

void lt_nn_dataset_free(lt_nn_dataset *ds) {
  if (!ds) return;
  if (ds->images) lt__free(ds->images, (size_t)(ds->n * ds->features));
  if (ds->labels) lt__free(ds->labels, (size_t)ds->n * sizeof(int64_t));
  memset(ds, 0, sizeof *ds);
}

int lt_nn_dataset_load(const char *images_path, const char *labels_path, lt_nn_dataset *ds) {
  const char *fn = "lt_nn_dataset_load";
  if (!images_path || !labels_path || !ds) return lt__err(LT_EINVAL, "%s: NULL argument", fn);
  memset(ds, 0, sizeof *ds);
  lt_nn_idx im, lb;
  int rc = lt_nn_idx_read(images_path, &im);
  if (rc != LT_OK) return rc;
  rc = lt_nn_idx_read(labels_path, &lb);
  if (rc != LT_OK) {
    lt_nn_idx_free(&im);
    return rc;
  }
  if (im.ndim != 3) {
    rc = lt__err(LT_EINVAL, "%s: %s has %d dims; images need 3 (n, rows, cols)", fn, images_path,
                 im.ndim);
  } else if (lb.ndim != 1) {
    rc = lt__err(LT_EINVAL, "%s: %s has %d dims; labels need 1", fn, labels_path, lb.ndim);
  } else if (im.dims[0] != lb.dims[0]) {
    rc = lt__err(LT_EINVAL, "%s: %s holds %lld images but %s holds %lld labels", fn, images_path,
                 (long long)im.dims[0], labels_path, (long long)lb.dims[0]);
  } else if (im.dims[0] == 0) {
    rc = lt__err(LT_EINVAL, "%s: %s holds no images", fn, images_path);
  }
  if (rc == LT_OK) {
    ds->labels = lt__malloc((size_t)lb.size * sizeof(int64_t));
    if (!ds->labels) rc = LT_ENOMEM;
  }
  if (rc != LT_OK) {
    lt_nn_idx_free(&im);
    lt_nn_idx_free(&lb);
    return rc;
  }
  ds->n = im.dims[0];
  ds->rows = im.dims[1];
  ds->cols = im.dims[2];
  ds->features = ds->rows * ds->cols;
  ds->images = im.data; /* same allocation size: n * features */
  int64_t maxl = 0;
  for (int64_t i = 0; i < ds->n; i++) {
    ds->labels[i] = lb.data[i];
    if (lb.data[i] > maxl) maxl = lb.data[i];
  }
  ds->num_classes = maxl + 1;
  lt_nn_idx_free(&lb);
  return LT_OK;
}

int lt_nn_fashion_mnist(const char *dir, bool train, lt_nn_dataset *ds) {
  if (!dir) dir = getenv("LT_DATA_DIR");
  if (!dir || !*dir) dir = LT_NN_FASHION_MNIST_DIR;
  const char *split = train ? "train" : "t10k";
  size_t n = strlen(dir) + 64;
  char *a = lt__malloc(n), *b = lt__malloc(n);
  int rc = LT_ENOMEM;
  if (a && b) {
    snprintf(a, n, "%s/%s-images-idx3-ubyte.gz", dir, split);
    snprintf(b, n, "%s/%s-labels-idx1-ubyte.gz", dir, split);
    rc = lt_nn_dataset_load(a, b, ds);
  }
  if (a) lt__free(a, n);
  if (b) lt__free(b, n);
  return rc;
}

/* x / 255 for every byte value. */
static const float *byte_scale(void) {
  static float table[256];
  static int ready;
  if (!__atomic_load_n(&ready, __ATOMIC_ACQUIRE)) {
    for (int i = 0; i < 256; i++) table[i] = (float)i / 255.0f;
    __atomic_store_n(&ready, 1, __ATOMIC_RELEASE);
  }
  return table;
}

static void gather_rows(const lt_nn_dataset *ds, const int64_t *idx, int64_t count, float *dst) {
  const float *s = byte_scale();
  for (int64_t r = 0; r < count; r++) {
    const uint8_t *src = ds->images + idx[r] * ds->features;
    float *d = dst + r * ds->features;
    for (int64_t k = 0; k < ds->features; k++) d[k] = s[src[k]];
  }
}

lt_tensor *lt_nn_dataset_images(const lt_nn_dataset *ds, lt_device dev, int64_t start,
                                int64_t count) {
  const char *fn = "lt_nn_dataset_images";
  if (!ds || !ds->images) {
    lt__err(LT_EINVAL, "%s: dataset is NULL or empty", fn);
    return NULL;
  }
  if (start < 0 || count < 0 || start > ds->n) {
    lt__err(LT_EINVAL, "%s: range [%lld, +%lld) is outside the %lld samples", fn, (long long)start,
            (long long)count, (long long)ds->n);
    return NULL;
  }
  size_t bytes = (size_t)(count * ds->features) * sizeof(float);
  float *buf = lt__calloc(bytes);
  if (!buf) return NULL;
  const float *s = byte_scale();
  int64_t real = ds->n - start < count ? ds->n - start : count;
  const uint8_t *src = ds->images + start * ds->features;
  for (int64_t k = 0; k < real * ds->features; k++) buf[k] = s[src[k]];
  lt_tensor *t = lt_from_data(dev, LT_F32, (int64_t[]){count, ds->features}, 2, buf);
  lt__free(buf, bytes);
  return t;
}

/* ---- loader ----------------------------------------------------------------- */

struct lt_nn_loader {
  const lt_nn_dataset *ds;
  lt_device dev;
  int64_t batch, pos;
  bool shuffle, started;
  int64_t *order; /* ds->n */
  lt_tensor **ahead;
  int nahead, ahead_cap, ahead_head;
  float *xbuf;   /* batch * features */
  int64_t *ybuf; /* batch */
};

void lt_nn_loader_free(lt_nn_loader *l) {
  if (!l) return;
  for (int i = l->ahead_head; i < l->nahead; i++) lt_release(l->ahead[i]);
  if (l->ahead) lt__free(l->ahead, (size_t)l->ahead_cap * sizeof(lt_tensor *));
  if (l->order) lt__free(l->order, (size_t)l->ds->n * sizeof(int64_t));
  if (l->xbuf) lt__free(l->xbuf, (size_t)(l->batch * l->ds->features) * sizeof(float));
  if (l->ybuf) lt__free(l->ybuf, (size_t)l->batch * sizeof(int64_t));
  lt__free(l, sizeof *l);
}

lt_nn_loader *lt_nn_loader_create(const lt_nn_dataset *ds, lt_device dev, int64_t batch,
                                  bool shuffle) {
  const char *fn = "lt_nn_loader_create";
  if (!ds || !ds->images || !ds->labels || ds->n <= 0) {
    lt__err(LT_EINVAL, "%s: dataset is NULL or empty", fn);
    return NULL;
  }
  if (batch <= 0 || batch > ds->n) {
    lt__err(LT_EINVAL, "%s: batch must be in [1, %lld] (the samples; got %lld)", fn,
            (long long)ds->n, (long long)batch);
    return NULL;
  }
  char dbuf[32];
  lt_device_str(dev, dbuf, sizeof dbuf);
  if (dev.type != LT_DEVICE_CPU || dev.index < 0 || dev.index >= LT_MAX_DEVICES) {
    lt__err(LT_EDEVICE, "%s: unknown device %s", fn, dbuf);
    return NULL;
  }
  lt_nn_loader *l = lt__calloc(sizeof *l);
  if (!l) return NULL;
  l->ds = ds;
  l->dev = dev;
  l->batch = batch;
  l->shuffle = shuffle;
  l->order = lt__malloc((size_t)ds->n * sizeof(int64_t));
  l->xbuf = lt__malloc((size_t)(batch * ds->features) * sizeof(float));
  l->ybuf = lt__malloc((size_t)batch * sizeof(int64_t));
  if (!l->order || !l->xbuf || !l->ybuf) {
    lt_nn_loader_free(l);
    return NULL;
  }
  return l;
}

int lt_nn_loader_shuffle_ahead(lt_nn_loader *l, int epochs) {
  if (!l) return lt__err(LT_EINVAL, "lt_nn_loader_shuffle_ahead: loader is NULL");
  if (epochs < 0) return lt__err(LT_EINVAL, "lt_nn_loader_shuffle_ahead: epochs < 0");
  if (!l->shuffle || epochs == 0) return LT_OK;
  if (l->nahead + epochs > l->ahead_cap) {
    int ncap = l->nahead + epochs;
    lt_tensor **a =
        lt__realloc(l->ahead, (size_t)l->ahead_cap * sizeof *a, (size_t)ncap * sizeof *a);
    if (!a) return LT_ENOMEM;
    l->ahead = a;
    l->ahead_cap = ncap;
  }
  int rc = LT_OK;
  nn_own_begin();
  for (int e = 0; e < epochs; e++) {
    lt_tensor *p = nn_keep(lt_randperm(l->dev, LT_I64, l->ds->n));
    if (!p) {
      rc = lt_last_status() ? lt_last_status() : LT_ENOMEM;
      break;
    }
    l->ahead[l->nahead++] = p;
  }
  nn_own_end();
  return rc;
}

int64_t lt_nn_loader_epoch(lt_nn_loader *l) {
  if (!l) return lt__err(LT_EINVAL, "lt_nn_loader_epoch: loader is NULL");
  int64_t n = l->ds->n;
  if (!l->shuffle) {
    for (int64_t i = 0; i < n; i++) l->order[i] = i;
  } else {
    lt_tensor *perm = NULL;
    int rc = LT_OK;
    if (l->ahead_head < l->nahead) {
      perm = l->ahead[l->ahead_head++];
      if (l->ahead_head == l->nahead) l->ahead_head = l->nahead = 0;
    } else {
      nn_own_begin();
      perm = nn_keep(lt_randperm(l->dev, LT_I64, n));
      nn_own_end();
      if (!perm) return lt_last_status() ? lt_last_status() : LT_ENOMEM;
      /* A barrier of its own: the seed chain restarts, so the epoch's first
       * step traces the same graph as every other step. */
      rc = lt_mark_step(l->dev);
    }
    if (rc == LT_OK) rc = lt_to_data(perm, l->order, (size_t)n * sizeof(int64_t));
    lt_release(perm);
    if (rc != LT_OK) return rc;
  }
  l->pos = 0;
  l->started = true;
  return n / l->batch;
}

int lt_nn_loader_next(lt_nn_loader *l, lt_tensor **x, lt_tensor **y) {
  if (!l || !x || !y) return lt__err(LT_EINVAL, "lt_nn_loader_next: NULL argument");
  *x = *y = NULL;
  if (!l->started)
    return lt__err(LT_EINVAL, "lt_nn_loader_next: no epoch started (call lt_nn_loader_epoch)");
  const lt_nn_dataset *ds = l->ds;
  if (l->pos + l->batch > ds->n) return 0; /* the partial batch is dropped */
  const int64_t *idx = l->order + l->pos;
  gather_rows(ds, idx, l->batch, l->xbuf);
  for (int64_t r = 0; r < l->batch; r++) l->ybuf[r] = ds->labels[idx[r]];
  lt_tensor *xt = lt_from_data(l->dev, LT_F32, (int64_t[]){l->batch, ds->features}, 2, l->xbuf);
  lt_tensor *yt = xt ? lt_from_data(l->dev, LT_I64, &l->batch, 1, l->ybuf) : NULL;
  if (!yt) {
    lt__tensor_discard(xt); /* also drops the open scope's reference */
    return lt_last_status() ? lt_last_status() : LT_ENOMEM;
  }
  l->pos += l->batch;
  *x = xt;
  *y = yt;
  return 1;
}

const int64_t *lt_nn_loader_order(const lt_nn_loader *l) {
  return l && l->started ? l->order : NULL;
}
