/* The cpu backend, inside: a compiled graph is a list of kernels over a table
 * of slots (storage), run in order.
 *
 *   cpu_lower.c    post-order graph -> kernels, views, slots, donor pairs
 *   cpu_codegen.c  fused loop nests (elementwise chains, reductions) as LLVM IR text
 *   cpu_irmath.c   IR emission helpers and the vectorizable math (exp, log, ...)
 *   cpu_jit.c      LLVM: one module per kernel compiled on several threads, the kernel
 *                  cache (compiled kernels shared by structure), ORC LLJIT
 *   cpu_serial.c   serialize / deserialize (the plan and the object code)
 *   cpu_exec.c     execution: slot table, buffer arena, each kernel in turn
 *   cpu_native.c   hand-written kernels of the ops without generated code (NATIVE rows)
 *   cpu_gemm.c     matrix products: oneDNN (f32), OpenBLAS (f64), split over the pool
 *   cpu_openblas.c OpenBLAS, loaded with dlopen at the first f64 product
 *   cpu_isa.c      the instruction set in use (LT_CPU_ISA=avx2 caps an AVX-512 machine)
 *   cpu_matmul_prim.c  f32 products through oneDNN matmul primitives, one per shape
 *   cpu_dnnl.c     the oneDNN engine and execution arguments both kinds of primitive share
 *   cpu_conv.c     convolutions (oneDNN primitives, cached) and cpu_maxpool.c (max-pool
 *                  argmax): kernels in cpu_native's shape (cpu_conv.h)
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

#define CPU_BACKEND_VERSION "cpu-3"

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

bool lt__cpu_view_contiguous(const cpu_view *v);
void lt__cpu_view_init(cpu_view *v, int slot, int dtype, const int64_t *shape, int ndim);

typedef void (*cpu_kernel_fn)(void **slots, int64_t lo, int64_t hi);

typedef enum cpu_kind {
  CK_LOOP,   /* a JIT loop nest: fn over [0, extent), split across the pool */
  CK_BLAS,   /* matmul through lt__cpu_gemm (oneDNN sgemm / bf16 matmul, OpenBLAS dgemm) */
  CK_REF,    /* ops without codegen, on contiguous operands: a native kernel, else ref's */
  CK_MEMCPY, /* out slot = contiguous view (duplicate roots) */
} cpu_kind;

/* A product's dtype is its operands' (a.dtype = b.dtype): f32, f64 (f64
 * set) or bf16. */
