/* lazytensor_nn: layers, losses, optimizers and data on top of lazytensor.h.
 *
 * Linear layers and activations, cross-entropy and accuracy, SGD / Adam /
 * AdamW as lazy in-place updates, parameter files, an IDX reader, labelled
 * image sets (Fashion-MNIST) and a shuffling batch iterator. The conventions
 * (errors, scopes, names) are those of lazytensor.h.
 */
#ifndef LAZYTENSOR_NN_H
#define LAZYTENSOR_NN_H

#include "lazytensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- layers and losses ------------------------------------------------------------------ */
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
LT_API int lt_nn_linear_init(lt_nn_linear *l, lt_device dev, lt_dtype dt, int64_t in, int64_t out,
                             bool bias);
LT_API void lt_nn_linear_free(lt_nn_linear *l); /* releases the parameters; NULL is accepted */
LT_API lt_tensor *lt_nn_linear_forward(const lt_nn_linear *l, lt_tensor *x); /* x: [..., in] */
/* Makes the n tensors device data with one graph (waits). */
LT_API int lt_nn_params_sync(lt_tensor *const *params, int n);
LT_API lt_tensor *lt_nn_relu(lt_tensor *x);
LT_API lt_tensor *lt_nn_gelu(lt_tensor *x); /* exact (erf) gelu */
LT_API lt_tensor *lt_nn_dropout(lt_tensor *x, double p, bool train);
/* Mean cross-entropy of logits [B, C] (float) against integer labels [B] in
 * [0, C): -mean_b log_softmax(logits)[b, labels[b]], via one_hot (stable: the
 * log-sum-exp is shifted by the row max). A 0-d tensor of logits' dtype. A
 * label outside [0, C) fails at execution (LT_EEXEC), as one_hot does. */
LT_API lt_tensor *lt_nn_cross_entropy(lt_tensor *logits, lt_tensor *labels);
/* Fraction of rows whose argmax (first on ties) equals the label: 0-d f32. */
LT_API lt_tensor *lt_nn_accuracy(lt_tensor *logits, lt_tensor *labels);

/* ---- optimizers ------------------------------------------------------------------------- */
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
LT_API lt_nn_optim_config lt_nn_optim_defaults(lt_nn_optim_kind kind);
typedef struct lt_nn_optim lt_nn_optim;
/* Keeps a reference to each of the n float parameters. */
LT_API lt_nn_optim *lt_nn_optim_create(const lt_nn_optim_config *cfg, lt_tensor *const *params,
                                       int n);
/* One update from each parameter's lt_grad (parameters without a grad are
 * skipped, as PyTorch), then drops the grads (lt_zero_grad). */
LT_API int lt_nn_optim_step(lt_nn_optim *o);
/* The same with explicit grads (n entries as at create; NULL skips); the
 * parameters' own grads are left alone. */
LT_API int lt_nn_optim_step_grads(lt_nn_optim *o, lt_tensor *const *grads);
LT_API int lt_nn_optim_set_lr(lt_nn_optim *o, double lr);
LT_API int64_t lt_nn_optim_steps(const lt_nn_optim *o); /* updates done so far */
LT_API void lt_nn_optim_free(lt_nn_optim *o);

/* ---- parameter files -------------------------------------------------------------------- */
/* Parameter files (lt_nn_save / lt_nn_load), little-endian:
 *   "LTPARAMS" (8 bytes), u32 version (1), u32 count,
 *   count times: u32 dtype (lt_dtype), u32 ndim, ndim x i64 shape, the data,
 *   u64 FNV-1a 64 checksum of every byte before it.
 * lt_nn_load checks everything (count, dtypes, shapes, size, checksum) before
 * it assigns the values (lazily, lt_assign) to the n given tensors. */
LT_API int lt_nn_save(const char *path, lt_tensor *const *ts, int n);
LT_API int lt_nn_load(const char *path, lt_tensor *const *ts, int n);

/* ---- data --------------------------------------------------------------------------------- */
/* IDX files (gzip-compressed or plain, read with zlib): unsigned-byte data
 * (type 0x08) only. Missing, truncated, wrong-magic files and files with
 * bytes beyond the data fail with LT_EINVAL and the path in the message. */
typedef struct lt_nn_idx {
  int ndim;
  int64_t dims[LT_MAX_DIMS];
  uint8_t *data; /* prod(dims) bytes */
  int64_t size;
} lt_nn_idx;
LT_API int lt_nn_idx_read(const char *path, lt_nn_idx *out);
LT_API void lt_nn_idx_free(lt_nn_idx *x);

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
LT_API int lt_nn_dataset_load(const char *images_path, const char *labels_path, lt_nn_dataset *ds);
/* {train,t10k}-{images-idx3,labels-idx1}-ubyte.gz from dir. */
LT_API int lt_nn_fashion_mnist(const char *dir, bool train, lt_nn_dataset *ds);
LT_API void lt_nn_dataset_free(lt_nn_dataset *ds);
/* Images [count, features] as f32 in [0, 1] (x / 255, as torchvision's
 * ToTensor, no normalisation) from sample start; rows past the set's end are
 * zero (padding). A new host tensor. */
LT_API lt_tensor *lt_nn_dataset_images(const lt_nn_dataset *ds, lt_device dev, int64_t start,
                                       int64_t count);

/* Shuffling batch iterator. Each epoch visits the samples in the order of
 * lt_randperm from dev's RNG (read once per epoch), or in order without
 * shuffle. The last partial batch of an epoch is DROPPED: every batch has the
 * same shape, so the step never recompiles (n / batch batches per epoch). */
typedef struct lt_nn_loader lt_nn_loader;
LT_API lt_nn_loader *lt_nn_loader_create(const lt_nn_dataset *ds, lt_device dev, int64_t batch,
                                         bool shuffle);
/* Draws the permutations of the next `epochs` epochs now, lazily, so that
 * they run with the graph of the next step barrier (e.g. the model's init)
 * instead of a graph of their own per epoch. */
LT_API int lt_nn_loader_shuffle_ahead(lt_nn_loader *l, int epochs);
/* Starts the next epoch; returns its number of batches, or a negative status.
 * Without a permutation drawn ahead it draws one and calls lt_mark_step(dev)
 * (a step barrier: pending values of dev run), then reads it. */
LT_API int64_t lt_nn_loader_epoch(lt_nn_loader *l);
/* The next batch: *x [batch, features] f32 in [0, 1], *y [batch] i64 (new host
 * tensors, owned by the open scope if any). Returns 1, 0 at the epoch's end,
 * or a negative status. */
LT_API int lt_nn_loader_next(lt_nn_loader *l, lt_tensor **x, lt_tensor **y);
/* This epoch's order of the sample indices (n entries), or NULL before one. */
LT_API const int64_t *lt_nn_loader_order(const lt_nn_loader *l);
LT_API void lt_nn_loader_free(lt_nn_loader *l);

#ifdef __cplusplus
}
#endif
#endif
