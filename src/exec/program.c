/* Execute-by-key: a graph compiled once and run again on new inputs without
 * tracing. A program holds the graph key (not the executable: the cache may
 * evict it, and then running says so), how its parameters map to the caller's
 * inputs, and the parameters it captured (scalars and other fixed data). */
#include <string.h>

#include "../core/lt_alloc.h"
#include "../core/lt_error.h"
#include "program_internal.h"

typedef lt__shape_sig shape_sig;

static shape_sig sig_of(const lt_tensor *t) {
  shape_sig s = {t->dtype, t->ndim, {0}};
  memcpy(s.shape, t->shape, sizeof s.shape);
  return s;
}

/* Field by field: memcmp would also compare the padding after ndim. */
static bool sig_equal(const shape_sig *a, const shape_sig *b) {
  return a->dtype == b->dtype && a->ndim == b->ndim &&
         memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof a->shape[0]) == 0;
}

void lt_program_free(lt_program *p) {
  if (!p) return;
  for (int i = 0; i < p->nparams; i++) lt__buffer_release(p->captured[i]);
  if (p->roots)
    for (int i = 0; i < p->nout; i++) lt__node_release(p->roots[i]);
  if (p->in_buf)
    for (int i = 0; i < p->nin; i++) lt__buffer_release(p->in_buf[i]);
  lt__free(p->roots, (size_t)p->nout * sizeof(lt_node *));
  lt__free(p->in_buf, (size_t)(p->nin + 1) * sizeof(lt_buffer *));
  lt__free(p->param_input, (size_t)p->nparams * sizeof(int));
  lt__free(p->captured, (size_t)p->nparams * sizeof(lt_buffer *));
  lt__free(p->in_sig, (size_t)p->nin * sizeof(shape_sig));
  lt__free(p->out_sig, (size_t)p->nout * sizeof(shape_sig));
  lt__free(p, sizeof *p);
}

/* Inputs must be device values: host data is uploaded, pending graphs refused. */
static int check_inputs(const char *fn, lt_tensor *const *inputs, int nin) {
  for (int i = 0; i < nin; i++) {
    lt_tensor *t = inputs[i];
    if (!t) return lt__err_null(fn);
    if (t->ir)
      return lt__err(LT_EINVAL, "%s: input %d holds a pending graph; sync it first", fn, i);
    if (t->host && !lt__tensor_ir(t)) return lt_last_status();
    int rc = lt__buffer_wait(t->buf);
    if (rc != LT_OK) return rc;
  }
  return LT_OK;
}

lt_program *lt_program_create(lt_tensor *const *outputs, int nout, lt_tensor *const *inputs,
                              int nin) {
  const char *fn = "lt_program_create";
  if (nout <= 0 || !outputs || nin < 0 || (nin > 0 && !inputs)) {
    lt__err(LT_EINVAL, "%s: need at least one output and a valid input list", fn);
    return NULL;
  }
  for (int i = 0; i < nout; i++) {
    if (!outputs[i]) {
      lt__err_null(fn);
      return NULL;
    }
    if (!outputs[i]->ir) {
      lt__err(LT_EINVAL, "%s: output %d holds no pending graph", fn, i);
      return NULL;
    }
  }
  if (lt__check_operands(fn, outputs, nout) != LT_OK) return NULL;
  if (nin > 0 && (lt__check_operands(fn, inputs, nin) != LT_OK ||
                  !lt__device_equal(inputs[0]->dev, outputs[0]->dev))) {
    if (lt_last_status() == LT_OK)
      lt__err(LT_EDEVICE, "%s: inputs and outputs on different devices", fn);
    return NULL;
  }
  if (check_inputs(fn, inputs, nin) != LT_OK) return NULL;
  lt_device dev = outputs[0]->dev;
  lt_exec_dev *ctx = lt__exec_dev(fn, dev);
  lt_program *p = lt__calloc(sizeof *p);
  lt_node **roots = lt__malloc((size_t)nout * sizeof *roots);
  if (!ctx || !p || !roots) goto fail;
  for (int i = 0; i < nout; i++) roots[i] = outputs[i]->ir;
  p->dev = dev;
  p->nin = nin;
  p->nout = nout;
  p->in_sig = lt__calloc((size_t)(nin + 1) * sizeof(shape_sig));
  p->out_sig = lt__calloc((size_t)nout * sizeof(shape_sig));
  p->roots = lt__calloc((size_t)nout * sizeof(lt_node *));
  p->in_buf = lt__calloc((size_t)(nin + 1) * sizeof(lt_buffer *));
  if (!p->in_sig || !p->out_sig || !p->roots || !p->in_buf) goto fail;
  for (int i = 0; i < nin; i++) p->in_sig[i] = sig_of(inputs[i]);
  for (int i = 0; i < nout; i++) p->out_sig[i] = sig_of(outputs[i]);
  for (int i = 0; i < nout; i++) p->roots[i] = lt__node_retain(roots[i]);
  for (int i = 0; i < nin; i++) p->in_buf[i] = lt__buffer_retain(inputs[i]->buf);
  if (lt__device_acquire(ctx, false) != LT_OK) goto fail;
  lt_buffer **params = NULL;
  lt_cache_entry *e = NULL;
  int rc = lt__compile_roots(dev, roots, nout, "program", &p->key, &params, &p->nparams, &e);
  lt__cache_entry_release(e);
  if (rc == LT_OK) {
    p->param_input = lt__malloc((size_t)(p->nparams + 1) * sizeof(int));
    p->captured = lt__calloc((size_t)(p->nparams + 1) * sizeof(lt_buffer *));
    if (!p->param_input || !p->captured) rc = LT_ENOMEM;
    for (int k = 0; rc == LT_OK && k < p->nparams; k++) {
      p->param_input[k] = -1;
      for (int i = 0; i < nin && p->param_input[k] < 0; i++)
        if (inputs[i]->buf == params[k]) p->param_input[k] = i;
      if (p->param_input[k] < 0) p->captured[k] = lt__buffer_retain(params[k]);
    }
  }
  lt__device_release(ctx);
  lt__free(roots, (size_t)nout * sizeof *roots);
  if (rc == LT_OK) return p;
  if (!p->captured) p->nparams = 0;
  lt_program_free(p);
  return NULL;
fail:
  if (lt_last_status() == LT_OK) lt__err(LT_ENOMEM, "%s: out of memory", fn);
  lt__free(roots, (size_t)nout * sizeof *roots);
  lt_program_free(p);
  return NULL;
}

