/* lazytensor-train --model gpt in data-parallel mode (train_dp.c hands it
 * over): --data-parallel (one replica per MPI process) or --devices N (N
 * replicas in this process). Every replica builds the same GPT from the same
 * seed (then rank 0's parameters are broadcast), draws the same N x --batch
 * random windows each step and trains on its rows [rank x batch, (rank + 1)
 * x batch) (gpt_trainer_step_dp: grads averaged over the replicas, then
 * clipped by their global norm and AdamW), so that the run follows one
 * process (train_gpt.c) at --batch N x batch with the same seed up to
 * rounding. Only rank 0 evaluates, prints and saves. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

#include "lazytensor.h"
#include "lazytensor_dist.h"
#include "lazytensor_nn.h"
#include "cli.h"
#include "model.h"
#include "rank_agree.h"

int train_gpt_dp_main(int argc, char **argv);
void train_dp_warn_alone(const lt_world *w); /* train_dp.c */

typedef struct gdp_ctx {
  const gpt_options *o;
  const lt_nn_text *text;
  int size;
} gdp_ctx;

/* The options of the single-process run that the replicas have no use for,
 * refused: a message and 2; else 0. */
static int refuse_unused(const gpt_options *o) {
  const char *bad = o->generate                    ? "--generate"
                    : o->temperature != 1.0        ? "--temperature"
                    : strcmp(o->prompt, "\n") != 0 ? "--prompt"
                    : o->d.backend                 ? "--backend"
                    : o->d.cache_dir               ? "--cache-dir"
                    : o->d.log_path                ? "--log"
                    : o->d.plot_path               ? "--plot"
                                                   : NULL;
  if (bad) {
    fprintf(stderr,
            "lazytensor-train: %s is not supported with --model gpt and --data-parallel or "
            "--devices\n",
            bad);
    return 2;
  }
  if (o->mpi && o->devices > 1) {
    fprintf(stderr,
            "lazytensor-train: --data-parallel (one replica per MPI process) and "
            "--devices N (N replicas in this process) exclude each other\n");
    return 2;
  }
  return 0;
}

/* Prints a step's line and, at an evaluation step, rank 0's validation loss. */
static int gdp_report(gpt_trainer *tr, const gpt_options *o, int64_t s, double wloss, double wrate,
                      bool eval) {
  printf("step %lld/%lld  lr %.2e  train loss %.4f  %.2f steps/s\n", (long long)(s + 1),
         (long long)o->steps, gpt_lr_at(o->lr, s, o->steps, o->warmup), wloss, wrate);
  double val = NAN;
  int rc = eval ? gpt_evaluate(tr, true, o->eval_windows, &val) : LT_OK;
  if (rc == LT_OK && eval)
    printf("step %lld/%lld  validation loss %.4f\n", (long long)(s + 1), (long long)o->steps, val);
  fflush(stdout);
  return rc;
}

static int gdp_replica(int rank, lt_device dev, void *arg) {
  gdp_ctx *ctx = arg;
  const gpt_options *o = ctx->o;
  bool lead = rank == 0;
  gpt_config c = o->c;
  c.vocab = ctx->text->vocab_size;
  lt_set_seed(dev, o->d.seed);
  gpt_trainer tr;
  lt_tensor *acc = NULL;
  int rc = gpt_trainer_init(&tr, dev, ctx->text, &c, o->batch, o->lr, o->weight_decay, o->clip,
                            o->d.seed);
  if (rc != LT_OK) return rc;
  tr.m.precision = o->d.precision; /* each replica's forward under autocast; grads stay f32 */
  rc = lt_dp_broadcast_params(tr.m.params, tr.m.nparams);
  double zero = 0;
  if (rc == LT_OK && !(acc = lt_from_data(dev, LT_F64, NULL, 0, &zero))) rc = lt_last_status();
  /* graph 1: the init, the broadcast, the uploads */
  if (rc == LT_OK) rc = lt_mark_step(dev);
  if (rc == LT_OK && lead) {
    printf(
        "lazytensor-train: data parallel over %d replica(s) (%s), %lld characters (%lld "
        "train), ",
        ctx->size, o->mpi ? "MPI processes" : "devices of this process", (long long)ctx->text->n,
        (long long)ctx->text->n_train);
    tr.m.describe(&tr.m, stdout);
    printf(
        ", adamw lr %g (warm-up %lld, cosine to %g), weight decay %g, clip %g (of the "
        "averaged grads), batch %lld per replica (%lld in all), %lld steps, threads %s, "
        "precision %s\n",
        o->lr, (long long)o->warmup, o->lr / 10, o->weight_decay, o->clip, (long long)o->batch,
        (long long)(o->batch * ctx->size), (long long)o->steps,
        getenv("LT_NUM_THREADS") ? getenv("LT_NUM_THREADS") : "default",
        driver_precision_name(&o->d, dev));
    fflush(stdout);
  }
  if (rc == LT_OK) rc = lt_wait_device_ops(dev);
  double t0 = cli_now_s(), last_t = t0, last_sum = 0, train_s = 0;
  int64_t last_step = 0;
  for (int64_t s = 0; s < o->steps && rc == LT_OK; s++) {
    rc = gpt_trainer_set_lr(&tr, gpt_lr_at(o->lr, s, o->steps, o->warmup));
    if (rc != LT_OK) break;
    lt_scope_begin();
    lt_tensor *loss = gpt_trainer_step_dp(&tr, rank, ctx->size);
    /* the global batch's mean loss (every shard has the same token count) */
    lt_tensor *next =
        loss ? lt_add(acc, lt_cast(lt_all_reduce(loss, LT_REDUCE_MEAN), LT_F64)) : NULL;
    if (next) lt_retain(next);
    rc = next ? LT_OK : lt_last_status() ? lt_last_status() : LT_EINVAL;
    lt_scope_end();
    if (rc != LT_OK) break;
    lt_release(acc);
    acc = next;
    rc = lt_mark_step(dev);
    bool log = (s + 1) % o->d.log_every == 0 || s + 1 == o->steps;
    bool eval = o->eval_every && (s + 1) % o->eval_every == 0 && s + 1 < o->steps;
    if (rc != LT_OK || !lead || (!log && !eval)) continue;
    double sum;
    rc = lt_item(acc, 0, &sum);
    double t = cli_now_s();
    if (rc == LT_OK)
      rc = gdp_report(&tr, o, s, (sum - last_sum) / (double)(s + 1 - last_step),
                      (double)(s + 1 - last_step) / (t - last_t), eval);
    last_sum = sum;
    last_step = s + 1;
    last_t = cli_now_s(); /* the evaluation is not training */
    train_s += t - t0;
    t0 = last_t;
  }
  if (rc == LT_OK) rc = lt_wait_device_ops(dev);
  train_s += cli_now_s() - t0;
  if (rc == LT_OK && lead) {
    double trn = NAN, val = NAN;
    rc = gpt_evaluate(&tr, false, o->eval_windows, &trn);
    if (rc == LT_OK) rc = gpt_evaluate(&tr, true, o->eval_windows, &val);
    /* the same parseable line as the single-process run's */
    if (rc == LT_OK)
      printf("final: steps %lld train_loss %.4f val_loss %.4f\n", (long long)o->steps, trn, val);
  }
  if (rc == LT_OK && lead && o->d.save) {
    rc = lt_nn_params_save(tr.m.state, tr.m.nstate, o->d.save);
    if (rc == LT_OK) printf("saved %d tensors to %s\n", tr.m.nstate, o->d.save);
  }
  if (rc == LT_OK && lead)
    printf("summary: %lld steps, %.2f steps/s\n", (long long)o->steps,
           train_s > 0 ? (double)o->steps / train_s : 0.0);
  fflush(stdout);
  lt_wait_device_ops(dev);
  lt_release(acc);
  gpt_trainer_free(&tr);
  return rc;
}

