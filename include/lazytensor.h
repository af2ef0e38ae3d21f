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
 *  - Axes. A parameter naming one axis of a tensor is `axis` (start_axis,
 *    end_axis for a range), several are `axes` with their count `naxes`;
 *    negative values count from the end. "dim" is kept only for sizes
 *    (lt_dim reads one) and for PyTorch's keepdim.
 *  - Arrays. Every array a function reads comes with its count: right after
 *    it (axes, naxes; shape, ndim; ts, n), or, when several arrays share one
 *    count, after the last of them (lt_slice_n's starts, stops, steps, n).
 *    A count that does not fit the call (a rank other than the tensor's,
 *    an odd number of pads) is LT_EINVAL with a message naming the function.
 *    The {h, w} arguments of the 2-d convolutions and poolings (kernel,
 *    stride, padding, dilation, output_padding, output_size) each take a
 *    count as torch takes an int or a pair: 2 is {h, w}, 1 one value for
 *    both axes, 0 not given (the default; the pointer is not read; refused
 *    for the kernel and output_size, which have none). A function that
 *    gained counts took the suffix _n (lt_conv2d_n). The exceptions are
 *    arrays whose length an object fixed (lt_program_run's outputs, one per
 *    lt_program_count; lt_nn_optim_step_grads' grads, one per parameter)
 *    and fixed-size buffers (LT_MAX_DIMS shapes).
 *  - Argument order. The tensor or object the call works on comes first;
 *    then the axes it works along with their count; then the op's options
 *    (ord, correction, ...); then keepdim; last the results written through
 *    pointers (lt_sort's values, indices). Siblings agree: lt_var(a, axes,
 *    naxes, correction, keepdim), lt_vector_norm(a, axes, naxes, ord,
 *    keepdim). An op that follows a torch function keeps that function's
 *    order where this rule says nothing (lt_topk(a, k, axis, ...)). Saving
 *    and loading name the object first and the file last
 *    (lt_program_save(p, path), lt_nn_params_save(ts, n, path),
 *    lt_nn_checkpoint_load(ts, n, o, path)); a load that makes a new object
 *    takes the path alone (lt_program_load(path)).
 *  - Objects. An opaque object is made by a function that returns it, NULL
 *    with lt_last_error() set on failure (lt_program_create, lt_program_load,
 *    lt_nn_optim_create, lt_nn_loader_create), and is freed by
 *    lt_<type>_free, which accepts NULL. A struct whose fields the program
 *    reads (the layers of lazytensor_nn.h, data sets, corpora) lives in the
 *    caller's memory instead, often a field of the model's own struct:
 *    lt_<type>_init(&s, ...) (or _load / _read from a file) fills it and
 *    returns a status, lt_<type>_free(&s) releases what it holds. The one
 *    exception left: lt_world_local and lt_world_mpi return a status and
 *    the world through a pointer (docs/API.md says why).
 *  - A function whose arguments changed (counts added, order made to agree)
 *    has a new name; the old one stays as a deprecated alias at the end of
 *    its header, source compatible, and the shared library does not export
 *    it. docs/API.md has these rules with examples.
 *
 * The two public headers: this one (tensors, ops, executor, autograd, random
 * numbers, metrics) and lazytensor_nn.h (layers, losses, optimizers, data).
 * This one includes lazytensor_ops.h, the table its elementwise and reduction
 * ops are declared from.
 */
#ifndef LAZYTENSOR_H
#define LAZYTENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lazytensor_ops.h"

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
 * the default (the C library). Set it before creating any tensor. Storage of
 * 256 KiB and up is the exception: it comes from the library's pool of mapped,
 * reused blocks (LT_BUFFER_POOL_MB), and the hook sees a small record for each
 * new block, so failing the hook still fails those allocations. */
typedef void *(*lt_alloc_fn)(void *ud, void *ptr, size_t osize, size_t nsize);
LT_API void lt_set_allocator(lt_alloc_fn fn, void *ud);

/* ---- dtypes ----------------------------------------------------------------- */
typedef enum lt_dtype {
  LT_BOOL = 0,
  LT_I32 = 1,
  LT_I64 = 2,
  LT_F32 = 3,
  LT_F64 = 4,
  /* Added after the first five so that their ids, which parameter files and the
   * persistent cache store, keep their meaning. */
  LT_U8 = 5,   /* torch.uint8 */
  LT_I8 = 6,   /* torch.int8 */
  LT_BF16 = 7, /* torch.bfloat16: f32's exponent, 8 significant bits */
  LT_NUM_DTYPES
} lt_dtype;
/* Small integers follow torch.uint8 / torch.int8:
 *  - promotion is torch.promote_types: bool < any integer < any float; among
 *    integers the wider wins (u8, i8 < i32 < i64), except that u8 with i8
 *    gives i32, the smallest dtype here that holds both (torch gives int16,
 *    which this library does not have);
 *  - arithmetic wraps around (u8: 250 + 10 = 4, 0 - 1 = 255; neg of u8 wraps,
 *    abs of u8 is the identity), integer division is true division in f32;
 *  - a cast from a float truncates toward zero to an int64 (saturating at the
 *    int64 range, NaN giving 0), then keeps the low 8 bits (two's
 *    complement): u8 of 300.7 is 44, of -1.5 is 255, of +inf 255 and of -inf
 *    0; i8 of 200 is -56. Creation values (lt_full, lt_scalar) convert the
 *    same way. (torch leaves out-of-range float casts undefined.)
 *  - sum and prod give i64, max/min keep the dtype, argmax gives i64;
 *  - they are not index dtypes: gather, index_select and one_hot take i32 or
 *    i64 indices (torch takes int64 for gather), and randperm gives i32 or i64. */

/* bf16 follows torch.bfloat16:
 *  - promotion: bf16 with f32 gives f32 and with f64 f64; with bool or any
 *    integer it gives bf16 (the float category wins, as torch);
 *  - every conversion into bf16 rounds to nearest, ties to even, through f32
 *    as torch's does (a double is rounded to f32 first, then to bf16), and
 *    any NaN becomes 0x7FC0; values beyond its range round to +-inf;
 *  - kernels compute in f32 and round once per op (as torch's CPU kernels);
 *  - lt_from_data / lt_to_data move raw 16-bit values; lt_from_f32 and
 *    lt_to_f32 convert from and to f32 arrays on the host. */
LT_API const char *lt_dtype_name(
    lt_dtype dt);                         /* "bool", "i32", ..., "i8", "bf16"; "?" if invalid */
LT_API size_t lt_dtype_size(lt_dtype dt); /* bytes per element, 0 if invalid */

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

/* Lifetime rules.
 *  - A tensor created while a scope is open (lt_scope_begin) belongs to the
 *    innermost open scope of the creating thread; lt_scope_end releases it.
 *    Outside any scope the caller holds the new tensor's one reference.
 *  - lt_retain adds a reference, which its holder drops with one lt_release.
 *    Release only references you hold: never the one a scope holds (retain
 *    first to keep a scoped tensor past its scope), never one twice.
 *  - A tensor whose last reference is gone must not be used again.
 * Misuse is reported, not undefined, within a window: each thread keeps its
 * most recently released tensor headers (a bounded number) marked released
 * before recycling them,
 * so any public call given such a tensor (an op, lt_to_data, lt_item, an
 * accessor, lt_retain, a second lt_release) fails with LT_EINVAL and a
 * message naming the call ("lt_item: tensor 42 was released ..."); results
 * are NULL or the accessor's "none" value (-1, NULL). lt_release of the
 * reference a scope holds is refused the same way and the tensor lives on.
 * A pointer older than the window may name a recycled, live tensor. */
LT_API lt_tensor *lt_retain(lt_tensor *t); /* returns t; NULL for NULL or a released t */
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
/* [start, stop) by step, as torch 1.13's torch.arange (not numpy's):
 * ceil((stop - start) / step) elements start + i * step. An integer dt
 * truncates start, stop and step toward 0 first: the values are trunc(start)
 * + i * trunc(step) (lt_arange(dev, LT_I32, 0, 5, 1.5) is 0 1 2 3), and the
 * length comes from the truncated values for LT_I64, from the values as
 * given for the other integer dtypes (torch's two paths). A step that
 * truncates to 0 is a zero step: lt_arange(dev, LT_I64, -3, 3, 0.5) is
 * LT_EINVAL, as torch ("step must be nonzero"), where numpy steps by
 * (start + step) - start in the dtype and gives -3, -2, ..., 8. LT_EINVAL for
 * a zero step, one whose sign leads away from stop (after truncation) and a
 * negative length. */
LT_API lt_tensor *lt_arange(lt_device dev, lt_dtype dt, double start, double stop, double step);
/* n x m identity (m <= 0 means m = n). */
LT_API lt_tensor *lt_eye(lt_device dev, lt_dtype dt, int64_t n, int64_t m);

/* ---- reading values ------------------------------------------------------------- */
/* Runs what the tensor needs and copies its value into dst (nbytes must be at
 * least numel * dtype size). On failure the tensor keeps its pending graph. */
LT_API int lt_to_data(lt_tensor *t, void *dst, size_t nbytes);
/* Host arrays of f32 in and out of any dtype, each value converted as
 * lt_cast converts it (bf16: rounded to nearest even; the way in and out of
 * bf16 for a program without a 16-bit float type). lt_from_f32 copies
 * numel values; lt_to_f32 needs n >= numel. */
LT_API lt_tensor *lt_from_f32(lt_device dev, lt_dtype dt, const int64_t *shape, int ndim,
                              const float *data);
LT_API int lt_to_f32(lt_tensor *t, float *dst, size_t n);
/* One element as double, for tests and printing (flat index). */
LT_API int lt_item(lt_tensor *t, int64_t flat_index, double *out);

/* ---- elementwise ---------------------------------------------------------------- */
/* Binary ops broadcast as numpy and promote dtypes as PyTorch: bool < i32 < i64 <
 * f32 < f64 (u8 and i8 below i32; u8 with i8 gives i32, see lt_dtype), with 0-d
 * tensors only raising the category (bool, int, float) of tensors that have
 * dimensions.
 *
 * The unary and binary ops below are the rows of LT_UNARY_OPS and
 * LT_BINARY_OPS (lazytensor_ops.h), declared from them here:
 *   lt_tensor *lt_<name>(lt_tensor *a)                  (neg, abs, ..., exp, ..., isfinite)
 *   lt_tensor *lt_<name>(lt_tensor *a, lt_tensor *b)    (add, ..., eq, ..., matmul)
 * Each row gives the op's result dtype, the inputs with a NaN result and
 * whether it has a gradient. Floating ops (DTYPE FLOAT): bool and integer
 * inputs give f32. */
#define LT__DECLARE_UNARY(name, ...) LT_API lt_tensor *lt_##name(lt_tensor *a);
#define LT__DECLARE_BINARY(name, ...) LT_API lt_tensor *lt_##name(lt_tensor *a, lt_tensor *b);
LT_UNARY_OPS(LT__DECLARE_UNARY)
LT_BINARY_OPS(LT__DECLARE_BINARY)
#undef LT__DECLARE_UNARY
#undef LT__DECLARE_BINARY
/* clamp to [lo, hi]; NAN for a bound means none. As torch.clamp: NaN stays NaN, lo > hi
 * gives hi; the gradient is 1 on [lo, hi] (bounds included), 0 outside and at NaN. */
LT_API lt_tensor *lt_clamp(lt_tensor *a, double lo, double hi);

/* cond ? a : b, broadcasting all three; cond is read as bool. */
LT_API lt_tensor *lt_where(lt_tensor *cond, lt_tensor *a, lt_tensor *b);
/* torch.masked_fill: a where mask (bool, broadcast to a's shape) is false,
 * value where it is true; a's dtype (value converted as torch). */
LT_API lt_tensor *lt_masked_fill(lt_tensor *a, lt_tensor *mask, double value);
/* torch.tril / torch.triu over the last two axes (rank >= 2): elements with
 * j - i <= diagonal (tril) or j - i >= diagonal (triu) are kept, the others
 * zero (false for bool). Gradients pass through the kept elements. */
LT_API lt_tensor *lt_tril(lt_tensor *a, int64_t diagonal);
LT_API lt_tensor *lt_triu(lt_tensor *a, int64_t diagonal);
LT_API lt_tensor *lt_cast(lt_tensor *a, lt_dtype dt);
/* torch.remainder and torch.floor_divide (Python's % and //): the operands
 * broadcast and promote as lt_add (bool with bool is LT_EDTYPE); the result
 * has the promoted dtype. remainder has the sign of b (or is 0) and
 * floor_divide rounds toward -inf: remainder(-7, 2) = 1, floor_divide(-7, 2)
 * = -4, remainder(7, -2) = -1. Floats follow torch's formulas over C's fmod,
 * which is exact for any magnitudes (f32 remainder(1e20, 3) = 2, f64 = 1;
 * tiny b too): remainder of an infinite a or of b == 0 is NaN, floor_divide
 * by 0 is a / b (+-inf or NaN); a zero remainder keeps a's sign (-0.0 for
 * remainder(-3, 3)), as torch. Integers divided by 0 give 0 for both
 * (numpy's answer; torch raises an error, a lazy graph cannot since b is
 * data); INT_MIN // -1 wraps to INT_MIN.
 * Gradients: remainder's are 1 for a and -floor_divide(a, b) for b (torch's);
 * floor_divide has none (a constant to autograd, as lt_detach).
 * (lt_remainder and lt_floor_divide are rows of LT_BINARY_OPS.) */

/* ---- reductions ------------------------------------------------------------------- */
/* axes: naxes entries (negative count from the end); naxes == 0 reduces all axes.
 * sum and prod of bool/int give i64; mean needs a floating dtype.
 * These and lt_any / lt_all below are the rows of LT_REDUCE_OPS
 * (lazytensor_ops.h), declared from them here:
 *   lt_tensor *lt_<name>(lt_tensor *a, const int *axes, int naxes, bool keepdim) */
#define LT__DECLARE_REDUCE(name, ...) \
  LT_API lt_tensor *lt_##name(lt_tensor *a, const int *axes, int naxes, bool keepdim);
LT_REDUCE_OPS(LT__DECLARE_REDUCE)
#undef LT__DECLARE_REDUCE
/* The names (without "lt_") of the rows of LT_UNARY_OPS, LT_BINARY_OPS and
 * LT_REDUCE_OPS that this library was built with, in row order, for bindings
 * that call the library without its headers: the i-th, NULL for i out of
 * range. */
LT_API const char *lt_unary_op_name(int i);
LT_API const char *lt_binary_op_name(int i);
LT_API const char *lt_reduce_op_name(int i);
/* torch.var / torch.std over axes (same axes rules): sum((a - mean)^2) /
 * max(N - correction, 0) for groups of N elements; correction 1 is the
 * unbiased estimate (torch's default), 0 the population one. A divisor of 0
 * gives NaN (or inf), as torch; so does an empty group. Floating dtypes only
 * (LT_EDTYPE otherwise, as torch). f32 is computed in f64 and rounded once,
 * as torch's cpu kernels: std([3e19, -3e19]) is 4.24e19, not inf, although
 * the squares overflow f32 (the var, 1.8e39, is inf in f32). */
LT_API lt_tensor *lt_var(lt_tensor *a, const int *axes, int naxes, double correction, bool keepdim);
LT_API lt_tensor *lt_std(lt_tensor *a, const int *axes, int naxes, double correction, bool keepdim);
/* torch.linalg.vector_norm over axes (naxes == 0: the whole tensor as one
 * vector): ord 2 (Euclidean), 1, INFINITY (max |a|), -INFINITY (min |a|), 0
 * (count of non-zero elements), any other (sum |a|^ord)^(1/ord). Floating
 * dtypes only; the +-inf norms of an empty group are LT_ESHAPE. The gradient
 * is torch's: 0 where the norm is 0, and for ord < 1 at elements that are 0;
 * the inf norms split it evenly among the elements that reach the max.
 * (lt_norm, ord before the axes, is its deprecated alias.) */
LT_API lt_tensor *lt_vector_norm(lt_tensor *a, const int *axes, int naxes, double ord,
                                 bool keepdim);
/* torch.any / torch.all over axes: whether some / every element is non-zero
 * (NaN is non-zero). bool result (u8 for a u8 input, as torch); over no
 * elements any is false and all is true. (Rows of LT_REDUCE_OPS.) */
/* Index (i64) of the first largest / smallest value along one axis. */
LT_API lt_tensor *lt_argmax(lt_tensor *a, int axis, bool keepdim);
LT_API lt_tensor *lt_argmin(lt_tensor *a, int axis, bool keepdim);
LT_API lt_tensor *lt_softmax(lt_tensor *a, int axis);
LT_API lt_tensor *lt_log_softmax(lt_tensor *a, int axis);

/* ---- contraction -------------------------------------------------------------------- */
/* numpy.matmul: 1-d operands are promoted and the added dim removed; batch dims
 * broadcast. bool is not accepted. lt_matmul(a, b) is a row of LT_BINARY_OPS. */

/* ---- attention ------------------------------------------------------------------------ */
/* torch.nn.functional.scaled_dot_product_attention (PyTorch 2's documented
 * math, no dropout): q [..., L, E], k [..., S, E], v [..., S, Ev] (float,
 * operands promote; batch dims broadcast) -> [..., L, Ev] =
 * softmax(q k^T * scale + bias) v, with scale = 1/sqrt(E) when scale is NaN
 * or <= 0. mask (NULL for none) broadcasts to [..., L, S]: bool keeps the
 * positions that are true (false ones get -inf), a float mask is added.
 * causal: position i sees positions j <= i (the top-left aligned lower
 * triangle, as torch's is_causal); mask and causal together is LT_EINVAL,
 * as in torch. A row that sees no position is NaN, as torch's math path.
 * The cpu backend fuses scale, mask, softmax and the second product so that
 * the L x S scores are never stored in full (a blocked online softmax). */
LT_API lt_tensor *lt_scaled_dot_product_attention(lt_tensor *q, lt_tensor *k, lt_tensor *v,
                                                  lt_tensor *mask, bool causal, double scale);

/* ---- convolution and pooling (NCHW) ------------------------------------------------- */
/* The {h, w} arguments below each come with a count (see Conventions): 2
 * for {h, w}, 1 for one value on both axes (torch's int), 0 for the
 * default (then the pointer may be NULL). Another count, or a NULL pointer
 * with a count, is LT_EINVAL. The forms without counts (lt_conv2d, ...) are
 * deprecated aliases at the end of this file.
 *
 * torch.nn.functional.conv2d: x [N, C, H, W], weight [O, C / groups, kh, kw],
 * bias [O] or NULL; f32 or f64 (operands promote). stride, padding and
 * dilation default to 1, 0, 1; groups >= 1 divides C and O.
 * Output [N, O, (H + 2 ph - dh (kh - 1) - 1) / sh + 1, ...]; an empty output
 * (a kernel larger than the padded input) is an error, as in PyTorch. */
LT_API lt_tensor *lt_conv2d_n(lt_tensor *x, lt_tensor *weight, lt_tensor *bias,
                              const int64_t *stride, int nstride, const int64_t *padding,
                              int npadding, const int64_t *dilation, int ndilation, int64_t groups);
/* torch.nn.functional.conv_transpose2d: x [N, C, H, W], weight
 * [C, O / groups, kh, kw], bias [O] or NULL; output_padding (default 0)
 * must be smaller than stride or dilation. Output [N, O,
 * (H - 1) sh - 2 ph + dh (kh - 1) + oph + 1, ...] (the gradient of conv2d
 * with respect to its input). */
LT_API lt_tensor *lt_conv_transpose2d_n(lt_tensor *x, lt_tensor *weight, lt_tensor *bias,
                                        const int64_t *stride, int nstride, const int64_t *padding,
                                        int npadding, const int64_t *output_padding,
                                        int noutput_padding, const int64_t *dilation, int ndilation,
                                        int64_t groups);
/* torch.nn.functional.max_pool2d on [N, C, H, W] or [C, H, W]: kernel {kh,
 * kw} (required); stride by default the kernel; padding (default 0) at most
 * half the kernel, filled with -inf; dilation default 1; ceil_mode as
 * PyTorch (a window must start inside the input or its left padding). NaN
 * propagates. The gradient goes to the first largest element of each window
 * (row-major window order). */
LT_API lt_tensor *lt_max_pool2d_n(lt_tensor *x, const int64_t *kernel, int nkernel,
                                  const int64_t *stride, int nstride, const int64_t *padding,
                                  int npadding, const int64_t *dilation, int ndilation,
                                  bool ceil_mode);
/* torch.nn.functional.avg_pool2d: as max_pool2d without dilation; padding
 * counts as zeros; count_include_pad chooses whether padded elements count in
 * each window's divisor; divisor_override > 0 replaces the divisor (0: none). */
LT_API lt_tensor *lt_avg_pool2d_n(lt_tensor *x, const int64_t *kernel, int nkernel,
                                  const int64_t *stride, int nstride, const int64_t *padding,
                                  int npadding, bool ceil_mode, bool count_include_pad,
                                  int64_t divisor_override);
/* torch.nn.functional.adaptive_avg_pool2d to output {oh, ow} (required):
 * window i of an axis of size n covers [floor(i n / o), ceil((i + 1) n / o)). */
LT_API lt_tensor *lt_adaptive_avg_pool2d_n(lt_tensor *x, const int64_t *output_size,
                                           int noutput_size);
/* torch.flatten: axes start_axis..end_axis (negative counts from the end)
 * merged into one. */
LT_API lt_tensor *lt_flatten(lt_tensor *x, int start_axis, int end_axis);

/* ---- normalisation ------------------------------------------------------------------- */
/* torch.nn.functional.batch_norm over axis 1 of x [N, C, ...]. training:
 * normalises by the batch statistics (mean and biased variance over every
 * axis but 1) and, when running_mean / running_var are given (both or
 * neither, [C], x's dtype), updates them lazily in place (lt_assign, no
 * gradient): r = (1 - momentum) r + momentum s, with the unbiased variance
 * for running_var (PyTorch's rule; a single value per channel is an error).
 * Not training: normalises by the running statistics (required; constants to
 * autograd). weight and bias [C] or NULL. Every tensor has x's dtype, f32 or
 * f64 (LT_EDTYPE otherwise, as torch's CPU kernels); eps >= 0 and momentum
 * finite (LT_EINVAL). */
LT_API lt_tensor *lt_batch_norm(lt_tensor *x, lt_tensor *running_mean, lt_tensor *running_var,
                                lt_tensor *weight, lt_tensor *bias, bool training, double momentum,
                                double eps);
/* torch.nn.functional.layer_norm: normalises over the last nnorm axes of x,
 * whose sizes are normalized_shape (the check); weight and bias of
 * normalized_shape or NULL. Biased variance. Dtypes and eps as batch_norm. */
LT_API lt_tensor *lt_layer_norm(lt_tensor *x, const int64_t *normalized_shape, int nnorm,
                                lt_tensor *weight, lt_tensor *bias, double eps);
/* torch.nn.functional.group_norm: x [N, C, ...], C divisible by num_groups;
 * statistics per (sample, group); weight and bias [C] or NULL. Dtypes and eps
 * as batch_norm. */
LT_API lt_tensor *lt_group_norm(lt_tensor *x, int64_t num_groups, lt_tensor *weight,
                                lt_tensor *bias, double eps);

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
 * stops mean the end, NULL steps mean 1. Out-of-range bounds are clamped. n is
 * the arrays' length and must be a's rank (LT_EINVAL otherwise). */
LT_API lt_tensor *lt_slice_n(lt_tensor *a, const int64_t *starts, const int64_t *stops,
                             const int64_t *steps, int n);
LT_API lt_tensor *lt_concat(lt_tensor *const *ts, int n, int axis);
LT_API lt_tensor *lt_stack(lt_tensor *const *ts, int n, int axis);
/* pads[2*i], pads[2*i+1]: elements added before and after axis i (>= 0),
 * value in the new places. npads must be twice a's rank (LT_EINVAL
 * otherwise). */
LT_API lt_tensor *lt_pad_n(lt_tensor *a, const int64_t *pads, int npads, double value);
/* torch.flip: a reversed along each of axes (naxes entries, no axis
 * twice). */
LT_API lt_tensor *lt_flip(lt_tensor *a, const int *axes, int naxes);
/* torch.roll: element i of axis axes[k] moves to (i + shifts[k]) mod its size
 * (negative shifts roll back; an axis may appear more than once). With
 * naxes == 0, one shift rolls the flattened tensor and the shape is kept. */
LT_API lt_tensor *lt_roll(lt_tensor *a, const int64_t *shifts, int nshifts, const int *axes,
                          int naxes);
/* torch.Tensor.repeat: a tiled repeats[d] times along each axis; nrep must be
 * at least a's rank (a gets leading axes of size 1 to nrep dims); 0 repeats
 * give an empty axis. */
LT_API lt_tensor *lt_repeat(lt_tensor *a, const int64_t *repeats, int nrep);
/* Splitting along axis into pieces written to out[0..count) (new tensors as
 * any op result: they share a's value, nothing is copied). Each returns the
 * count of pieces, or a negative status with nothing created; out == NULL
 * only returns the count, and a count above cap is LT_EINVAL. 0-d tensors
 * cannot be split (LT_ESHAPE).
 * lt_split: torch.split with a list: pieces of sizes[0..nsizes), which must
 * add up to the axis' size. lt_split_size: torch.split with one size: pieces
 * of size, the last one smaller if the axis does not divide evenly (one empty
 * piece for an empty axis; size 0 only then). lt_chunk: torch.chunk: pieces
 * of ceil(dim / chunks), so possibly fewer than chunks (6 in 4 chunks gives
 * 2, 2, 2); an empty axis gives chunks empty pieces. */
LT_API int lt_split(lt_tensor *a, const int64_t *sizes, int nsizes, int axis, lt_tensor **out,
                    int cap);
LT_API int lt_split_size(lt_tensor *a, int64_t size, int axis, lt_tensor **out, int cap);
LT_API int lt_chunk(lt_tensor *a, int chunks, int axis, lt_tensor **out, int cap);
/* torch.gather: out[i][j] = a[index[i][j]][j] for axis 0, etc. index is an
 * integer tensor of a's rank. Out-of-range indices fail at execution. */
LT_API lt_tensor *lt_gather(lt_tensor *a, int axis, lt_tensor *index);
/* Select entries of a 1-d integer index along axis. */
LT_API lt_tensor *lt_index_select(lt_tensor *a, int axis, lt_tensor *index);
/* One-hot of an integer tensor: a new last axis of num_classes entries. */
LT_API lt_tensor *lt_one_hot(lt_tensor *indices, int64_t num_classes, lt_dtype dt);
/* torch.nn.functional.embedding: rows of weight [num, dim] picked by an
 * integer tensor of indices of any shape -> [*indices.shape, dim]. Its
 * gradient adds each picked row's gradient into weight (scatter-add, repeats
 * sum). An index outside [0, num) fails at execution (LT_EEXEC). */
LT_API lt_tensor *lt_embedding(lt_tensor *indices, lt_tensor *weight);
/* Writes at computed positions, as torch (a is not changed: the result is a
 * new tensor). index is i32 or i64; src has a's dtype (LT_EDTYPE otherwise).
 * Out-of-range (or negative) indices fail at execution (LT_EEXEC), before
 * anything is written.
 * lt_scatter_add (torch.scatter_add): a, with src[i][j] added at
 * [index[i][j]][j] for axis 0, etc. index, src and a have one rank; index is
 * no larger than src in any dim nor than a off axis; only the part of src
 * that index covers is read. Duplicate indices add up.
 * lt_scatter (torch.scatter): the same positions are replaced by src's
 * values; a 0-d src is torch's `value` form (one value, any dtype, converted
 * to a's with torch's overflow check, as lt_masked_fill: -1 or 256 into u8
 * is LT_EINVAL; a src of another dtype is read, so its graph runs). Where
 * index repeats a position torch leaves the result undefined (one of the
 * values); here it is their mean, so it is exact when they are equal.
 * Gradients: src gets g gathered at index (divided by the repeat count), a
 * gets g where nothing was written.
 * lt_index_add (torch.index_add): a, with alpha * src[..., i, ...] added at
 * [..., index[i], ...] along axis; index is 1-d (or 0-d), src has a's shape
 * but len(index) along axis; alpha must be an integer for integer a. */
LT_API lt_tensor *lt_scatter_add(lt_tensor *a, int axis, lt_tensor *index, lt_tensor *src);
LT_API lt_tensor *lt_scatter(lt_tensor *a, int axis, lt_tensor *index, lt_tensor *src);
LT_API lt_tensor *lt_index_add(lt_tensor *a, int axis, lt_tensor *index, lt_tensor *src,
                               double alpha);

/* ---- scans and sorting ------------------------------------------------------------------ */
/* axis: one axis, negative counting from the end; a 0-d tensor takes 0 or -1.
 *
 * torch.cumsum: out[..., j, ...] = sum of a[..., i, ...] for i <= j along axis.
 * bool and integer inputs give i64 (as torch); a float input keeps its dtype.
 * For torch's dtype= argument, cast first: lt_cumsum(lt_cast(a, dt), axis). */
LT_API lt_tensor *lt_cumsum(lt_tensor *a, int axis);
/* torch.sort / torch.argsort: a sorted along axis, ascending or descending.
 * The sort is always stable (equal elements keep their order, in either
 * direction: torch's stable=True, which is also a valid stable=False
 * result); NaN sorts as larger than every number (last ascending, first
 * descending); -0.0 equals 0.0. *values gets the sorted values (a's dtype),
 * *indices their positions along axis (i64), both of a's shape and new
 * references as any op result; either pointer may be NULL when that output
 * is not wanted (not both). Returns LT_OK, or a negative status with both
 * outputs set to NULL and nothing created. The gradient of the values flows
 * back through the indices (torch's). */
LT_API int lt_sort(lt_tensor *a, int axis, bool descending, lt_tensor **values,
                   lt_tensor **indices);
LT_API lt_tensor *lt_argsort(lt_tensor *a, int axis, bool descending); /* lt_sort's indices */
/* torch.topk: the k largest (largest) or smallest elements along axis, in
 * sorted order (largest first, or smallest first), with their i64 positions:
 * the first k of lt_sort(a, axis, largest) (so ties keep their order, and NaN
 * counts as the largest). Results have a's shape with k along axis; k must lie
 * in [0, size of axis] (LT_EINVAL otherwise); a 0-d input takes k = 1 only.
 * Outputs and status as lt_sort. torch's sorted=False allows any order, so
 * the sorted result serves it too. */
LT_API int lt_topk(lt_tensor *a, int64_t k, int axis, bool largest, lt_tensor **values,
                   lt_tensor **indices);

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
/* Warm-up: compiles, without running or uploading anything, the executable
 * that reading ts will run: lt_sync(ts, n, ...) of the same tensors in the
 * same order, which for one tensor is also what lt_to_data(ts[0], ...)
 * runs. A later read of them then finds it in the compilation cache
 * (tensors without a pending graph are skipped; donors are those a read
 * chooses: tensors marked by lt_set_donatable). To read several tensors
 * after one warm-up, sync them together with lt_sync first: lt_to_data of
 * each alone runs a graph of its own. ts stay pending. LT_EDEVICE for
 * tensors on different devices. */
LT_API int lt_warmup(lt_tensor *const *ts, int n);
/* Warm-up of a step: compiles the executable that lt_mark_step will run
 * when ts are the tensors with a pending graph on their device: the same
 * graph (ts in any order), the step barrier's flags and the same donated
 * inputs, so that the step finds it in the compilation cache. Pass every
 * tensor the step will sync: with fewer, the step runs another graph and
 * compiles it (an lt_nn optimizer's state tensors cannot be named, so a step
 * with SGD momentum or Adam is not warmed this way). ts stay pending.
 * LT_EDEVICE for tensors on different devices. */
LT_API int lt_warmup_step(lt_tensor *const *ts, int n);
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

/* The backend that compiles and runs graphs, for every device of the
 * process: "cpu" (fused LLVM kernels and oneDNN products, the default) or
 * "ref" (the plain interpreter, the oracle every op is checked against).
 * LT_BACKEND=<name> in the environment chooses it at the first graph;
 * lt_set_backend replaces that choice from the next graph on (graphs already
 * queued finish on the backend that compiled them). A name that is no
 * backend is LT_EINVAL, the message listing the known ones, and the choice
 * stays. Tensors alive may cross a switch: both backends keep their buffers
 * in host memory in one layout, each reads the other's, and compiled
 * executables are cached per backend, so a graph is never run by the other's
 * code. (A backend with storage of its own would be refused while tensors
 * are alive, LT_EINVAL naming how many.) lt_get_backend returns the name of
 * the backend the next graph uses, a static string. */
LT_API int lt_set_backend(const char *name);
LT_API const char *lt_get_backend(void);

/* Eager mode: every op runs as soon as it is traced (also LT_EAGER=1). */
LT_API void lt_set_eager(bool on);
LT_API bool lt_get_eager(void);
/* Autocast (mixed precision, as torch.autocast("cpu", dtype=torch.bfloat16)):
 * between lt_autocast_begin(dev, LT_BF16) and lt_autocast_end(dev), ops built
 * by this thread on dev choose their compute dtype by torch 1.13's CPU lists:
 * lt_matmul, lt_nn_linear_forward, lt_conv2d and attention cast f32 operands
 * to bf16 (f64 is left alone); lt_conv_transpose2d, lt_prod and the losses
 * cast bf16 operands to f32; every other op runs in its operands' dtype. The
 * casts are graph nodes, so gradients flow through them: f32 parameters get
 * f32 gradients, bf16 activations bf16 ones. Scopes nest; LT_F32 turns
 * autocast off until its own end. The state is per thread and per device.
 * LT_EDTYPE for a dtype other than bf16 or f32, LT_EINVAL for an end with no
 * open scope (or nesting deeper than 32), LT_EDEVICE for a bad device. */
LT_API int lt_autocast_begin(lt_device dev, lt_dtype dt);
LT_API int lt_autocast_end(lt_device dev);
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
/* Writes p to path (replaced atomically): its graph as IR, the dtypes and
 * shapes of its inputs and outputs, the values it captured (weights,
 * scalars) and, when the backend can serialize it, the compiled code for this
 * CPU. The format is versioned and checksummed (docs/DEPLOY.md). */
LT_API int lt_program_save(const lt_program *p, const char *path);
/* A program from a file lt_program_save wrote, on lt_cpu(0), run with
 * lt_program_run like any other. The saved code is used when the file was
 * written by this library version, op table, backend and CPU; otherwise the
 * graph is compiled again from its IR. NULL with the error set (LT_ENOTFOUND
 * for a missing file, LT_EINVAL for a truncated, corrupted or foreign one). */
LT_API lt_program *lt_program_load(const char *path);
/* The number of inputs (output false) or outputs (true) of p; -1 for NULL. */
LT_API int lt_program_count(const lt_program *p, bool output);
/* The dtype and shape of input or output i of p (shape: room for LT_MAX_DIMS).
 * LT_EINVAL when i is out of range. */
LT_API int lt_program_signature(const lt_program *p, bool output, int i, lt_dtype *dt,
                                int64_t *shape, int *ndim);

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
/* torch.Tensor.detach: a new tensor with a's value (the same lazy graph, nothing
 * is computed or copied) that lt_backward treats as a constant: no gradient
 * flows through it into the tensors a was computed from. It does not require
 * grad; lt_set_requires_grad on it makes it a leaf of its own. */
LT_API lt_tensor *lt_detach(lt_tensor *a);
/* torch.no_grad: between lt_no_grad_begin() and lt_no_grad_end() every op
 * result of this thread is made as by lt_detach, so that updates and
 * evaluation record nothing for autograd. Scopes nest (per thread); an end
 * without a begin does nothing. lt_set_requires_grad still works inside, and
 * lt_get_no_grad() tells whether a scope is open on this thread. */
LT_API void lt_no_grad_begin(void);
LT_API void lt_no_grad_end(void);
LT_API bool lt_get_no_grad(void);

/* ---- random numbers ------------------------------------------------------------------- */
/* One seed per device. Random ops draw from a seed chain kept inside the graph,
 * so a training step compiles once; lt_mark_step advances the base seed.
 * lt_set_seed sets the device's base seed (torch.manual_seed). */
LT_API int lt_set_seed(lt_device dev, uint64_t seed);
/* The device's random state as an opaque blob (torch.get_rng_state /
 * set_rng_state): setting a state got earlier replays the same draws (dropout
 * masks, randperm), within a step and across lt_mark_step. The blob is plain
 * bytes, the same on every host: it may be written to a file and set in
 * another process. LT_EINVAL for bytes that are not such a state. */
#define LT_RNG_STATE_BYTES 32
typedef struct lt_rng_state {
  uint8_t bytes[LT_RNG_STATE_BYTES];
} lt_rng_state;
LT_API int lt_get_rng_state(lt_device dev, lt_rng_state *out);
LT_API int lt_set_rng_state(lt_device dev, const lt_rng_state *state);
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
 * CreateTensor, DestroyTensor, ...) into *out. The cpu backend counts kernels:
 * KernelCompile (compiled by LLVM) and KernelCacheHit (a new executable's
 * kernel found compiled already: in a live executable, or earlier in the same
 * graph). */
LT_API int lt_get_counter(const char *name, int64_t *out);
/* Names of all counters, NULL-terminated. */
LT_API const char *const *lt_counter_names(void);
/* Reset every counter to 0. */
LT_API void lt_counters_reset(void);
/* Timers (TraceTime, CompileTime, ExecuteTime, TransferToDeviceTime,
 * TransferFromDeviceTime, DeviceLockWait; in ns) and value metrics
 * (TensorsGraphSize, InputOutputAliasCount): samples seen and their stats.
 * DeviceLockWait: each wait for a device's execution lock (a sync, read or
 * lt_wait_device_ops waiting for the execution in flight). TraceTime: per
 * sync, the time from the end of the device's previous sync to the start of
 * this one, less the lock waits in between: the program's own tracing. */
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
/* The instruction set that dtype dt's products (matmul, convolutions) use on
 * dev, a static string: on the cpu backend oneDNN's for f32 ("avx512_core",
 * "avx2", ... as capped by LT_CPU_ISA), for bf16 the same when it has the
 * bf16 dot product ("avx512_core_bf16", "avx512_core_amx"), else e.g. "avx2
 * (bf16 converted to f32)"; "openblas <core>" for f64; "ref" for dtypes whose
 * products run on the ref fallback, and on the ref backend. NULL (and the
 * error set) for a bad device or dtype. The metrics report names the bf16
 * set once a bf16 product ran (Info: Bf16Isa), beside the counters
 * Bf16GemmNative / Bf16GemmConverted and Bf16ConvNative / Bf16ConvConverted. */
LT_API const char *lt_get_isa(lt_device dev, lt_dtype dt);

/* Cost analysis (docs/COST.md), as XLA's cost_analysis() and PyTorch's
 * FlopCounterMode: the executor counts each graph's cost from its IR.
 * flops: the products only (matmul, attention, convolutions and their
 * gradients), 2 per multiply-add, as MFU counts them; bytes: every op reads
 * its operands and writes its result once (the unfused graph's traffic;
 * leaves and strided views move nothing). The counters ExecutedFlops and
 * ExecutedBytes sum them over every execution (lt_counters_reset zeroes
 * them). */
typedef struct lt_cost {
  double flops;
  double bytes;
} lt_cost;
/* The cost of the graph that syncing ts would run (their pending graphs;
 * nothing is compiled or run; tensors without one add nothing). */
LT_API int lt_get_graph_cost(lt_tensor *const *ts, int n, lt_cost *out);
/* The cost of the graph last executed on dev (zeros before the first); read
 * it after lt_wait_device_ops, as an execution in flight may be writing it. */
LT_API int lt_get_last_cost(lt_device dev, lt_cost *out);
/* The sum over every execution since start or lt_counters_reset. */
LT_API int lt_get_executed_cost(lt_cost *out);
/* The f32 multiply-add peak of `threads` cores in GFLOP/s (0: as many as the
 * cpu backend runs on): threads x one core's peak, which is measured once per
 * process (a few milliseconds of the widest vector FMA the CPU has) unless
 * LT_PEAK_GFLOPS gives it. MFU = FLOPs / seconds / 1e9 / peak. LT_ENOTFOUND
 * on a CPU without vector FMA and no LT_PEAK_GFLOPS; LT_EINVAL for a bad
 * LT_PEAK_GFLOPS. */
LT_API int lt_get_fma_peak(int threads, double *gflops);

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
/* The forms before the array counts and the argument order of the
 * Conventions: a NULL {h, w} pair is a count of 0, any other pointer holds
 * a full {h, w} pair (2) and slice and pad arrays cover every axis, as
 * before. Their errors name the new function. */
LT_DEPRECATED("use lt_vector_norm (the axes before ord)")
static inline lt_tensor *lt_norm(lt_tensor *a, double ord, const int *axes, int naxes,
                                 bool keepdim) {
  return lt_vector_norm(a, axes, naxes, ord, keepdim);
}
LT_DEPRECATED("use lt_slice_n (with the number of axes)")
static inline lt_tensor *lt_slice(lt_tensor *a, const int64_t *starts, const int64_t *stops,
                                  const int64_t *steps) {
  return lt_slice_n(a, starts, stops, steps, lt_ndim(a) < 0 ? 0 : lt_ndim(a));
}
LT_DEPRECATED("use lt_pad_n (with the number of pads)")
static inline lt_tensor *lt_pad(lt_tensor *a, const int64_t *pads, double value) {
  return lt_pad_n(a, pads, lt_ndim(a) < 0 ? 0 : 2 * lt_ndim(a), value);
}
#define LT__PAIR_COUNT(p) ((p) ? 2 : 0)
LT_DEPRECATED("use lt_conv2d_n (with the counts of the pairs)")
static inline lt_tensor *lt_conv2d(lt_tensor *x, lt_tensor *weight, lt_tensor *bias,
                                   const int64_t *stride, const int64_t *padding,
                                   const int64_t *dilation, int64_t groups) {
  return lt_conv2d_n(x, weight, bias, stride, LT__PAIR_COUNT(stride), padding,
                     LT__PAIR_COUNT(padding), dilation, LT__PAIR_COUNT(dilation), groups);
}
LT_DEPRECATED("use lt_conv_transpose2d_n (with the counts of the pairs)")
static inline lt_tensor *lt_conv_transpose2d(lt_tensor *x, lt_tensor *weight, lt_tensor *bias,
                                             const int64_t *stride, const int64_t *padding,
                                             const int64_t *output_padding, const int64_t *dilation,
                                             int64_t groups) {
  return lt_conv_transpose2d_n(
      x, weight, bias, stride, LT__PAIR_COUNT(stride), padding, LT__PAIR_COUNT(padding),
      output_padding, LT__PAIR_COUNT(output_padding), dilation, LT__PAIR_COUNT(dilation), groups);
}
LT_DEPRECATED("use lt_max_pool2d_n (with the counts of the pairs)")
static inline lt_tensor *lt_max_pool2d(lt_tensor *x, const int64_t *kernel, const int64_t *stride,
                                       const int64_t *padding, const int64_t *dilation,
                                       bool ceil_mode) {
  return lt_max_pool2d_n(x, kernel, LT__PAIR_COUNT(kernel), stride, LT__PAIR_COUNT(stride), padding,
                         LT__PAIR_COUNT(padding), dilation, LT__PAIR_COUNT(dilation), ceil_mode);
}
LT_DEPRECATED("use lt_avg_pool2d_n (with the counts of the pairs)")
static inline lt_tensor *lt_avg_pool2d(lt_tensor *x, const int64_t *kernel, const int64_t *stride,
                                       const int64_t *padding, bool ceil_mode,
                                       bool count_include_pad, int64_t divisor_override) {
  return lt_avg_pool2d_n(x, kernel, LT__PAIR_COUNT(kernel), stride, LT__PAIR_COUNT(stride), padding,
                         LT__PAIR_COUNT(padding), ceil_mode, count_include_pad, divisor_override);
}
LT_DEPRECATED("use lt_adaptive_avg_pool2d_n (with the count of output_size)")
static inline lt_tensor *lt_adaptive_avg_pool2d(lt_tensor *x, const int64_t *output_size) {
  return lt_adaptive_avg_pool2d_n(x, output_size, LT__PAIR_COUNT(output_size));
}

#ifdef __cplusplus
}
#endif
#endif
