/* The persistent compilation cache (disk_cache.h has the entry format).
 *
 * Safety under sharing and faults rests on three rules:
 * - a writer never touches a final entry name: it writes a unique temporary
 *   file (mkstemp) in the same directory, fsyncs it and renames it over the
 *   name, so readers see either no entry or a whole one, and concurrent
 *   writers of one key leave exactly one whole entry (the last rename);
 * - a reader trusts nothing it reads: size, magic, version, checksum,
 *   backend, environment and key are checked before the backend's
 *   deserialize (which validates its own bytes), and any failure is a miss;
 * - nothing here fails a computation: failures are counted, reported on
 *   stderr, cleaned up, and the executor compiles as if no cache existed.
 *
 * Recency for the size bound is the entry file's mtime: a hit touches it, and
 * a store evicts the oldest entries first when the directory would pass the
 * bound. Several processes may evict at once; unlinking a name another
 * process just removed is harmless. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>
#include <xxhash.h>

#include "../core/lt_alloc.h"
#include "../core/lt_error.h"
#include "disk_cache.h"
#include "lt_metrics.h"

#ifndef PATH_MAX
#define PATH_MAX 4096
#endif

static const uint64_t kDefaultMaxBytes = (uint64_t)1 << 30;
static const char kMagic[4] = {'L', 'T', 'X', 'C'};
/* Temporary files older than this were left by a writer that died. */
static const time_t kStaleTempSeconds = 3600;

typedef struct dc_config {
  bool on, read_only;
  uint64_t max_bytes;
  char dir[PATH_MAX];
} dc_config;

static pthread_once_t g_env_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static dc_config g_cfg;           /* guarded by g_mu */
static uint64_t g_env_max_bytes;  /* LT_PERSISTENT_CACHE_MAX_BYTES, or the default */
static uint64_t g_hook_max_bytes; /* lt__disk_cache_set_max_bytes; 0 when unset */
static atomic_bool g_on;
static atomic_bool g_warned_write; /* one stderr report per configuration */
static atomic_int g_fail_writes;

/* ---- configuration ---------------------------------------------------------------- */

/* mkdir -p; 0 or -1 with errno. */
static int make_dirs(const char *dir) {
  char p[PATH_MAX];
  size_t n = strlen(dir);
  if (n == 0 || n >= sizeof p) {
    errno = ENAMETOOLONG;
    return -1;
  }
  memcpy(p, dir, n + 1);
  for (size_t i = 1; i <= n; i++) {
    if (p[i] != '/' && p[i] != '\0') continue;
    char c = p[i];
    p[i] = '\0';
    if (mkdir(p, 0777) != 0 && errno != EEXIST) return -1;
    p[i] = c;
  }
  struct stat st;
  if (stat(dir, &st) != 0) return -1;
  if (!S_ISDIR(st.st_mode)) {
    errno = ENOTDIR;
    return -1;
  }
  return 0;
}

/* Sets the directory (NULL: off). Caller holds g_mu. */
static int configure_locked(const char *dir, bool read_only) {
  atomic_store(&g_warned_write, false);
  if (!dir || !*dir) {
    g_cfg.on = false;
    g_cfg.dir[0] = '\0';
    atomic_store(&g_on, false);
    return LT_OK;
  }
  size_t n = strlen(dir);
  /* room for "/", 32 hex digits, ".ltx" and the temporary suffix */
  if (n + 64 >= sizeof g_cfg.dir)
    return lt__err(LT_EINVAL, "lt_set_persistent_cache: path of %zu characters is too long", n);
  memcpy(g_cfg.dir, dir, n + 1);
  while (n > 1 && g_cfg.dir[n - 1] == '/') g_cfg.dir[--n] = '\0';
  g_cfg.read_only = read_only;
  g_cfg.on = true;
  if (!read_only && make_dirs(g_cfg.dir) != 0) /* stores will fail, be counted and reported */
    fprintf(stderr, "lazytensor: persistent cache: cannot create directory %s: %s\n", g_cfg.dir,
            strerror(errno));
  atomic_store(&g_on, true);
  return LT_OK;
}

