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
const char *lt_last_error(void);
/* Status code of the last failure on this thread (LT_OK when none). */
int lt_last_status(void);
/* Forget the last failure on this thread. */
void lt_clear_error(void);

/* ---- allocator hook -------------------------------------------------------- */
/* One hook for every allocation the library makes, as in Lua: nsize == 0 frees
 * ptr and returns NULL; otherwise it behaves as realloc(ptr, nsize). Returning
 * NULL for nsize > 0 reports an allocation failure. Passing fn == NULL restores
 * the default (the C library). Set it before creating any tensor. */
typedef void *(*lt_alloc_fn)(void *ud, void *ptr, size_t osize, size_t nsize);
void lt_set_allocator(lt_alloc_fn fn, void *ud);

/* ---- dtypes ----------------------------------------------------------------- */
typedef enum lt_dtype {
  LT_BOOL = 0,
  LT_I32 = 1,
  LT_I64 = 2,
  LT_F32 = 3,
  LT_F64 = 4,
  LT_NUM_DTYPES
} lt_dtype;

const char *lt_dtype_name(lt_dtype dt); /* "bool", "i32", ... ; "?" if invalid */
size_t lt_dtype_size(lt_dtype dt);      /* bytes per element, 0 if invalid */

/* ---- devices ---------------------------------------------------------------- */
typedef enum lt_device_type { LT_DEVICE_CPU = 0 } lt_device_type;

#define LT_MAX_DEVICES 64

typedef struct lt_device {
  lt_device_type type;
  int index;
} lt_device;

/* The device CPU:index. */
lt_device lt_cpu(int index);
/* Parse "CPU:0" (case-insensitive type). Returns LT_OK or LT_EDEVICE. */
int lt_device_parse(const char *text, lt_device *out);
/* Write "CPU:0" into buf; returns the length it needs (snprintf style). */
int lt_device_str(lt_device dev, char *buf, size_t n);
/* Count of live tensors on a device (those not yet destroyed). */
int64_t lt_device_live_tensors(lt_device dev);

/* ---- tensors and lifetimes ---------------------------------------------------- */
typedef struct lt_tensor lt_tensor;

lt_tensor *lt_retain(lt_tensor *t); /* returns t */
void lt_release(lt_tensor *t);      /* NULL is accepted */

/* Scopes nest. Tensors created while a scope is open belong to it. */
void lt_scope_begin(void);
void lt_scope_end(void);

int64_t lt_id(const lt_tensor *t);
lt_dtype lt_get_dtype(const lt_tensor *t);
int lt_ndim(const lt_tensor *t);
int64_t lt_dim(const lt_tensor *t, int axis); /* negative axis counts from the end */
const int64_t *lt_shape(const lt_tensor *t);
int64_t lt_numel(const lt_tensor *t);
lt_device lt_get_device(const lt_tensor *t);

/* Where the value of a tensor currently lives. */
typedef enum lt_state { LT_STATE_DEVICE = 0, LT_STATE_PENDING = 1, LT_STATE_HOST = 2 } lt_state;
lt_state lt_get_state(const lt_tensor *t);
/* True when t's value can be read without waiting for an execution (host data,
 * or a device buffer whose execution has finished, successfully or not). */
bool lt_ready(const lt_tensor *t);

/* ---- creation ------------------------------------------------------------------- */
/* Copies nbytes-worth of data (numel * dtype size) from data. */
lt_tensor *lt_from_data(lt_device dev, lt_dtype dt, const int64_t *shape, int ndim,
                        const void *data);
lt_tensor *lt_full(lt_device dev, lt_dtype dt, const int64_t *shape, int ndim, double value);
lt_tensor *lt_zeros(lt_device dev, lt_dtype dt, const int64_t *shape, int ndim);
lt_tensor *lt_ones(lt_device dev, lt_dtype dt, const int64_t *shape, int ndim);
/* A 0-d tensor. 0 and +-1 become IR constants; other values become device data,
 * so a value that changes from step to step never changes the graph. */
lt_tensor *lt_scalar(lt_device dev, lt_dtype dt, double value);
/* [start, stop) by step, as numpy.arange; step must not be 0. */
lt_tensor *lt_arange(lt_device dev, lt_dtype dt, double start, double stop, double step);
/* n x m identity (m <= 0 means m = n). */
lt_tensor *lt_eye(lt_device dev, lt_dtype dt, int64_t n, int64_t m);

