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
LT_API lt_tensor *lt_nn_gelu(lt_tensor *x);      /* exact (erf) gelu */
LT_API lt_tensor *lt_nn_gelu_tanh(lt_tensor *x); /* gelu, tanh approximation */
/* Embedding table (torch.nn.Embedding): weight [num, dim] drawn N(0, 1) from
 * dev's RNG (pending, as lt_nn_linear_init), requires-grad set. */
typedef struct lt_nn_embedding {
  lt_tensor *weight; /* [num, dim]; owned by the layer */
  int64_t num, dim;
} lt_nn_embedding;
LT_API int lt_nn_embedding_init(lt_nn_embedding *l, lt_device dev, lt_dtype dt, int64_t num,
                                int64_t dim);
LT_API void lt_nn_embedding_free(lt_nn_embedding *l); /* NULL is accepted */
LT_API lt_tensor *lt_nn_embedding_forward(const lt_nn_embedding *l, lt_tensor *indices);
LT_API lt_tensor *lt_nn_dropout(lt_tensor *x, double p, bool train);

/* ---- convolution, normalisation and pooling layers (NCHW) -------------------------------- */
/* Layers whose behaviour differs between training and evaluation (batch
 * norm, dropout) take `bool train` in their forward, as torch's
 * module.train() / module.eval(): a training step and an evaluation are two
 * graphs, each compiled once and then found in the cache whatever the order
 * in which the two modes alternate. */

/* 2-d convolution (torch.nn.Conv2d): y = lt_conv2d_n(x, weight, bias, ...).
 * kernel {kh, kw} is required; stride, padding, dilation default to 1, 0, 1;
 * each {h, w} argument has a count as in lt_conv2d_n (2: {h, w}, 1: both
 * axes, 0: the default; LT_EINVAL otherwise); groups >= 1 divides in and out. Init as PyTorch's
 * default (kaiming_uniform with a = sqrt 5): weight and bias U(-1/sqrt(fan_in), 1/sqrt(fan_in))
 * with fan_in = in / groups * kh * kw, drawn from dev's RNG, pending until the next sync (as
 * lt_nn_linear_init), requires-grad set. */
typedef struct lt_nn_conv2d {
  lt_tensor *weight; /* [out, in / groups, kh, kw]; owned by the layer */
  lt_tensor *bias;   /* [out], or NULL */
  int64_t in, out, groups;
  int64_t kernel[2], stride[2], padding[2], dilation[2];
} lt_nn_conv2d;
LT_API int lt_nn_conv2d_init_n(lt_nn_conv2d *l, lt_device dev, lt_dtype dt, int64_t in, int64_t out,
                               const int64_t *kernel, int nkernel, const int64_t *stride,
                               int nstride, const int64_t *padding, int npadding,
                               const int64_t *dilation, int ndilation, int64_t groups, bool bias);
LT_API void lt_nn_conv2d_free(lt_nn_conv2d *l); /* NULL is accepted */
/* x: [N, in, H, W] -> [N, out, OH, OW]. */
LT_API lt_tensor *lt_nn_conv2d_forward(const lt_nn_conv2d *l, lt_tensor *x);

/* Batch normalisation over the channels of [N, C, H, W] (torch.nn.BatchNorm2d,
 * track_running_stats on): affine weight ones and bias zeros (parameters,
 * requires-grad; NULL when not affine), running_mean zeros and running_var
 * ones (buffers: no gradient, updated in place by each training forward;
 * sync them with the parameters, save them with the model), momentum 0.1,
 * eps 1e-5 (fields the caller may change before the first forward; a change
 * after it makes new graphs). All four are pending until the next sync or
 * step barrier, as lt_nn_linear_init's draws. */
