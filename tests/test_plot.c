/* lazytensor-train's --log CSV and --plot PNG (tools/train/runlog.c, plot.c):
 * a log written and read back; a known log rendered, the PNG read back with
 * cairo, its size checked and the curves' colours looked up at the pixels
 * the data maps to (and not elsewhere); bad input reported, not crashed on. */
#include <cairo.h>
#include <fontconfig/fontconfig.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "runlog.h"

static char g_dir[64];

static const char *tmp_path(const char *name) {
  static char buf[4][128];
  static int k;
  k = (k + 1) % 4;
  snprintf(buf[k], sizeof buf[k], "%s/%s", g_dir, name);
  return buf[k];
}

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

/* The pixel's colour at (x, y) as 0xRRGGBB. */
static int pixel(cairo_surface_t *s, double x, double y) {
  int ix = (int)floor(x), iy = (int)floor(y);
  assert_true(ix >= 0 && iy >= 0 && ix < cairo_image_surface_get_width(s) &&
              iy < cairo_image_surface_get_height(s));
  const unsigned char *row =
      cairo_image_surface_get_data(s) + (size_t)iy * (size_t)cairo_image_surface_get_stride(s);
  uint32_t v;
  memcpy(&v, row + 4 * ix, 4);
  return (int)(v & 0xffffff);
}

static bool near_rgb(int a, int b, int tol) {
  for (int sh = 0; sh <= 16; sh += 8)
    if (abs(((a >> sh) & 255) - ((b >> sh) & 255)) > tol) return false;
  return true;
}

/* Pixels of the metric's colour (red over the white background, at any
 * antialiasing coverage over a half) in the box [x0, x1) x [y0, y1). */
static int reddish_pixels(cairo_surface_t *s, double x0, double x1, double y0, double y1) {
  int n = 0;
  for (double y = y0; y < y1; y++)
    for (double x = x0; x < x1; x++) {
      int c = pixel(s, x, y), r = (c >> 16) & 255, g = (c >> 8) & 255, b = c & 255;
      n += r - g > 80 && r - b > 80;
    }
  return n;
}

static void test_log_roundtrip(void **state) {
  (void)state;
  runlog l;
  const char *p = tmp_path("rt.csv");
  assert_int_equal(runlog_open(&l, p, "test_acc"), 0);
  assert_int_equal(runlog_row(&l, 100, 1, 0.75, 1e-3, 42.5, NAN), 0);
  assert_int_equal(runlog_row(&l, 468, 1, 0.5, 5e-4, 40, 0.8512), 0);
  assert_int_equal(runlog_close(&l), 0);
  FILE *f = fopen(p, "r");
  char text[256] = {0};
  assert_true(fread(text, 1, sizeof text - 1, f) > 0);
  fclose(f);
  assert_string_equal(text,
                      "step,epoch,loss,lr,steps_per_s,test_acc\n"
                      "100,1,0.75,0.001,42.5,\n"
                      "468,1,0.5,0.0005,40,0.8512\n");
  runlog_data d;
  char err[256];
  assert_int_equal(runlog_read(p, &d, err, sizeof err), 0);
  assert_int_equal(d.n, 2);
  assert_true(d.metric_is_acc);
  assert_true(d.step[1] == 468 && d.loss[0] == 0.75 && d.lr[1] == 5e-4 && d.rate[0] == 42.5);
  assert_true(isnan(d.metric[0]) && d.metric[1] == 0.8512);
  runlog_data_free(&d);
}

/* A known accuracy log: loss falls 2.0 -> 0.4 over 400 steps, accuracy per
 * "epoch" at steps 200 and 400. */
static const char kAccLog[] =
    "step,epoch,loss,lr,steps_per_s,test_acc\n"
    "50,1,2.0,0.001,100,\n"
    "100,1,1.2,0.001,100,\n"
    "150,1,0.9,0.001,100,\n"
    "200,1,0.8,0.001,100,0.6\n"
    "300,2,0.6,0.0005,100,\n"
    "400,2,0.4,0.0001,100,0.9\n";

