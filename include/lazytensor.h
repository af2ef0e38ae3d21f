/* lazytensor: lazy tensors for C with a caching graph executor.
 *
 * Every op records a node in an IR graph instead of computing. Reading a value
 * (lt_to_data) runs the pending graph: the executor hashes it, looks up a
 * compiled executable in its cache, compiles on a miss, executes, and stores
 * the results back into the tensors.
 *
 * Conventions:
 *  - A call that fails returns NULL (tensor results) or a negative LT_E* status
 *    and leaves a message in lt_last_error(). An op given a NULL operand returns
 *    NULL and keeps the error already recorded, so an expression may be chained
 *    and checked once at the end.
 *  - Tensors are reference counted. Inside lt_scope_begin()/lt_scope_end() every
 *    tensor created is owned by the scope and released at its end; lt_retain()
 *    a tensor to keep it. Outside any scope the caller owns the new reference.
 *  - Names. A property or setting the program can change is changed with
 *    lt_set_<name> and read with lt_get_<name> (lt_set_eager / lt_get_eager,
 *    lt_set_requires_grad / lt_get_requires_grad, lt_set_seed); an object of
 *    lazytensor_nn.h puts its name first (lt_nn_optim_set_lr). A value looked
 *    up by name is read with lt_get_<name>(name, &out), which returns a status:
 *    LT_ENOTFOUND for an unknown name (lt_get_counter, lt_get_metric).
 *    Read-only facts of a tensor, device or other object that need no lookup
 *    are plain accessors named by the noun (lt_id, lt_ndim, lt_dim, lt_shape,
 *    lt_numel, lt_ready, lt_grad, lt_device_live_tensors, lt_device_memory,
 *    lt_cache_entries, lt_program_key); they take lt_get_ only where the noun
 *    is a type name (lt_get_dtype, lt_get_device, lt_get_state). Everything
 *    else is named by what it does (lt_mark_step, lt_cache_clear). Old names
 *    are kept as deprecated aliases at the end of this file.
 *
 * The two public headers: this one (tensors, ops, executor, autograd, random
 * numbers, metrics) and lazytensor_nn.h (layers, losses, optimizers, data).
 */
#ifndef LAZYTENSOR_H
#define LAZYTENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LT_VERSION_MAJOR 0
#define LT_VERSION_MINOR 1
#define LT_VERSION_PATCH 0
#define LT_VERSION_STRING "0.1.0"

#define LT_MAX_DIMS 8

/* LT_API marks what the shared library exports (it is built with hidden
 * visibility: everything else in it stays internal). LT_DEPRECATED(msg) marks
 * an old name kept for existing programs. */
#ifndef LT_API
#if defined(__GNUC__) || defined(__clang__)
#define LT_API __attribute__((visibility("default")))
#else
#define LT_API
#endif
#endif
#if defined(__GNUC__) || defined(__clang__)
#define LT_DEPRECATED(msg) __attribute__((deprecated(msg)))
#else
#define LT_DEPRECATED(msg)
#endif

/* ---- status codes --------------------------------------------------------- */
typedef enum lt_status {
  LT_OK = 0,
  LT_EINVAL = -1,   /* bad argument (NULL, out-of-range axis, bad value) */
  LT_ESHAPE = -2,   /* shapes do not fit the op */
  LT_EDTYPE = -3,   /* dtype not accepted by the op */
  LT_EDEVICE = -4,  /* unknown device or operands on different devices */
  LT_ENOMEM = -5,   /* an allocation failed */
  LT_ECOMPILE = -6, /* the backend could not compile a graph */
  LT_EEXEC = -7,    /* the backend failed while executing a graph */
  LT_ENOTFOUND = -8 /* a name or key is not known */
} lt_status;

/* Message of the last failure on this thread ("" when none). */
LT_API const char *lt_last_error(void);
/* Status code of the last failure on this thread (LT_OK when none). */
LT_API int lt_last_status(void);
/* Forget the last failure on this thread. */
LT_API void lt_clear_error(void);

/* ---- allocator hook -------------------------------------------------------- */
/* One hook for every allocation the library makes, as in Lua: nsize == 0 frees
 * ptr and returns NULL; otherwise it behaves as realloc(ptr, nsize). Returning
 * NULL for nsize > 0 reports an allocation failure. Passing fn == NULL restores
 * the default (the C library). Set it before creating any tensor. */
