/* The cpu backend's kernels for the CNN primitives (issue #14), in the
 * cpu_native_fn shape (cpu_native.h): operands and result contiguous, NCHW
 * for activations and OIHW for weights, attributes as the op table has them
 * (conv rows: {sh, sw, ph, pw, dh, dw, groups}; MAX_POOL2D_ARGMAX: {kh, kw,
 * sh, sw, ph, pw, dh, dw}).
 *
 * The convolutions (f32, and bf16 summed in f32 and rounded once) run
 * oneDNN primitives (cpu_conv.c); their sums run in oneDNN's order, not
 * ref's, so results match the ref kernels within f32 rounding (bf16: and
 * its rounding), not bit for bit (as for GEMM), and may differ in the last
 * bits between thread counts (the batch is cut into one slice per thread).
 * The max-pool argmax (f32 and f64 in, i64 out; cpu_maxpool.c) and the
 * plane gather / scatter of its values and gradients are exact.
 *
 * Every kernel checks the attribute count and that the shapes agree with
 * each other and with the attributes, and returns CPU_NATIVE_DECLINED
 * (the fallback then runs, or reports) on anything inconsistent, on a
 * problem oneDNN does not take and when scratch memory is short. */
#ifndef LT_CPU_CONV_H
#define LT_CPU_CONV_H

#include "cpu_native.h"

/* CONV2D: (x [N,C,H,W], w [O,C/g,kh,kw]) -> y [N,O,OH,OW]; CONV2D_BIAS: the
 * same plus b [O] (a third operand) on each channel. */
int lt__cpu_conv2d_fwd(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in);
/* CONV2D_GRAD_INPUT: (gy [N,O,OH,OW], w [O,C/g,kh,kw]) -> gx [N,C,H,W]. */
int lt__cpu_conv2d_bwd_data(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in);
/* CONV2D_GRAD_WEIGHT: (x [N,C,H,W], gy [N,O,OH,OW]) -> gw [O,C/g,kh,kw]. */
int lt__cpu_conv2d_bwd_weight(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in);
/* MAX_POOL2D_ARGMAX: x [N,C,H,W] (f32 or f64) -> i64 [N,C,OH,OW]. */
int lt__cpu_max_pool2d_argmax(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in);
/* POOL_GATHER: (v [N,C,H,W], idx i64 [N,C,...]) -> idx's shape, f32 or f64;
 * exact (copies). */
int lt__cpu_pool_gather(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in);
/* POOL_SCATTER_ADD: (g [N,C,...], idx) -> [N,C,H,W]; ref's sums exactly
 * (each plane in double where an index repeats). */
int lt__cpu_pool_scatter_add(const lt_instr *ins, lt_buffer *out, lt_buffer *const *in);

/* Frees the cached oneDNN primitives. Safe at any time, from any thread:
 * a primitive another thread is running is freed when that run ends. */
void lt__cpu_conv_cleanup(void);
/* Cached primitives (for tests). */
int lt__cpu_conv_cached(void);

#endif
