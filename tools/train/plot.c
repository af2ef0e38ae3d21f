/* --plot: the training log (runlog.h) drawn with cairo as a PNG: training
 * loss (and the GPT's validation loss) on a left axis, test accuracy on a
 * right axis, against steps; ticks, grid, labels and a legend; each
 * evaluation point carries its value (the test accuracy, or the validation
 * loss) as a label beside its marker. Built only
 * where CMake found cairo (LT_HAVE_CAIRO); runlog.c has the stub otherwise. */
#include <cairo.h>
#include <fontconfig/fontconfig.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "runlog.h"

static void set_rgb(cairo_t *cr, int rgb) {
  cairo_set_source_rgb(cr, ((rgb >> 16) & 255) / 255.0, ((rgb >> 8) & 255) / 255.0,
                       (rgb & 255) / 255.0);
}

/* A "nice" tick spacing (1, 2 or 5 times a power of ten) giving about n ticks. */
static double nice_step(double range, int n) {
  if (!(range > 0)) return 1;
  double raw = range / n, p = pow(10, floor(log10(raw))), f = raw / p;
  return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * p;
}

static void text_at(cairo_t *cr, double x, double y, const char *s, double ax, double ay) {
  cairo_text_extents_t te;
  cairo_text_extents(cr, s, &te);
  cairo_move_to(cr, x - ax * te.width - te.x_bearing, y - ay * te.height - te.y_bearing);
  cairo_show_text(cr, s);
}

/* A polyline through the finite (x, v) points of a series; markers: a dot
 * at each point too (sparse series such as one accuracy per epoch). */
static void series(cairo_t *cr, const plot_layout *p, const runlog_data *d, const double *v,
                   bool acc_axis, int rgb, double width, bool markers) {
  set_rgb(cr, rgb);
  cairo_set_line_width(cr, width);
  cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
  cairo_set_line_cap(cr, CAIRO_LINE_CAP_ROUND);
  bool started = false;
  for (size_t i = 0; i < d->n; i++) {
    if (isnan(v[i])) continue;
    double x = plot_map_x(p, d->step[i]);
    double y = acc_axis ? plot_map_acc(p, v[i]) : plot_map_loss(p, v[i]);
    if (started)
      cairo_line_to(cr, x, y);
    else
      cairo_move_to(cr, x, y);
    started = true;
  }
  cairo_stroke(cr);
  if (!markers) return;
  for (size_t i = 0; i < d->n; i++) {
    if (isnan(v[i])) continue;
    double x = plot_map_x(p, d->step[i]);
    double y = acc_axis ? plot_map_acc(p, v[i]) : plot_map_loss(p, v[i]);
    cairo_arc(cr, x, y, 4, 0, 2 * M_PI);
    cairo_fill(cr);
  }
}

/* Each evaluation point of the metric labelled by its value (accuracy to 4
 * places, validation loss to 3), in the metric's colour, centred above its
 * marker: below it where the label would leave the plot area at the top,
 * and shifted in where it would cross a side. Returns the labels drawn. */
static int label_points(cairo_t *cr, const plot_layout *p, const runlog_data *d) {
  int drawn = 0;
  char buf[32];
  set_rgb(cr, PLOT_METRIC_RGB);
  for (size_t i = 0; i < d->n; i++) {
    if (!isfinite(d->metric[i])) continue;
    snprintf(buf, sizeof buf, d->metric_is_acc ? "%.4f" : "%.3f", d->metric[i]);
    cairo_text_extents_t te;
    cairo_text_extents(cr, buf, &te);
    double x = plot_map_x(p, d->step[i]);
    double y = d->metric_is_acc ? plot_map_acc(p, d->metric[i]) : plot_map_loss(p, d->metric[i]);
    double left = x - te.width / 2;
    if (left + te.width > p->x1 - 2) left = p->x1 - 2 - te.width;
    if (left < p->x0 + 2) left = p->x0 + 2;
    double top = y - PLOT_LABEL_GAP - te.height;
    if (top < p->y0 + 2) top = y + PLOT_LABEL_GAP;
    text_at(cr, left, top, buf, 0, 0);
    drawn++;
  }
  return drawn;
}