/* ---- reading values ------------------------------------------------------------- */
/* Runs what the tensor needs and copies its value into dst (nbytes must be at
 * least numel * dtype size). On failure the tensor keeps its pending graph. */
int lt_to_data(lt_tensor *t, void *dst, size_t nbytes);
/* One element as double, for tests and printing (flat index). */
int lt_item(lt_tensor *t, int64_t flat_index, double *out);

/* ---- elementwise ---------------------------------------------------------------- */
/* Binary ops broadcast as numpy and promote dtypes as PyTorch: bool < i32 < i64 <
 * f32 < f64, with 0-d tensors only raising the category (bool, int, float) of
 * tensors that have dimensions. */
lt_tensor *lt_add(lt_tensor *a, lt_tensor *b);
lt_tensor *lt_sub(lt_tensor *a, lt_tensor *b);
lt_tensor *lt_mul(lt_tensor *a, lt_tensor *b);
lt_tensor *lt_div(lt_tensor *a, lt_tensor *b); /* true division: ints give f32 */
lt_tensor *lt_pow(lt_tensor *a, lt_tensor *b);
lt_tensor *lt_maximum(lt_tensor *a, lt_tensor *b);
lt_tensor *lt_minimum(lt_tensor *a, lt_tensor *b);

lt_tensor *lt_neg(lt_tensor *a);
lt_tensor *lt_abs(lt_tensor *a);
lt_tensor *lt_sign(lt_tensor *a);
lt_tensor *lt_relu(lt_tensor *a);
lt_tensor *lt_floor(lt_tensor *a);
lt_tensor *lt_ceil(lt_tensor *a);
lt_tensor *lt_round(lt_tensor *a); /* half to even */
/* Floating ops: bool and integer inputs give f32. */
lt_tensor *lt_exp(lt_tensor *a);
lt_tensor *lt_log(lt_tensor *a);
lt_tensor *lt_log1p(lt_tensor *a);
lt_tensor *lt_sqrt(lt_tensor *a);
lt_tensor *lt_rsqrt(lt_tensor *a);
lt_tensor *lt_sin(lt_tensor *a);
lt_tensor *lt_cos(lt_tensor *a);
lt_tensor *lt_tanh(lt_tensor *a);
lt_tensor *lt_sigmoid(lt_tensor *a);
lt_tensor *lt_gelu(lt_tensor *a); /* exact: x * (1 + erf(x / sqrt 2)) / 2 */
lt_tensor *lt_erf(lt_tensor *a);
/* clamp to [lo, hi]; NAN for a bound means none. */
lt_tensor *lt_clamp(lt_tensor *a, double lo, double hi);

/* Comparisons give bool. */
lt_tensor *lt_eq(lt_tensor *a, lt_tensor *b);
lt_tensor *lt_ne(lt_tensor *a, lt_tensor *b);
lt_tensor *lt_lt(lt_tensor *a, lt_tensor *b);
lt_tensor *lt_le(lt_tensor *a, lt_tensor *b);
lt_tensor *lt_gt(lt_tensor *a, lt_tensor *b);
lt_tensor *lt_ge(lt_tensor *a, lt_tensor *b);
/* Logical ops treat non-zero as true and give bool. */
lt_tensor *lt_logical_and(lt_tensor *a, lt_tensor *b);
lt_tensor *lt_logical_or(lt_tensor *a, lt_tensor *b);
lt_tensor *lt_logical_not(lt_tensor *a);
/* cond ? a : b, broadcasting all three; cond is read as bool. */
lt_tensor *lt_where(lt_tensor *cond, lt_tensor *a, lt_tensor *b);
lt_tensor *lt_cast(lt_tensor *a, lt_dtype dt);

/* ---- reductions ------------------------------------------------------------------- */
/* axes: naxes entries (negative count from the end); naxes == 0 reduces all axes.
 * sum and prod of bool/int give i64; mean needs a floating dtype. */
lt_tensor *lt_sum(lt_tensor *a, const int *axes, int naxes, bool keepdim);
lt_tensor *lt_mean(lt_tensor *a, const int *axes, int naxes, bool keepdim);
lt_tensor *lt_max(lt_tensor *a, const int *axes, int naxes, bool keepdim);
lt_tensor *lt_min(lt_tensor *a, const int *axes, int naxes, bool keepdim);
lt_tensor *lt_prod(lt_tensor *a, const int *axes, int naxes, bool keepdim);
lt_tensor *lt_logsumexp(lt_tensor *a, const int *axes, int naxes, bool keepdim);
/* Index (i64) of the first largest / smallest value along one axis. */
lt_tensor *lt_argmax(lt_tensor *a, int axis, bool keepdim);
lt_tensor *lt_argmin(lt_tensor *a, int axis, bool keepdim);
lt_tensor *lt_softmax(lt_tensor *a, int axis);
lt_tensor *lt_log_softmax(lt_tensor *a, int axis);

