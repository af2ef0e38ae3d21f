/* A small GPT trained on a 2-d (data x model) mesh, Megatron style, and the
 * same GPT on one device: what tests/test_mesh_gpt.c (4 in-process
 * replicas) and tests/mpi/mpi_world.c (mode mesh_gpt, 4 processes) compare.
 *
 * The model: token and position embeddings, MG_L pre-norm blocks (causal
 * attention of MG_H heads, MLP of MG_F hidden units with tanh gelu), a final
 * layer norm and a linear head; mean cross-entropy of the next token.
 *
 * On a mesh of D (data) x M (model) ranks, the rank at (d, p):
 *   - takes rows [d B/D, (d+1) B/D) of every global batch of MG_B rows;
 *   - holds heads [p H/M, (p+1) H/M) of each attention (the q, k and v
 *     columns of those heads: column-parallel) and rows of the output
 *     projection for them (row-parallel), columns [p F/M, ...) of the MLP's
 *     first layer and those rows of its second: each block's two partial
 *     sums are all-reduced over the model axis (lt_all_reduce_over), then the
 *     replicated bias is added;
 *   - holds the embeddings, layer norms and head whole (replicated).
 * Gradients: each rank back-propagates its loss divided by M D, the
 * all-reduces' adjoints (all-reduces of the gradients over the model axis)
 * carrying the heads' parts back. The sum over all ranks of those losses is
 * the global loss, so a split parameter's gradient is the sum over the data
 * axis of its ranks' gradients, and a replicated one's the sum over the
 * whole world: lt_all_reduce_over(data) and lt_all_reduce, before the
 * optimizer (Adam) steps. With mesh NULL the same code is the one-device
 * model (M = D = 1, no collective).
 *
 * Everything is drawn from fixed seeds, so every process makes the same
 * problem. */
#ifndef LT_TESTS_MESH_GPT_H
#define LT_TESTS_MESH_GPT_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lazytensor_dist.h"

enum {
  MG_V = 16, /* vocabulary */
  MG_T = 8,  /* context */
  MG_C = 16, /* width */
  MG_H = 4,  /* heads */
  MG_F = 64, /* MLP hidden units */
  MG_L = 2,  /* blocks */
  MG_B = 4,  /* global batch (rows of MG_T tokens) */
  MG_STEPS = 20,
};

/* How a parameter is laid out over the model axis. */
typedef enum mg_split {
  MG_REPL,     /* whole on every rank */
  MG_QKV_COLS, /* [C, 3C] or [3C]: the columns of its heads, in each of q, k, v */
  MG_COLS,     /* [in, out] or [out]: a block of columns */
  MG_ROWS,     /* [in, out]: a block of rows */
} mg_split;

enum { MG_BLOCK_PARAMS = 12, MG_NP = 2 + MG_L * MG_BLOCK_PARAMS + 4 };

typedef struct mg_param {
  int ndim;
  int64_t shape[2]; /* global */
  mg_split split;
  float *init; /* global values */
} mg_param;

typedef struct mg_problem {
  mg_param p[MG_NP];
  int64_t ids[MG_STEPS][MG_B * MG_T], next[MG_STEPS][MG_B * MG_T];
} mg_problem;

static inline uint32_t mg_lcg(uint32_t *s) {
  *s = *s * 1664525u + 1013904223u;
  return *s >> 8;
}

static inline void mg_def(mg_problem *pb, int k, int ndim, int64_t a, int64_t b, mg_split split,
                          int kind, uint32_t *s) {
  mg_param *q = &pb->p[k];
  q->ndim = ndim;
  q->shape[0] = a;
  q->shape[1] = b;
  q->split = split;
  int64_t n = ndim == 1 ? a : a * b;
  q->init = malloc((size_t)n * sizeof *q->init);
  /* kind 0: weights ~ U(-0.5, 0.5) / sqrt(fan-in); 1: layer norm scales near 1; 2: biases */
  double scale = kind == 0 ? 1.0 / sqrt((double)a) : 0.1;
  for (int64_t i = 0; q->init && i < n; i++) {
    double u = (double)(mg_lcg(s) & 0xffff) / 65536.0 - 0.5;
    q->init[i] = (float)(kind == 1 ? 1.0 + 0.1 * u : 2 * u * scale);
  }
}

