/* lazytensor-train's character-level GPT (issue #15): token and position
 * embeddings, pre-norm transformer blocks (causal multi-head attention, MLP
 * with tanh gelu), final layer norm, linear head. The PyTorch twin is
 * bench/torch_models.py's GPT: the same layers in the same order with the
 * same inits, so that a run and its peer differ only in their draws. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

/* 2 embeddings, 12 tensors a block, 4 at the end */
enum { GPT_MAX_LAYERS = (MODEL_MAX_TENSORS - 6) / 12 };

typedef struct gpt_block {
  lt_nn_layernorm ln1, ln2;
  lt_nn_linear qkv, proj, fc, fc2;
} gpt_block;

typedef struct gpt {
  gpt_config c;
  lt_tensor *wte, *wpe; /* [vocab, C], [context, C] */
  gpt_block blocks[GPT_MAX_LAYERS];
  lt_nn_layernorm lnf;
  lt_nn_linear head;
  /* composite only: [context, context] f32, 0 on and below the diagonal,
   * -inf above */
  lt_tensor *causal;
  bool decays[MODEL_MAX_TENSORS];
} gpt;

/* rows of w picked by ids [B, T] -> [B, T, C] */
static lt_tensor *embed(const gpt *g, lt_tensor *ids, lt_tensor *w) {
  if (!g->c.composite) return lt_embedding(ids, w);
  if (!ids) return NULL;
  lt_tensor *flat = lt_reshape(ids, (const int64_t[]){-1}, 1);
  return lt_reshape(lt_index_select(w, 0, flat),
                    (const int64_t[]){lt_dim(ids, 0), lt_dim(ids, 1), lt_dim(w, 1)}, 3);
}

static lt_tensor *gelu_tanh(const gpt *g, lt_tensor *x) {
  if (!g->c.composite) return lt_nn_gelu_tanh(x);
  if (!x) return NULL;
  lt_device dev = lt_get_device(x);
  lt_tensor *x3 = lt_mul(lt_mul(x, x), x);
  lt_tensor *in = lt_mul(lt_add(x, lt_mul(x3, lt_scalar(dev, LT_F32, 0.044715))),
                         lt_scalar(dev, LT_F32, sqrt(2.0 / 3.14159265358979323846)));
  return lt_mul(lt_mul(x, lt_scalar(dev, LT_F32, 0.5)),
                lt_add(lt_tanh(in), lt_scalar(dev, LT_F32, 1.0)));
}

/* causal attention of q, k, v [B, H, T, D] -> [B, H, T, D] */
static lt_tensor *attend(const gpt *g, lt_tensor *q, lt_tensor *k, lt_tensor *v) {
  if (!g->c.composite) return lt_scaled_dot_product_attention(q, k, v, NULL, true, NAN);
  if (!q || !k || !v) return NULL;
  int64_t t = lt_dim(q, 2), d = lt_dim(q, 3);
  lt_tensor *mask = g->causal;
  if (t != g->c.context)
    mask = lt_slice_n(mask, (const int64_t[]){0, 0}, (const int64_t[]){t, t}, NULL, 2);
  lt_tensor *s = lt_mul(lt_matmul(q, lt_transpose(k, -2, -1)),
                        lt_scalar(lt_get_device(q), LT_F32, 1.0 / sqrt((double)d)));
  return lt_matmul(lt_softmax(lt_add(s, mask), -1), v);
}

/* x + attn(ln1(x)) for x [B, T, C] */
static lt_tensor *self_attention(const gpt *g, const gpt_block *b, lt_tensor *x) {
  if (!x) return NULL;
  int64_t bs = lt_dim(x, 0), t = lt_dim(x, 1), c = g->c.width, h = g->c.heads;
  lt_tensor *qkv = lt_nn_linear_forward(&b->qkv, lt_nn_layernorm_forward(&b->ln1, x));
  lt_tensor *parts[3] = {NULL, NULL, NULL};
  if (!qkv || lt_split_size(qkv, c, 2, parts, 3) != 3) return NULL;
  /* [B, T, C] -> [B, H, T, D] */
  const int64_t heads[4] = {bs, t, h, c / h};
  for (int i = 0; i < 3; i++) parts[i] = lt_transpose(lt_reshape(parts[i], heads, 4), 1, 2);
  lt_tensor *o = attend(g, parts[0], parts[1], parts[2]);
  o = lt_reshape(lt_transpose(o, 1, 2), (const int64_t[]){bs, t, c}, 3);
  return lt_add(x, lt_nn_linear_forward(&b->proj, o));
}