typedef void *(*lt_alloc_fn)(void *ud, void *ptr, size_t osize, size_t nsize);
LT_API void lt_set_allocator(lt_alloc_fn fn, void *ud);

/* ---- dtypes ----------------------------------------------------------------- */
typedef enum lt_dtype {
  LT_BOOL = 0,
  LT_I32 = 1,
  LT_I64 = 2,
  LT_F32 = 3,
  LT_F64 = 4,
  LT_NUM_DTYPES
} lt_dtype;

LT_API const char *lt_dtype_name(lt_dtype dt); /* "bool", "i32", ... ; "?" if invalid */
LT_API size_t lt_dtype_size(lt_dtype dt);      /* bytes per element, 0 if invalid */

/* ---- devices ---------------------------------------------------------------- */
typedef enum lt_device_type { LT_DEVICE_CPU = 0 } lt_device_type;

#define LT_MAX_DEVICES 64

typedef struct lt_device {
  lt_device_type type;
  int index;
} lt_device;

/* The device CPU:index. */
LT_API lt_device lt_cpu(int index);
/* Parse "CPU:0" (case-insensitive type). Returns LT_OK or LT_EDEVICE. */
LT_API int lt_device_parse(const char *text, lt_device *out);
/* Write "CPU:0" into buf; returns the length it needs (snprintf style). */
LT_API int lt_device_str(lt_device dev, char *buf, size_t n);
/* Count of live tensors on a device (those not yet destroyed). */
LT_API int64_t lt_device_live_tensors(lt_device dev);

/* ---- tensors and lifetimes ---------------------------------------------------- */
typedef struct lt_tensor lt_tensor;

LT_API lt_tensor *lt_retain(lt_tensor *t); /* returns t */
LT_API void lt_release(lt_tensor *t);      /* NULL is accepted */

/* Scopes nest. Tensors created while a scope is open belong to it. */
LT_API void lt_scope_begin(void);
LT_API void lt_scope_end(void);

LT_API int64_t lt_id(const lt_tensor *t);
LT_API lt_dtype lt_get_dtype(const lt_tensor *t);
LT_API int lt_ndim(const lt_tensor *t);
LT_API int64_t lt_dim(const lt_tensor *t, int axis); /* negative axis counts from the end */
LT_API const int64_t *lt_shape(const lt_tensor *t);
LT_API int64_t lt_numel(const lt_tensor *t);
LT_API lt_device lt_get_device(const lt_tensor *t);

/* Where the value of a tensor currently lives. */
typedef enum lt_state { LT_STATE_DEVICE = 0, LT_STATE_PENDING = 1, LT_STATE_HOST = 2 } lt_state;
LT_API lt_state lt_get_state(const lt_tensor *t);
/* True when t's value can be read without waiting for an execution (host data,
 * or a device buffer whose execution has finished, successfully or not). */
LT_API bool lt_ready(const lt_tensor *t);

/* ---- creation ------------------------------------------------------------------- */
/* Copies nbytes-worth of data (numel * dtype size) from data. */
LT_API lt_tensor *lt_from_data(lt_device dev, lt_dtype dt, const int64_t *shape, int ndim,
                               const void *data);
LT_API lt_tensor *lt_full(lt_device dev, lt_dtype dt, const int64_t *shape, int ndim, double value);
LT_API lt_tensor *lt_zeros(lt_device dev, lt_dtype dt, const int64_t *shape, int ndim);
LT_API lt_tensor *lt_ones(lt_device dev, lt_dtype dt, const int64_t *shape, int ndim);
/* A 0-d tensor. 0 and +-1 become IR constants; other values become device data,
 * so a value that changes from step to step never changes the graph. */
LT_API lt_tensor *lt_scalar(lt_device dev, lt_dtype dt, double value);
/* [start, stop) by step, as numpy.arange; step must not be 0. */
LT_API lt_tensor *lt_arange(lt_device dev, lt_dtype dt, double start, double stop, double step);
/* n x m identity (m <= 0 means m = n). */
LT_API lt_tensor *lt_eye(lt_device dev, lt_dtype dt, int64_t n, int64_t m);

