/* The training driver that lazytensor-train's commands share: train.c (the
 * MLP and the CNN on Fashion-MNIST) and train_gpt.c (the GPT on fortunes).
 * A command parses its own options, builds its model and traces its step;
 * the driver holds the rest:
 *  - the options both take (driver_opts: --seed, --log-every, --threads,
 *    --backend, --data, --save, --cache-dir, --log, --plot, --precision,
 *    --keep-denormals) and the process set-up they ask for;
 *  - the step: the loss traced into a running sum on the device (a new 0-d
 *    tensor per step, never read inside the step), the step barrier;
 *  - the windows of progress lines and log rows (mean loss and step rate
 *    since the last one), and how often the log takes a row;
 *  - the failure message and the summary lines of a run. */
#ifndef LT_TRAIN_DRIVER_H
#define LT_TRAIN_DRIVER_H

#include <stdbool.h>
#include <stdint.h>

#include "lazytensor.h"

/* The options both commands take. */
typedef struct driver_opts {
  int64_t log_every; /* 0: the command's default */
  uint64_t seed;
  bool keep_denormals;
  const char *threads, *backend, *data, *save, *cache_dir, *log_path, *plot_path;
  lt_dtype precision; /* --precision: LT_F32 (0: not given) or LT_BF16 (autocast) */
} driver_opts;

/* Whether name (e.g. "--seed") is one of driver_opts' options taking a
 * value; when it is, val is parsed into o and *ok says whether it was good. */
bool driver_parse_option(driver_opts *o, const char *name, const char *val, bool *ok);

/* Before the library's first use: flushes denormals to zero (FTZ/DAZ, unless
 * --keep-denormals) in this thread, which the library's threads inherit, sets
 * LT_NUM_THREADS and LT_BACKEND, opens the persistent cache, and seeds the
 * device. 0, or 1 after a message (the exit status). */
int driver_setup(const driver_opts *o, lt_device *dev);

/* The backend and thread count a run reports ("default" when unset). */
const char *driver_backend_name(void);
/* "f32", or "bf16 (autocast, products on <the ISA lt_get_isa names>)". */
const char *driver_precision_name(const driver_opts *o, lt_device dev);
const char *driver_threads_name(void);

/* "lazytensor-train: what: <the library's last error>" on stderr; 1. */
int driver_fail(const char *what);

/* The running sum of the training loss: acc through the last step, prev
 * through the step before it (which lt_mark_step has waited for, so reading
 * it costs no overlap). */
typedef struct driver_loss {
  lt_device dev;
  lt_tensor *acc, *prev;
} driver_loss;

/* acc = 0 (uploaded with the next step barrier). 0, or 1 after a message
 * naming what (the caller's stage). */
int driver_loss_init(driver_loss *l, lt_device dev, const char *what);
void driver_loss_free(driver_loss *l);

/* One training step: in a scope, trace(ctx) gives the step's loss (NULL on
 * failure), which is added to the running sum; then the step barrier.
 * 0, or 1 after a message. */
int driver_step(driver_loss *l, lt_tensor *(*trace)(void *ctx), void *ctx);

/* driver_loss_init and driver_step's trace (no step barrier) without the
 * message: a status, with lt_last_error() set on failure. For the replicas
 * of a data-parallel world, whose failure lt_world_run's caller reports
 * once, with its rank. */
int driver_loss_begin(driver_loss *l, lt_device dev);
int driver_trace_step(driver_loss *l, lt_tensor *(*trace)(void *ctx), void *ctx);

/* The steps a run of epochs x per_epoch steps takes, at most limit (0: no
 * limit): the cosine schedule's length. */
int64_t driver_planned_steps(int64_t epochs, int64_t per_epoch, int64_t limit);
/* The learning rate of step `step` (from 0) of `steps` under the cosine
 * schedule: it falls from lr to 0 along a half cosine. */
double driver_cosine_lr(double lr, int64_t step, int64_t steps);

/* The value of a running sum (prev or acc). 0, or 1 after a message. */
int driver_read_sum(lt_tensor *sum, double *out);

/* A window of steps since the last progress line or log row. */
typedef struct driver_window {
  int64_t step; /* steps summed in sum */
  double sum;
  int64_t done; /* steps done when t was taken (the rate's count) */
  double t;
} driver_window;

/* The mean loss of the steps since w (step steps summed in sum), NAN when
 * there are none. */
double driver_window_loss(const driver_window *w, int64_t step, double sum);
/* Steps per second since w, done steps done at time t. */
double driver_window_rate(const driver_window *w, int64_t done, double t);

/* Points the log's curves get per run of `steps` steps (at least). */
enum { DRIVER_LOG_POINTS = 50 };
/* Steps between the log's rows over a run (or epoch) of steps steps: a row
 * every max(1, steps / DRIVER_LOG_POINTS), so the curve has about
 * DRIVER_LOG_POINTS points however long the run and the file stays small. */
int64_t driver_log_every(int64_t steps);

/* The summary lines of compiles and of the time spent tracing, waiting for
 * the device's lock, compiling and executing. */
void driver_print_summary(void);

#endif