/* The parameters (torch's order: wte, wpe, per block ln1 w b, qkv w b, proj
 * w b, ln2 w b, fc w b, fc2 w b, then lnf w b, head w b) and the batches. */
static inline void mg_make_problem(mg_problem *pb) {
  uint32_t s = 2024;
  int k = 0;
  mg_def(pb, k++, 2, MG_V, MG_C, MG_REPL, 0, &s);
  mg_def(pb, k++, 2, MG_T, MG_C, MG_REPL, 0, &s);
  for (int l = 0; l < MG_L; l++) {
    mg_def(pb, k++, 1, MG_C, 0, MG_REPL, 1, &s);
    mg_def(pb, k++, 1, MG_C, 0, MG_REPL, 2, &s);
    mg_def(pb, k++, 2, MG_C, 3 * MG_C, MG_QKV_COLS, 0, &s);
    mg_def(pb, k++, 1, 3 * MG_C, 0, MG_QKV_COLS, 2, &s);
    mg_def(pb, k++, 2, MG_C, MG_C, MG_ROWS, 0, &s);
    mg_def(pb, k++, 1, MG_C, 0, MG_REPL, 2, &s);
    mg_def(pb, k++, 1, MG_C, 0, MG_REPL, 1, &s);
    mg_def(pb, k++, 1, MG_C, 0, MG_REPL, 2, &s);
    mg_def(pb, k++, 2, MG_C, MG_F, MG_COLS, 0, &s);
    mg_def(pb, k++, 1, MG_F, 0, MG_COLS, 2, &s);
    mg_def(pb, k++, 2, MG_F, MG_C, MG_ROWS, 0, &s);
    mg_def(pb, k++, 1, MG_C, 0, MG_REPL, 2, &s);
  }
  mg_def(pb, k++, 1, MG_C, 0, MG_REPL, 1, &s);
  mg_def(pb, k++, 1, MG_C, 0, MG_REPL, 2, &s);
  mg_def(pb, k++, 2, MG_C, MG_V, MG_REPL, 0, &s);
  mg_def(pb, k++, 1, MG_V, 0, MG_REPL, 2, &s);
  /* a learnable sequence: each token follows from the one before, with noise */
  for (int t = 0; t < MG_STEPS; t++)
    for (int r = 0; r < MG_B; r++) {
      int64_t tok = mg_lcg(&s) % MG_V;
      for (int i = 0; i <= MG_T; i++) {
        int64_t nxt = mg_lcg(&s) % 4 == 0 ? mg_lcg(&s) % MG_V : (tok * 5 + 3) % MG_V;
        if (i < MG_T) pb->ids[t][r * MG_T + i] = tok;
        if (i > 0) pb->next[t][r * MG_T + i - 1] = tok;
        tok = nxt;
      }
    }
}

static inline void mg_free_problem(mg_problem *pb) {
  for (int k = 0; k < MG_NP; k++) free(pb->p[k].init);
}

/* A rank's model: its parameters (the split ones' parts) and optimizer. */
typedef struct mg_model {
  const lt_mesh *mesh; /* NULL: one device */
  int data_axis, model_axis, D, M;
  lt_tensor *p[MG_NP];
  lt_nn_optim *o;
} mg_model;

/* Model coordinate pos of M: this rank's part of parameter q (global
 * values), into out; its shape into shape. */