/* ---- contraction -------------------------------------------------------------------- */
/* numpy.matmul: 1-d operands are promoted and the added dim removed; batch dims
 * broadcast. bool is not accepted. */
lt_tensor *lt_matmul(lt_tensor *a, lt_tensor *b);

/* ---- shape ---------------------------------------------------------------------------- */
/* One entry of shape may be -1 and is then inferred. */
lt_tensor *lt_reshape(lt_tensor *a, const int64_t *shape, int ndim);
lt_tensor *lt_permute(lt_tensor *a, const int *perm, int ndim);
lt_tensor *lt_transpose(lt_tensor *a, int axis0, int axis1);
/* Broadcast to shape (numpy.broadcast_to); -1 keeps that dim. */
lt_tensor *lt_expand(lt_tensor *a, const int64_t *shape, int ndim);
/* Remove axis if its size is 1 (else a no-op, as PyTorch). */
lt_tensor *lt_squeeze(lt_tensor *a, int axis);
lt_tensor *lt_unsqueeze(lt_tensor *a, int axis);
/* Per axis python-style [start:stop:step], with step > 0; NULL starts mean 0, NULL
 * stops mean the end, NULL steps mean 1. Out-of-range bounds are clamped. */
lt_tensor *lt_slice(lt_tensor *a, const int64_t *starts, const int64_t *stops,
                    const int64_t *steps);
lt_tensor *lt_concat(lt_tensor *const *ts, int n, int axis);
lt_tensor *lt_stack(lt_tensor *const *ts, int n, int axis);
/* pads[2*i], pads[2*i+1]: elements added before and after axis i (>= 0). */
lt_tensor *lt_pad(lt_tensor *a, const int64_t *pads, double value);
/* torch.gather: out[i][j] = a[index[i][j]][j] for axis 0, etc. index is an
 * integer tensor of a's rank. Out-of-range indices fail at execution. */
lt_tensor *lt_gather(lt_tensor *a, int axis, lt_tensor *index);
/* Select entries of a 1-d integer index along axis. */
lt_tensor *lt_index_select(lt_tensor *a, int axis, lt_tensor *index);
/* One-hot of an integer tensor: a new last axis of num_classes entries. */
lt_tensor *lt_one_hot(lt_tensor *indices, int64_t num_classes, lt_dtype dt);

/* ---- in place ------------------------------------------------------------------------- */
/* dst takes the value of src (broadcast to dst's shape and cast to its dtype),
 * lazily: dst keeps its identity, and its value becomes src's pending graph. */
int lt_assign(lt_tensor *dst, lt_tensor *src);

/* ---- executor -------------------------------------------------------------------------- */
/* Runs the pending graphs of ts (one device) and cuts them: each tensor's value
 * becomes a device buffer. With wait false the call returns once the execution
 * is queued; the tensors hold placeholders that reads wait on. */
int lt_sync(lt_tensor *const *ts, int n, bool wait);
/* The step barrier: syncs every live tensor of the device (uploading host
 * data), donates the storage of values the step overwrites to its outputs
 * (unless aliasing is off), advances the device's RNG, and returns without
 * waiting for the execution. An error of an earlier asynchronous execution on
 * this device is returned here (once) instead, and the step is not taken. */
int lt_mark_step(lt_device dev);
/* Waits for every execution queued on dev; returns a pending error once. */
int lt_wait_device_ops(lt_device dev);
/* Drops the pending graphs of every live tensor of dev: reading one then fails
 * with a clear message. Returns how many tensors were cleared. */
int lt_clear_pending(lt_device dev);
/* Compiles what syncing ts would run, without running it (warm-up). */
int lt_warmup(lt_tensor *const *ts, int n);
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
int lt_set_persistent_cache(const char *dir, bool read_only);

/* Eager mode: every op runs as soon as it is traced (also LT_EAGER=1). */
void lt_set_eager(bool on);
bool lt_get_eager(void);
/* Storage reuse at step barriers (also LT_ENABLE_PARAM_ALIASING=0 to disable). */
void lt_set_param_aliasing(bool on);
bool lt_get_param_aliasing(void);
/* Allows t's current buffer to be reused for an output of the next sync that
 * reads it and nothing else holds it. */
