/* The program object, shared by program.c (create, run) and program_file.c
 * (save, load). */
#ifndef LT_PROGRAM_INTERNAL_H
#define LT_PROGRAM_INTERNAL_H

#include "../core/lt_buffer.h"
#include "../core/lt_node.h"
#include "exec_internal.h"

typedef struct lt__shape_sig {
  uint8_t dtype, ndim;
  int64_t shape[LT_MAX_DIMS];
} lt__shape_sig;

struct lt_program {
  lt_device dev;
  lt_graph_key key;
  int nparams;
  int *param_input;     /* per parameter: the input index, or -1: captured */
  lt_buffer **captured; /* per parameter: the captured buffer, or NULL */
  int nin, nout;
  lt__shape_sig *in_sig, *out_sig;
  /* The graph itself (a reference on each output's root node) and the
   * buffers the inputs had at creation (references), so that
   * lt_program_save can write the IR and tell inputs from captured leaves. */
  lt_node **roots;
  lt_buffer **in_buf;
};

#endif