static inline int mg_local(const mg_param *q, int pos, int M, float *out, int64_t *shape) {
  int64_t rows = q->ndim == 1 ? 1 : q->shape[0], cols = q->ndim == 1 ? q->shape[0] : q->shape[1];
  int64_t lr = rows, lc = cols;
  if (q->split == MG_COLS || q->split == MG_QKV_COLS) lc = cols / M;
  if (q->split == MG_ROWS) lr = rows / M;
  for (int64_t i = 0; i < lr; i++)
    for (int64_t j = 0; j < lc; j++) {
      int64_t gi = i, gj = j;
      if (q->split == MG_ROWS) gi = pos * lr + i;
      if (q->split == MG_COLS) gj = pos * lc + j;
      if (q->split == MG_QKV_COLS) { /* lc / 3 columns of each of q, k, v */
        int64_t w = lc / 3, part = j / w;
        gj = part * (cols / 3) + pos * w + j % w;
      }
      out[i * lc + j] = q->init[gi * cols + gj];
    }
  if (q->ndim == 1) {
    shape[0] = lc;
    return 1;
  }
  shape[0] = lr;
  shape[1] = lc;
  return 2;
}

static inline int mg_init(mg_model *m, lt_device dev, const mg_problem *pb, const lt_mesh *mesh,
                          int rank) {
  memset(m, 0, sizeof *m);
  m->mesh = mesh;
  m->D = m->M = 1;
  int pos = 0;
  if (mesh) {
    m->data_axis = lt_mesh_axis(mesh, "data");
    m->model_axis = lt_mesh_axis(mesh, "model");
    if (m->data_axis < 0 || m->model_axis < 0) return LT_EINVAL;
    m->D = lt_mesh_size(mesh, m->data_axis);
    m->M = lt_mesh_size(mesh, m->model_axis);
    pos = lt_mesh_coord(mesh, rank, m->model_axis);
  }
  float *buf = malloc(sizeof(float) * MG_F * MG_C * 3);
  if (!buf) return LT_ENOMEM;
  for (int k = 0; k < MG_NP; k++) {
    int64_t shape[2];
    int nd = mg_local(&pb->p[k], pos, m->M, buf, shape);
    m->p[k] = lt_from_data(dev, LT_F32, shape, nd, buf);
    if (!m->p[k] || lt_set_requires_grad(m->p[k], true) != LT_OK) {
      free(buf);
      return lt_last_status();
    }
  }
  free(buf);
  lt_nn_optim_config cfg = lt_nn_optim_defaults(LT_NN_ADAM);
  cfg.lr = 1e-2;
  m->o = lt_nn_optim_create(&cfg, m->p, MG_NP);
  return m->o ? LT_OK : lt_last_status();
}

static inline void mg_free(mg_model *m) {
  lt_nn_optim_free(m->o);
  for (int k = 0; k < MG_NP; k++) lt_release(m->p[k]);
}

/* A row-parallel product's partial sums, summed over the model axis. */
static inline lt_tensor *mg_reduce(const mg_model *m, lt_tensor *z) {
  return m->mesh ? lt_all_reduce_over(z, m->mesh, m->model_axis, LT_REDUCE_SUM) : z;
}

/* The mean cross-entropy of this rank's rows of step t (rows [row0, row0 +
 * rows) of the global batch). */
static inline lt_tensor *mg_loss(const mg_model *m, lt_device dev, const mg_problem *pb, int t,
                                 int row0, int rows) {
  const int64_t C = MG_C, cl = MG_C / m->M, hl = MG_H / m->M, dh = MG_C / MG_H;
  const int64_t ids_shape[2] = {rows, MG_T}, flat[1] = {rows * MG_T};
  lt_tensor *ids = lt_from_data(dev, LT_I64, ids_shape, 2, pb->ids[t] + row0 * MG_T);
  lt_tensor *next = lt_from_data(dev, LT_I64, flat, 1, pb->next[t] + row0 * MG_T);
  lt_tensor *const *p = m->p;
  lt_tensor *x = lt_add(lt_embedding(ids, p[0]), p[1]);
  for (int l = 0; l < MG_L; l++) {
    lt_tensor *const *b = p + 2 + l * MG_BLOCK_PARAMS;
    lt_tensor *h = lt_layer_norm(x, &C, 1, b[0], b[1], 1e-5);
    lt_tensor *qkv = lt_add(lt_matmul(h, b[2]), b[3]); /* [rows, T, 3 cl] */
    lt_tensor *part[3] = {NULL, NULL, NULL};
    if (!qkv || lt_split_size(qkv, cl, 2, part, 3) != 3) return NULL;
    const int64_t heads[4] = {rows, MG_T, hl, dh};
    for (int i = 0; i < 3; i++) part[i] = lt_transpose(lt_reshape(part[i], heads, 4), 1, 2);
    lt_tensor *o = lt_scaled_dot_product_attention(part[0], part[1], part[2], NULL, true, NAN);
    o = lt_reshape(lt_transpose(o, 1, 2), (const int64_t[]){rows, MG_T, cl}, 3);
    x = lt_add(x, lt_add(mg_reduce(m, lt_matmul(o, b[4])), b[5]));
    h = lt_layer_norm(x, &C, 1, b[6], b[7], 1e-5);
    lt_tensor *u = lt_nn_gelu_tanh(lt_add(lt_matmul(h, b[8]), b[9]));
    x = lt_add(x, lt_add(mg_reduce(m, lt_matmul(u, b[10])), b[11]));
  }
  lt_tensor *const *f = p + 2 + MG_L * MG_BLOCK_PARAMS;
  lt_tensor *logits = lt_add(lt_matmul(lt_layer_norm(x, &C, 1, f[0], f[1], 1e-5), f[2]), f[3]);
  return lt_nn_cross_entropy(lt_reshape(logits, (const int64_t[]){rows * MG_T, MG_V}, 2), next);
}