typedef struct lt_nn_batchnorm2d {
  lt_tensor *weight, *bias;              /* [C], or NULL */
  lt_tensor *running_mean, *running_var; /* [C] */
  int64_t num_features;
  double momentum, eps;
} lt_nn_batchnorm2d;
LT_API int lt_nn_batchnorm2d_init(lt_nn_batchnorm2d *l, lt_device dev, lt_dtype dt,
                                  int64_t num_features, bool affine);
LT_API void lt_nn_batchnorm2d_free(lt_nn_batchnorm2d *l); /* NULL is accepted */
/* train: batch statistics, and the running statistics updated (lazily, with
 * the step's graph); otherwise normalises by the running statistics. */
LT_API lt_tensor *lt_nn_batchnorm2d_forward(const lt_nn_batchnorm2d *l, lt_tensor *x, bool train);

/* Layer normalisation (torch.nn.LayerNorm) over the last nnorm (1 to
 * LT_MAX_DIMS) axes, of sizes normalized_shape; elementwise_affine: weight
 * ones and bias zeros of that shape (parameters), else NULL. eps 1e-5. */
typedef struct lt_nn_layernorm {
  lt_tensor *weight, *bias;
  int64_t normalized_shape[LT_MAX_DIMS];
  int nnorm;
  double eps;
} lt_nn_layernorm;
LT_API int lt_nn_layernorm_init(lt_nn_layernorm *l, lt_device dev, lt_dtype dt,
                                const int64_t *normalized_shape, int nnorm,
                                bool elementwise_affine);
LT_API void lt_nn_layernorm_free(lt_nn_layernorm *l); /* NULL is accepted */
LT_API lt_tensor *lt_nn_layernorm_forward(const lt_nn_layernorm *l, lt_tensor *x);

/* Pooling as torch.nn.MaxPool2d / AvgPool2d with their defaults: no stride
 * (count 0) means the kernel, no padding means 0; no dilation, floor mode,
 * padded zeros counted in the average. Counts as lt_nn_conv2d_init_n. */
LT_API lt_tensor *lt_nn_max_pool2d_n(lt_tensor *x, const int64_t *kernel, int nkernel,
                                     const int64_t *stride, int nstride, const int64_t *padding,
                                     int npadding);
LT_API lt_tensor *lt_nn_avg_pool2d_n(lt_tensor *x, const int64_t *kernel, int nkernel,
                                     const int64_t *stride, int nstride, const int64_t *padding,
                                     int npadding);

/* Mean cross-entropy of logits [B, C] (float) against integer labels [B] in
 * [0, C): -mean_b log_softmax(logits)[b, labels[b]], via one_hot (stable: the
 * log-sum-exp is shifted by the row max). A 0-d tensor of logits' dtype. A
 * label outside [0, C) fails at execution (LT_EEXEC), as one_hot does. */
LT_API lt_tensor *lt_nn_cross_entropy(lt_tensor *logits, lt_tensor *labels);
/* Fraction of rows whose argmax (first on ties) equals the label: 0-d f32. */
LT_API lt_tensor *lt_nn_accuracy(lt_tensor *logits, lt_tensor *labels);

/* The losses below follow torch.nn.functional (1.13), with its reductions:
 * mean (0-d), sum (0-d) or none (one loss per element). Float operands only
 * (f32, f64); the result has their promoted dtype. */
typedef enum lt_nn_reduction {
  LT_NN_REDUCTION_MEAN = 0,
  LT_NN_REDUCTION_SUM = 1,
  LT_NN_REDUCTION_NONE = 2
} lt_nn_reduction;
/* PyTorch's default ignore_index: no class index is negative, so it ignores
 * no valid target. */
#define LT_NN_IGNORE_INDEX_DEFAULT (-100)
/* (input - target)^2, the operands broadcast (F.mse_loss). As torch, they
 * broadcast before they promote: f32 with a 0-d f64 gives f64. */
