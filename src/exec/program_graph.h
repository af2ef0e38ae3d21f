/* A program's graph, read by tools that compile it further (tools/aot): the
 * documented internal API between such a tool and the program object, whose
 * layout (program_internal.h) stays the executor's own. The nodes are core's
 * IR (src/core/lt_node.h); a program holds a reference on each, so they live
 * as long as it does. The inputs' and outputs' count, dtypes and shapes come
 * from the public lt_program_count and lt_program_signature. */
#ifndef LT_PROGRAM_GRAPH_H
#define LT_PROGRAM_GRAPH_H

#include <stdbool.h>
#include <stddef.h>

#include "../core/lt_node.h"
#include "lazytensor.h"

/* The root node of output i of p; NULL when p is NULL or i is out of range. */
lt_node *lt__program_root(const lt_program *p, int i);
/* Whether n is the DATA leaf that stands for input i of p (its buffer is the
 * one that input had when the program was made); any other DATA leaf is a
 * captured constant. */
bool lt__program_is_input(const lt_program *p, int i, const lt_node *n);
/* Copies the value of the DATA leaf n (a captured constant) into dst, which
 * holds nbytes: the leaf's element count times its dtype's size. Waits for
 * the value first. LT_OK, or the status of the wait or of the read (with the
 * error recorded); LT_EINVAL when n is not a DATA leaf or nbytes is not its
 * size. */
int lt__program_read_leaf(const lt_node *n, void *dst, size_t nbytes);

#endif