/* ---- reading values ------------------------------------------------------------- */
/* Runs what the tensor needs and copies its value into dst (nbytes must be at
 * least numel * dtype size). On failure the tensor keeps its pending graph. */
LT_API int lt_to_data(lt_tensor *t, void *dst, size_t nbytes);
/* One element as double, for tests and printing (flat index). */
LT_API int lt_item(lt_tensor *t, int64_t flat_index, double *out);

/* ---- elementwise ---------------------------------------------------------------- */
/* Binary ops broadcast as numpy and promote dtypes as PyTorch: bool < i32 < i64 <
 * f32 < f64, with 0-d tensors only raising the category (bool, int, float) of
 * tensors that have dimensions. */
LT_API lt_tensor *lt_add(lt_tensor *a, lt_tensor *b);
LT_API lt_tensor *lt_sub(lt_tensor *a, lt_tensor *b);
LT_API lt_tensor *lt_mul(lt_tensor *a, lt_tensor *b);
LT_API lt_tensor *lt_div(lt_tensor *a, lt_tensor *b); /* true division: ints give f32 */
LT_API lt_tensor *lt_pow(lt_tensor *a, lt_tensor *b);
LT_API lt_tensor *lt_maximum(lt_tensor *a, lt_tensor *b);
LT_API lt_tensor *lt_minimum(lt_tensor *a, lt_tensor *b);

LT_API lt_tensor *lt_neg(lt_tensor *a);
LT_API lt_tensor *lt_abs(lt_tensor *a);
LT_API lt_tensor *lt_sign(lt_tensor *a);
LT_API lt_tensor *lt_relu(lt_tensor *a);
LT_API lt_tensor *lt_floor(lt_tensor *a);
LT_API lt_tensor *lt_ceil(lt_tensor *a);
LT_API lt_tensor *lt_round(lt_tensor *a); /* half to even */
/* Floating ops: bool and integer inputs give f32. */
LT_API lt_tensor *lt_exp(lt_tensor *a);
LT_API lt_tensor *lt_log(lt_tensor *a);
LT_API lt_tensor *lt_log1p(lt_tensor *a);
LT_API lt_tensor *lt_sqrt(lt_tensor *a);
LT_API lt_tensor *lt_rsqrt(lt_tensor *a);
LT_API lt_tensor *lt_sin(lt_tensor *a);
LT_API lt_tensor *lt_cos(lt_tensor *a);
LT_API lt_tensor *lt_tanh(lt_tensor *a);
LT_API lt_tensor *lt_sigmoid(lt_tensor *a);
LT_API lt_tensor *lt_gelu(lt_tensor *a); /* exact: x * (1 + erf(x / sqrt 2)) / 2 */
LT_API lt_tensor *lt_erf(lt_tensor *a);
/* clamp to [lo, hi]; NAN for a bound means none. */
LT_API lt_tensor *lt_clamp(lt_tensor *a, double lo, double hi);

/* Comparisons give bool. */
LT_API lt_tensor *lt_eq(lt_tensor *a, lt_tensor *b);
LT_API lt_tensor *lt_ne(lt_tensor *a, lt_tensor *b);
LT_API lt_tensor *lt_lt(lt_tensor *a, lt_tensor *b);
LT_API lt_tensor *lt_le(lt_tensor *a, lt_tensor *b);
LT_API lt_tensor *lt_gt(lt_tensor *a, lt_tensor *b);
LT_API lt_tensor *lt_ge(lt_tensor *a, lt_tensor *b);
/* Logical ops treat non-zero as true and give bool. */
LT_API lt_tensor *lt_logical_and(lt_tensor *a, lt_tensor *b);
LT_API lt_tensor *lt_logical_or(lt_tensor *a, lt_tensor *b);
LT_API lt_tensor *lt_logical_not(lt_tensor *a);
/* cond ? a : b, broadcasting all three; cond is read as bool. */
LT_API lt_tensor *lt_where(lt_tensor *cond, lt_tensor *a, lt_tensor *b);
LT_API lt_tensor *lt_cast(lt_tensor *a, lt_dtype dt);