LT_API lt_tensor *lt_nn_mse_loss(lt_tensor *input, lt_tensor *target, lt_nn_reduction reduction);
/* Negative log-likelihood of log-probabilities (F.nll_loss): logp [N, C],
 * [N, C, d1, ...] or [C]; target i32/i64 class indices shaped as logp without
 * its class axis (axis 1, or 0 for [C] whose target is 0-d). Each element's
 * loss is -logp[n, target[n]]; elements whose target equals ignore_index lose
 * 0 and the mean divides by the number of the others (NaN when every one is
 * ignored, as PyTorch). A target outside [0, C) that is not ignore_index
 * fails at execution (LT_EEXEC). */
LT_API lt_tensor *lt_nn_nll_loss(lt_tensor *logp, lt_tensor *target, lt_nn_reduction reduction,
                                 int64_t ignore_index);
/* Cross-entropy of logits with class indices (F.cross_entropy): the nll
 * loss of log_softmax over the class axis, with ignore_index as above and
 * label smoothing eps in [0, 1]: (1 - eps) * nll + eps / C * sum over the
 * classes of -log_softmax, both terms 0 for ignored elements and reduced
 * alike. lt_nn_cross_entropy(l, y) is the mean with no ignore_index and no
 * smoothing. */
LT_API lt_tensor *lt_nn_cross_entropy_ex(lt_tensor *logits, lt_tensor *target,
                                         lt_nn_reduction reduction, int64_t ignore_index,
                                         double label_smoothing);
/* Binary cross-entropy of logits x against targets y of x's shape
 * (F.binary_cross_entropy_with_logits), in the stable form
 * max(x, 0) - x y + log1p(exp(-|x|)); with pos_weight (NULL for none; it
 * broadcasts to x, e.g. [C] for the last axis) the positive term is weighted:
 * (1 - y) x + (1 + (pos_weight - 1) y) (max(-x, 0) + log1p(exp(-|x|))). */
LT_API lt_tensor *lt_nn_bce_with_logits(lt_tensor *x, lt_tensor *target, lt_tensor *pos_weight,
                                        lt_nn_reduction reduction);

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
 * skipped, as PyTorch), then drops the grads (lt_zero_grad). Each parameter
 * counts its own steps, advanced only by steps that gave it a grad, and
 * Adam's bias corrections use that count (PyTorch's state["step"]). */
LT_API int lt_nn_optim_step(lt_nn_optim *o);
/* The same with explicit grads (n entries as at create; NULL skips); the
 * parameters' own grads are left alone. */
LT_API int lt_nn_optim_step_grads(lt_nn_optim *o, lt_tensor *const *grads);
LT_API int lt_nn_optim_set_lr(lt_nn_optim *o, double lr);
/* Parameter groups, as torch's per-group options: parameter i's weight
 * decay (>= 0, finite) replaces the config's from the next step on; e.g.
 * AdamW decaying the weight matrices only (0 for biases, norms, embeddings'
 * positions as the caller chooses). The value enters the graph as data:
 * changing it does not recompile. */
LT_API int lt_nn_optim_set_param_weight_decay(lt_nn_optim *o, int i, double weight_decay);
LT_API int64_t lt_nn_optim_steps(const lt_nn_optim *o); /* updates done so far */
/* Bytes of optimizer state (momentum buffers, Adam's moments) this optimizer
 * holds on its device: 0 for plain SGD; with sharded state
 * (lt_dp_optim_create), this replica's chunks only. 0 for NULL. */
LT_API int64_t lt_nn_optim_state_bytes(const lt_nn_optim *o);
/* Updates parameter i has had (its step count); -1 for a bad index. */
LT_API int64_t lt_nn_optim_param_steps(const lt_nn_optim *o, int i);
LT_API void lt_nn_optim_free(lt_nn_optim *o);
/* Gradient clipping by the global norm (torch.nn.utils.clip_grad_norm_):
 * the norm of order norm_type (> 0, or INFINITY) of all the grads of params
 * together (params without a grad are skipped), and every grad scaled in
 * place by min(max_norm / (norm + 1e-6), 1). Lazy: the norm and the scaled
 * grads are pending values of the step's graph, nothing runs. *total_norm
 * (unless NULL) gets the norm as a new 0-d tensor (f32, f64 when a grad is
 * f64; 0 when no parameter has a grad), owned like any op's result. */
