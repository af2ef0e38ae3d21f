/* The training log of lazytensor-train (--log FILE.csv) and its plot (--plot
 * FILE.png, plot.c; built only where cairo was found).
 *
 * The CSV: a header line, then one row per logged step. Columns:
 *   step,epoch,loss,lr,steps_per_s,<metric>
 * written by runlog.c's write_header, the one place that names them;
 * docs/TRAINING.md documents each (tests/train_log.sh checks that its header
 * is the one written). <metric> is test_acc (the MLP and the CNN) or val_loss
 * (the GPT). An empty field has no value. */
#ifndef LT_TRAIN_RUNLOG_H
#define LT_TRAIN_RUNLOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct runlog {
  FILE *f;
  char *path;
  const char *opt; /* the option its errors name: "--log", or "--plot" for a temporary log */
  bool temp;       /* a temporary file (--plot without --log), removed by runlog_finish */
} runlog;

/* Opens path (truncating it) and writes the header with metric's name
 * ("test_acc" or "val_loss"). Returns 0, or -1 with a message on stderr. */
int runlog_open(runlog *l, const char *path, const char *metric);
/* The log of a run: log_path when set; else, when png_path is, a temporary
 * file that only the plot reads (runlog_finish removes it); else none (every
 * call is then a no-op). Returns 0, or -1 with a message on stderr naming
 * the option. */
int runlog_start(runlog *l, const char *log_path, const char *png_path, const char *metric);
/* One row; NAN for an empty field. Returns 0, or -1 (write error; stderr). */
int runlog_row(runlog *l, int64_t step, int64_t epoch, double loss, double lr, double rate,
               double metric);
/* Flushes and closes (0, or -1 when a write failed). A closed log is a no-op. */
int runlog_close(runlog *l);

/* A log read back: columns as arrays of n rows (NAN: empty). */
typedef struct runlog_data {
  size_t n;
  double *step, *epoch, *loss, *lr, *rate, *metric;
  bool metric_is_acc; /* the metric column is test_acc (else val_loss) */
} runlog_data;

/* Reads a log written by runlog_*. Returns 0, or -1 with a message in err. */
int runlog_read(const char *path, runlog_data *d, char *err, size_t errlen);
void runlog_data_free(runlog_data *d);

/* Where plot_render put things: the plot area in pixels (x0 left, x1 right,
 * y0 top, y1 bottom) and the data ranges its axes span. The loss axis is on
 * the left; accuracy has its own axis on the right (0 to 1); validation loss
 * shares the loss axis. */
typedef struct plot_layout {
  double x0, x1, y0, y1;
  double step_min, step_max, loss_min, loss_max, acc_min, acc_max;
  int labels; /* evaluation points labelled with their value */
} plot_layout;

/* Pixels between an evaluation point's marker centre and its value's label
 * (above the marker; below it at the top of the plot area). */
enum { PLOT_LABEL_GAP = 8 };

/* The colours of the curves (RGB, 0-255). */
enum { PLOT_LOSS_RGB = 0x1f77b4, PLOT_METRIC_RGB = 0xd62728 };

static inline double plot_map_x(const plot_layout *p, double step) {
  return p->x0 + (step - p->step_min) / (p->step_max - p->step_min) * (p->x1 - p->x0);
}
static inline double plot_map_loss(const plot_layout *p, double loss) {
  return p->y1 - (loss - p->loss_min) / (p->loss_max - p->loss_min) * (p->y1 - p->y0);
}
static inline double plot_map_acc(const plot_layout *p, double acc) {
  return p->y1 - (acc - p->acc_min) / (p->acc_max - p->acc_min) * (p->y1 - p->y0);
}

/* Draws the log at csv_path as a width x height PNG at png_path: loss and
 * the metric against steps, with axes, ticks, labels and a legend. layout
 * (may be NULL) receives the mapping. Returns 0, or -1 with a message in err
 * (also when built without cairo). */
int plot_render(const char *csv_path, const char *png_path, int width, int height,
                plot_layout *layout, char *err, size_t errlen);
/* Gives cairo's and fontconfig's caches back (after the last plot_render of
 * the process), so that leak checkers find nothing of theirs left. */
void plot_release_caches(void);

/* The end of a run (runlog_start): closes the log and, when png_path is
 * set, draws it (900x540) and says where; a temporary log is removed.
 * Returns 0, or -1 (stderr, naming the option). */
int runlog_finish(runlog *l, const char *png_path);

#endif