/* ---- reductions ------------------------------------------------------------------- */
/* axes: naxes entries (negative count from the end); naxes == 0 reduces all axes.
 * sum and prod of bool/int give i64; mean needs a floating dtype. */
LT_API lt_tensor *lt_sum(lt_tensor *a, const int *axes, int naxes, bool keepdim);
LT_API lt_tensor *lt_mean(lt_tensor *a, const int *axes, int naxes, bool keepdim);
LT_API lt_tensor *lt_max(lt_tensor *a, const int *axes, int naxes, bool keepdim);
LT_API lt_tensor *lt_min(lt_tensor *a, const int *axes, int naxes, bool keepdim);
LT_API lt_tensor *lt_prod(lt_tensor *a, const int *axes, int naxes, bool keepdim);
LT_API lt_tensor *lt_logsumexp(lt_tensor *a, const int *axes, int naxes, bool keepdim);
/* Index (i64) of the first largest / smallest value along one axis. */
LT_API lt_tensor *lt_argmax(lt_tensor *a, int axis, bool keepdim);
LT_API lt_tensor *lt_argmin(lt_tensor *a, int axis, bool keepdim);
LT_API lt_tensor *lt_softmax(lt_tensor *a, int axis);
LT_API lt_tensor *lt_log_softmax(lt_tensor *a, int axis);

/* ---- contraction -------------------------------------------------------------------- */
/* numpy.matmul: 1-d operands are promoted and the added dim removed; batch dims
 * broadcast. bool is not accepted. */
LT_API lt_tensor *lt_matmul(lt_tensor *a, lt_tensor *b);

/* ---- shape ---------------------------------------------------------------------------- */
/* One entry of shape may be -1 and is then inferred. */
LT_API lt_tensor *lt_reshape(lt_tensor *a, const int64_t *shape, int ndim);
LT_API lt_tensor *lt_permute(lt_tensor *a, const int *perm, int ndim);
LT_API lt_tensor *lt_transpose(lt_tensor *a, int axis0, int axis1);
/* Broadcast to shape (numpy.broadcast_to); -1 keeps that dim. */
LT_API lt_tensor *lt_expand(lt_tensor *a, const int64_t *shape, int ndim);
/* Remove axis if its size is 1 (else a no-op, as PyTorch). */
LT_API lt_tensor *lt_squeeze(lt_tensor *a, int axis);
LT_API lt_tensor *lt_unsqueeze(lt_tensor *a, int axis);
/* Per axis python-style [start:stop:step], with step > 0; NULL starts mean 0, NULL
 * stops mean the end, NULL steps mean 1. Out-of-range bounds are clamped. */
LT_API lt_tensor *lt_slice(lt_tensor *a, const int64_t *starts, const int64_t *stops,
                           const int64_t *steps);
LT_API lt_tensor *lt_concat(lt_tensor *const *ts, int n, int axis);
LT_API lt_tensor *lt_stack(lt_tensor *const *ts, int n, int axis);
/* pads[2*i], pads[2*i+1]: elements added before and after axis i (>= 0). */
LT_API lt_tensor *lt_pad(lt_tensor *a, const int64_t *pads, double value);
/* torch.gather: out[i][j] = a[index[i][j]][j] for axis 0, etc. index is an
 * integer tensor of a's rank. Out-of-range indices fail at execution. */
LT_API lt_tensor *lt_gather(lt_tensor *a, int axis, lt_tensor *index);
/* Select entries of a 1-d integer index along axis. */
LT_API lt_tensor *lt_index_select(lt_tensor *a, int axis, lt_tensor *index);
/* One-hot of an integer tensor: a new last axis of num_classes entries. */
LT_API lt_tensor *lt_one_hot(lt_tensor *indices, int64_t num_classes, lt_dtype dt);

/* ---- in place ------------------------------------------------------------------------- */
/* dst takes the value of src (broadcast to dst's shape and cast to its dtype),
 * lazily: dst keeps its identity, and its value becomes src's pending graph. */
LT_API int lt_assign(lt_tensor *dst, lt_tensor *src);

/* ---- executor -------------------------------------------------------------------------- */
/* Runs the pending graphs of ts (one device) and cuts them: each tensor's value
 * becomes a device buffer. With wait false the call returns once the execution
 * is queued; the tensors hold placeholders that reads wait on. */