LT_API int lt_nn_clip_grad_norm(lt_tensor *const *params, int n, double max_norm, double norm_type,
                                lt_tensor **total_norm);

/* ---- parameter files -------------------------------------------------------------------- */
/* Parameter files (lt_nn_params_save / lt_nn_params_load), little-endian:
 *   "LTPARAMS" (8 bytes), u32 version (1 or 2), u32 count,
 *   count times: u32 dtype (lt_dtype), u32 ndim, ndim x i64 shape, the data,
 *   version 2 only: u32 section count, each section a 4-byte tag, u32
 *     section version, u64 payload bytes and the payload,
 *   u64 FNV-1a 64 checksum of every byte before it.
 * A file without sections is written as version 1. Section "OPTM" (version
 * 1) is an optimizer's state: u32 kind, u32 parameters, u32 state tensors
 * per parameter (0-2), u32 nesterov, f64 lr, momentum, weight_decay, beta1,
 * beta2, eps, i64 steps, then per parameter: u32 dtype, u32 ndim, ndim x i64
 * shape, i64 step count and the data of its state tensors (SGD's momentum
 * buffer; Adam's exp_avg, exp_avg_sq). Sections of other tags are skipped.
 * lt_nn_params_load checks everything (count, dtypes, shapes, size,
 * checksum) before it assigns the values (lazily, lt_assign) to the n given
 * tensors; an unknown file or section version fails with LT_EINVAL, naming
 * it. The objects come first and the path last, as lt_program_save. */
LT_API int lt_nn_params_save(lt_tensor *const *ts, int n, const char *path);
LT_API int lt_nn_params_load(lt_tensor *const *ts, int n, const char *path);
/* A checkpoint: the same with the optimizer's state (PyTorch's optimizer
 * state_dict: step counts, moments, hyper-parameters), so that training
 * resumes bit-exactly. o may be NULL (the parameters only, as
 * lt_nn_params_save / lt_nn_params_load). lt_nn_checkpoint_load needs a file
 * with optimizer state of the same kind and parameter shapes (and momentum
 * buffers when o has them); it restores the hyper-parameters (lr included,
 * as torch's load_state_dict) and the step counts, and assigns parameters
 * and state only when everything checked out. */
LT_API int lt_nn_checkpoint_save(lt_tensor *const *ts, int n, const lt_nn_optim *o,
                                 const char *path);
LT_API int lt_nn_checkpoint_load(lt_tensor *const *ts, int n, lt_nn_optim *o, const char *path);

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

/* ---- text corpora (character-level language models) ------------------------------------- */
/* A byte corpus for character-level models: the regular files of a
 * directory (symbolic links, names starting with '.' and ending in ".dat" or
 * ".u8" skipped, subdirectories not entered) in byte order of their names,
 * concatenated. Tokens are bytes: the vocabulary is the distinct bytes of the
 * corpus in increasing order and ids[i] is bytes[i]'s place in it. The first
 * n_train = n * 9 / 10 tokens are the training split, the rest the
 * validation split (a split by position, as the tokens come). */
typedef struct lt_nn_text {
  uint8_t *bytes;     /* n bytes */
  uint8_t *ids;       /* n token ids in [0, vocab_size) */
  int64_t n, n_train; /* tokens, and those of the training split */
  uint8_t vocab[256]; /* vocab[id] is the byte of token id */
  int vocab_size;
  int files; /* files read */
} lt_nn_text;
/* The text of Debian's `fortunes` package (its plain fortune files). */
#define LT_NN_FORTUNES_DIR "/usr/share/games/fortunes"
/* Reads dir (NULL: LT_NN_FORTUNES_DIR). A missing or unreadable directory,
 * or one without a file, or one holding less than 2 bytes, fails with
 * LT_EINVAL and a message naming the directory and, for the default one, the
 * package (`fortunes`). */