int train_gpt_dp_main(int argc, char **argv) {
  gpt_options o;
  int prc = gpt_parse(argc, argv, &o);
  if (prc) return prc > 0 ? 0 : 2;
  if ((prc = refuse_unused(&o))) return prc;
#if defined(__SSE__)
  /* before the replicas' threads start (they inherit it), as train_gpt.c */
  if (!o.d.keep_denormals) _mm_setcsr(_mm_getcsr() | 0x8040); /* FTZ | DAZ */
#endif
  if (o.d.threads) setenv("LT_NUM_THREADS", o.d.threads, 1);
  lt_world *w = NULL;
  if ((o.mpi ? lt_world_mpi(&w) : lt_world_local((int)o.devices, &w)) != LT_OK) {
    fprintf(stderr, "lazytensor-train: world: %s\n", lt_last_error());
    return 1;
  }
  if (o.mpi) {
    train_dp_warn_alone(w);
    const rank_option opts[] = {
        rank_opt_text("--model", "gpt"),
        rank_opt_int("--steps", o.steps),
        rank_opt_int("--batch", o.batch),
        rank_opt_int("--warmup", o.warmup),
        rank_opt_int("--eval-every", o.eval_every),
        rank_opt_int("--eval-windows", o.eval_windows),
        rank_opt_int("--log-every", o.d.log_every),
        rank_opt_int("--context", o.c.context),
        rank_opt_int("--width", o.c.width),
        rank_opt_int("--layers", o.c.layers),
        rank_opt_int("--heads", o.c.heads),
        rank_opt_int("--composite-ops", o.c.composite),
        rank_opt_real("--lr", o.lr),
        rank_opt_real("--weight-decay", o.weight_decay),
        rank_opt_real("--clip", o.clip),
        rank_opt_int("--seed", (int64_t)o.d.seed),
        rank_opt_text("--data", o.d.data),
    };
    if (rank_agree(w, opts, (int)(sizeof opts / sizeof *opts)) != LT_OK) {
      lt_world_free(w);
      return 2;
    }
  }
  lt_nn_text text;
  if (lt_nn_text_load(o.d.data, &text) != LT_OK) {
    fprintf(stderr, "lazytensor-train: corpus: %s\n", lt_last_error());
    lt_world_free(w);
    return 1;
  }
  gdp_ctx c = {&o, &text, lt_world_size(w)};
  /* what the replicas would each refuse (with no library message), refused
   * here once */
  const char *bad = NULL;
  if (o.batch * c.size > 4096)
    bad = "--batch x replicas is over 4096 windows a step";
  else if (o.c.layers > (MODEL_MAX_TENSORS - 6) / 12)
    bad = "--layers is over the model's limit (see --model gpt --help)";
  else if (text.n_train < o.c.context + 2)
    bad = "the training split is shorter than a window (--context)";
  int rc = LT_EINVAL;
  if (bad && lt_world_rank(w) == 0) fprintf(stderr, "lazytensor-train: %s\n", bad);
  if (!bad) rc = lt_world_run(w, gdp_replica, &c);
  if (rc != LT_OK && !bad) fprintf(stderr, "lazytensor-train: %s\n", lt_last_error());
  lt_nn_text_free(&text);
  lt_world_free(w);
  return bad ? 2 : rc == LT_OK ? 0 : 1;
}
