/* The training log's CSV (runlog.h): writing it as training runs, and
 * reading it back for the plot. No cairo here: the log works without it. */
#include "runlog.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The header: the log's columns (docs/TRAINING.md documents them). */
static void write_header(runlog *l, const char *metric) {
  fprintf(l->f, "step,epoch,loss,lr,steps_per_s,%s\n", metric);
}

int runlog_open(runlog *l, const char *path, const char *metric) {
  l->f = fopen(path, "w");
  l->path = NULL;
  l->opt = "--log";
  l->temp = false;
  if (!l->f) {
    fprintf(stderr, "lazytensor-train: --log %s: %s\n", path, strerror(errno));
    return -1;
  }
  l->path = strdup(path);
  write_header(l, metric);
  return 0;
}

int runlog_start(runlog *l, const char *log_path, const char *png_path, const char *metric) {
  if (log_path) return runlog_open(l, log_path, metric);
  l->f = NULL;
  l->path = NULL;
  l->opt = "--plot";
  l->temp = true;
  if (!png_path) return 0;
  const char *tmpdir = getenv("TMPDIR");
  char tmpl[4096];
  snprintf(tmpl, sizeof tmpl, "%s/lazytensor-train-XXXXXX.csv",
           tmpdir && *tmpdir ? tmpdir : "/tmp");
  int fd = mkstemps(tmpl, 4);
  if (fd < 0 || !(l->f = fdopen(fd, "w"))) {
    fprintf(stderr, "lazytensor-train: --plot %s: cannot make its temporary log %s: %s\n", png_path,
            tmpl, strerror(errno));
    if (fd >= 0) {
      close(fd);
      unlink(tmpl);
    }
    return -1;
  }
  l->path = strdup(tmpl);
  write_header(l, metric);
  return 0;
}

/* A field: %.9g keeps a float's value exactly; empty for NAN. */
static void field(FILE *f, double v, bool last) {
  if (!isnan(v)) fprintf(f, "%.9g", v);
  fputc(last ? '\n' : ',', f);
}

int runlog_row(runlog *l, int64_t step, int64_t epoch, double loss, double lr, double rate,
               double metric) {
  if (!l->f) return 0;
  fprintf(l->f, "%lld,%lld,", (long long)step, (long long)epoch);
  field(l->f, loss, false);
  field(l->f, lr, false);
  field(l->f, rate, false);
  field(l->f, metric, true);
  /* flushed per row: a run stopped early still leaves its curve */
  if (fflush(l->f) != 0 || ferror(l->f)) {
    fprintf(stderr, "lazytensor-train: %s %s: %s\n", l->opt, l->path ? l->path : "",
            strerror(errno));
    return -1;
  }
  return 0;
}

int runlog_close(runlog *l) {
  int rc = 0;
  if (l->f && fclose(l->f) != 0) rc = -1;
  l->f = NULL;
  free(l->path);
  l->path = NULL;
  return rc;
}

int runlog_finish(runlog *l, const char *png_path) {
  if (!l->path) return 0; /* no log */
  char *csv = l->path;
  l->path = NULL; /* runlog_close frees it: keep it for the plot */
  bool temp = l->temp;
  int rc = 0;
  if (runlog_close(l)) {
    fprintf(stderr, "lazytensor-train: %s %s: write failed\n", temp ? "--plot" : "--log",
            temp ? png_path : csv);
    rc = -1;
  }
  if (rc == 0 && !temp) printf("log: %s\n", csv);
  if (rc == 0 && png_path) {
    char err[512];
    rc = plot_render(csv, png_path, 900, 540, NULL, err, sizeof err);
    plot_release_caches(); /* the run draws once, at its end */
    if (rc)
      fprintf(stderr, "lazytensor-train: --plot %s: %s\n", png_path, err);
    else
      printf("plot: %s\n", png_path);
  }
  if (temp) unlink(csv);
  free(csv);
  return rc;
}

void runlog_data_free(runlog_data *d) {
  free(d->step);
  free(d->epoch);
  free(d->loss);
  free(d->lr);
  free(d->rate);
  free(d->metric);
  memset(d, 0, sizeof *d);
}

/* One field of a row; empty (or only spaces) reads as NAN. */
static bool parse_field(char **p, double *out, bool last) {
  char *s = *p, *end;
  char *sep = strchr(s, last ? '\n' : ',');
  if (!sep && last) sep = s + strlen(s);
  if (!sep) return false;
  while (s < sep && *s == ' ') s++;
  if (s == sep || (s + 1 == sep && *s == '\r')) {
    *out = NAN;
  } else {
    errno = 0;
    *out = strtod(s, &end);
    while (end < sep && (*end == ' ' || *end == '\r')) end++;
    if (errno || end != sep) return false;
  }
  *p = *sep ? sep + 1 : sep;
  return true;
}

int runlog_read(const char *path, runlog_data *d, char *err, size_t errlen) {
  memset(d, 0, sizeof *d);
  FILE *f = fopen(path, "r");
  if (!f) {
    snprintf(err, errlen, "%s: %s", path, strerror(errno));
    return -1;
  }
  char line[512];
  int rc = -1;
  size_t cap = 0;
  if (!fgets(line, sizeof line, f)) {
    snprintf(err, errlen, "%s: empty", path);
    goto out;
  }
  line[strcspn(line, "\r\n")] = 0;
  if (!strcmp(line, "step,epoch,loss,lr,steps_per_s,test_acc"))
    d->metric_is_acc = true;
  else if (strcmp(line, "step,epoch,loss,lr,steps_per_s,val_loss")) {
    snprintf(err, errlen, "%s: not a lazytensor-train log (header '%s')", path, line);
    goto out;
  }
  for (size_t row = 2; fgets(line, sizeof line, f); row++) {
    if (line[0] == '\n' || line[0] == 0) continue;
    if (d->n == cap) {
      cap = cap ? 2 * cap : 64;
      double **cols[] = {&d->step, &d->epoch, &d->loss, &d->lr, &d->rate, &d->metric};
      for (int c = 0; c < 6; c++) {
        double *g = realloc(*cols[c], cap * sizeof(double));
        if (!g) {
          snprintf(err, errlen, "out of memory");
          goto out;
        }
        *cols[c] = g;
      }
    }
    char *p = line;
    size_t i = d->n;
    if (!parse_field(&p, &d->step[i], false) || !parse_field(&p, &d->epoch[i], false) ||
        !parse_field(&p, &d->loss[i], false) || !parse_field(&p, &d->lr[i], false) ||
        !parse_field(&p, &d->rate[i], false) || !parse_field(&p, &d->metric[i], true) ||
        isnan(d->step[i])) {
      snprintf(err, errlen, "%s: line %zu: expected 6 numeric fields", path, row);
      goto out;
    }
    d->n++;
  }
  rc = 0;
out:
  fclose(f);
  if (rc) runlog_data_free(d);
  return rc;
}

#ifndef LT_HAVE_CAIRO
int plot_render(const char *csv_path, const char *png_path, int width, int height,
                plot_layout *layout, char *err, size_t errlen) {
  (void)csv_path, (void)png_path, (void)width, (void)height, (void)layout;
  snprintf(err, errlen, "built without cairo (install libcairo2-dev and reconfigure)");
  return -1;
}
void plot_release_caches(void) {}
#endif