int plot_render(const char *csv_path, const char *png_path, int width, int height,
                plot_layout *layout, char *err, size_t errlen) {
  if (width < 200 || height < 150 || width > 8192 || height > 8192) {
    snprintf(err, errlen, "plot size %dx%d out of range (200x150 to 8192x8192)", width, height);
    return -1;
  }
  runlog_data d;
  if (runlog_read(csv_path, &d, err, errlen)) return -1;
  int rc = -1;
  plot_layout p = {70, width - 70.0, 40, height - 55.0, 0, 1, 0, 1, 0, 1, 0};
  /* the ranges: steps from 0, losses from 0 to a tick above the largest */
  double smax = 0, lmax = 0;
  bool any_metric = false;
  for (size_t i = 0; i < d.n; i++) {
    if (d.step[i] > smax) smax = d.step[i];
    if (isfinite(d.loss[i]) && d.loss[i] > lmax) lmax = d.loss[i];
    if (isfinite(d.metric[i])) {
      any_metric = true;
      if (!d.metric_is_acc && d.metric[i] > lmax) lmax = d.metric[i];
    }
  }
  double xs = nice_step(smax > 0 ? smax : 1, 6), ls = nice_step(lmax > 0 ? lmax : 1, 5);
  p.step_max = xs * ceil((smax > 0 ? smax : 1) / xs);
  p.loss_max = ls * ceil((lmax > 0 ? lmax : 1) / ls);
  if (p.loss_max <= lmax) p.loss_max += ls; /* the curve's top stays inside */

  cairo_surface_t *s = cairo_image_surface_create(CAIRO_FORMAT_RGB24, width, height);
  cairo_t *cr = cairo_create(s);
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_paint(cr);
  cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr, 12);

  /* grid and ticks */
  char buf[64];
  cairo_set_line_width(cr, 1);
  for (double t = 0; t <= p.step_max + xs / 2; t += xs) {
    double x = floor(plot_map_x(&p, t)) + 0.5;
    cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
    cairo_move_to(cr, x, p.y0);
    cairo_line_to(cr, x, p.y1);
    cairo_stroke(cr);
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_move_to(cr, x, p.y1);
    cairo_line_to(cr, x, p.y1 + 5);
    cairo_stroke(cr);
    snprintf(buf, sizeof buf, "%g", t);
    text_at(cr, x, p.y1 + 8, buf, 0.5, 0);
  }
  for (double t = 0; t <= p.loss_max + ls / 2; t += ls) {
    double y = floor(plot_map_loss(&p, t)) + 0.5;
    cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
    cairo_move_to(cr, p.x0, y);
    cairo_line_to(cr, p.x1, y);
    cairo_stroke(cr);
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_move_to(cr, p.x0 - 5, y);
    cairo_line_to(cr, p.x0, y);
    cairo_stroke(cr);
    snprintf(buf, sizeof buf, "%g", t);
    text_at(cr, p.x0 - 8, y, buf, 1, 0.5);
  }
  if (d.metric_is_acc) {
    for (int k = 0; k <= 5; k++) {
      double y = floor(plot_map_acc(&p, k / 5.0)) + 0.5;
      cairo_move_to(cr, p.x1, y);
      cairo_line_to(cr, p.x1 + 5, y);
      cairo_stroke(cr);
      snprintf(buf, sizeof buf, "%.1f", k / 5.0);
      text_at(cr, p.x1 + 8, y, buf, 0, 0.5);
    }
  }
  /* the frame */
  cairo_rectangle(cr, floor(p.x0) + 0.5, floor(p.y0) + 0.5, floor(p.x1) - floor(p.x0),
                  floor(p.y1) - floor(p.y0));
  cairo_stroke(cr);
  /* axis labels and title */
  text_at(cr, (p.x0 + p.x1) / 2, height - 6, "step", 0.5, 1);
  cairo_save(cr);
  cairo_translate(cr, 16, (p.y0 + p.y1) / 2);
  cairo_rotate(cr, -M_PI / 2);
  text_at(cr, 0, 0, "loss", 0.5, 0.5);
  cairo_restore(cr);
  if (d.metric_is_acc) {
    cairo_save(cr);
    cairo_translate(cr, width - 14, (p.y0 + p.y1) / 2);
    cairo_rotate(cr, M_PI / 2);
    text_at(cr, 0, 0, "test accuracy", 0.5, 0.5);
    cairo_restore(cr);
  }
  cairo_set_font_size(cr, 14);
  text_at(cr, p.x0, p.y0 - 14, "lazytensor-train", 0, 0.5);
  cairo_set_font_size(cr, 12);

  /* the curves, clipped to the plot area and a marker's radius around it */
  cairo_save(cr);
  cairo_rectangle(cr, p.x0 - 5, p.y0 - 5, p.x1 - p.x0 + 10, p.y1 - p.y0 + 10);
  cairo_clip(cr);
  series(cr, &p, &d, d.loss, false, PLOT_LOSS_RGB, 3, false);
  if (any_metric) series(cr, &p, &d, d.metric, d.metric_is_acc, PLOT_METRIC_RGB, 3, true);
  cairo_restore(cr);
  p.labels = label_points(cr, &p, &d);

  /* the legend, in the top margin on the right, off the curves */
  const char *names[2] = {"training loss", d.metric_is_acc ? "test accuracy" : "validation loss"};
  int colours[2] = {PLOT_LOSS_RGB, PLOT_METRIC_RGB};
  double lx = p.x1;
  for (int k = 1; k >= 0; k--) {
    cairo_text_extents_t te;
    cairo_text_extents(cr, names[k], &te);
    lx -= te.x_advance;
    cairo_set_source_rgb(cr, 0, 0, 0);
    text_at(cr, lx, p.y0 - 14, names[k], 0, 0.5);
    set_rgb(cr, colours[k]);
    cairo_set_line_width(cr, 3);
    cairo_move_to(cr, lx - 30, p.y0 - 14);
    cairo_line_to(cr, lx - 6, p.y0 - 14);
    cairo_stroke(cr);
    lx -= 30 + 16;
  }

  cairo_destroy(cr);
  cairo_surface_flush(s);
  cairo_status_t st = cairo_surface_write_to_png(s, png_path);
  cairo_surface_destroy(s);
  if (st != CAIRO_STATUS_SUCCESS) {
    snprintf(err, errlen, "%s: %s", png_path, cairo_status_to_string(st));
  } else {
    rc = 0;
    if (layout) *layout = p;
  }
  runlog_data_free(&d);
  return rc;
}

void plot_release_caches(void) {
  cairo_debug_reset_static_data();
  FcFini();
}
