/* Text corpora for character-level language models: a directory's plain
 * files concatenated in name order, bytes as tokens, a 90/10 split by
 * position, and windows of token ids as host tensors. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lt_tensor.h"
#include "nn.h"

void lt_nn_text_free(lt_nn_text *t) {
  if (!t) return;
  if (t->bytes) lt__free(t->bytes, (size_t)t->n);
  if (t->ids) lt__free(t->ids, (size_t)t->n);
  memset(t, 0, sizeof *t);
}

/* The hint a message ends with: the default directory belongs to a package. */
static const char *pkg_hint(const char *dir) {
  return strcmp(dir, LT_NN_FORTUNES_DIR) == 0
             ? " (it comes with Debian's package `fortunes`: apt-get install fortunes)"
             : "";
}

static bool ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && memcmp(s + n - m, suffix, m) == 0;
}

static int cmp_names(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static void free_names(char **names, int n, int cap) {
  if (!names) return;
  for (int i = 0; i < n; i++) lt__free(names[i], strlen(names[i]) + 1);
  lt__free(names, (size_t)cap * sizeof *names);
}

/* The names of dir's corpus files, sorted: *count of them (0 is allowed) in
 * an array of *capacity entries. */
static int list_files(const char *fn, const char *dir, char ***names, int *count, int *capacity) {
  *names = NULL;
  *count = *capacity = 0;
  errno = 0;
  DIR *d = opendir(dir);
  if (!d)
    return lt__err(LT_EINVAL, "%s: cannot open the directory %s: %s%s", fn, dir, strerror(errno),
                   pkg_hint(dir));
  char **list = NULL;
  int n = 0, cap = 0, rc = LT_OK;
  struct dirent *e;
  while (rc == LT_OK && (e = readdir(d))) {
    const char *name = e->d_name;
    /* the index files strfile writes (.dat), the UTF-8 aliases (.u8 links) */
    if (name[0] == '.' || ends_with(name, ".dat") || ends_with(name, ".u8")) continue;
    char path[4096];
    struct stat st;
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path) continue;
    if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode)) continue; /* links, directories */
    if (n == cap) {
      int ncap = cap ? 2 * cap : 64;
      char **grown = lt__realloc(list, (size_t)cap * sizeof *list, (size_t)ncap * sizeof *list);
      if (!grown) {
        rc = LT_ENOMEM;
        break;
      }
      list = grown;
      cap = ncap;
    }
    size_t len = strlen(name) + 1;
    list[n] = lt__malloc(len);
    if (!list[n]) {
      rc = LT_ENOMEM;
      break;
    }
    memcpy(list[n++], name, len);
  }
  closedir(d);
  if (rc != LT_OK) {
    free_names(list, n, cap);
    return lt__err(rc, "%s: out of memory listing %s", fn, dir);
  }
  if (n > 1) qsort(list, (size_t)n, sizeof *list, cmp_names);
  *names = list;
  *count = n;
  *capacity = cap;
  return LT_OK;
}

/* Appends the file's bytes to *buf (size *n, capacity *cap). */
static int append_file(const char *fn, const char *path, uint8_t **buf, int64_t *n, int64_t *cap) {
  errno = 0;
  FILE *f = fopen(path, "rb");
  if (!f) return lt__err(LT_EINVAL, "%s: cannot open %s: %s", fn, path, strerror(errno));
  int rc = LT_OK;
  for (;;) {
    if (*cap - *n < 65536) {
      int64_t ncap = *cap ? 2 * *cap : 1 << 20;
      uint8_t *grown = lt__realloc(*buf, (size_t)*cap, (size_t)ncap);
      if (!grown) {
        rc = lt__err(LT_ENOMEM, "%s: out of memory reading %s", fn, path);
        break;
      }
      *buf = grown;
      *cap = ncap;
    }
    size_t got = fread(*buf + *n, 1, (size_t)(*cap - *n), f);
    *n += (int64_t)got;
    if (got == 0) {
      if (ferror(f)) rc = lt__err(LT_EINVAL, "%s: read error in %s", fn, path);
      break;
    }
  }
  fclose(f);
  return rc;
}

