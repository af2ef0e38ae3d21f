/* The cpu backend, inside: a compiled graph is a list of kernels over a table
 * of slots (storage), run in order.
 *
 *   cpu_lower.c    post-order graph -> kernels, views, slots, donor pairs
 *   cpu_codegen.c  fused loop nests (elementwise chains, reductions) as LLVM IR text
 *   cpu_irmath.c   IR emission helpers and the vectorizable math (exp, log, ...)
 *   cpu_jit.c      LLVM: parse, default<O3> for the host CPU, object code, ORC LLJIT
 *   cpu_serial.c   serialize / deserialize (the plan and the object code)
 *   cpu_exec.c     execution: slot table, buffer arena, BLAS and ref fallbacks
 *   cpu_pool.c     the thread pool (LT_NUM_THREADS) and its BLAS coordination
 *   cpu_backend.c  the lt_backend: buffers, env hash, compile/execute entry points
 *
 * Slots: [0, nparams) are the parameters, [nparams, nparams + nroots) the
 * roots' output buffers, the rest temporaries placed in one arena per
 * execution (offsets from the buffer plan, reused after a value's last use).
 * A root written in place over a donated parameter uses the parameter's slot. */
#ifndef LT_CPU_H
#define LT_CPU_H

#include <stdio.h>

#include "../../core/lt_strbuf.h"
#include "cpu_api.h"

#define CPU_BACKEND_VERSION "cpu-1"

/* An affine view of a slot: element (c_0..c_{n-1}) lives at
 * offset + sum c_d * strides[d] (in elements of dtype). */
typedef struct cpu_view {
  int slot;
  uint8_t dtype;
  uint8_t ndim;
  int64_t offset;
  int64_t shape[LT_MAX_DIMS];
  int64_t strides[LT_MAX_DIMS];
} cpu_view;

bool cpu_view_contiguous(const cpu_view *v);
void cpu_view_init(cpu_view *v, int slot, int dtype, const int64_t *shape, int ndim);

typedef void (*cpu_kernel_fn)(void **slots, int64_t lo, int64_t hi);

typedef enum cpu_kind {
  CK_LOOP,   /* a JIT loop nest: fn over [0, extent), split across the pool */
  CK_BLAS,   /* matmul through cblas_?gemm */
  CK_REF,    /* a ref kernel on contiguous operands (ops without codegen yet) */
  CK_MEMCPY, /* out slot = contiguous view (duplicate roots) */
} cpu_kind;

typedef struct cpu_matmul {
  bool f64, ta, tb;
  int64_t n, m, k, lda, ldb;
  int nbatch_dims;
  int64_t batch_shape[LT_MAX_DIMS];
  int64_t a_bstride[LT_MAX_DIMS], b_bstride[LT_MAX_DIMS];
  cpu_view a, b; /* offsets and slots; strides described by ta/lda etc. */
} cpu_matmul;

typedef struct cpu_kernel {
  cpu_kind kind;
  int out_slot;
  /* CK_LOOP */
  int fn_index;
  cpu_kernel_fn fn;
  int64_t extent;    /* parallel iterations */
  int64_t unit_cost; /* elements touched per iteration (to size chunks) */
  /* CK_BLAS */
  cpu_matmul mm;
  /* CK_REF */
  lt_instr ins;
  cpu_view *in; /* ins.noperands contiguous views */
  cpu_view out;
  /* CK_MEMCPY */
  cpu_view src;
  size_t nbytes;
} cpu_kernel;

typedef struct cpu_slot {
  size_t nbytes;   /* parameters and roots too: execute checks their buffers */
  size_t offset;   /* temporaries: place in the arena */
  int first, last; /* kernels that write first / read last */
} cpu_slot;

struct lt_executable {
  uint64_t uid; /* names its JIT symbols */
  int nparams, nroots;
  int nslots, slots_cap;
  cpu_slot *slots;
  int nkernels, kernels_cap;
  cpu_kernel *kernels;
  int *root_slot;     /* per root: the slot holding its value */
  int *alias;         /* per root: the donated parameter written in place, or -1 */
  size_t arena_bytes; /* temporaries */
  int nfns;           /* JIT functions (CK_LOOP fn_index < nfns) */
  void *obj;          /* their object code (lt__malloc'd), kept for serialize */
  size_t obj_len;
  struct cpu_jit_module *jit;
};

/* ---- lowering and codegen ---- */
int cpu_lower(const lt_graph *g, lt_executable *e, lt_strbuf *ir, int *nfns);
void cpu_kernels_free(cpu_kernel *k, int n);
/* Symbol of JIT function i of executable uid. */
void cpu_fn_name(char *buf, size_t n, uint64_t uid, int i);

/* ---- JIT ---- */
typedef struct cpu_jit_module cpu_jit_module;
/* IR text -> optimized object code for the host (*obj lt__malloc'd, *obj_len bytes). */
int cpu_jit_compile(const char *ir, size_t len, uint64_t uid, void **obj, size_t *obj_len);
/* Adds object code to the JIT (a JITDylib of its own) and finds functions
 * 0..nfns-1 of executable uid. */
int cpu_jit_load(const void *obj, size_t len, uint64_t uid, int nfns, cpu_kernel_fn *fns,
                 cpu_jit_module **out);
void cpu_jit_free(cpu_jit_module *m);
int cpu_jit_host(const char **cpu, const char **features);

/* ---- the executable ---- */
void cpu_executable_free(lt_executable *e);
/* Looks up e's JIT functions in its object code and sets its kernels' fn. */
int cpu_executable_link(lt_executable *e);
int cpu_serialize(const lt_executable *e, void **bytes, size_t *nbytes);
int cpu_deserialize(const void *bytes, size_t nbytes, lt_executable **out);

/* ---- execution ---- */
int cpu_run(const lt_executable *e, lt_buffer *const *args, lt_buffer *const *outs);

/* ---- pool ---- */
int cpu_pool_threads(void);
/* Runs fn over [0, extent) in chunks on the pool (inline when small). */
void cpu_pool_run(cpu_kernel_fn fn, void **slots, int64_t extent, int64_t unit_cost);

#endif