lt_key lt_program_key(const lt_program *p) {
  lt_key k = {0, 0};
  if (p) {
    k.lo = p->key.lo;
    k.hi = p->key.hi;
  }
  return k;
}

int lt_program_run(lt_program *p, lt_tensor *const *inputs, int nin, lt_tensor **outputs) {
  const char *fn = "lt_program_run";
  if (!p || !outputs || nin != (p ? p->nin : 0) || (nin > 0 && !inputs))
    return lt__err(LT_EINVAL, "%s: need the program, %d inputs and room for the outputs", fn,
                   p ? p->nin : 0);
  for (int i = 0; i < nin; i++) {
    if (!inputs[i]) return lt__err_null(fn);
    if (!lt__device_equal(inputs[i]->dev, p->dev)) {
      char a[32], b[32];
      lt_device_str(inputs[i]->dev, a, sizeof a);
      lt_device_str(p->dev, b, sizeof b);
      return lt__err(LT_EDEVICE, "%s: input %d is on %s, the program was created on %s", fn, i, a,
                     b);
    }
    shape_sig s = sig_of(inputs[i]);
    if (!sig_equal(&s, &p->in_sig[i])) {
      char a[128], b[128];
      return lt__err(LT_ESHAPE, "%s: input %d is %s %s, the program takes %s %s", fn, i,
                     lt_dtype_name((lt_dtype)s.dtype), lt__shape_str(s.shape, s.ndim, a, sizeof a),
                     lt_dtype_name((lt_dtype)p->in_sig[i].dtype),
                     lt__shape_str(p->in_sig[i].shape, p->in_sig[i].ndim, b, sizeof b));
    }
  }
  int rc = check_inputs(fn, inputs, nin);
  if (rc != LT_OK) return rc;
  lt_exec_dev *ctx = lt__exec_dev(fn, p->dev);
  if (!ctx) return LT_EDEVICE;
  if ((rc = lt__device_acquire(ctx, true)) != LT_OK) return rc;
  lt_cache_entry *e = lt__cache_get(p->key);
  if (!e) {
    lt__device_release(ctx);
    return lt__err(LT_ENOTFOUND,
                   "%s: the graph's executable was evicted from the compilation cache "
                   "(LT_COMPILATION_CACHE_SIZE); create the program again",
                   fn);
  }
  lt_exec_job *job = lt__calloc(sizeof *job);
  if (!job) goto oom;
  job->ctx = ctx;
  job->entry = e;
  e = NULL;
  job->params = lt__calloc((size_t)(p->nparams + 1) * sizeof *job->params);
  job->outs = lt__calloc((size_t)p->nout * sizeof *job->outs);
  if (!job->params || !job->outs) goto oom;
  for (int k = 0; k < p->nparams; k++) {
    int i = p->param_input[k];
    job->params[job->nparams++] = lt__buffer_retain(i >= 0 ? inputs[i]->buf : p->captured[k]);
  }
  for (int r = 0; r < p->nout; r++) {
    lt_buffer *b =
        lt__buffer_new(e ? e->backend : job->entry->backend, p->dev, (lt_dtype)p->out_sig[r].dtype,
                       p->out_sig[r].shape, p->out_sig[r].ndim);
    if (!b) goto oom;
    job->outs[job->nouts++] = b;
  }
  rc = lt__job_run_sync(job);
  for (int r = 0; r < p->nout; r++) outputs[r] = NULL;
  for (int r = 0; rc == LT_OK && r < p->nout; r++) {
    outputs[r] = lt__tensor_from_buffer(p->dev, lt__buffer_retain(job->outs[r]));
    if (!outputs[r]) rc = LT_ENOMEM;
  }
  if (rc != LT_OK)
    for (int r = p->nout - 1; r >= 0; r--) lt__tensor_discard(outputs[r]), outputs[r] = NULL;
  lt__job_free(job);
  lt__device_release(ctx);
  return rc;
oom:
  lt__cache_entry_release(e);
  lt__job_free(job);
  lt__device_release(ctx);
  return lt__err(LT_ENOMEM, "%s: out of memory", fn);
}

int lt_program_count(const lt_program *p, bool output) {
  if (!p) return -1;
  return output ? p->nout : p->nin;
}

int lt_program_signature(const lt_program *p, bool output, int i, lt_dtype *dt, int64_t *shape,
                         int *ndim) {
  const char *fn = "lt_program_signature";
  if (!p || !dt || !shape || !ndim) return lt__err_null(fn);
  int n = output ? p->nout : p->nin;
  if (i < 0 || i >= n)
    return lt__err(LT_EINVAL, "%s: %s %d of %d", fn, output ? "output" : "input", i, n);
  const shape_sig *s = output ? &p->out_sig[i] : &p->in_sig[i];
  *dt = (lt_dtype)s->dtype;
  *ndim = s->ndim;
  memcpy(shape, s->shape, (size_t)s->ndim * sizeof *shape);
  return LT_OK;
}
