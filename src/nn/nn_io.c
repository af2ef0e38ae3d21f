/* Parameter files: see the format in lazytensor.h (lt_nn_save). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "nn.h"

#define NN_MAGIC "LTPARAMS"
#define NN_VERSION 1u

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

int lt_nn_save(const char *path, lt_tensor *const *ts, int n) {
  const char *fn = "lt_nn_save";
  if (!path || n < 0 || (n > 0 && !ts)) return lt__err(LT_EINVAL, "%s: bad arguments", fn);
  if (!little_endian()) return lt__err(LT_EINVAL, "%s: big-endian hosts are not supported", fn);
  for (int i = 0; i < n; i++)
    if (!ts[i]) return lt__err(LT_EINVAL, "%s: tensor %d is NULL", fn, i);
  errno = 0;
  FILE *f = fopen(path, "wb");
  if (!f) return lt__err(LT_EINVAL, "%s: cannot create %s: %s", fn, path, strerror(errno));
  writer w = {f, FNV_INIT, true};
  uint32_t ver = NN_VERSION, count = (uint32_t)n;
  put(&w, NN_MAGIC, 8);
  put(&w, &ver, 4);
  put(&w, &count, 4);
  int rc = LT_OK;
  for (int i = 0; i < n && rc == LT_OK && w.ok; i++) {
    uint32_t dt = (uint32_t)lt_get_dtype(ts[i]), nd = (uint32_t)lt_ndim(ts[i]);
    put(&w, &dt, 4);
    put(&w, &nd, 4);
    if (nd) put(&w, lt_shape(ts[i]), nd * sizeof(int64_t));
    size_t bytes = (size_t)lt_numel(ts[i]) * lt_dtype_size((lt_dtype)dt);
    void *buf = lt__malloc(bytes);
    if (!buf) {
      rc = LT_ENOMEM;
      break;
    }
    rc = lt_to_data(ts[i], buf, bytes);
    if (rc == LT_OK) put(&w, buf, bytes);
    lt__free(buf, bytes);
  }
  uint64_t h = w.h;
  if (rc == LT_OK) put(&w, &h, 8);
  if (fclose(f) != 0) w.ok = false;
  if (rc == LT_OK && !w.ok)
    rc = lt__err(LT_EINVAL, "%s: writing %s failed: %s", fn, path, strerror(errno));
  if (rc != LT_OK) remove(path);
  return rc;
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

int lt_nn_load(const char *path, lt_tensor *const *ts, int n) {
  const char *fn = "lt_nn_load";
  if (!path || n < 0 || (n > 0 && !ts)) return lt__err(LT_EINVAL, "%s: bad arguments", fn);
  if (!little_endian()) return lt__err(LT_EINVAL, "%s: big-endian hosts are not supported", fn);
  for (int i = 0; i < n; i++)
    if (!ts[i]) return lt__err(LT_EINVAL, "%s: tensor %d is NULL", fn, i);
  uint8_t *d = NULL;
  size_t size = 0;
  int rc = slurp(fn, path, &d, &size);
  if (rc != LT_OK) return rc;
  size_t *offs = lt__calloc((size_t)(n ? n : 1) * sizeof(size_t));
  if (!offs) {
    lt__free(d, size ? size : 1);
    return LT_ENOMEM;
  }
  size_t pos = 0;
#define NEED(k, what)                          \
  if (rc == LT_OK && size - pos < (size_t)(k)) \
  rc = lt__err(LT_EINVAL, "%s: %s is truncated (%zu bytes; ends inside %s)", fn, path, size, what)
  NEED(16, "the header");
  if (rc == LT_OK && memcmp(d, NN_MAGIC, 8) != 0)
    rc = lt__err(LT_EINVAL, "%s: %s is not a lazytensor parameter file (bad magic)", fn, path);
  uint32_t ver = 0, count = 0;
  if (rc == LT_OK) {
    memcpy(&ver, d + 8, 4);
    memcpy(&count, d + 12, 4);
    pos = 16;
    if (ver != NN_VERSION)
      rc = lt__err(LT_EINVAL, "%s: %s has format version %u; this build reads %u", fn, path, ver,
                   NN_VERSION);
    else if (count != (uint32_t)n)
      rc = lt__err(LT_EINVAL, "%s: %s holds %u tensors, the model has %d", fn, path, count, n);
  }
  for (int i = 0; i < n && rc == LT_OK; i++) {
    uint32_t dt = 0, nd = 0;
    NEED(8, "a tensor header");
    if (rc != LT_OK) break;
    memcpy(&dt, d + pos, 4);
    memcpy(&nd, d + pos + 4, 4);
    pos += 8;
    if (nd > LT_MAX_DIMS) {
      rc = lt__err(LT_EINVAL, "%s: %s: tensor %d has %u dims (corrupt file)", fn, path, i, nd);
      break;
    }
    int64_t shape[LT_MAX_DIMS];
    NEED(nd * 8, "a shape");
    if (rc != LT_OK) break;
    if (nd) memcpy(shape, d + pos, nd * 8);
    pos += nd * 8;
    char b1[128], b2[128];
    bool same = (int)nd == lt_ndim(ts[i]) && dt == (uint32_t)lt_get_dtype(ts[i]);
    for (uint32_t k = 0; same && k < nd; k++) same = shape[k] == lt_shape(ts[i])[k];
    if (!same) {
      rc = lt__err(LT_EINVAL, "%s: %s: tensor %d is %s %s, the model's is %s %s", fn, path, i,
                   lt_dtype_name((lt_dtype)dt), lt__shape_str(shape, (int)nd, b1, sizeof b1),
                   lt_dtype_name(lt_get_dtype(ts[i])),
                   lt__shape_str(lt_shape(ts[i]), lt_ndim(ts[i]), b2, sizeof b2));
      break;
    }
    size_t bytes = (size_t)lt_numel(ts[i]) * lt_dtype_size((lt_dtype)dt);
    NEED(bytes, "tensor data");
    offs[i] = pos;
    pos += bytes;
  }
  NEED(8, "the checksum");
  if (rc == LT_OK && size - pos != 8)
    rc = lt__err(LT_EINVAL, "%s: %s has %zu bytes after its checksum (wrong size)", fn, path,
                 size - pos - 8);
  if (rc == LT_OK) {
    uint64_t want, got = fnv1a(FNV_INIT, d, pos);
    memcpy(&want, d + pos, 8);
    if (want != got) rc = lt__err(LT_EINVAL, "%s: %s fails its checksum (corrupt file)", fn, path);
  }
#undef NEED
  if (rc == LT_OK) {
    nn_own_begin();
    for (int i = 0; i < n && rc == LT_OK; i++) {
      lt_tensor *h = lt_from_data(lt_get_device(ts[i]), lt_get_dtype(ts[i]), lt_shape(ts[i]),
                                  lt_ndim(ts[i]), d + offs[i]);
      rc = h ? lt_assign(ts[i], h) : (lt_last_status() ? lt_last_status() : LT_ENOMEM);
    }
    nn_own_end();
  }
  lt__free(offs, (size_t)(n ? n : 1) * sizeof(size_t));
  lt__free(d, size ? size : 1);
  return rc;
}
