/* rank_agree.h: the options of the ranks of an MPI world compared at start-up. */
#include "rank_agree.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lazytensor.h"

rank_option rank_opt_int(const char *name, int64_t v) {
  rank_option o = {name, RANK_OPT_INT, v, NULL};
  return o;
}

rank_option rank_opt_real(const char *name, double v) {
  rank_option o = {name, RANK_OPT_REAL, 0, NULL};
  memcpy(&o.value, &v, sizeof v);
  return o;
}

/* FNV-1a: texts compare by hash (a collision would only miss a report). */
rank_option rank_opt_text(const char *name, const char *text) {
  uint64_t h = 0;
  if (text) {
    h = 1469598103934665603ull;
    for (const unsigned char *c = (const unsigned char *)text; *c; c++)
      h = (h ^ *c) * 1099511628211ull;
  }
  rank_option o = {name, RANK_OPT_TEXT, (int64_t)h, text};
  return o;
}

/* An option's value for a message. */
static void show(const rank_option *o, int64_t v, char *buf, size_t n) {
  double d;
  switch (o->kind) {
  case RANK_OPT_INT:
    snprintf(buf, n, "%lld", (long long)v);
    break;
  case RANK_OPT_REAL:
    memcpy(&d, &v, sizeof d);
    snprintf(buf, n, "%g", d);
    break;
  default: /* another rank's text is known by its hash only */
    snprintf(buf, n, "another value");
    break;
  }
}

typedef struct agree_ctx {
  const rank_option *opts;
  int n, size;
  int disagree; /* options that differ from this rank's on some rank */
} agree_ctx;

static int agree_replica(int rank, lt_device dev, void *arg) {
  agree_ctx *c = arg;
  int64_t mine[RANK_AGREE_MAX] = {0};
  for (int i = 0; i < c->n; i++) mine[i] = c->opts[i].value;
  int size = c->size;
  int64_t *all = calloc((size_t)size * RANK_AGREE_MAX, sizeof *all);
  if (!all) return LT_ENOMEM;
  lt_scope_begin();
  const int64_t shape[1] = {RANK_AGREE_MAX};
  lt_tensor *g = lt_all_gather(lt_from_data(dev, LT_I64, shape, 1, mine), 0);
  int rc = g ? lt_to_data(g, all, (size_t)size * RANK_AGREE_MAX * sizeof *all) : lt_last_status();
  lt_scope_end();
  for (int i = 0; rc == LT_OK && i < c->n; i++) {
    const rank_option *o = &c->opts[i];
    for (int r = 0; r < size; r++) {
      int64_t theirs = all[(size_t)r * RANK_AGREE_MAX + i];
      /* the first option (the model) lays the table out: past a rank that
       * differs there, the rest would compare unlike options */
      bool other_layout = i > 0 && all[(size_t)r * RANK_AGREE_MAX] != c->opts[0].value;
      if (r == rank || theirs == o->value || other_layout) continue;
      char a[64], b[64];
      if (o->kind == RANK_OPT_TEXT)
        snprintf(a, sizeof a, "'%s'", o->text ? o->text : "(none)");
      else
        show(o, o->value, a, sizeof a);
      show(o, theirs, b, sizeof b);
      fprintf(
          stderr,
          "lazytensor-train: rank %d: the ranks disagree on %s: rank %d has %s, rank %d has %s\n",
          rank, o->name, rank, a, r, b);
      c->disagree++;
      break; /* one report per option */
    }
  }
  free(all);
  return rc;
}

int rank_agree(lt_world *w, const rank_option *opts, int n) {
  if (lt_world_size(w) <= 1 || n > RANK_AGREE_MAX) return LT_OK;
  agree_ctx c = {opts, n, lt_world_size(w), 0};
  int rc = lt_world_run(w, agree_replica, &c);
  if (rc != LT_OK) {
    fprintf(stderr, "lazytensor-train: comparing the ranks' options: %s\n", lt_last_error());
    return rc;
  }
  if (c.disagree) {
    fprintf(stderr,
            "lazytensor-train: every rank of --data-parallel must be given the same options "
            "(%d differ here)\n",
            c.disagree);
    return LT_EINVAL;
  }
  return LT_OK;
}