LT_API int lt_sync(lt_tensor *const *ts, int n, bool wait);
/* The step barrier: syncs every live tensor of the device (uploading host
 * data), donates the storage of values the step overwrites to its outputs
 * (unless aliasing is off), advances the device's RNG, and returns without
 * waiting for the execution. An error of an earlier asynchronous execution on
 * this device is returned here (once) instead, and the step is not taken. */
LT_API int lt_mark_step(lt_device dev);
/* Waits for every execution queued on dev; returns a pending error once. */
LT_API int lt_wait_device_ops(lt_device dev);
/* Drops the pending graphs of every live tensor of dev: reading one then fails
 * with a clear message. Returns how many tensors were cleared. */
LT_API int lt_clear_pending(lt_device dev);
/* Compiles what syncing ts would run, without running it (warm-up). */
LT_API int lt_warmup(lt_tensor *const *ts, int n);
/* The persistent compilation cache: compiled executables kept in dir (created
 * if missing), so that a later process skips the compiles an earlier one did.
 * Lookups go memory, then disk, then compile. read_only: load, never write.
 * NULL dir disables it. Overrides LT_PERSISTENT_CACHE_PATH and
 * LT_PERSISTENT_CACHE_READ_ONLY=1; LT_PERSISTENT_CACHE_MAX_BYTES (default
 * 1 GiB) bounds the directory, evicting the least recently used entries.
 * Call it before the first compile. Bad entries and write failures are
 * counted (PersistentCacheDeserializeFailure, PersistentCacheWriteFailure),
 * reported on stderr and never fail a computation. LT_OK, or LT_EINVAL for
 * a path that is too long. */
LT_API int lt_set_persistent_cache(const char *dir, bool read_only);

/* Eager mode: every op runs as soon as it is traced (also LT_EAGER=1). */
LT_API void lt_set_eager(bool on);
LT_API bool lt_get_eager(void);
/* Storage reuse at step barriers (also LT_ENABLE_PARAM_ALIASING=0 to disable). */
LT_API void lt_set_param_aliasing(bool on);
LT_API bool lt_get_param_aliasing(void);
/* Allows t's current buffer to be reused for an output of the next sync that
 * reads it and nothing else holds it. */
LT_API int lt_set_donatable(lt_tensor *t, bool on);
/* Bytes of device storage alive now and at the peak since the last reset. */
LT_API int lt_device_memory(lt_device dev, int64_t *live_bytes, int64_t *peak_bytes);
LT_API void lt_device_memory_reset_peak(lt_device dev);

/* Execute-by-key: compile a graph once, then run it on new inputs without
 * tracing again. inputs name the tensors whose buffers are parameters of the
 * graph of outputs (other parameters, e.g. scalars, are captured as they are). */
typedef struct lt_program lt_program;
typedef struct lt_key {
  uint64_t lo, hi;
} lt_key;
LT_API lt_program *lt_program_create(lt_tensor *const *outputs, int nout, lt_tensor *const *inputs,
                                     int nin);
LT_API lt_key lt_program_key(const lt_program *p);
/* Runs p on inputs (same dtypes and shapes as at creation); writes nout new
 * tensors to outputs. LT_ENOTFOUND when the key was evicted from the cache. */
LT_API int lt_program_run(lt_program *p, lt_tensor *const *inputs, int nin, lt_tensor **outputs);
LT_API void lt_program_free(lt_program *p);

/* ---- autograd --------------------------------------------------------------------------- */
/* Reverse mode over the IR: lt_backward(loss) differentiates the loss's pending
 * graph and adds each requires-grad tensor's gradient to its grad, as more IR,
 * so forward, backward and the optimizer's update form one graph per step.
 * Call it before reading the loss (a read cuts the graph). Floating dtypes only. */
LT_API int lt_set_requires_grad(lt_tensor *t, bool on);
LT_API bool lt_get_requires_grad(const lt_tensor *t);
/* loss: one element of a floating dtype, with a pending graph. */
LT_API int lt_backward(lt_tensor *loss);
/* t's gradient (borrowed: valid until lt_zero_grad or t's release), or NULL. */
LT_API lt_tensor *lt_grad(lt_tensor *t);
/* Drops t's gradient (the next backward starts from zero). */
LT_API int lt_zero_grad(lt_tensor *t);