LT_API int lt_nn_text_load(const char *dir, lt_nn_text *out);
LT_API void lt_nn_text_free(lt_nn_text *t); /* NULL is accepted */
/* count windows of len + 1 tokens starting at starts[i] (each with
 * starts[i] + len + 1 <= n, LT_EINVAL otherwise): *x gets tokens [s, s + len)
 * and *y the next-token targets [s + 1, s + len + 1), both [count, len] i64
 * host tensors (new references, owned by the open scope if any). */
LT_API int lt_nn_text_windows(const lt_nn_text *t, lt_device dev, const int64_t *starts,
                              int64_t count, int64_t len, lt_tensor **x, lt_tensor **y);

/* ---- deprecated names ------------------------------------------------------------------- */
/* The forms before lazytensor.h's conventions on array counts and argument
 * order (source compatible; the shared library does not export them). */
LT_DEPRECATED("use lt_nn_conv2d_init_n (with the counts of the pairs)")
static inline int lt_nn_conv2d_init(lt_nn_conv2d *l, lt_device dev, lt_dtype dt, int64_t in,
                                    int64_t out, const int64_t *kernel, const int64_t *stride,
                                    const int64_t *padding, const int64_t *dilation, int64_t groups,
                                    bool bias) {
  return lt_nn_conv2d_init_n(l, dev, dt, in, out, kernel, LT__PAIR_COUNT(kernel), stride,
                             LT__PAIR_COUNT(stride), padding, LT__PAIR_COUNT(padding), dilation,
                             LT__PAIR_COUNT(dilation), groups, bias);
}
LT_DEPRECATED("use lt_nn_max_pool2d_n (with the counts of the pairs)")
static inline lt_tensor *lt_nn_max_pool2d(lt_tensor *x, const int64_t *kernel,
                                          const int64_t *stride, const int64_t *padding) {
  return lt_nn_max_pool2d_n(x, kernel, LT__PAIR_COUNT(kernel), stride, LT__PAIR_COUNT(stride),
                            padding, LT__PAIR_COUNT(padding));
}
LT_DEPRECATED("use lt_nn_avg_pool2d_n (with the counts of the pairs)")
static inline lt_tensor *lt_nn_avg_pool2d(lt_tensor *x, const int64_t *kernel,
                                          const int64_t *stride, const int64_t *padding) {
  return lt_nn_avg_pool2d_n(x, kernel, LT__PAIR_COUNT(kernel), stride, LT__PAIR_COUNT(stride),
                            padding, LT__PAIR_COUNT(padding));
}
LT_DEPRECATED("use lt_nn_params_save(ts, n, path)")
static inline int lt_nn_save(const char *path, lt_tensor *const *ts, int n) {
  return lt_nn_params_save(ts, n, path);
}
LT_DEPRECATED("use lt_nn_params_load(ts, n, path)")
static inline int lt_nn_load(const char *path, lt_tensor *const *ts, int n) {
  return lt_nn_params_load(ts, n, path);
}
LT_DEPRECATED("use lt_nn_checkpoint_save(ts, n, o, path)")
static inline int lt_nn_save_state(const char *path, lt_tensor *const *ts, int n,
                                   const lt_nn_optim *o) {
  return lt_nn_checkpoint_save(ts, n, o, path);
}
LT_DEPRECATED("use lt_nn_checkpoint_load(ts, n, o, path)")
static inline int lt_nn_load_state(const char *path, lt_tensor *const *ts, int n, lt_nn_optim *o) {
  return lt_nn_checkpoint_load(ts, n, o, path);
}

#ifdef __cplusplus
}
#endif
#endif