int lt_mark_donatable(lt_tensor *t, bool on);
/* Bytes of device storage alive now and at the peak since the last reset. */
int lt_device_memory(lt_device dev, int64_t *live_bytes, int64_t *peak_bytes);
void lt_device_memory_reset_peak(lt_device dev);

/* Execute-by-key: compile a graph once, then run it on new inputs without
 * tracing again. inputs name the tensors whose buffers are parameters of the
 * graph of outputs (other parameters, e.g. scalars, are captured as they are). */
typedef struct lt_program lt_program;
typedef struct lt_key {
  uint64_t lo, hi;
} lt_key;
lt_program *lt_program_create(lt_tensor *const *outputs, int nout, lt_tensor *const *inputs,
                              int nin);
lt_key lt_program_key(const lt_program *p);
/* Runs p on inputs (same dtypes and shapes as at creation); writes nout new
 * tensors to outputs. LT_ENOTFOUND when the key was evicted from the cache. */
int lt_program_run(lt_program *p, lt_tensor *const *inputs, int nin, lt_tensor **outputs);
void lt_program_free(lt_program *p);

/* Test hooks (fault injection for the reliability tests). The next
 * execution (or compile) after `skip` more succeed fails with LT_EEXEC
 * (LT_ECOMPILE); skip < 0 disarms. A delay makes every execution slower. */
typedef enum lt_fault { LT_FAULT_EXECUTE = 0, LT_FAULT_COMPILE = 1 } lt_fault;
void lt_inject_fault(lt_fault kind, int skip);
void lt_set_execute_delay_us(int64_t us);

/* ---- autograd --------------------------------------------------------------------------- */
/* Reverse mode over the IR: lt_backward(loss) differentiates the loss's pending
 * graph and adds each requires-grad tensor's gradient to its grad, as more IR,
 * so forward, backward and the optimizer's update form one graph per step.
 * Call it before reading the loss (a read cuts the graph). Floating dtypes only. */
int lt_requires_grad(lt_tensor *t, bool on);
bool lt_get_requires_grad(const lt_tensor *t);
/* loss: one element of a floating dtype, with a pending graph. */
int lt_backward(lt_tensor *loss);
/* t's gradient (borrowed: valid until lt_zero_grad or t's release), or NULL. */
lt_tensor *lt_grad(lt_tensor *t);
/* Drops t's gradient (the next backward starts from zero). */
int lt_zero_grad(lt_tensor *t);

/* ---- random numbers ------------------------------------------------------------------- */
/* One seed per device. Random ops draw from a seed chain kept inside the graph,
 * so a training step compiles once; lt_mark_step advances the base seed. */
int lt_manual_seed(lt_device dev, uint64_t seed);
/* Uniform in [lo, hi) and normal(mean, std), float dtypes only. */
lt_tensor *lt_rand_uniform(lt_device dev, lt_dtype dt, const int64_t *shape, int ndim, double lo,
                           double hi);
lt_tensor *lt_rand_normal(lt_device dev, lt_dtype dt, const int64_t *shape, int ndim, double mean,
                          double std);
/* 1 with probability p (elementwise, p a float tensor), in p's dtype. */
lt_tensor *lt_bernoulli(lt_tensor *p);
/* Zeroes each element with probability p and scales the rest by 1/(1-p);
 * identity when train is false. p in [0, 1). */
lt_tensor *lt_dropout(lt_tensor *a, double p, bool train);
/* A random permutation of 0..n-1 (i32 or i64). */
lt_tensor *lt_randperm(lt_device dev, lt_dtype dt, int64_t n);

/* ---- metrics ------------------------------------------------------------------------------ */
/* Value of a counter by name (CachedCompile, UncachedCompile, ExecuteComputation,
 * CreateTensor, DestroyTensor, ...); -1 if the name is unknown. */
int64_t lt_counter(const char *name);
/* Names of all counters, NULL-terminated. */
const char *const *lt_counter_names(void);
/* Reset every counter to 0. */
void lt_counters_reset(void);
/* Timers (TraceTime, CompileTime, ExecuteTime, TransferToDeviceTime,
 * TransferFromDeviceTime, DeviceLockWait; in ns) and value metrics
 * (TensorsGraphSize, InputOutputAliasCount): samples seen and their stats. */