/* ---- random numbers ------------------------------------------------------------------- */
/* One seed per device. Random ops draw from a seed chain kept inside the graph,
 * so a training step compiles once; lt_mark_step advances the base seed.
 * lt_set_seed sets the device's base seed (torch.manual_seed). */
LT_API int lt_set_seed(lt_device dev, uint64_t seed);
/* Uniform in [lo, hi) and normal(mean, std), float dtypes only. */
LT_API lt_tensor *lt_rand_uniform(lt_device dev, lt_dtype dt, const int64_t *shape, int ndim,
                                  double lo, double hi);
LT_API lt_tensor *lt_rand_normal(lt_device dev, lt_dtype dt, const int64_t *shape, int ndim,
                                 double mean, double std);
/* 1 with probability p (elementwise, p a float tensor), in p's dtype. */
LT_API lt_tensor *lt_bernoulli(lt_tensor *p);
/* Zeroes each element with probability p and scales the rest by 1/(1-p);
 * identity when train is false. p in [0, 1). */
LT_API lt_tensor *lt_dropout(lt_tensor *a, double p, bool train);
/* A random permutation of 0..n-1 (i32 or i64). */
LT_API lt_tensor *lt_randperm(lt_device dev, lt_dtype dt, int64_t n);

/* ---- metrics ------------------------------------------------------------------------------ */
/* Lookups by name return a status: LT_OK, or LT_ENOTFOUND for an unknown name
 * (the message names it; lt_counter_names / lt_metric_names list the known
 * ones), and leave *out alone on failure. */
/* Value of a counter by name (CachedCompile, UncachedCompile, ExecuteComputation,
 * CreateTensor, DestroyTensor, ...) into *out. */
LT_API int lt_get_counter(const char *name, int64_t *out);
/* Names of all counters, NULL-terminated. */
LT_API const char *const *lt_counter_names(void);
/* Reset every counter to 0. */
LT_API void lt_counters_reset(void);
/* Timers (TraceTime, CompileTime, ExecuteTime, TransferToDeviceTime,
 * TransferFromDeviceTime, DeviceLockWait; in ns) and value metrics
 * (TensorsGraphSize, InputOutputAliasCount): samples seen and their stats. */
typedef struct lt_metric_stats {
  int64_t count;
  double total, min, max, p50, p90, p99;
} lt_metric_stats;
/* Stats of a timer or value metric by name into *out. */
LT_API int lt_get_metric(const char *name, lt_metric_stats *out);
/* Names of all timers and value metrics, NULL-terminated. */
LT_API const char *const *lt_metric_names(void);
/* Number of compiled executables held in memory, and a way to drop them all. */
LT_API int64_t lt_cache_entries(void);
LT_API void lt_cache_clear(void);
/* Write a text report of every metric; returns the length it needs (snprintf style). */
LT_API int lt_metrics_report(char *buf, size_t n);

/* ---- deprecated names ------------------------------------------------------------------- */
/* The names before the naming rule above, for existing programs (source
 * compatible; the shared library no longer exports them). */
LT_DEPRECATED("use lt_set_requires_grad")
static inline int lt_requires_grad(lt_tensor *t, bool on) { return lt_set_requires_grad(t, on); }
LT_DEPRECATED("use lt_set_donatable")
static inline int lt_mark_donatable(lt_tensor *t, bool on) { return lt_set_donatable(t, on); }
LT_DEPRECATED("use lt_set_seed")
static inline int lt_manual_seed(lt_device dev, uint64_t seed) { return lt_set_seed(dev, seed); }
/* -1 for an unknown name (LT_ENOTFOUND is recorded, as lt_get_counter does). */
LT_DEPRECATED("use lt_get_counter")
static inline int64_t lt_counter(const char *name) {
  int64_t v;
  return lt_get_counter(name, &v) == LT_OK ? v : -1;
}
LT_DEPRECATED("use lt_get_metric")
static inline int lt_metric(const char *name, lt_metric_stats *out) {
  return lt_get_metric(name, out);
}

#ifdef __cplusplus
}
#endif
#endif
