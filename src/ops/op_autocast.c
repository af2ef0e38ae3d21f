/* Autocast scopes: lt_autocast_begin(dev, dt) / lt_autocast_end(dev).
 *
 * The state is per thread and per device, as torch's autocast state is per
 * thread: a scope changes the graphs the thread that opened it traces, and
 * never those of another thread tracing on the same device (data-parallel
 * replicas, a loader thread). Casts are decided when an op is built, so the
 * graph holds them as CAST nodes: a scope has no effect on execution, and
 * autograd differentiates the casts (a CAST's gradient is cast back, so f32
 * parameters get f32 gradients and bf16 activations bf16 ones).
 *
 * Scopes nest; each begin pushes its dtype and each end pops one. LT_F32 in
 * a scope turns autocast off until its end (torch's nested
 * autocast(enabled=False)).
 *
 * The op classes follow torch 1.13's CPU autocast lists (what
 * torch.autocast("cpu", dtype=torch.bfloat16) does): matmul, linear and
 * convolution run in bf16; the losses, conv_transpose and prod in f32; the
 * rest (sum, mean, softmax, log_softmax, layer_norm, ...) in their input's
 * dtype. For bf16 inputs those compute in f32 or wider inside and round once
 * (the ref kernels and the composite builders), which is what torch's CPU
 * kernels do, so their results are torch's; where a torch kernel rounds in
 * between (log_softmax along the last axis, logsumexp), ref rounds there
 * too. */
#include "op_autocast.h"

#include "lt_device.h"
#include "lt_ops.h"

/* The deepest nesting: a program that never ends its scopes fails here
 * instead of growing without bound. */
#define LT_AUTOCAST_MAX_DEPTH 32

typedef enum autocast_class { AUTOCAST_LOWER, AUTOCAST_FP32 } autocast_class;

#define LT_AUTOCAST_CLASS(e, cls) [LT_AUTOCAST_##e] = AUTOCAST_##cls,
static const autocast_class kClass[LT_AUTOCAST_OP_COUNT] = {LT_AUTOCAST_OPS(LT_AUTOCAST_CLASS)};
#undef LT_AUTOCAST_CLASS

typedef struct autocast_stack {
  int depth;
  lt_dtype dt[LT_AUTOCAST_MAX_DEPTH];
} autocast_stack;

static _Thread_local autocast_stack g_stack[LT_MAX_DEVICES];

/* The scope's dtypes: bf16 (on) and f32 (off inside an enclosing scope). */
static bool scope_dtype_ok(lt_dtype dt) {
  switch (dt) {
  case LT_BF16:
  case LT_F32:
    return true;
  case LT_F64:
  case LT_BOOL:
  case LT_I32:
  case LT_I64:
  case LT_U8:
  case LT_I8:
  case LT_NUM_DTYPES: /* not a dtype */
    return false;
  }
  return false;
}

int lt_autocast_begin(lt_device dev, lt_dtype dt) {
  static const char *fn = "lt_autocast_begin";
  if (!lt__device_ctx(fn, dev)) return lt_last_status();
  if (!scope_dtype_ok(dt))
    return lt__err(LT_EDTYPE, "%s: dtype %s is not an autocast dtype (bf16, or f32 for off)", fn,
                   lt_dtype_name(dt));
  autocast_stack *s = &g_stack[dev.index];
  if (s->depth == LT_AUTOCAST_MAX_DEPTH)
    return lt__err(LT_EINVAL, "%s: scopes nested more than %d deep on CPU:%d", fn,
                   LT_AUTOCAST_MAX_DEPTH, dev.index);
  s->dt[s->depth++] = dt;
  return LT_OK;
}

int lt_autocast_end(lt_device dev) {
  if (!lt__device_ctx("lt_autocast_end", dev)) return lt_last_status();
  autocast_stack *s = &g_stack[dev.index];
  if (s->depth == 0)
    return lt__err(LT_EINVAL, "lt_autocast_end: no autocast scope is open on CPU:%d in this thread",
                   dev.index);
  s->depth--;
  return LT_OK;
}

lt_dtype lt__autocast_dtype(lt_device dev, lt_autocast_op op, lt_dtype dt) {
  if (dev.index < 0 || dev.index >= LT_MAX_DEVICES || op < 0 || op >= LT_AUTOCAST_OP_COUNT)
    return dt;
  const autocast_stack *s = &g_stack[dev.index];
  if (s->depth == 0) return dt;
  lt_dtype scope = s->dt[s->depth - 1];
  if (scope == LT_F32) return dt; /* off until this scope ends */
  if (kClass[op] == AUTOCAST_LOWER) return dt == LT_F32 ? scope : dt;
  return dt == scope ? LT_F32 : dt;
}