/* "123", "64k", "512M", "1G" (powers of 1024); false when malformed. */
static bool parse_bytes(const char *s, uint64_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (end == s || errno) return false;
  int shift = 0;
  switch (*end) {
  case 'k':
  case 'K':
    shift = 10;
    break;
  case 'm':
  case 'M':
    shift = 20;
    break;
  case 'g':
  case 'G':
    shift = 30;
    break;
  case '\0':
    break;
  default:
    return false;
  }
  if (shift && *++end) return false;
  if (v == 0 || v > (UINT64_MAX >> shift)) return false;
  *out = (uint64_t)v << shift;
  return true;
}

static void read_env(void) {
  const char *max = getenv("LT_PERSISTENT_CACHE_MAX_BYTES");
  g_env_max_bytes = kDefaultMaxBytes;
  if (max && *max && !parse_bytes(max, &g_env_max_bytes)) {
    g_env_max_bytes = kDefaultMaxBytes;
    fprintf(stderr,
            "lazytensor: LT_PERSISTENT_CACHE_MAX_BYTES='%s' is not a size (bytes, or with a "
            "k/M/G suffix); using %llu\n",
            max, (unsigned long long)kDefaultMaxBytes);
  }
  const char *dir = getenv("LT_PERSISTENT_CACHE_PATH");
  const char *ro = getenv("LT_PERSISTENT_CACHE_READ_ONLY");
  pthread_mutex_lock(&g_mu);
  if (dir && *dir && configure_locked(dir, ro && *ro && strcmp(ro, "0") != 0) != LT_OK) {
    fprintf(stderr, "lazytensor: LT_PERSISTENT_CACHE_PATH ignored: %s\n", lt_last_error());
    lt_clear_error();
  }
  pthread_mutex_unlock(&g_mu);
}

int lt_set_persistent_cache(const char *dir, bool read_only) {
  pthread_once(&g_env_once, read_env); /* the environment never overrides this call */
  pthread_mutex_lock(&g_mu);
  int rc = configure_locked(dir, read_only);
  pthread_mutex_unlock(&g_mu);
  return rc;
}

void lt__disk_cache_fail_next_write(int n) { atomic_store(&g_fail_writes, n > 0 ? n : 0); }

void lt__disk_cache_set_max_bytes(uint64_t bytes) {
  pthread_once(&g_env_once, read_env);
  pthread_mutex_lock(&g_mu);
  g_hook_max_bytes = bytes;
  pthread_mutex_unlock(&g_mu);
}

/* A copy of the configuration; false when the cache is off. */
static bool snapshot(dc_config *c) {
  pthread_once(&g_env_once, read_env);
  if (!atomic_load(&g_on)) return false;
  pthread_mutex_lock(&g_mu);
  c->on = g_cfg.on;
  c->read_only = g_cfg.read_only;
  c->max_bytes = g_hook_max_bytes ? g_hook_max_bytes : g_env_max_bytes;
  memcpy(c->dir, g_cfg.dir, strlen(g_cfg.dir) + 1);
  pthread_mutex_unlock(&g_mu);
  return c->on;
}

bool lt__disk_cache_enabled(const lt_backend *be) {
  pthread_once(&g_env_once, read_env);
  return atomic_load(&g_on) && be && be->serialize && be->deserialize;
}

/* ---- helpers ------------------------------------------------------------------------ */

static void put_u32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put_u64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get_u32(const uint8_t *p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) v |= (uint32_t)p[i] << (8 * i);
  return v;
}
static uint64_t get_u64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

static void entry_name(char *buf, size_t n, lt_graph_key key) {
  snprintf(buf, n, "%016llx%016llx.ltx", (unsigned long long)key.hi, (unsigned long long)key.lo);
}

/* The thread's error state, kept across backend calls whose failures are
 * handled here (a bad entry is a miss, not an error of the caller). */
typedef struct saved_error {
  int status;
  char msg[512];
} saved_error;
static void error_save(saved_error *s) {
  s->status = lt_last_status();
  snprintf(s->msg, sizeof s->msg, "%s", lt_last_error());
}
static void error_restore(const saved_error *s) {
  if (s->status == LT_OK)
    lt_clear_error();
  else
    lt__err(s->status, "%s", s->msg);
}

/* Reads exactly n bytes; 0, or -1 with errno (EIO-free short read: errno 0). */
static int read_full(int fd, uint8_t *p, size_t n) {
  while (n) {
    ssize_t r = read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      if (r == 0) errno = 0;
      return -1;
    }
    p += r;
    n -= (size_t)r;
  }
  return 0;
}

