/* IDX reader and batch iterator, on small files the test writes with zlib. */
#include <unistd.h>
#include <zlib.h>

#include "test_util.h"
#include "lazytensor_nn.h"

static char g_dir[64];

static void path_of(char *buf, size_t n, const char *name) {
  snprintf(buf, n, "%s/%s", g_dir, name);
}

/* An IDX file: header (type, dims) and `bytes` data bytes (value i % 251,
 * or i for labels when index_labels), gzip'd or plain. */
static void write_idx(const char *name, bool gz, uint8_t type, int ndim, const uint32_t *dims,
                      int64_t bytes, bool index_labels, const uint8_t *magic_override) {
  char path[128];
  path_of(path, sizeof path, name);
  uint8_t head[4 + 4 * 8] = {0, 0, type, (uint8_t)ndim};
  if (magic_override) memcpy(head, magic_override, 4);
  for (int d = 0; d < ndim; d++) {
    head[4 + 4 * d] = (uint8_t)(dims[d] >> 24);
    head[5 + 4 * d] = (uint8_t)(dims[d] >> 16);
    head[6 + 4 * d] = (uint8_t)(dims[d] >> 8);
    head[7 + 4 * d] = (uint8_t)dims[d];
  }
  uint8_t *data = malloc((size_t)bytes + 1);
  for (int64_t i = 0; i < bytes; i++) data[i] = (uint8_t)(index_labels ? i : i % 251);
  if (gz) {
    gzFile f = gzopen(path, "wb");
    assert_non_null(f);
    gzwrite(f, head, 4 + 4 * ndim);
    if (bytes) gzwrite(f, data, (unsigned)bytes);
    gzclose(f);
  } else {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fwrite(head, 1, 4 + 4 * (size_t)ndim, f);
    fwrite(data, 1, (size_t)bytes, f);
    fclose(f);
  }
  free(data);
}

static int group_setup(void **state) {
  (void)state;
  return tu_mkdtemp(g_dir, sizeof g_dir, "lt_test_data_") ? 0 : -1;
}
static int group_teardown(void **state) {
  (void)state;
  return tu_rm_tree(g_dir);
}

static int setup(void **state) {
  lt_wait_device_ops(CPU0);
  return tu_setup(state);
}
#define DTEST(f) cmocka_unit_test_setup_teardown(f, setup, tu_teardown_wait)

static void expect_idx_error(const char *name, const char *needle) {
  char path[128];
  path_of(path, sizeof path, name);
  lt_nn_idx x;
  assert_int_equal(lt_nn_idx_read(path, &x), LT_EINVAL);
  if (!strstr(lt_last_error(), needle))
    fail_msg("message '%s' lacks '%s'", lt_last_error(), needle);
  assert_non_null(strstr(lt_last_error(), path));
  assert_null(x.data);
}

static void test_idx_good_gz_and_plain(void **state) {
  (void)state;
  for (int gz = 0; gz < 2; gz++) {
    write_idx("good.idx", gz, 0x08, 3, (uint32_t[]){5, 2, 3}, 30, false, NULL);
    char path[128];
    path_of(path, sizeof path, "good.idx");
    lt_nn_idx x;
    assert_int_equal(lt_nn_idx_read(path, &x), LT_OK);
    assert_int_equal(x.ndim, 3);
    assert_int_equal(x.dims[0], 5);
    assert_int_equal(x.dims[1], 2);
    assert_int_equal(x.dims[2], 3);
    assert_int_equal(x.size, 30);
    for (int i = 0; i < 30; i++) assert_int_equal(x.data[i], i);
    lt_nn_idx_free(&x);
    assert_null(x.data);
  }
}

static void test_idx_errors(void **state) {
  (void)state;
  expect_idx_error("missing.idx", "cannot open");
  write_idx("trunc.idx", true, 0x08, 3, (uint32_t[]){5, 2, 3}, 29, false, NULL);
  expect_idx_error("trunc.idx", "truncated: 29 of the 30");
  write_idx("trunchead.idx", true, 0x08, 3, (uint32_t[]){5, 2, 3}, 0, false, NULL);
  char path[128];
  path_of(path, sizeof path, "short.idx");
  FILE *f = fopen(path, "wb");
  fputs("\x00\x00", f);
  fclose(f);
  expect_idx_error("short.idx", "truncated");
  write_idx("magic.idx", true, 0x08, 1, (uint32_t[]){4}, 4, false, (const uint8_t[]){8, 3, 0, 0});
  expect_idx_error("magic.idx", "not an IDX file");
  write_idx("type.idx", true, 0x0D, 1, (uint32_t[]){4}, 16, false, NULL);
  expect_idx_error("type.idx", "0x0d");
  write_idx("long.idx", true, 0x08, 1, (uint32_t[]){4}, 5, false, NULL);
  expect_idx_error("long.idx", "wrong size");
  /* a corrupt gzip stream */
  path_of(path, sizeof path, "corrupt.idx");
  f = fopen(path, "wb");
  const uint8_t junk[] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 0xff, 0xff, 0xff, 0xff, 0xff};
  fwrite(junk, 1, sizeof junk, f);
  fclose(f);
  lt_nn_idx x;
  assert_int_equal(lt_nn_idx_read(path, &x), LT_EINVAL);
}