/* Traces step t on this rank (its rows, given by data coordinate d): the
 * backward pass, the gradients' sums and the optimizer's update; *loss gets
 * the global batch's loss (retained: the caller reads and releases it). */
static inline int mg_step(mg_model *m, lt_device dev, const mg_problem *pb, int t, int d,
                          lt_tensor **loss) {
  int rows = MG_B / m->D;
  lt_tensor *l = mg_loss(m, dev, pb, t, d * rows, rows);
  if (!l) return lt_last_status();
  lt_tensor *scaled = lt_mul(l, lt_scalar(dev, LT_F32, 1.0 / (m->M * m->D)));
  int rc = scaled ? lt_backward(scaled) : lt_last_status();
  for (int k = 0; k < MG_NP && rc == LT_OK && m->mesh; k++) {
    lt_tensor *g = lt_grad(m->p[k]);
    if (!g) continue;
    lt_tensor *sum = pb->p[k].split == MG_REPL
                         ? lt_all_reduce(g, LT_REDUCE_SUM)
                         : lt_all_reduce_over(g, m->mesh, m->data_axis, LT_REDUCE_SUM);
    rc = sum ? lt_assign(g, sum) : lt_last_status();
  }
  if (rc == LT_OK) rc = lt_nn_optim_step(m->o);
  lt_tensor *global =
      m->mesh ? lt_all_reduce_over(lt_detach(l), m->mesh, m->data_axis, LT_REDUCE_MEAN) : l;
  if (rc == LT_OK && !global) rc = lt_last_status();
  *loss = rc == LT_OK ? lt_retain(global) : NULL;
  return rc;
}

/* MG_STEPS steps; losses[t] gets step t's global loss (read after the last
 * step, so that tracing overlaps the executions). rank: this rank of
 * mesh's world (ignored without a mesh). */
static inline int mg_train(lt_device dev, const mg_problem *pb, const lt_mesh *mesh, int rank,
                           double *losses) {
  mg_model m;
  lt_tensor *loss[MG_STEPS] = {NULL};
  int rc = mg_init(&m, dev, pb, mesh, rank);
  int d = mesh && rc == LT_OK ? lt_mesh_coord(mesh, rank, m.data_axis) : 0;
  for (int t = 0; t < MG_STEPS && rc == LT_OK; t++) {
    lt_scope_begin();
    rc = mg_step(&m, dev, pb, t, d, &loss[t]);
    lt_scope_end();
    if (rc == LT_OK) rc = lt_mark_step(dev);
  }
  for (int t = 0; t < MG_STEPS; t++) {
    float v = NAN;
    if (rc == LT_OK) rc = lt_to_data(loss[t], &v, sizeof v);
    losses[t] = v;
    lt_release(loss[t]);
  }
  mg_free(&m);
  return rc;
}

#endif
