/* The mutation sweep of saved programs: real programs (an MLP training step,
 * a CNN step through conv2d and max_pool2d, a graph of shape, reduction and
 * index ops with their gradients, attention) are saved under ref and cpu,
 * then copies are damaged (byte and bit flips, and changed node fields:
 * dtype, shape dims, operand indices, attrs, counts; signature and constant
 * fields; op numbers), their checksum made right again, and each is loaded
 * and run in a child process on ref and on cpu (a file written by the other
 * backend loads without its object code). A signal in a child fails the
 * sweep; a load or run error is counted as clean when it says why.
 *
 * ctest runs a short sweep; LT_PROGRAM_SWEEP_FILES=N (or --files N) sets the
 * number of damaged files, LT_PROGRAM_SWEEP_SEED the first seed. A file whose
 * child died is kept (its path printed) to reproduce with --child PATH.
 * --save DIR writes the undamaged programs (ref) to DIR (the fuzz seeds in
 * fuzz/corpus/fuzz_program_load). */
#include <fcntl.h>
#include <sys/resource.h>
#include <xxhash.h>

#include "test_util.h"
#include "lazytensor_nn.h"
#include "../src/backend/backend.h"
#include "../src/backend/cpu/cpu_api.h"
#include "../src/backend/ref/ref_api.h"
#include "../src/core/lt_node.h"
#include "../src/exec/program_file.h"

extern char **environ;

/* ---- the programs -------------------------------------------------------------------- */

static lt_tensor *wave(int seed, const int64_t *shape, int ndim, bool grad) {
  lt_tensor *t = tu_wave_f32(seed, shape, ndim);
  if (grad) lt_set_requires_grad(t, true);
  return t;
}

static lt_tensor *step(lt_tensor *w, float lr) {
  return lt_sub(w, lt_mul(lt_grad(w), lt_scalar(CPU0, LT_F32, lr)));
}

/* Saves the program of outs over ins to path under backend be. */
static void save(lt_tensor **outs, int nout, lt_tensor **ins, int nin, const char *path) {
  lt_program *p = lt_program_create(outs, nout, ins, nin);
  if (!p) fail_msg("create %s: %s", path, lt_last_error());
  if (lt_program_save(p, path) != LT_OK) fail_msg("save %s: %s", path, lt_last_error());
  lt_program_free(p);
}

static void release_all(lt_tensor **ts, int n) {
  for (int i = 0; i < n; i++) lt_release(ts[i]);
}

/* loss = cross entropy of relu(x W1 + b1) W2 on labels; outputs the loss
 * and the weights after one SGD step. */
static void save_mlp(const char *path) {
  int64_t labels[8] = {0, 1, 2, 1, 0, 2, 2, 1};
  lt_tensor *x = wave(1, SHAPE(8, 6), 2, false), *y = tu_i64(SHAPE(8), 1, labels);
  lt_tensor *w1 = wave(2, SHAPE(6, 16), 2, true), *b1 = wave(3, SHAPE(16), 1, true);
  lt_tensor *w2 = wave(4, SHAPE(16, 3), 2, true);
  lt_tensor *h = lt_relu(lt_add(lt_matmul(x, w1), b1));
  lt_tensor *loss = lt_nn_cross_entropy(lt_matmul(h, w2), y);
  assert_int_equal(lt_backward(loss), LT_OK);
  lt_tensor *outs[4] = {loss, step(w1, 0.1f), step(b1, 0.1f), step(w2, 0.1f)};
  lt_tensor *ins[5] = {x, y, w1, b1, w2};
  save(outs, 4, ins, 5, path);
  release_all(outs, 4);
  lt_release(h);
  release_all(ins, 5);
}

/* conv2d with bias, relu, max_pool2d, a linear layer; gradients of the
 * input and of every weight (conv2d_grad_input / _weight, pool_scatter_add). */