int lt_nn_text_load(const char *dir, lt_nn_text *out) {
  const char *fn = "lt_nn_text_load";
  if (!out) return lt__err(LT_EINVAL, "%s: out is NULL", fn);
  memset(out, 0, sizeof *out);
  if (!dir) dir = LT_NN_FORTUNES_DIR;
  char **names;
  int count, cap_names;
  int rc = list_files(fn, dir, &names, &count, &cap_names);
  if (rc != LT_OK) return rc;
  if (count == 0) {
    free_names(names, count, cap_names);
    return lt__err(LT_EINVAL, "%s: %s holds no text file%s", fn, dir, pkg_hint(dir));
  }
  uint8_t *buf = NULL;
  int64_t n = 0, cap = 0;
  for (int i = 0; i < count && rc == LT_OK; i++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    rc = append_file(fn, path, &buf, &n, &cap);
  }
  free_names(names, count, cap_names);
  if (rc == LT_OK && n < 2)
    rc = lt__err(LT_EINVAL, "%s: %s holds %lld byte(s) of text; a corpus needs at least 2%s", fn,
                 dir, (long long)n, pkg_hint(dir));
  uint8_t *bytes = NULL, *ids = NULL;
  if (rc == LT_OK) {
    /* exact-size copies, so that lt_nn_text_free knows every size from n */
    bytes = lt__malloc((size_t)n);
    ids = lt__malloc((size_t)n);
    if (!bytes || !ids) rc = lt__err(LT_ENOMEM, "%s: out of memory (%lld bytes)", fn, (long long)n);
  }
  if (rc != LT_OK) {
    if (bytes) lt__free(bytes, (size_t)n);
    if (ids) lt__free(ids, (size_t)n);
    if (buf) lt__free(buf, (size_t)cap);
    return rc;
  }
  memcpy(bytes, buf, (size_t)n);
  lt__free(buf, (size_t)cap);
  bool seen[256] = {false};
  for (int64_t i = 0; i < n; i++) seen[bytes[i]] = true;
  uint8_t id_of[256] = {0};
  for (int b = 0; b < 256; b++)
    if (seen[b]) {
      id_of[b] = (uint8_t)out->vocab_size;
      out->vocab[out->vocab_size++] = (uint8_t)b;
    }
  for (int64_t i = 0; i < n; i++) ids[i] = id_of[bytes[i]];
  out->bytes = bytes;
  out->ids = ids;
  out->n = n;
  out->n_train = n * 9 / 10;
  out->files = count;
  return LT_OK;
}

int lt_nn_text_windows(const lt_nn_text *t, lt_device dev, const int64_t *starts, int64_t count,
                       int64_t len, lt_tensor **x, lt_tensor **y) {
  const char *fn = "lt_nn_text_windows";
  if (x) *x = NULL;
  if (y) *y = NULL;
  if (!t || !t->ids || !starts || !x || !y)
    return lt__err(LT_EINVAL, "%s: text, starts, x or y is NULL", fn);
  if (count < 1 || len < 1)
    return lt__err(LT_EINVAL, "%s: count %lld and len %lld must be >= 1", fn, (long long)count,
                   (long long)len);
  for (int64_t i = 0; i < count; i++)
    if (starts[i] < 0 || starts[i] > t->n - len - 1)
      return lt__err(LT_EINVAL,
                     "%s: window %lld starts at %lld: %lld + 1 tokens from there leave "
                     "the corpus of %lld",
                     fn, (long long)i, (long long)starts[i], (long long)len, (long long)t->n);
  size_t bytes = (size_t)count * (size_t)len * sizeof(int64_t);
  int64_t *xs = lt__malloc(bytes), *ys = lt__malloc(bytes);
  int rc = LT_OK;
  if (!xs || !ys) rc = lt__err(LT_ENOMEM, "%s: out of memory", fn);
  for (int64_t i = 0; rc == LT_OK && i < count; i++)
    for (int64_t j = 0; j < len; j++) {
      xs[i * len + j] = t->ids[starts[i] + j];
      ys[i * len + j] = t->ids[starts[i] + j + 1];
    }
  lt_tensor *tx = NULL, *ty = NULL;
  if (rc == LT_OK) {
    const int64_t shape[2] = {count, len};
    tx = lt_from_data(dev, LT_I64, shape, 2, xs);
    ty = tx ? lt_from_data(dev, LT_I64, shape, 2, ys) : NULL;
    if (!ty) {
      rc = lt_last_status() ? lt_last_status() : LT_ENOMEM;
      lt__tensor_discard(tx); /* also drops the open scope's reference */
      tx = NULL;
    }
  }
  if (xs) lt__free(xs, bytes);
  if (ys) lt__free(ys, bytes);
  if (rc != LT_OK) return rc;
  *x = tx;
  *y = ty;
  return LT_OK;
}