static int write_full(int fd, const uint8_t *p, size_t n) {
  while (n) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      if (w == 0) errno = EIO;
      return -1;
    }
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

/* ---- load ------------------------------------------------------------------------------ */

/* Why the entry bytes are unusable for (be, key), or NULL. */
static const char *check_entry(const lt_backend *be, lt_graph_key key, const uint8_t *b,
                               size_t size, char *why, size_t n) {
  size_t min = LT_DISK_HEADER_BYTES + LT_DISK_CHECKSUM_BYTES;
  if (size < min) {
    snprintf(why, n, "truncated (%zu bytes, a header alone takes %zu)", size, min);
    return why;
  }
  if (memcmp(b, kMagic, sizeof kMagic) != 0) return "not a lazytensor cache entry (bad magic)";
  uint32_t version = get_u32(b + LT_DISK_OFF_VERSION);
  if (version != LT_DISK_FORMAT_VERSION) {
    snprintf(why, n, "format version %u, this library reads version %d", version,
             LT_DISK_FORMAT_VERSION);
    return why;
  }
  uint64_t len = get_u64(b + LT_DISK_OFF_LEN);
  if (len != size - min) {
    snprintf(why, n, "%s (%zu bytes, its header promises %llu)",
             len > size - min ? "truncated" : "trailing bytes", size,
             (unsigned long long)len + min);
    return why;
  }
  uint64_t sum = XXH3_64bits(b, size - LT_DISK_CHECKSUM_BYTES);
  if (sum != get_u64(b + size - LT_DISK_CHECKSUM_BYTES))
    return "checksum mismatch (the file is corrupted)";
  char name[LT_DISK_BACKEND_NAME_LEN + 1];
  memcpy(name, b + LT_DISK_OFF_BACKEND, LT_DISK_BACKEND_NAME_LEN);
  name[LT_DISK_BACKEND_NAME_LEN] = '\0';
  if (strcmp(name, be->name) != 0) {
    snprintf(why, n, "written by backend '%s', not '%s'", name, be->name);
    return why;
  }
  if (get_u64(b + LT_DISK_OFF_ENV) != lt__backend_env_key(be))
    return "written for a different compile environment (library version, CPU or compiler)";
  if (get_u64(b + LT_DISK_OFF_KEY) != key.lo || get_u64(b + LT_DISK_OFF_KEY + 8) != key.hi)
    return "holds a different graph key";
  return NULL;
}

/* Removes path if it is still the file fd reads (another process may have
 * renamed a fresh entry over it since). */
static void remove_if_same(const char *path, int fd) {
  struct stat a, b;
  if (fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
    unlink(path);
}

int lt__disk_cache_load(const lt_backend *be, lt_graph_key key, lt_executable **exe) {
  dc_config cfg;
  if (!exe || !lt__disk_cache_enabled(be) || !snapshot(&cfg)) return LT_ENOTFOUND;
  int64_t t0 = lt__now_ns();
  char path[PATH_MAX + 128], name[64];
  entry_name(name, sizeof name, key);
  snprintf(path, sizeof path, "%s/%s", cfg.dir, name);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    lt__count(LT_CTR_PERSISTENT_MISS, 1);
    return LT_ENOTFOUND;
  }
  saved_error saved;
  error_save(&saved);
  char whybuf[640];
  const char *why = NULL;
  uint8_t *buf = NULL;
  size_t size = 0;
  lt_executable *e = NULL;
  struct stat st;
  if (fstat(fd, &st) != 0) {
    snprintf(whybuf, sizeof whybuf, "cannot stat it: %s", strerror(errno));
    why = whybuf;
  } else if (!S_ISREG(st.st_mode)) {
    why = "not a regular file";
  } else if ((uint64_t)st.st_size > cfg.max_bytes || (uint64_t)st.st_size > SIZE_MAX / 2) {
    why = "larger than the cache's size bound";
  } else {
    size = (size_t)st.st_size;
    buf = lt__malloc(size);
    if (!buf) { /* not the entry's fault: a plain miss */
      close(fd);
      error_restore(&saved);
      lt__count(LT_CTR_PERSISTENT_MISS, 1);
      return LT_ENOTFOUND;
    }
    if (read_full(fd, buf, size) != 0) {
      snprintf(whybuf, sizeof whybuf, "%s", errno ? strerror(errno) : "truncated while reading");
      why = whybuf;
    } else {
      why = check_entry(be, key, buf, size, whybuf, sizeof whybuf);
    }
    if (!why) {
      int rc = be->deserialize(buf + LT_DISK_HEADER_BYTES,
                               size - LT_DISK_HEADER_BYTES - LT_DISK_CHECKSUM_BYTES, &e);
      if (rc == LT_ENOMEM) { /* not the entry's fault either: keep it, report a miss */
        lt__free(buf, size);
        close(fd);
        error_restore(&saved);
        lt__count(LT_CTR_PERSISTENT_MISS, 1);
        return LT_ENOTFOUND;
      }
      if (rc != LT_OK) {
        snprintf(whybuf, sizeof whybuf, "the backend cannot read it: %s", lt_last_error());
        why = whybuf;
        e = NULL;
      }
    }
  }
  lt__free(buf, size);
  if (why) {
    if (!cfg.read_only) remove_if_same(path, fd);
    close(fd);
    error_restore(&saved);
    lt__count(LT_CTR_PERSISTENT_BAD_ENTRY, 1);
    lt__count(LT_CTR_PERSISTENT_MISS, 1);
    fprintf(stderr, "lazytensor: persistent cache: ignoring %s: %s; %s, compiling instead\n", path,
            why, cfg.read_only ? "kept (read-only)" : "removed");
    return LT_ENOTFOUND;
  }
  if (!cfg.read_only) futimens(fd, NULL); /* most recently used; best effort */
  close(fd);
  error_restore(&saved);
  *exe = e;
  lt__count(LT_CTR_PERSISTENT_HIT, 1);
  lt__timer_add(LT_TIMER_PERSISTENT_LOAD, lt__now_ns() - t0);
  return LT_OK;
}