typedef struct cpu_matmul {
  bool f64, ta, tb;
  bool acc_f32; /* bf16 operands, f32 result: the sums left unrounded (LT_RES_ACC) */
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
  int arg_base;      /* where its function's slot pointers start in the table (cpu_loop_args) */
  int64_t extent;    /* parallel iterations */
  int64_t unit_cost; /* elements touched per iteration (to size chunks) */
  /* CK_BLAS */
  cpu_matmul mm;
  bool epilogue; /* the next kernel, a loop, runs per block of the product's rows */
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

/* A JIT function of an executable: compiled code (shared by every executable
 * with a kernel of the same structure) and the slots it takes, which are
 * args[arg0, arg0 + nargs) of the executable. */
typedef struct cpu_fn {
  int code; /* index into the executable's codes */
  int arg0, nargs;
} cpu_fn;

struct lt_executable {
  uint64_t uid; /* names it in dumps and profiles */
  int nparams, nroots;
  int nslots, slots_cap;
  cpu_slot *slots;
  int nkernels, kernels_cap;
  cpu_kernel *kernels;
  int *root_slot;     /* per root: the slot holding its value */
  int *alias;         /* per root: the donated parameter written in place, or -1 */
  size_t arena_bytes; /* temporaries */
  int nfns;           /* JIT functions (CK_LOOP fn_index < nfns) */
  int nargs;          /* the slots of every function, one list after another */
  int ncodes;         /* distinct compiled kernels, one reference each */
  /* one block (lt__cpu_executable_fn_block): codes has nfns entries, ncodes used */
  struct cpu_kcode **codes;
  cpu_fn *fns;
  int *args;
};

/* The slot pointers the function of loop kernel k takes. The slot table that
 * lt__cpu_run passes has nslots + nargs entries: table[nslots + j] =
 * table[args[j]], so that a function sees its own slots as 0, 1, ... whatever
 * their numbers in this executable, and one compiled kernel serves every
 * executable that has it. */
static inline void **cpu_loop_args(const cpu_kernel *k, void **table) {
  return table + k->arg_base;
}

/* Runs loop kernel k over its whole extent on the pool (cpu_pool.c). */
void lt__cpu_loop_run(const cpu_kernel *k, void **table);

/* ---- lowering and codegen ---- */
/* The JIT functions of a graph as lowering made them, each an LLVM module of
 * its own: the declarations, the function (whose symbol is the placeholder
 * CPU_SYM_PLACEHOLDER), and the uniform functions it calls. The modules lie
 * one after another in text; meta holds per function: its module's start
 * and end in text, its number of slots, then those slots (its pointer
 * argument's entries 0, 1, ...). */
typedef struct cpu_fntab {
  lt_strbuf text;
  int n;
  int64_t *meta;
  size_t nmeta, meta_cap;
  size_t begun; /* where the module begun last starts */
  bool oom;
  bool misordered; /* a function began out of turn */
} cpu_fntab;
/* Starts the module of function fn_index (which must be the next one). */
void lt__cpu_fntab_begin(cpu_fntab *t, int fn_index);
/* Ends the module begun last: its function takes slots args. */
void lt__cpu_fntab_end(cpu_fntab *t, const int *args, int nargs);
void lt__cpu_fntab_reset(cpu_fntab *t);
void lt__cpu_fntab_free(cpu_fntab *t);

int lt__cpu_lower(const lt_graph *g, lt_executable *e, cpu_fntab *fns);
void lt__cpu_kernels_free(cpu_kernel *k, int n);

/* ---- kernels and the JIT ---- */
/* A kernel's key: XXH3-128 of its module's text (whose symbol is still the
 * placeholder) under the backend's environment hash (LLVM, CPU, features,
 * optimisation pipeline). Equal keys: the same code. */
typedef struct cpu_kkey {
  uint64_t lo, hi;
} cpu_kkey;
#define CPU_SYM_PLACEHOLDER "lt_h00000000000000000000000000000000"
/* The symbol of the kernel of key: lt_h<32 hex digits>, as long as the
 * placeholder (n >= sizeof CPU_SYM_PLACEHOLDER). */
void lt__cpu_kernel_symbol(char *buf, size_t n, cpu_kkey key);

int lt__cpu_jit_host(const char **cpu, const char **features);
/* The optimisation pipeline, in words (part of the environment hash). */
const char *lt__cpu_jit_pipeline(void);
/* A module to compile: IR text defining the symbol of key. */
typedef struct cpu_kjob {
  const char *ir;
  size_t len;
  cpu_kkey key;
  void *buf; /* out: LLVM's buffer of its object code (lt__cpu_jit_release) */
  const void *obj;
  size_t obj_len;
} cpu_kjob;
/* Compiles the jobs' modules to object code for the host, on up to
 * lt__cpu_jit_threads() threads. On failure nothing is kept. */
int lt__cpu_jit_compile(cpu_kjob *jobs, int n);
/* Frees the jobs' object code. */
void lt__cpu_jit_release(cpu_kjob *jobs, int n);
/* Threads a compile uses: LT_COMPILE_THREADS, else the pool's thread count. */
int lt__cpu_jit_threads(void);

/* A compiled kernel, loaded in the JIT and shared by every executable that
 * has it (counted references); its code is removed with the last. */
typedef struct cpu_kcode cpu_kcode;
/* A kernel's object code (ELF for the host, defining its key's symbol). */
typedef struct cpu_kobj {
  cpu_kkey key;
  const void *obj;
  size_t len;
} cpu_kobj;
/* A new reference to the loaded kernel of key, or NULL. */
cpu_kcode *lt__cpu_kcode_find(cpu_kkey key);
/* References to the kernels of objs[0..n): those loaded are shared (*nshared
 * counts them), the others loaded from their object code (copied). On
 * failure nothing is kept. */
int lt__cpu_kcode_get(const cpu_kobj *objs, int n, cpu_kcode **out, int *nshared);
void lt__cpu_kcode_release(cpu_kcode *c);
cpu_kernel_fn lt__cpu_kcode_fn(const cpu_kcode *c);
cpu_kkey lt__cpu_kcode_key(const cpu_kcode *c);
const void *lt__cpu_kcode_object(const cpu_kcode *c, size_t *len);

/* ---- the executable ---- */
void lt__cpu_executable_free(lt_executable *e);
/* e's functions, codes and their slots, one block: nfns functions taking
 * nargs slots in all (sets nfns, nargs, fns, codes (all NULL), args). */
int lt__cpu_executable_fn_block(lt_executable *e, int nfns, int nargs);
/* Sets each loop kernel's fn and arg_base from e's functions and codes. */
void lt__cpu_executable_link(lt_executable *e);
int lt__cpu_serialize(const lt_executable *e, void **bytes, size_t *nbytes);
int lt__cpu_deserialize(const void *bytes, size_t nbytes, lt_executable **out);

/* ---- execution ---- */
int lt__cpu_run(const lt_executable *e, lt_buffer *const *args, lt_buffer *const *outs);

/* ---- GEMM (cpu_gemm.c) ---- */
/* Sets oneDNN to one thread per call (the pool splits products; OpenBLAS is
 * set so when it is loaded, at the first f64 product). */
void lt__cpu_gemm_init(void);
/* Keeps the libraries' calls on the calling thread at one OpenMP thread:
 * called by every thread that runs oneDNN (the convolutions too). */
void lt__cpu_gemm_one_thread(void);
/* Runs CK_BLAS kernel k (out = a @ b over its batch) over the slot table,
 * and with it `next` when k->epilogue holds and next fits (then the caller
 * skips next: see lt__cpu_gemm_takes_next). Always LT_OK: a product cannot fail
 * (cpu_gemm.c), so a donated buffer may be written before one. */
int lt__cpu_gemm(const cpu_kernel *k, const cpu_kernel *next, void **table);
/* C[n x m] = op(A) op(B), row-major, operands of dtype dt and C of cdt (both
 * f32; or bf16 operands with f32 sums, each result rounded once to a bf16 C
 * or kept in an f32 C), through a oneDNN matmul primitive made
 * for the shape on its first call and kept (cpu_matmul_prim.c); false when
 * there is none (f32 without LT_CPU_MATMUL=primitive, bf16 without bf16
 * instructions) or it failed: the caller then runs the product another way.
 * On the calling thread. */
bool lt__cpu_gemm_prim(int dt, int cdt, bool ta, bool tb, int64_t n, int64_t m, int64_t k,
                       const void *a, int64_t lda, const void *b, int64_t ldb, void *c,
                       int64_t ldc);
/* nb products at once through one batched primitive (f32 operands, or bf16
 * ones where oneDNN has bf16 instructions): a, b and c hold their entries densely one
 * after the other (op(A) n x k stored k x n when ta, and so on; c nb x n x
 * m). false: none (another dtype, no bf16 instructions, oneDNN declined or
 * offered only its sgemm or reference loops, or failed); the caller then
 * runs the entries one by one. */
bool lt__cpu_gemm_prim_batch(int dt, int cdt, bool ta, bool tb, int64_t nb, int64_t n, int64_t m,
                             int64_t k, const void *a, const void *b, void *c);
bool lt__cpu_gemm_takes_next(const cpu_kernel *k, const cpu_kernel *next);

/* ---- instruction set (cpu_isa.c): the host's, or AVX2 with LT_CPU_ISA=avx2 ---- */
typedef struct cpu_isa {
  bool avx512;  /* the backend may use AVX-512 (f, vl, bw, dq): the host has it, uncapped */
  bool avx2;    /* the host has AVX2 and FMA */
  bool capped;  /* LT_CPU_ISA=avx2 */
  bool bad_env; /* LT_CPU_ISA holds a value other than avx2 or native */
} cpu_isa;
const cpu_isa *lt__cpu_isa(void); /* read once per process */

/* ---- profile (cpu_profile.c): LT_CPU_PROFILE=1 ---- */
bool lt__cpu_profile_on(void);
uint64_t lt__cpu_profile_now(void); /* ns */
/* Adds ns to kernel i of e; at exit, the costliest kernels go to stderr. */
void lt__cpu_profile_add(const lt_executable *e, int i, uint64_t ns);

/* ---- pool ---- */
int lt__cpu_pool_threads(void);
/* The pool's thread count without starting it (for figures such as the FMA
 * peak of the threads a step would use): the started pool's, else what it
 * would start with. */
int lt__cpu_pool_threads_planned(void);
/* The outputs a column sum accumulates together (cpu_codegen.c's
 * sum_blocked); the pool cuts reductions into whole blocks of them. */
#define LT_CPU_SUM_BLOCK 64
/* Runs fn over [0, extent) in chunks on the pool (inline when small). */
void lt__cpu_pool_run(cpu_kernel_fn fn, void **slots, int64_t extent, int64_t unit_cost);
/* Runs fn(ctx, i, i + 1) for each i in [0, nparts), spread over the pool's
 * threads: for jobs already cut into parts of about equal cost. */
void lt__cpu_pool_run_parts(cpu_kernel_fn fn, void **ctx, int64_t nparts);

#endif