typedef struct lt_metric_stats {
  int64_t count;
  double total, min, max, p50, p90, p99;
} lt_metric_stats;
/* LT_ENOTFOUND for an unknown name. */
int lt_metric(const char *name, lt_metric_stats *out);
/* Number of compiled executables held in memory, and a way to drop them all. */
int64_t lt_cache_entries(void);
void lt_cache_clear(void);
/* Write a text report of every metric; returns the length it needs (snprintf style). */
int lt_metrics_report(char *buf, size_t n);

/* ---- nn, optimizers, data ---- */
/* Linear layer: y = x @ weight + bias. weight is [in, out] (the transpose of
 * PyTorch's [out, in]: the forward needs no transpose), bias is [out] or NULL.
 * Init as PyTorch's default: U(-1/sqrt(in), 1/sqrt(in)) for weight and bias,
 * drawn from dev's RNG (lt_rand_uniform), with requires-grad set. The draws
 * are left pending, so that a whole model (and the loader's shuffles, see
 * lt_nn_loader_shuffle_ahead) initialises in ONE graph: call lt_nn_params_sync
 * or lt_mark_step once after building the model. */
typedef struct lt_nn_linear {
  lt_tensor *weight; /* [in, out]; owned by the layer */
  lt_tensor *bias;   /* [out], or NULL */
  int64_t in, out;
} lt_nn_linear;
int lt_nn_linear_init(lt_nn_linear *l, lt_device dev, lt_dtype dt, int64_t in, int64_t out,
                      bool bias);
void lt_nn_linear_free(lt_nn_linear *l); /* releases the parameters; NULL is accepted */
lt_tensor *lt_nn_linear_forward(const lt_nn_linear *l, lt_tensor *x); /* x: [..., in] */
/* Makes the n tensors device data with one graph (waits). */
int lt_nn_params_sync(lt_tensor *const *params, int n);
lt_tensor *lt_nn_relu(lt_tensor *x);
lt_tensor *lt_nn_gelu(lt_tensor *x); /* exact (erf) gelu */
lt_tensor *lt_nn_dropout(lt_tensor *x, double p, bool train);
/* Mean cross-entropy of logits [B, C] (float) against integer labels [B] in
 * [0, C): -mean_b log_softmax(logits)[b, labels[b]], via one_hot (stable: the
 * log-sum-exp is shifted by the row max). A 0-d tensor of logits' dtype. A
 * label outside [0, C) fails at execution (LT_EEXEC), as one_hot does. */
lt_tensor *lt_nn_cross_entropy(lt_tensor *logits, lt_tensor *labels);
/* Fraction of rows whose argmax (first on ties) equals the label: 0-d f32. */
lt_tensor *lt_nn_accuracy(lt_tensor *logits, lt_tensor *labels);

/* Optimizers: lazy in-place updates (lt_assign) of the parameters and of their
 * state (created once as device data at the next step barrier), with PyTorch's
 * update rules. Values that change from step to step (lr, Adam's bias
 * corrections) enter the graph as data, never as constants: a run of steps
 * compiles once whatever their values. */
typedef enum lt_nn_optim_kind { LT_NN_SGD = 0, LT_NN_ADAM = 1, LT_NN_ADAMW = 2 } lt_nn_optim_kind;
typedef struct lt_nn_optim_config {
  lt_nn_optim_kind kind;
  double lr;
  double momentum;          /* SGD (dampening is 0) */
  bool nesterov;            /* SGD; needs momentum > 0 */
  double weight_decay;      /* SGD, Adam: g += wd * p; AdamW: p *= 1 - lr * wd */
  double beta1, beta2, eps; /* Adam, AdamW */
} lt_nn_optim_config;
/* PyTorch's defaults: SGD lr 0.01 (torch has none); Adam lr 1e-3, betas
 * (0.9, 0.999), eps 1e-8; AdamW the same with weight decay 1e-2. */
lt_nn_optim_config lt_nn_optim_defaults(lt_nn_optim_kind kind);
typedef struct lt_nn_optim lt_nn_optim;
/* Keeps a reference to each of the n float parameters. */
lt_nn_optim *lt_nn_optim_create(const lt_nn_optim_config *cfg, lt_tensor *const *params, int n);
/* One update from each parameter's lt_grad (parameters without a grad are
 * skipped, as PyTorch), then drops the grads (lt_zero_grad). */
int lt_nn_optim_step(lt_nn_optim *o);
/* The same with explicit grads (n entries as at create; NULL skips); the
 * parameters' own grads are left alone. */