static void test_plot_accuracy(void **state) {
  (void)state;
  const char *csv = tmp_path("acc.csv"), *png = tmp_path("acc.png");
  write_file(csv, kAccLog);
  plot_layout p;
  char err[256];
  assert_int_equal(plot_render(csv, png, 640, 400, &p, err, sizeof err), 0);
  cairo_surface_t *s = cairo_image_surface_create_from_png(png);
  assert_int_equal(cairo_surface_status(s), CAIRO_STATUS_SUCCESS);
  assert_int_equal(cairo_image_surface_get_width(s), 640);
  assert_int_equal(cairo_image_surface_get_height(s), 400);
  /* the axes: steps 0..400 (a nice tick at 400), loss 0..2.5 at least, accuracy 0..1 */
  assert_true(p.step_min == 0 && p.step_max == 400);
  assert_true(p.loss_min == 0 && p.loss_max > 2.0 && p.loss_max <= 3.0);
  assert_true(p.acc_min == 0 && p.acc_max == 1);
  assert_true(p.x0 > 0 && p.x1 < 640 && p.y0 > 0 && p.y1 < 400);
  /* the loss curve passes through each of its points */
  const double steps[] = {50, 100, 150, 200, 300, 400}, loss[] = {2.0, 1.2, 0.9, 0.8, 0.6, 0.4};
  for (int i = 0; i < 6; i++) {
    int c = pixel(s, plot_map_x(&p, steps[i]), plot_map_loss(&p, loss[i]));
    assert_true(near_rgb(c, PLOT_LOSS_RGB, 40));
  }
  /* half way between two points, on the segment */
  assert_true(near_rgb(pixel(s, plot_map_x(&p, 250), plot_map_loss(&p, 0.7)), PLOT_LOSS_RGB, 40));
  /* the accuracy markers, on the right axis */
  assert_true(near_rgb(pixel(s, plot_map_x(&p, 200), plot_map_acc(&p, 0.6)), PLOT_METRIC_RGB, 40));
  assert_true(near_rgb(pixel(s, plot_map_x(&p, 400), plot_map_acc(&p, 0.9)), PLOT_METRIC_RGB, 40));
  /* and not where the data is not: the loss at step 100 is 1.2, not 0.3 */
  int off = pixel(s, plot_map_x(&p, 100), plot_map_loss(&p, 0.3));
  assert_false(near_rgb(off, PLOT_LOSS_RGB, 60));
  assert_false(near_rgb(off, PLOT_METRIC_RGB, 60));
  /* the accuracy is not on the loss axis: 0.6 as a loss at step 200 is empty */
  assert_false(
      near_rgb(pixel(s, plot_map_x(&p, 200), plot_map_loss(&p, 0.1)), PLOT_METRIC_RGB, 60));
  /* each evaluation point is labelled by its value, above its marker: the
   * label's left half (no curve passes there: the accuracy starts at this
   * point and rises to the right) holds text in the metric's colour */
  assert_int_equal(p.labels, 2);
  double lx = plot_map_x(&p, 200), ly = plot_map_acc(&p, 0.6);
  assert_true(reddish_pixels(s, lx - 16, lx - 2, ly - PLOT_LABEL_GAP - 9, ly - PLOT_LABEL_GAP) >=
              3);
  /* and nothing reddish where no label is: the same box above the loss curve's start */
  double nx = plot_map_x(&p, 100), ny = plot_map_acc(&p, 0.3);
  assert_int_equal(reddish_pixels(s, nx - 16, nx - 2, ny - PLOT_LABEL_GAP - 9, ny - PLOT_LABEL_GAP),
                   0);
  cairo_surface_destroy(s);
}