static void save_cnn(const char *path) {
  lt_tensor *x = wave(5, SHAPE(2, 1, 6, 6), 4, true), *w = wave(6, SHAPE(3, 1, 3, 3), 4, true);
  lt_tensor *b = wave(7, SHAPE(3), 1, true), *fc = wave(8, SHAPE(27, 4), 2, true);
  lt_tensor *c = lt_relu(lt_conv2d_n(x, w, b, NULL, 0, SHAPE(1, 1), 2, NULL, 0, 1));
  lt_tensor *p = lt_max_pool2d_n(c, SHAPE(2, 2), 2, NULL, 0, NULL, 0, NULL, 0, false);
  lt_tensor *z = lt_matmul(lt_reshape(p, SHAPE(2, 27), 2), fc);
  lt_tensor *loss = lt_mean(lt_mul(z, z), NULL, 0, false);
  assert_int_equal(lt_backward(loss), LT_OK);
  lt_tensor *outs[5] = {loss, lt_mul(lt_grad(x), lt_scalar(CPU0, LT_F32, 1.0)), step(w, 0.05f),
                        step(b, 0.05f), step(fc, 0.05f)};
  lt_tensor *ins[4] = {x, w, b, fc};
  save(outs, 5, ins, 4, path);
  release_all(outs, 5);
  lt_release(c);
  lt_release(p);
  lt_release(z);
  release_all(ins, 4);
}

/* permute, slice, concat, pad, cumsum, softmax, argmax, max, gather,
 * index_select, one_hot, where; the gradient through the index and slice ops
 * (scatter_add, index_add, unslice). */
static void save_shapes(const char *path) {
  int64_t gi[8] = {0, 4, 1, 3, 2, 2, 4, 0}, si[3] = {3, 0, 1};
  lt_tensor *a = wave(9, SHAPE(4, 5), 2, true), *idx = tu_i64(SHAPE(4, 2), 2, gi);
  lt_tensor *sel = tu_i64(SHAPE(3), 1, si);
  lt_tensor *t = lt_permute(a, (const int[]){1, 0}, 2);
  lt_tensor *s = lt_slice_n(a, SHAPE(1, 0), SHAPE(4, 5), SHAPE(2, 2), 2);
  lt_tensor *parts[2] = {s, lt_pad_n(s, SHAPE(0, 0, 1, 0), 4, 0.5)};
  lt_tensor *cat =
      lt_concat((lt_tensor *[]){parts[0], lt_slice_n(parts[1], NULL, SHAPE(2, 3), NULL, 2)}, 2, 0);
  lt_tensor *g = lt_gather(a, 1, idx), *is = lt_index_select(a, 0, sel);
  lt_tensor *cs = lt_cumsum(t, 1), *sm = lt_softmax(a, 1);
  lt_tensor *am = lt_argmax(a, 1, false);
  lt_tensor *oh = lt_one_hot(am, 5, LT_F32);
  lt_tensor *w = lt_where(lt_gt(a, lt_scalar(CPU0, LT_F32, 0.0)), a, sm);
  lt_tensor *loss = lt_add(lt_add(lt_sum(g, NULL, 0, false), lt_sum(is, NULL, 0, false)),
                           lt_add(lt_sum(cat, NULL, 0, false), lt_sum(w, NULL, 0, false)));
  assert_int_equal(lt_backward(loss), LT_OK);
  lt_tensor *outs[6] = {loss,
                        lt_max(cs, (const int[]){0}, 1, true),
                        lt_mul(oh, sm),
                        step(a, 0.1f),
                        lt_mean(cat, (const int[]){1}, 1, false),
                        lt_add(am, lt_scalar(CPU0, LT_I64, 2))};
  lt_tensor *ins[3] = {a, idx, sel};
  save(outs, 6, ins, 3, path);
  release_all(outs, 6);
  lt_tensor *tmp[] = {t, s, parts[1], cat, g, is, cs, sm, am, oh, w};
  release_all(tmp, (int)(sizeof tmp / sizeof tmp[0]));
  release_all(ins, 3);
}

/* scaled dot product attention, causal, and its gradients. */
static void save_attention(const char *path) {
  lt_tensor *q = wave(10, SHAPE(2, 4, 8), 3, true), *k = wave(11, SHAPE(2, 5, 8), 3, true);
  lt_tensor *v = wave(12, SHAPE(2, 5, 6), 3, true);
  lt_tensor *o = lt_scaled_dot_product_attention(q, k, v, NULL, false, 0.35);
  lt_tensor *loss = lt_sum(lt_mul(o, o), NULL, 0, false);
  assert_int_equal(lt_backward(loss), LT_OK);
  lt_tensor *outs[4] = {loss, step(q, 0.1f), step(k, 0.1f), step(v, 0.1f)};
  lt_tensor *ins[3] = {q, k, v};
  save(outs, 4, ins, 3, path);
  release_all(outs, 4);
  lt_release(o);
  release_all(ins, 3);
}