static lt_tensor *gpt_forward(const train_model *m, lt_tensor *ids, bool train) {
  (void)train; /* no dropout: one forward for both modes */
  const gpt *g = m->impl;
  if (!ids) return NULL;
  int64_t t = lt_dim(ids, 1);
  lt_tensor *pos = g->wpe;
  if (t != g->c.context) pos = lt_slice_n(pos, NULL, (const int64_t[]){t, g->c.width}, NULL, 2);
  lt_tensor *x = lt_add(embed(g, ids, g->wte), pos);
  for (int64_t l = 0; l < g->c.layers; l++) {
    const gpt_block *b = &g->blocks[l];
    x = self_attention(g, b, x);
    lt_tensor *hdn = lt_nn_linear_forward(&b->fc, lt_nn_layernorm_forward(&b->ln2, x));
    x = lt_add(x, lt_nn_linear_forward(&b->fc2, gelu_tanh(g, hdn)));
  }
  return lt_nn_linear_forward(&g->head, lt_nn_layernorm_forward(&g->lnf, x));
}

static void gpt_describe(const train_model *m, FILE *f) {
  const gpt *g = m->impl;
  fprintf(f,
          "gpt vocab %lld, context %lld, width %lld, %lld layers, %lld heads, mlp x%lld (tanh "
          "gelu), pre-norm",
          (long long)g->c.vocab, (long long)g->c.context, (long long)g->c.width,
          (long long)g->c.layers, (long long)g->c.heads, (long long)g->c.mlp_ratio);
}

static void gpt_free(train_model *m) {
  gpt *g = m->impl;
  if (!g) return;
  lt_release(g->wte);
  lt_release(g->wpe);
  lt_release(g->causal);
  for (int i = 0; i < GPT_MAX_LAYERS; i++) {
    gpt_block *b = &g->blocks[i];
    lt_nn_layernorm_free(&b->ln1);
    lt_nn_layernorm_free(&b->ln2);
    lt_nn_linear_free(&b->qkv);
    lt_nn_linear_free(&b->proj);
    lt_nn_linear_free(&b->fc);
    lt_nn_linear_free(&b->fc2);
  }
  lt_nn_layernorm_free(&g->lnf);
  lt_nn_linear_free(&g->head);
  free(g);
  m->impl = NULL;
  m->nparams = m->nstate = 0;
}

/* An embedding table [num, dim] ~ N(0, 1) (torch.nn.Embedding's init). */
static lt_tensor *embedding_table(lt_device dev, int64_t num, int64_t dim) {
  lt_nn_embedding e;
  if (lt_nn_embedding_init(&e, dev, LT_F32, num, dim) != LT_OK) return NULL;
  return e.weight; /* the layer owns nothing else */
}

static void add_param(train_model *m, gpt *g, lt_tensor *t, bool decays) {
  if (m->nparams < MODEL_MAX_TENSORS) g->decays[m->nparams] = decays;
  model_add_param(m, t);
}

bool model_gpt_decays(const train_model *m, int i) {
  const gpt *g = m ? m->impl : NULL;
  return g && i >= 0 && i < m->nparams && g->decays[i];
}

void model_gpt_set_composite(train_model *m, bool on) {
  gpt *g = m ? m->impl : NULL;
  if (g) g->c.composite = on;
}

const gpt_config *model_gpt_config(const train_model *m) {
  const gpt *g = m ? m->impl : NULL;
  return g ? &g->c : NULL;
}