/* The GPT's log: validation loss shares the loss axis. */
static void test_plot_val_loss(void **state) {
  (void)state;
  const char *csv = tmp_path("gpt.csv"), *png = tmp_path("gpt.png");
  write_file(csv,
             "step,epoch,loss,lr,steps_per_s,val_loss\n"
             "100,1,3.0,0.001,10,\n"
             "200,1,2.5,0.001,10,2.8\n"
             "300,1,2.0,0.001,10,\n"
             "400,1,1.5,0.0001,10,2.2\n");
  plot_layout p;
  char err[256];
  assert_int_equal(plot_render(csv, png, 800, 500, &p, err, sizeof err), 0);
  cairo_surface_t *s = cairo_image_surface_create_from_png(png);
  assert_int_equal(cairo_image_surface_get_width(s), 800);
  assert_int_equal(cairo_image_surface_get_height(s), 500);
  assert_true(p.loss_max >= 3.0 && p.loss_max <= 4.0);
  assert_true(near_rgb(pixel(s, plot_map_x(&p, 300), plot_map_loss(&p, 2.0)), PLOT_LOSS_RGB, 40));
  assert_true(near_rgb(pixel(s, plot_map_x(&p, 200), plot_map_loss(&p, 2.8)), PLOT_METRIC_RGB, 40));
  /* between the validation points (200, 2.8) and (400, 2.2): (300, 2.5) */
  assert_true(near_rgb(pixel(s, plot_map_x(&p, 300), plot_map_loss(&p, 2.5)), PLOT_METRIC_RGB, 40));
  assert_int_equal(p.labels, 2); /* the two validation points */
  cairo_surface_destroy(s);
}

static void test_plot_errors(void **state) {
  (void)state;
  char err[256];
  plot_layout p;
  const char *png = tmp_path("bad.png");
  err[0] = 0;
  assert_int_equal(plot_render(tmp_path("missing.csv"), png, 640, 400, &p, err, sizeof err), -1);
  assert_non_null(strstr(err, "missing.csv"));
  const char *bad = tmp_path("bad.csv");
  write_file(bad, "a,b,c\n1,2,3\n");
  assert_int_equal(plot_render(bad, png, 640, 400, &p, err, sizeof err), -1);
  assert_non_null(strstr(err, "not a lazytensor-train log"));
  write_file(bad, "step,epoch,loss,lr,steps_per_s,test_acc\n1,1,x,0.1,1,\n");
  assert_int_equal(plot_render(bad, png, 640, 400, &p, err, sizeof err), -1);
  assert_non_null(strstr(err, "line 2"));
  write_file(bad, kAccLog);
  assert_int_equal(plot_render(bad, png, 10, 10, &p, err, sizeof err), -1);
  assert_non_null(strstr(err, "out of range"));
  /* an unwritable PNG path */
  assert_int_equal(plot_render(bad, "/nonexistent-dir/x.png", 640, 400, &p, err, sizeof err), -1);
  /* a log with a header only still draws (empty axes) */
  write_file(bad, "step,epoch,loss,lr,steps_per_s,test_acc\n");
  assert_int_equal(plot_render(bad, png, 640, 400, &p, err, sizeof err), 0);
}

static int setup(void **state) {
  (void)state;
  snprintf(g_dir, sizeof g_dir, "/tmp/lt_test_plot_XXXXXX");
  return mkdtemp(g_dir) ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  const char *names[] = {"rt.csv",  "acc.csv", "acc.png", "gpt.csv",
                         "gpt.png", "bad.csv", "bad.png"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) unlink(tmp_path(names[i]));
  rmdir(g_dir);
  /* cairo's and fontconfig's caches, so that valgrind and LeakSanitizer see no leak */
  cairo_debug_reset_static_data();
  FcFini();
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_log_roundtrip),
      cmocka_unit_test(test_plot_accuracy),
      cmocka_unit_test(test_plot_val_loss),
      cmocka_unit_test(test_plot_errors),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