typedef void (*save_fn)(const char *path);
static const struct {
  const char *name;
  save_fn save;
} kPrograms[] = {
    {"mlp", save_mlp}, {"cnn", save_cnn}, {"shapes", save_shapes}, {"attention", save_attention}};
enum { kNPrograms = sizeof kPrograms / sizeof kPrograms[0] };

static const lt_backend *backend_of(int i) { return i == 0 ? &lt__ref_backend : &lt__cpu_backend; }

/* ---- the child: load and run on both backends --------------------------------------- */

/* How one backend's attempt ended (the child's exit code holds both). */
enum { kRejected, kRan, kRunError, kOutcomes };
enum { kExitSilent = 100 }; /* a failure without a message: a bug too */

enum { kNoRun = 1000 }; /* a signature too large to feed: not run */

/* Inputs of p's signature (device data): small values for floats, zeros for
 * the rest (valid indices). A signature too large to feed is not run. */
static int run_program(lt_program *p) {
  int nin = lt_program_count(p, false), nout = lt_program_count(p, true);
  lt_tensor *in[16] = {0}, *out[16] = {0};
  if (nin > 16 || nout > 16) return kNoRun;
  int rc = LT_OK;
  for (int i = 0; i < nin && rc == LT_OK; i++) {
    lt_dtype dt;
    int64_t shape[LT_MAX_DIMS];
    int nd;
    rc = lt_program_signature(p, false, i, &dt, shape, &nd);
    int64_t n = 1;
    for (int d = 0; d < nd; d++) n = shape[d] > (1 << 20) ? (1 << 21) : n * shape[d];
    if (rc == LT_OK && n > (1 << 20)) rc = kNoRun;
    if (rc != LT_OK) break;
    double *v = calloc((size_t)n + 1, sizeof *v); /* 8 bytes an element: room for any dtype */
    for (int64_t e = 0; e < n; e++) {
      if (dt == LT_F32)
        ((float *)v)[e] = 0.25f * (float)(i + 1) + tu_wave_at(i, e) * 0.1f;
      else if (dt == LT_F64)
        v[e] = 0.25 * (i + 1) + tu_wave_at(i, e) * 0.1;
    }
    in[i] = lt_from_data(CPU0, dt, shape, nd, v);
    free(v);
    if (!in[i]) rc = lt_last_status();
  }
  if (rc == LT_OK) rc = lt_program_run(p, in, nin, out);
  for (int o = 0; rc == LT_OK && o < nout; o++) { /* each output readable */
    double last = 0;
    int64_t n = lt_numel(out[o]);
    if (n > 0) rc = lt_item(out[o], n - 1, &last);
  }
  release_all(out, nout);
  release_all(in, nin);
  return rc;
}

static int child_main(const char *path) {
  /* a damaged size must fail an allocation, not take the machine */
  struct rlimit lim = {(rlim_t)16 << 30, (rlim_t)16 << 30};
  if (!TU_ASAN) setrlimit(RLIMIT_AS, &lim); /* under ASan: its options (run_child) */
  alarm(120);                               /* a hang dies by SIGALRM: counted as a signal */
  int code = 0;
  for (int bi = 0; bi < tu_nbackends(); bi++) {
    lt__backend_force(backend_of(bi));
    lt_clear_error();
    lt_program *p = lt_program_load(path);
    int outcome = kRejected;
    if (!p) {
      if (lt_last_status() == LT_OK || !lt_last_error()[0]) return kExitSilent;
      fprintf(stderr, "%s: load: %s\n", backend_of(bi)->name, lt_last_error());
    } else {
      lt_clear_error();
      int rc = run_program(p);
      if (rc != LT_OK)
        fprintf(stderr, "%s: run: %d %s\n", backend_of(bi)->name, rc, lt_last_error());
      if (rc != LT_OK && rc != kNoRun && (lt_last_status() == LT_OK || !lt_last_error()[0]))
        return kExitSilent + 1;
      outcome = rc == LT_OK ? kRan : kRunError;
      lt_program_free(p);
    }
    code = code * kOutcomes + outcome;
  }
  lt__backend_force(NULL);
  return code;
}