static void load_set(int n, int labels_n, lt_nn_dataset *ds, int expect) {
  write_idx("img.idx.gz", true, 0x08, 3, (uint32_t[]){(uint32_t)n, 2, 2}, 4 * n, false, NULL);
  write_idx("lab.idx.gz", true, 0x08, 1, (uint32_t[]){(uint32_t)labels_n}, labels_n, true, NULL);
  char a[128], b[128];
  path_of(a, sizeof a, "img.idx.gz");
  path_of(b, sizeof b, "lab.idx.gz");
  assert_int_equal(lt_nn_dataset_load(a, b, ds), expect);
}

static void test_dataset_and_wrong_count(void **state) {
  (void)state;
  lt_nn_dataset ds;
  load_set(6, 5, &ds, LT_EINVAL);
  assert_non_null(strstr(lt_last_error(), "holds 6 images but"));
  assert_non_null(strstr(lt_last_error(), "5 labels"));
  load_set(6, 6, &ds, LT_OK);
  assert_int_equal(ds.n, 6);
  assert_int_equal(ds.features, 4);
  assert_int_equal(ds.num_classes, 6);
  assert_int_equal(ds.labels[5], 5);
  /* images scaled to [0, 1] (x / 255); rows past the end are zero padding */
  lt_tensor *im = lt_nn_dataset_images(&ds, CPU0, 4, 3);
  tu_expect(im, LT_F32, SHAPE(3, 4), 2,
            (double[]){16 / 255.0, 17 / 255.0, 18 / 255.0, 19 / 255.0, 20 / 255.0, 21 / 255.0,
                       22 / 255.0, 23 / 255.0, 0, 0, 0, 0},
            1e-7);
  TU_EXPECT_ERROR(lt_nn_dataset_images(&ds, CPU0, 7, 1), LT_EINVAL, "outside");
  /* images file with 2 dims */
  write_idx("flat.idx", true, 0x08, 2, (uint32_t[]){6, 4}, 24, false, NULL);
  char a[128], b[128];
  path_of(a, sizeof a, "flat.idx");
  path_of(b, sizeof b, "lab.idx.gz");
  lt_nn_dataset bad;
  assert_int_equal(lt_nn_dataset_load(a, b, &bad), LT_EINVAL);
  assert_non_null(strstr(lt_last_error(), "images need 3"));
  lt_nn_dataset_free(&ds);
  lt_nn_dataset_free(&bad);
}

/* Runs one epoch; checks that the batches follow the order, cover every
 * sample once except the dropped tail; returns the order in order_out. */
static void one_epoch(lt_nn_loader *l, const lt_nn_dataset *ds, int64_t batch, int64_t *order_out) {
  int64_t nb = lt_nn_loader_epoch(l);
  assert_int_equal(nb, ds->n / batch);
  const int64_t *order = lt_nn_loader_order(l);
  assert_non_null(order);
  memcpy(order_out, order, (size_t)ds->n * sizeof(int64_t));
  int seen[64] = {0};
  for (int64_t i = 0; i < ds->n; i++) seen[order[i]]++;
  for (int64_t i = 0; i < ds->n; i++) assert_int_equal(seen[i], 1); /* a permutation */
  int64_t got = 0;
  for (;;) {
    lt_scope_begin();
    lt_tensor *x, *y;
    int rc = lt_nn_loader_next(l, &x, &y);
    assert_true(rc >= 0);
    if (rc == 0) {
      assert_null(x);
      lt_scope_end();
      break;
    }
    assert_int_equal(lt_dim(x, 0), batch);
    assert_int_equal(lt_dim(x, 1), ds->features);
    assert_int_equal(lt_get_dtype(y), LT_I64);
    double lab[64], img[64 * 4];
    tu_read(y, lab, batch);
    tu_read(x, img, batch * 4);
    for (int64_t r = 0; r < batch; r++) {
      int64_t idx = order[got + r];
      assert_int_equal((int64_t)lab[r], idx); /* labels are the sample index here */
      assert_true(fabs(img[r * 4] - (double)((idx * 4) % 251) / 255.0) < 1e-7);
    }
    got += batch;
    lt_scope_end();
  }
  assert_int_equal(got, nb * batch); /* the partial batch was dropped */
}