int model_gpt_init(train_model *m, lt_device dev, const gpt_config *c) {
  memset(m, 0, sizeof *m);
  m->forward = gpt_forward;
  m->describe = gpt_describe;
  m->free = gpt_free;
  if (c->vocab < 1 || c->context < 1 || c->width < 1 || c->heads < 1 || c->width % c->heads ||
      c->layers < 0 || c->layers > GPT_MAX_LAYERS || c->mlp_ratio < 1)
    return LT_EINVAL;
  gpt *g = calloc(1, sizeof *g);
  if (!g) return LT_ENOMEM;
  m->impl = g;
  g->c = *c;
  int64_t w = c->width, hidden = c->mlp_ratio * w;
  /* torch's module order: wte, wpe, blocks (ln1, qkv, proj, ln2, fc, fc2),
   * lnf, head; the draws come from one stream, so the order matters only for
   * reading the parameter list */
  g->wte = embedding_table(dev, c->vocab, w);
  g->wpe = embedding_table(dev, c->context, w);
  if (!g->wte || !g->wpe) return lt_last_status() ? lt_last_status() : LT_ENOMEM;
  add_param(m, g, g->wte, false);
  add_param(m, g, g->wpe, false);
  int rc = LT_OK;
  for (int64_t l = 0; l < c->layers && rc == LT_OK; l++) {
    gpt_block *b = &g->blocks[l];
    rc = lt_nn_layernorm_init(&b->ln1, dev, LT_F32, &w, 1, true);
    if (rc == LT_OK) rc = lt_nn_linear_init(&b->qkv, dev, LT_F32, w, 3 * w, true);
    if (rc == LT_OK) rc = lt_nn_linear_init(&b->proj, dev, LT_F32, w, w, true);
    if (rc == LT_OK) rc = lt_nn_layernorm_init(&b->ln2, dev, LT_F32, &w, 1, true);
    if (rc == LT_OK) rc = lt_nn_linear_init(&b->fc, dev, LT_F32, w, hidden, true);
    if (rc == LT_OK) rc = lt_nn_linear_init(&b->fc2, dev, LT_F32, hidden, w, true);
    if (rc != LT_OK) break;
    add_param(m, g, b->ln1.weight, false);
    add_param(m, g, b->ln1.bias, false);
    add_param(m, g, b->qkv.weight, true);
    add_param(m, g, b->qkv.bias, false);
    add_param(m, g, b->proj.weight, true);
    add_param(m, g, b->proj.bias, false);
    add_param(m, g, b->ln2.weight, false);
    add_param(m, g, b->ln2.bias, false);
    add_param(m, g, b->fc.weight, true);
    add_param(m, g, b->fc.bias, false);
    add_param(m, g, b->fc2.weight, true);
    add_param(m, g, b->fc2.bias, false);
  }
  if (rc == LT_OK) rc = lt_nn_layernorm_init(&g->lnf, dev, LT_F32, &w, 1, true);
  if (rc == LT_OK) rc = lt_nn_linear_init(&g->head, dev, LT_F32, w, c->vocab, true);
  if (rc != LT_OK) return rc;
  add_param(m, g, g->lnf.weight, false);
  add_param(m, g, g->lnf.bias, false);
  add_param(m, g, g->head.weight, true);
  add_param(m, g, g->head.bias, false);
  /* made whatever the mode, so that model_gpt_set_composite may switch */
  int64_t t = c->context;
  float *mask = malloc((size_t)(t * t) * sizeof *mask);
  if (!mask) return LT_ENOMEM;
  for (int64_t i = 0; i < t; i++)
    for (int64_t j = 0; j < t; j++) mask[i * t + j] = j <= i ? 0.0f : -INFINITY;
  /* the model owns one reference whether or not the caller has a scope open */
  lt_scope_begin();
  g->causal = lt_retain(lt_from_data(dev, LT_F32, (const int64_t[]){t, t}, 2, mask));
  lt_scope_end();
  free(mask);
  if (!g->causal) return lt_last_status();
  return LT_OK;
}