int lt_nn_optim_step_grads(lt_nn_optim *o, lt_tensor *const *grads);
int lt_nn_optim_set_lr(lt_nn_optim *o, double lr);
int64_t lt_nn_optim_steps(const lt_nn_optim *o); /* updates done so far */
void lt_nn_optim_free(lt_nn_optim *o);

/* Parameter files (lt_nn_save / lt_nn_load), little-endian:
 *   "LTPARAMS" (8 bytes), u32 version (1), u32 count,
 *   count times: u32 dtype (lt_dtype), u32 ndim, ndim x i64 shape, the data,
 *   u64 FNV-1a 64 checksum of every byte before it.
 * lt_nn_load checks everything (count, dtypes, shapes, size, checksum) before
 * it assigns the values (lazily, lt_assign) to the n given tensors. */
int lt_nn_save(const char *path, lt_tensor *const *ts, int n);
int lt_nn_load(const char *path, lt_tensor *const *ts, int n);

/* IDX files (gzip-compressed or plain, read with zlib): unsigned-byte data
 * (type 0x08) only. Missing, truncated, wrong-magic files and files with
 * bytes beyond the data fail with LT_EINVAL and the path in the message. */
typedef struct lt_nn_idx {
  int ndim;
  int64_t dims[LT_MAX_DIMS];
  uint8_t *data; /* prod(dims) bytes */
  int64_t size;
} lt_nn_idx;
int lt_nn_idx_read(const char *path, lt_nn_idx *out);
void lt_nn_idx_free(lt_nn_idx *x);

/* A labelled image set: images [n, rows, cols] u8, labels [n] in [0, 255]. */
typedef struct lt_nn_dataset {
  int64_t n, rows, cols, features; /* features = rows * cols */
  uint8_t *images;                 /* n * features */
  int64_t *labels;                 /* n */
  int64_t num_classes;             /* largest label + 1 */
} lt_nn_dataset;
/* Where lt_nn_fashion_mnist looks when dir is NULL (the Debian package's path,
 * or $LT_DATA_DIR when set). */
#define LT_NN_FASHION_MNIST_DIR "/usr/share/datasets/fashion-mnist"
int lt_nn_dataset_load(const char *images_path, const char *labels_path, lt_nn_dataset *ds);
/* {train,t10k}-{images-idx3,labels-idx1}-ubyte.gz from dir. */
int lt_nn_fashion_mnist(const char *dir, bool train, lt_nn_dataset *ds);
void lt_nn_dataset_free(lt_nn_dataset *ds);
/* Images [count, features] as f32 in [0, 1] (x / 255, as torchvision's
 * ToTensor, no normalisation) from sample start; rows past the set's end are
 * zero (padding). A new host tensor. */
lt_tensor *lt_nn_dataset_images(const lt_nn_dataset *ds, lt_device dev, int64_t start,
                                int64_t count);

/* Shuffling batch iterator. Each epoch visits the samples in the order of
 * lt_randperm from dev's RNG (read once per epoch), or in order without
 * shuffle. The last partial batch of an epoch is DROPPED: every batch has the
 * same shape, so the step never recompiles (n / batch batches per epoch). */
typedef struct lt_nn_loader lt_nn_loader;
lt_nn_loader *lt_nn_loader_create(const lt_nn_dataset *ds, lt_device dev, int64_t batch,
                                  bool shuffle);
/* Draws the permutations of the next `epochs` epochs now, lazily, so that
 * they run with the graph of the next step barrier (e.g. the model's init)
 * instead of a graph of their own per epoch. */
int lt_nn_loader_shuffle_ahead(lt_nn_loader *l, int epochs);
/* Starts the next epoch; returns its number of batches, or a negative status.
 * Without a permutation drawn ahead it draws one and calls lt_mark_step(dev)
 * (a step barrier: pending values of dev run), then reads it. */
int64_t lt_nn_loader_epoch(lt_nn_loader *l);
/* The next batch: *x [batch, features] f32 in [0, 1], *y [batch] i64 (new host
 * tensors, owned by the open scope if any). Returns 1, 0 at the epoch's end,
 * or a negative status. */
int lt_nn_loader_next(lt_nn_loader *l, lt_tensor **x, lt_tensor **y);
/* This epoch's order of the sample indices (n entries), or NULL before one. */
const int64_t *lt_nn_loader_order(const lt_nn_loader *l);
void lt_nn_loader_free(lt_nn_loader *l);

#ifdef __cplusplus
}
#endif
#endif