static void test_loader_epochs(void **state) {
  (void)state;
  enum { N = 23, B = 5 };
  lt_nn_dataset ds;
  load_set(N, N, &ds, LT_OK);
  int64_t e1[N], e2[N], e3[N], r1[N], r2[N];
  /* drawn per epoch (a step barrier each) */
  lt_set_seed(CPU0, 42);
  lt_nn_loader *l = lt_nn_loader_create(&ds, CPU0, B, true);
  assert_non_null(l);
  assert_null(lt_nn_loader_order(l));
  lt_tensor *x, *y;
  assert_int_equal(lt_nn_loader_next(l, &x, &y), LT_EINVAL);
  one_epoch(l, &ds, B, e1);
  one_epoch(l, &ds, B, e2);
  assert_memory_not_equal(e1, e2, sizeof e1);
  lt_nn_loader_free(l);
  /* same seed: same orders */
  lt_set_seed(CPU0, 42);
  l = lt_nn_loader_create(&ds, CPU0, B, true);
  one_epoch(l, &ds, B, r1);
  one_epoch(l, &ds, B, r2);
  assert_memory_equal(e1, r1, sizeof e1);
  assert_memory_equal(e2, r2, sizeof e2);
  lt_nn_loader_free(l);
  /* drawn ahead with the next barrier (one graph for every epoch) */
  lt_set_seed(CPU0, 42);
  lt_counters_reset();
  l = lt_nn_loader_create(&ds, CPU0, B, true);
  assert_int_equal(lt_nn_loader_shuffle_ahead(l, 3), LT_OK);
  assert_int_equal(lt_mark_step(CPU0), LT_OK);
  assert_int_equal(lt_wait_device_ops(CPU0), LT_OK);
  assert_int_equal(tu_counter("ExecuteComputation"), 1);
  one_epoch(l, &ds, B, r1);
  one_epoch(l, &ds, B, r2);
  one_epoch(l, &ds, B, e3);
  assert_int_equal(tu_counter("ExecuteComputation"), 1);
  assert_memory_not_equal(r1, r2, sizeof r1);
  assert_memory_not_equal(r2, e3, sizeof r1);
  one_epoch(l, &ds, B, e3); /* past the planned ones: drawn on demand */
  lt_nn_loader_free(l);
  /* without shuffle: in order */
  l = lt_nn_loader_create(&ds, CPU0, B, false);
  one_epoch(l, &ds, B, r1);
  for (int i = 0; i < N; i++) assert_int_equal(r1[i], i);
  lt_nn_loader_free(l);
  assert_null(lt_nn_loader_create(&ds, CPU0, N + 1, true));
  assert_non_null(strstr(lt_last_error(), "batch"));
  lt_nn_dataset_free(&ds);
}

static void test_fashion_mnist_if_installed(void **state) {
  (void)state;
  if (access(LT_NN_FASHION_MNIST_DIR "/t10k-labels-idx1-ubyte.gz", R_OK) != 0) {
    printf("# %s absent: skipped\n", LT_NN_FASHION_MNIST_DIR);
    return;
  }
  lt_nn_dataset ds;
  if (lt_nn_fashion_mnist(NULL, false, &ds) != LT_OK) fail_msg("%s", lt_last_error());
  assert_int_equal(ds.n, 10000);
  assert_int_equal(ds.rows, 28);
  assert_int_equal(ds.cols, 28);
  assert_int_equal(ds.num_classes, 10);
  lt_nn_dataset_free(&ds);
  assert_int_equal(lt_nn_fashion_mnist("/nonexistent", true, &ds), LT_EINVAL);
  assert_non_null(strstr(lt_last_error(), "/nonexistent/train-images-idx3-ubyte.gz"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      DTEST(test_idx_good_gz_and_plain),      DTEST(test_idx_errors),
      DTEST(test_dataset_and_wrong_count),    DTEST(test_loader_epochs),
      DTEST(test_fashion_mnist_if_installed),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
