/* Threads: (a) two devices (CPU:2, CPU:3) traced from two threads at once,
 * each training its own tiny model with lt_mark_step on its own device; (b)
 * one device (CPU:0) driven from four threads, each training its own model and
 * syncing only its own tensors (lt_sync of its parameters and loss: lt_mark_step
 * would sync the other threads' half-traced tensors too, and is not for
 * concurrent use). The ref backend is deterministic: the parameters after the
 * threaded runs must equal those of the same runs made one after another. */
#include <pthread.h>

#include "test_util.h"
#include "lazytensor_nn.h"

enum { IN = 6, HID = 8, OUT = 3, BATCH = 8, STEPS = 25, NPARAM = 4 };
enum { NVALUES = IN * HID + HID + HID * OUT + OUT };

typedef struct job {
  int id;          /* seeds the data and the initial values */
  lt_device dev;   /* where the model lives */
  bool mark_step;  /* true: lt_mark_step(dev); false: lt_sync of its own tensors */
  double momentum; /* SGD momentum (needs lt_mark_step: its state is not reachable) */
  bool manual;     /* gradients written out by hand instead of lt_backward */
  float out[NVALUES];
  float loss;
  int rc;
  char err[256];
} job;

static uint32_t next(uint32_t *s) {
  *s = *s * 1664525u + 1013904223u;
  return *s >> 8;
}

static float uniform(uint32_t *s) { return (float)(next(s) & 0xffff) / 65536.0f - 0.5f; }

/* A layer from host values (not from the device's RNG, which threads share). */
static int layer(lt_nn_linear *l, lt_device dev, int64_t in, int64_t out, uint32_t *s) {
  float w[IN * HID > HID * OUT ? IN * HID : HID * OUT], b[HID];
  for (int64_t i = 0; i < in * out; i++) w[i] = uniform(s);
  for (int64_t i = 0; i < out; i++) b[i] = uniform(s) * 0.1f;
  l->in = in;
  l->out = out;
  l->weight = lt_from_data(dev, LT_F32, (int64_t[]){in, out}, 2, w);
  l->bias = lt_from_data(dev, LT_F32, &out, 1, b);
  if (!l->weight || !l->bias) return lt_last_status();
  int rc = lt_set_requires_grad(l->weight, true);
  return rc ? rc : lt_set_requires_grad(l->bias, true);
}

/* The MLP's gradients by hand (mean cross-entropy): no autograd involved. */
static int manual_grads(const lt_nn_linear *l2, lt_tensor *x, lt_tensor *y, lt_tensor *h,
                        lt_tensor *logits, lt_nn_optim *opt) {
  lt_tensor *d = lt_div(lt_sub(lt_softmax(logits, 1), lt_one_hot(y, OUT, LT_F32)),
                        lt_scalar(lt_get_device(x), LT_F32, BATCH));
  lt_tensor *dh = lt_mul(lt_matmul(d, lt_transpose(l2->weight, 0, 1)),
                         lt_cast(lt_gt(h, lt_scalar(lt_get_device(x), LT_F32, 0)), LT_F32));
  lt_tensor *g[NPARAM] = {lt_matmul(lt_transpose(x, 0, 1), dh), lt_sum(dh, (int[]){0}, 1, false),
                          lt_matmul(lt_transpose(h, 0, 1), d), lt_sum(d, (int[]){0}, 1, false)};
  for (int i = 0; i < NPARAM; i++)
    if (!g[i]) return lt_last_status();
  return lt_nn_optim_step_grads(opt, g);
}