/* ---- store ------------------------------------------------------------------------------ */

static void write_failed(const char *path, const char *why) {
  lt__count(LT_CTR_PERSISTENT_WRITE_FAIL, 1);
  if (atomic_exchange(&g_warned_write, true)) return;
  fprintf(stderr,
          "lazytensor: persistent cache: cannot write %s: %s; the computation goes on without "
          "it (later write failures are only counted in PersistentCacheWriteFailure)\n",
          path, why);
}

typedef struct dc_file {
  char name[40];
  uint64_t size;
  struct timespec mtime;
} dc_file;

static int cmp_oldest(const void *pa, const void *pb) {
  const dc_file *a = pa, *b = pb;
  if (a->mtime.tv_sec != b->mtime.tv_sec) return a->mtime.tv_sec < b->mtime.tv_sec ? -1 : 1;
  if (a->mtime.tv_nsec != b->mtime.tv_nsec) return a->mtime.tv_nsec < b->mtime.tv_nsec ? -1 : 1;
  return strcmp(a->name, b->name);
}

static bool is_entry_name(const char *s) {
  size_t n = strlen(s);
  if (n != 36 || strcmp(s + 32, ".ltx") != 0) return false;
  for (int i = 0; i < 32; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return false;
  return true;
}

/* Evicts the least recently used entries until `need` more bytes fit in the
 * bound (never the entry named keep), and removes stale temporary files. */
static void make_room(const dc_config *cfg, uint64_t need, const char *keep) {
  DIR *d = opendir(cfg->dir);
  if (!d) return;
  dc_file *files = NULL;
  size_t n = 0, cap = 0;
  uint64_t total = 0;
  time_t now = time(NULL);
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    struct stat st;
    if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
      continue;
    if (de->d_name[0] == '.' && strstr(de->d_name, ".ltx.tmp.")) {
      if (now - st.st_mtime > kStaleTempSeconds) unlinkat(dirfd(d), de->d_name, 0);
      continue;
    }
    if (!is_entry_name(de->d_name) || strcmp(de->d_name, keep) == 0) continue;
    if (n == cap) {
      size_t nc = cap ? cap * 2 : 64;
      dc_file *f = lt__realloc(files, cap * sizeof *files, nc * sizeof *files);
      if (!f) break; /* evicts among those seen */
      files = f;
      cap = nc;
    }
    memcpy(files[n].name, de->d_name, 37); /* 36 characters, checked above */
    files[n].size = (uint64_t)st.st_size;
    files[n].mtime = st.st_mtim;
    total += files[n].size;
    n++;
  }
  if (total + need > cfg->max_bytes) {
    qsort(files, n, sizeof *files, cmp_oldest);
    for (size_t i = 0; i < n && total + need > cfg->max_bytes; i++) {
      if (unlinkat(dirfd(d), files[i].name, 0) == 0 || errno == ENOENT) total -= files[i].size;
    }
  }
  lt__free(files, cap * sizeof *files);
  closedir(d);
}

