/* The backend interface: storage for buffers (lt_buffer.h), compilation of a
 * post-order graph into an executable, and execution; and the registry that
 * the executor picks a backend from. ref (interpreter, the oracle) and cpu
 * (fused LLVM kernels) implement it; this layer names neither: the executor
 * registers them (src/exec/backends.c). */
#ifndef LT_BACKEND_H
#define LT_BACKEND_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "lazytensor.h"
#include "../core/lt_buffer.h"
#include "../core/lt_node.h"
#include "instr.h"

/* Gives b storage from its backend (device bytes counted). Its state does not
 * change: a placeholder becomes readable only when the executor publishes it,
 * after the whole execution succeeded. */
int lt__buffer_materialize(lt_buffer *b);
/* lt__buffer_new + lt__buffer_materialize, READY. */
int lt__buffer_alloc(const lt_backend *be, lt_device dev, lt_dtype dt, const int64_t *shape,
                     int ndim, lt_buffer **out);
/* A READY buffer whose storage is host, lt__malloc'd with the buffer's byte
 * size (backends with host_storage only); it takes host only on success. */
int lt__buffer_adopt(const lt_backend *be, lt_device dev, lt_dtype dt, const int64_t *shape,
                     int ndim, void *host, lt_buffer **out);

/* A graph as handed to compile: nodes in post-order (every operand comes before
 * its user, node->order is its index), the parameter index of each DATA node
 * (-1 for other nodes), the node index of each root (an output), and the
 * parameters whose storage may be reused for an output (ascending). The
 * backend pairs each donor with the first free root of equal dtype and shape
 * and may write that root's value in place. */
typedef struct lt_graph {
  lt_node **nodes;
  int nnodes;
  const int *param_of; /* per node */
  int nparams;
  const int *roots;
  int nroots;
  const int *donors;
  int ndonors;
} lt_graph;

typedef struct lt_executable lt_executable; /* backend-defined */

struct lt_backend {
  const char *name;
  /* Whether the backend has its own path for op. Nodes of other ops run
   * through the executor's fallback (lt__backend_run_fallback). */
  bool (*supports_op)(lt_op op);
  /* Optional: runs one instruction into out (already given storage) from
   * its operand values. The backend chosen as the fallback must have it. */
  int (*run_instr)(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in);
  /* Folds everything that changes generated code (backend version, CPU, ...). */
  uint64_t (*env_hash)(void);
  /* Storage for b->nbytes bytes into b->data; data_free gives it back. */
  int (*data_alloc)(lt_buffer *b);
  void (*data_free)(lt_buffer *b);
  int (*to_device)(lt_buffer *dst, const void *src, size_t nbytes);
  /* true: data_alloc's storage is host memory from lt__malloc(nbytes), so an
   * upload adopts the host copy of lt_from_data instead of copying it again. */
  bool host_storage;
  int (*from_device)(const lt_buffer *src, void *dst, size_t nbytes);
  /* The graph's nodes stay owned by the caller; the executable must not keep
   * pointers to them (nor to any device data). */
  int (*compile)(const lt_graph *g, lt_executable **out);
  /* The numbers of parameters and results exe was compiled for (the executor
   * checks a call against them before execute). */
  void (*signature)(const lt_executable *exe, int *nparams, int *nroots);
  /* args: one READY buffer per parameter (the executor checks the counts and
   * states: a backend need not). outs: one PENDING header per root,
   * which execute fills (materialize, or take a donated argument's storage).
   * On failure outs may be left PENDING: the executor fails them. */
  int (*execute)(lt_executable *exe, lt_buffer *const *args, int nargs, lt_buffer *const *outs,
                 int nouts);
  void (*executable_free)(lt_executable *exe);
  /* Optional: starts slow one-time set-up (JIT, threads) in the background
   * when the first device context is made, so that it overlaps the program's
   * first tracing instead of delaying its first sync. */
  void (*prepare)(void);
  /* Optional (NULL when unsupported): bytes for the persistent cache. */
  int (*serialize)(const lt_executable *exe, void **bytes, size_t *nbytes);
  int (*deserialize)(const void *bytes, size_t nbytes, lt_executable **out);
  /* Optional: the instruction set the products (matmul, convolutions) of
   * dtype dt run with, a static string (lt_get_isa); NULL: the backend's
   * name (its own loops). */
  const char *(*isa)(lt_dtype dt);
};

/* Host-memory storage (host_storage.c), for backends whose device is the host. */
int lt__host_data_alloc(lt_buffer *b);
void lt__host_data_free(lt_buffer *b);
int lt__host_to_device(lt_buffer *dst, const void *src, size_t nbytes);
int lt__host_from_device(const lt_buffer *src, void *dst, size_t nbytes);

/* ---- the registry (registry.c) ---- */

/* Adds be (kept by pointer, never copied). LT_EINVAL when a required entry
 * is missing or the name is taken; LT_ENOMEM when the registry is full. */
int lt__backend_register(const lt_backend *be);
/* The registered backend of that name, or NULL. */
const lt_backend *lt__backend_find(const char *name);
int lt__backend_count(void);
const lt_backend *lt__backend_at(int i);
/* The backend for dev: the forced one (tests), else the chosen one
 * (lt__backend_choose), else the one LT_BACKEND names (read once, at the
 * first selection), else the registered backend named dflt. An unknown LT_BACKEND
 * is reported once on stderr and dflt used. */
const lt_backend *lt__backend_select(lt_device dev, const char *dflt);
/* Makes be the process's choice (lt_set_backend): lt__backend_select answers
 * it from now on, LT_BACKEND no longer read. */
void lt__backend_choose(const lt_backend *be);
/* The registered names, in registration order, as "ref, cpu" into buf (n
 * bytes, truncated); returns the full length as snprintf does. */
int lt__backend_names(char *buf, size_t n);
/* Test hook: forces lt__backend_select to answer be (NULL: back to normal). */
void lt__backend_force(const lt_backend *be);
const lt_backend *lt__backend_forced(void);

/* The fallback: the executor names the backend (one with run_instr) that runs
 * the nodes other backends do not support. */
void lt__backend_set_fallback(const lt_backend *be);
const lt_backend *lt__backend_fallback(void);
/* Runs ins on the fallback backend; LT_EEXEC when none is set. */
int lt__backend_run_fallback(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in);

/* The compile environment key of be: its env_hash folded with the op table's
 * hash. Cached executables (memory and disk) are valid only under the key
 * they were compiled with. */
uint64_t lt__backend_env_key(const lt_backend *be);

#endif