#define CHECK(expr)                                                             \
  do {                                                                          \
    if ((rc = (expr)) != LT_OK) {                                               \
      snprintf(j->err, sizeof j->err, "%s: %d %s", #expr, rc, lt_last_error()); \
      goto out;                                                                 \
    }                                                                           \
  } while (0)

static void *train(void *arg) {
  job *j = arg;
  int rc = LT_OK;
  uint32_t s = 1000u + 77u * (uint32_t)j->id;
  lt_nn_linear l1 = {0}, l2 = {0};
  lt_nn_optim *opt = NULL;
  CHECK(layer(&l1, j->dev, IN, HID, &s));
  CHECK(layer(&l2, j->dev, HID, OUT, &s));
  lt_tensor *params[NPARAM] = {l1.weight, l1.bias, l2.weight, l2.bias};
  lt_nn_optim_config cfg = lt_nn_optim_defaults(LT_NN_SGD);
  cfg.lr = 0.05;
  cfg.momentum = j->momentum;
  opt = lt_nn_optim_create(&cfg, params, NPARAM);
  if (!opt) CHECK(lt_last_status());
  float x[BATCH * IN];
  int64_t y[BATCH];
  for (int step = 0; step < STEPS; step++) {
    for (int i = 0; i < BATCH * IN; i++) x[i] = uniform(&s);
    for (int i = 0; i < BATCH; i++) y[i] = next(&s) % OUT;
    lt_scope_begin();
    lt_tensor *xt = lt_from_data(j->dev, LT_F32, SHAPE(BATCH, IN), 2, x);
    lt_tensor *yt = lt_from_data(j->dev, LT_I64, SHAPE(BATCH), 1, y);
    lt_tensor *h = lt_nn_relu(lt_nn_linear_forward(&l1, xt));
    lt_tensor *logits = lt_nn_linear_forward(&l2, h);
    lt_tensor *loss = lt_nn_cross_entropy(logits, yt);
    rc = loss ? LT_OK : lt_last_status();
    if (rc == LT_OK && j->manual) rc = manual_grads(&l2, xt, yt, h, logits, opt);
    if (rc == LT_OK && !j->manual) rc = lt_backward(loss);
    if (rc == LT_OK && !j->manual) rc = lt_nn_optim_step(opt);
    if (rc == LT_OK && j->mark_step) rc = lt_mark_step(j->dev);
    if (rc == LT_OK && !j->mark_step) {
      lt_tensor *mine[NPARAM + 1] = {params[0], params[1], params[2], params[3], loss};
      rc = lt_sync(mine, NPARAM + 1, true);
    }
    if (rc == LT_OK && step % 5 == 4) rc = lt_to_data(loss, &j->loss, sizeof j->loss);
    if (rc != LT_OK) snprintf(j->err, sizeof j->err, "step %d: %d %s", step, rc, lt_last_error());
    lt_scope_end();
    if (rc != LT_OK) goto out;
  }
  if (j->mark_step) CHECK(lt_wait_device_ops(j->dev));
  int64_t off = 0;
  for (int i = 0; i < NPARAM; i++) {
    int64_t n = lt_numel(params[i]);
    CHECK(lt_to_data(params[i], j->out + off, (size_t)n * sizeof(float)));
    off += n;
  }
out:
  j->rc = rc;
  lt_nn_optim_free(opt);
  lt_nn_linear_free(&l1);
  lt_nn_linear_free(&l2);
  return NULL;
}

static void run_jobs(job *jobs, int n, bool threaded) {
  if (threaded) {
    pthread_t th[8];
    for (int i = 0; i < n; i++) assert_int_equal(pthread_create(&th[i], NULL, train, &jobs[i]), 0);
    for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
  } else {
    for (int i = 0; i < n; i++) train(&jobs[i]);
  }
  for (int i = 0; i < n; i++)
    if (jobs[i].rc != LT_OK)
      fail_msg("job %d (%s): %s", i, threaded ? "threaded" : "serial", jobs[i].err);
}

static void compare(const job *serial, const job *threaded, int n) {
  for (int i = 0; i < n; i++) {
    if (memcmp(serial[i].out, threaded[i].out, sizeof serial[i].out) != 0)
      fail_msg("job %d: the threaded run's parameters differ from the serial run's", i);
    assert_true(serial[i].loss == threaded[i].loss);
    for (int k = 0; k < i; k++) /* the jobs differ from each other: the check means something */
      assert_true(memcmp(serial[i].out, serial[k].out, sizeof serial[i].out) != 0);
  }
}

static void test_two_devices_two_threads(void **state) {
  (void)state;
  job serial[2], threaded[2];
  for (int i = 0; i < 2; i++) {
    serial[i] = (job){.id = i, .dev = lt_cpu(2 + i), .mark_step = true, .momentum = 0.9};
    threaded[i] = serial[i];
  }
  run_jobs(serial, 2, false);
  lt_cache_clear(); /* the threaded run compiles concurrently too */
  run_jobs(threaded, 2, true);
  compare(serial, threaded, 2);
  printf("threads: 2 devices x 1 thread, %d steps each: equal to the serial run\n", STEPS);
}

static void one_device_four_threads(bool manual) {
  job serial[4], threaded[4];
  for (int i = 0; i < 4; i++) {
    serial[i] = (job){.id = 10 + i, .dev = lt_cpu(0), .mark_step = false, .manual = manual};
    threaded[i] = serial[i];
  }
  run_jobs(serial, 4, false);
  lt_cache_clear();
  run_jobs(threaded, 4, true);
  compare(serial, threaded, 4);
  assert_int_equal(lt_device_live_tensors(lt_cpu(0)), 0);
  printf("threads: 1 device x 4 threads (%s), %d steps each: equal to the serial run\n",
         manual ? "gradients by hand" : "lt_backward", STEPS);
}

/* The executor alone: each thread writes its gradients out by hand. */
static void test_one_device_four_threads_manual_grads(void **state) {
  (void)state;
  one_device_four_threads(true);
}

/* The same with autograd. */
static void test_one_device_four_threads(void **state) {
  (void)state;
  one_device_four_threads(false);
}

int main(void) {
  setenv("LT_BACKEND", "ref", 0); /* deterministic; LT_BACKEND=cpu runs the same checks there */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_two_devices_two_threads),
      cmocka_unit_test(test_one_device_four_threads_manual_grads),
      cmocka_unit_test(test_one_device_four_threads),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
