/* The backend interface: buffers on a device, compilation of a post-order
 * graph into an executable, and execution. ref (interpreter, the oracle) and
 * cpu (fused LLVM kernels) implement it. */
#ifndef LT_BACKEND_H
#define LT_BACKEND_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "lazytensor.h"
#include "../core/lt_node.h"

typedef struct lt_backend lt_backend;

/* A device buffer. Reference counted; the executor shares buffers between
 * tensors and the graph leaves that read them. */
typedef struct lt_buffer {
  atomic_int refs;
  uint8_t dtype;
  uint8_t ndim;
  lt_device dev;
  int64_t shape[LT_MAX_DIMS];
  int64_t numel;
  size_t nbytes;
  void *data; /* host memory for the CPU backends */
  const lt_backend *backend;
  uint32_t param_mark; /* executor walk epoch, for parameter dedup */
  int32_t param_index;
} lt_buffer;

lt_buffer *lt__buffer_retain(lt_buffer *b);
void lt__buffer_release(lt_buffer *b);

/* A graph as handed to compile: nodes in post-order (every operand comes before
 * its user, node->order is its index), the parameter index of each DATA node
 * (-1 for other nodes), and the node index of each root (an output). */
typedef struct lt_graph {
  lt_node **nodes;
  int nnodes;
  const int *param_of; /* per node */
  int nparams;
  const int *roots;
  int nroots;
} lt_graph;

typedef struct lt_executable lt_executable; /* backend-defined */

struct lt_backend {
  const char *name;
  /* Folds everything that changes generated code (backend version, CPU, ...). */
  uint64_t (*env_hash)(void);
  int (*buffer_alloc)(lt_device dev, lt_dtype dt, const int64_t *shape, int ndim, lt_buffer **out);
  void (*buffer_free)(lt_buffer *b);
  int (*to_device)(lt_buffer *dst, const void *src, size_t nbytes);
  int (*from_device)(const lt_buffer *src, void *dst, size_t nbytes);
  /* The graph's nodes stay owned by the caller; the executable must not keep
   * pointers to them (nor to any device data). */
  int (*compile)(const lt_graph *g, lt_executable **out);
  /* args: one buffer per parameter; outs: one new reference per root. */
  int (*execute)(lt_executable *exe, lt_buffer *const *args, int nargs, lt_buffer **outs,
                 int nouts);
  void (*executable_free)(lt_executable *exe);
};

/* The backend that serves dev (today: ref for every CPU device). */
const lt_backend *lt__backend_for(lt_device dev);

extern const lt_backend lt__ref_backend;

#endif