/* ---- damage ------------------------------------------------------------------------------ */

static uint64_t rd(const uint8_t *p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}
static void wr(uint8_t *p, int bytes, uint64_t v) {
  for (int i = 0; i < bytes; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* A field of the file: where, and how wide. */
typedef struct field {
  size_t at;
  int bytes;
} field;

/* The fields worth changing: per node its header, shape dims, operand
 * indices and attrs; the op number table; signature and constant fields. */
typedef struct fields {
  field f[4096];
  int n;
} fields;

static void add(fields *fs, size_t at, int bytes) {
  if (fs->n < (int)(sizeof fs->f / sizeof fs->f[0])) fs->f[fs->n++] = (field){at, bytes};
}

static void list_fields(const uint8_t *b, size_t n, fields *fs) {
  size_t at[LT_PGM_NSECTIONS], pos = LT_PGM_HEADER_BYTES;
  for (int i = 0; i < LT_PGM_NSECTIONS; i++) {
    at[i] = pos;
    pos += 16 + rd(b + pos + 8, 8);
  }
  assert_int_equal(pos, n - LT_PGM_CHECKSUM_BYTES);
  /* signature: counts, then per signature dtype, rank, dims */
  pos = at[0] + 16;
  uint32_t nin = (uint32_t)rd(b + pos, 4), nout = (uint32_t)rd(b + pos + 4, 4);
  add(fs, pos, 4);
  add(fs, pos + 4, 4);
  pos += 8;
  for (uint32_t s = 0; s < nin + nout; s++) {
    int nd = b[pos + 1];
    add(fs, pos, 1);
    add(fs, pos + 1, 1);
    for (int d = 0; d < nd; d++) add(fs, pos + 8 + 8 * (size_t)d, 8);
    pos += 8 + 8 * (size_t)nd;
  }
  /* graph */
  pos = at[1] + 16;
  uint32_t nnodes = (uint32_t)rd(b + pos, 4), nused = (uint32_t)rd(b + pos + 8, 4);
  add(fs, pos, 4);
  pos += 12;
  for (uint32_t k = 0; k < nused; k++) {
    add(fs, pos, 2);
    pos += 3 + b[pos + 2];
  }
  for (uint32_t i = 0; i < nnodes; i++) {
    int nd = b[pos + 3], nops = (int)rd(b + pos + 4, 2), nattrs = (int)rd(b + pos + 6, 2);
    bool data = i == 0 || nops == 0; /* leaves: data nodes carry a parameter number */
    add(fs, pos, 2);
    add(fs, pos + 2, 1);
    add(fs, pos + 3, 1);
    add(fs, pos + 4, 2);
    add(fs, pos + 6, 2);
    size_t q = pos + 16;
    for (int d = 0; d < nd; d++, q += 8) add(fs, q, 8);
    for (int k = 0; k < nops; k++, q += 4) add(fs, q, 4);
    for (int k = 0; k < nattrs; k++, q += 8) add(fs, q, 8);
    /* a data node's parameter: only data nodes have one (const nodes do not) */
    uint16_t num = (uint16_t)rd(b + pos, 2);
    (void)data;
    size_t tbl = at[1] + 16 + 12;
    bool is_data = false;
    for (uint32_t k = 0; k < nused; k++) {
      uint8_t len = b[tbl + 2];
      if (rd(b + tbl, 2) == num) is_data = len == 4 && memcmp(b + tbl + 3, "data", 4) == 0;
      tbl += 3 + len;
    }
    if (is_data) add(fs, q, 4), q += 4;
    pos = q;
  }
  /* constants: count, per constant its signature, byte count and a byte */
  pos = at[2] + 16;
  uint32_t nc = (uint32_t)rd(b + pos, 4);
  add(fs, pos, 4);
  pos += 4;
  for (uint32_t c = 0; c < nc; c++) {
    int nd = b[pos + 1];
    add(fs, pos, 1);
    add(fs, pos + 1, 1);
    for (int d = 0; d < nd; d++) add(fs, pos + 8 + 8 * (size_t)d, 8);
    size_t q = pos + 8 + 8 * (size_t)nd;
    uint64_t nb = rd(b + q, 8);
    add(fs, q, 8);
    if (nb) add(fs, q + 8, 1);
    pos = q + 8 + nb;
  }
}

/* A new value for a field: near the old one, small, edge or random. */
static uint64_t new_value(uint64_t old, uint64_t *rng) {
  uint64_t r = tu_xorshift(rng);
  switch (r % 10) {
  case 0:
    return old + 1;
  case 1:
    return old - 1;
  case 2:
    return 0;
  case 3:
    return 1;
  case 4:
    return (uint64_t)-1;
  case 5:
    return old * 2;
  case 6:
    return (uint64_t)1 << (tu_xorshift(rng) % 63);
  case 7:
    return tu_xorshift(rng) % 8;
  case 8:
    return old ^ ((uint64_t)1 << (tu_xorshift(rng) % 8));
  default:
    return tu_xorshift(rng);
  }
}

/* One to three damages of b (n bytes, checksum made right after). */
static void damage(uint8_t *b, size_t n, const fields *fs, uint64_t *rng) {
  int times = 1 + (int)(tu_xorshift(rng) % 3 == 0) + (int)(tu_xorshift(rng) % 6 == 0);
  size_t body = n - LT_PGM_HEADER_BYTES - LT_PGM_CHECKSUM_BYTES;
  for (int t = 0; t < times; t++) {
    uint64_t r = tu_xorshift(rng) % 10;
    if (r < 2) { /* a flipped bit anywhere past the header */
      size_t at = LT_PGM_HEADER_BYTES + tu_xorshift(rng) % body;
      b[at] ^= (uint8_t)(1u << (tu_xorshift(rng) % 8));
    } else if (r < 3) { /* a random byte */
      b[LT_PGM_HEADER_BYTES + tu_xorshift(rng) % body] = (uint8_t)tu_xorshift(rng);
    } else { /* a field */
      const field *f = &fs->f[tu_xorshift(rng) % (uint64_t)fs->n];
      wr(b + f->at, f->bytes, new_value(rd(b + f->at, f->bytes), rng));
    }
  }
  wr(b + n - LT_PGM_CHECKSUM_BYTES, 8, XXH3_64bits(b, n - LT_PGM_CHECKSUM_BYTES));
}

/* ---- the sweep ------------------------------------------------------------------------- */

static char g_dir[128];

static int run_child(const char *self, const char *path) {
  int n = 0;
  while (environ[n]) n++;
  char **envp = calloc((size_t)n + 2, sizeof *envp);
  int k = 0;
  for (int i = 0; i < n; i++)
    if (strncmp(environ[i], "LT_PERSISTENT_CACHE_", 20) != 0 &&
        strncmp(environ[i], "ASAN_OPTIONS=", 13) != 0)
      envp[k++] = environ[i];
  /* AddressSanitizer reserves terabytes of shadow, so the child cannot cap its
   * address space (child_main): ASan's own limits make a damaged size fail its
   * allocation instead */
  char asan[512];
  if (TU_ASAN) {
    const char *was = getenv("ASAN_OPTIONS");
    snprintf(asan, sizeof asan,
             "ASAN_OPTIONS=%s%sallocator_may_return_null=1:max_allocation_size_mb=16384:"
             "soft_rss_limit_mb=16384",
             was ? was : "", was && *was ? ":" : "");
    envp[k++] = asan;
  }
  char *const argv[] = {"test_program_sweep", "--child", (char *)path, NULL};
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    int devnull = open("/dev/null", O_WRONLY);
    if (devnull >= 0 && !getenv("LT_PROGRAM_SWEEP_VERBOSE")) dup2(devnull, 2);
    execve(self, argv, envp);
    _exit(127);
  }
  free(envp);
  assert_true(pid > 0);
  int st;
  while (waitpid(pid, &st, 0) < 0) assert_int_equal(errno, EINTR);
  return WIFSIGNALED(st) ? -WTERMSIG(st) : WEXITSTATUS(st);
}

static long env_long(const char *name, long dflt) {
  const char *v = getenv(name);
  return v && *v ? strtol(v, NULL, 10) : dflt;
}

static long g_files = -1;

static void test_sweep(void **state) {
  (void)state;
  long files = g_files >= 0 ? g_files : env_long("LT_PROGRAM_SWEEP_FILES", 100);
  uint64_t seed = (uint64_t)env_long("LT_PROGRAM_SWEEP_SEED", 1);
  char self[512];
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  assert_true(len > 0);
  self[len] = '\0';
  tu_mkdtemp(g_dir, sizeof g_dir, "lt-program-sweep");
  /* the originals: every program under each backend; each loads and runs */
  int nbase = 0;
  char base[2 * kNPrograms][192];
  for (int bi = 0; bi < tu_nbackends(); bi++) {
    lt__backend_force(backend_of(bi));
    for (int p = 0; p < kNPrograms; p++) {
      snprintf(base[nbase], sizeof base[nbase], "%s/%s_%s.ltp", g_dir, kPrograms[p].name,
               backend_of(bi)->name);
      kPrograms[p].save(base[nbase]);
      int code = run_child(self, base[nbase]);
      int want = tu_nbackends() == 2 ? kRan * kOutcomes + kRan : kRan;
      if (code != want) fail_msg("%s: undamaged, the child gave %d", base[nbase], code);
      nbase++;
    }
    lt__backend_force(NULL);
  }
  long signals = 0, silent = 0, rejected = 0, ran = 0, run_errors = 0;
  char path[256];
  snprintf(path, sizeof path, "%s/damaged.ltp", g_dir);
  for (long f = 0; f < files; f++) {
    uint64_t rng = (seed + (uint64_t)f) * 0x9E3779B97F4A7C15ull | 1;
    size_t n;
    uint8_t *b = tu_read_file(base[f % nbase], &n);
    fields fs = {.n = 0};
    list_fields(b, n, &fs);
    damage(b, n, &fs, &rng);
    FILE *out = fopen(path, "wb");
    assert_non_null(out);
    assert_int_equal(fwrite(b, 1, n, out), n);
    fclose(out);
    free(b);
    int code = run_child(self, path);
    if (code < 0 || code >= kExitSilent) {
      char keep[300];
      snprintf(keep, sizeof keep, "/tmp/lt-sweep-%s-%ld.ltp", code < 0 ? "signal" : "silent",
               (long)(seed + (uint64_t)f));
      rename(path, keep);
      print_message("file %ld (from %s): %s %d; kept as %s\n", f, base[f % nbase],
                    code < 0 ? "signal" : "exit", code < 0 ? -code : code, keep);
      if (code < 0)
        signals++;
      else
        silent++;
      continue;
    }
    for (int bi = 0; bi < tu_nbackends(); bi++, code /= kOutcomes) {
      int o = code % kOutcomes;
      rejected += o == kRejected;
      ran += o == kRan;
      run_errors += o == kRunError;
    }
  }
  print_message(
      "program sweep: %ld damaged files (seed %llu), %d backends each: %ld signals, "
      "%ld failures without a message; %ld loads refused with an error, %ld ran, "
      "%ld runs failed with an error\n",
      files, (unsigned long long)seed, tu_nbackends(), signals, silent, rejected, ran, run_errors);
  tu_rm_tree(g_dir);
  assert_int_equal(signals, 0);
  assert_int_equal(silent, 0);
}

int main(int argc, char **argv) {
  if (argc >= 3 && strcmp(argv[1], "--child") == 0) return child_main(argv[2]);
  if (argc >= 3 && strcmp(argv[1], "--files") == 0) g_files = strtol(argv[2], NULL, 10);
  if (argc >= 3 && strcmp(argv[1], "--save") == 0) { /* the originals under ref (fuzz seeds) */
    lt__backend_force(&lt__ref_backend);
    for (int p = 0; p < kNPrograms; p++) {
      char path[512];
      snprintf(path, sizeof path, "%s/%s_ref.ltp", argv[2], kPrograms[p].name);
      kPrograms[p].save(path);
    }
    return 0;
  }
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_sweep)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
