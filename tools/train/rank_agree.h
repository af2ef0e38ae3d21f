/* The start-up check of a data-parallel run under mpirun: every rank must
 * have been given the same options, or the replicas train one model with an
 * inconsistent global batch (or worse) and nothing says so. Each rank puts
 * its parsed options in a table of rank_option; one all-gather (lazytensor_dist.h)
 * brings every rank's table to every rank, and each compares. */
#ifndef LT_TRAIN_RANK_AGREE_H
#define LT_TRAIN_RANK_AGREE_H

#include <stdint.h>

#include "lazytensor_dist.h"

typedef enum rank_option_kind {
  RANK_OPT_INT,  /* value is the integer */
  RANK_OPT_REAL, /* value holds a double's bits */
  RANK_OPT_TEXT  /* value is a hash of the text (NULL: 0) */
} rank_option_kind;

typedef struct rank_option {
  const char *name; /* "--batch" */
  rank_option_kind kind;
  int64_t value;
  const char *text; /* RANK_OPT_TEXT: the text itself, for this rank's message */
} rank_option;

enum { RANK_AGREE_MAX = 32 }; /* every table is gathered at this length */

rank_option rank_opt_int(const char *name, int64_t v);
rank_option rank_opt_real(const char *name, double v);
rank_option rank_opt_text(const char *name, const char *text);

/* Compares the n options (n <= RANK_AGREE_MAX) across the ranks of w (an MPI
 * world; a world in one process has one command line, nothing to compare).
 * The first option must be the one that selects the table's layout (the
 * model): past a difference there, the others are not compared. LT_OK when
 * they agree; otherwise every rank prints which options differ
 * and the values of both ranks, and the status is LT_EINVAL. */
int rank_agree(lt_world *w, const rank_option *opts, int n);

#endif