void lt__disk_cache_store(const lt_backend *be, lt_graph_key key, const lt_executable *exe) {
  dc_config cfg;
  if (!exe || !lt__disk_cache_enabled(be) || !snapshot(&cfg) || cfg.read_only) return;
  char name[64], path[PATH_MAX + 128], tmp[PATH_MAX + 128];
  entry_name(name, sizeof name, key);
  snprintf(path, sizeof path, "%s/%s", cfg.dir, name);
  saved_error saved;
  error_save(&saved);
  void *payload = NULL;
  size_t plen = 0;
  if (be->serialize(exe, &payload, &plen) != LT_OK) {
    char msg[600];
    snprintf(msg, sizeof msg, "the backend cannot serialize it: %s", lt_last_error());
    error_restore(&saved);
    write_failed(path, msg);
    return;
  }
  size_t total = LT_DISK_HEADER_BYTES + plen + LT_DISK_CHECKSUM_BYTES;
  if (total > cfg.max_bytes) {
    char msg[160];
    snprintf(msg, sizeof msg, "its %zu bytes exceed the size bound (%llu bytes)", total,
             (unsigned long long)cfg.max_bytes);
    lt__free(payload, plen);
    write_failed(path, msg);
    return;
  }
  uint8_t *buf = lt__malloc(total);
  if (!buf) {
    lt__free(payload, plen);
    error_restore(&saved);
    write_failed(path, strerror(ENOMEM));
    return;
  }
  memset(buf, 0, LT_DISK_HEADER_BYTES);
  memcpy(buf, kMagic, sizeof kMagic);
  put_u32(buf + LT_DISK_OFF_VERSION, LT_DISK_FORMAT_VERSION);
  snprintf((char *)buf + LT_DISK_OFF_BACKEND, LT_DISK_BACKEND_NAME_LEN, "%s", be->name);
  put_u64(buf + LT_DISK_OFF_ENV, lt__backend_env_key(be));
  put_u64(buf + LT_DISK_OFF_KEY, key.lo);
  put_u64(buf + LT_DISK_OFF_KEY + 8, key.hi);
  put_u64(buf + LT_DISK_OFF_LEN, plen);
  if (plen) memcpy(buf + LT_DISK_HEADER_BYTES, payload, plen);
  lt__free(payload, plen);
  put_u64(buf + total - LT_DISK_CHECKSUM_BYTES, XXH3_64bits(buf, total - LT_DISK_CHECKSUM_BYTES));

  make_room(&cfg, total, name);
  snprintf(tmp, sizeof tmp, "%s/.%s.tmp.XXXXXX", cfg.dir, name);
  const char *what = NULL;
  int err = 0;
  int fd = mkstemp(tmp);
  if (fd < 0) {
    what = "creating a temporary file";
    err = errno;
  } else {
    (void)fchmod(fd, 0644); /* mkstemp makes 0600; other users may share the directory */
    int fail = atomic_load(&g_fail_writes);
    while (fail > 0 && !atomic_compare_exchange_weak(&g_fail_writes, &fail, fail - 1)) {
    }
    if (fail > 0) { /* injected: a disk that fills up halfway through the entry */
      (void)write_full(fd, buf, total / 2);
      what = "write (injected fault)";
      err = ENOSPC;
    } else if (write_full(fd, buf, total) != 0) {
      what = "write";
      err = errno;
    } else if (fsync(fd) != 0) {
      what = "fsync";
      err = errno;
    }
    if (close(fd) != 0 && !what) {
      what = "close";
      err = errno;
    }
    if (!what && rename(tmp, path) != 0) {
      what = "rename";
      err = errno;
    }
    if (what) unlink(tmp);
  }
  lt__free(buf, total);
  if (what) {
    char msg[160];
    snprintf(msg, sizeof msg, "%s: %s", what, strerror(err));
    write_failed(path, msg);
    return;
  }
  int dfd = open(cfg.dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC); /* the rename itself, durable */
  if (dfd >= 0) {
    (void)fsync(dfd);
    close(dfd);
  }
}
