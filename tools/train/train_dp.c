/* lazytensor-train's data-parallel mode: the MLP or the CNN (--model) trained
 * by the replicas of a world (lazytensor_dist.h), reached from train.c's main by its hook
 * (train_dp_wanted):
 *   --data-parallel   one replica per process under mpirun (lt_world_mpi)
 *   --devices N       N replicas in this process (lt_world_local, lt_world_run)
 * Every replica loads the same shuffled global batch of N x --batch rows
 * (the same seed on every device gives the same permutation) and takes its
 * shard, rows [rank x batch, (rank + 1) x batch); its gradients are averaged
 * by all-reduces inside the step graph (lt_dp_optim_step) and every replica
 * runs the optimizer. Parameters start equal (broadcast from rank 0). So the
 * run follows the single-process run at batch N x --batch with the same
 * seed (the CNN's batch norm excepted: each replica normalises by its own
 * shard's statistics and keeps its own running statistics, as PyTorch's
 * DistributedDataParallel without SyncBatchNorm). Only rank 0 evaluates,
 * prints and writes files. --model gpt goes to train_gpt_dp.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lazytensor.h"
#include "lazytensor_dist.h"
#include "lazytensor_nn.h"
#include "cli.h"
#include "model.h"
#include "rank_agree.h"

int train_dp_main(int argc, char **argv);
int train_gpt_dp_main(int argc, char **argv);
bool train_dp_wanted(int argc, char **argv);
void train_dp_warn_alone(const lt_world *w);

typedef struct dp_options {
  bool mpi, cnn;
  int64_t devices, batch, epochs, hidden, layers, seed, limit_steps, test_limit;
  double lr;
  bool lr_set;
  const char *data, *threads, *save;
} dp_options;

typedef struct dp_ctx {
  const dp_options *o;
  const lt_nn_dataset *train, *test;
  int size;
  double final_acc; /* rank 0's */
} dp_ctx;

bool train_dp_wanted(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--data-parallel") || !strncmp(argv[i], "--devices", 9)) return true;
  return false;
}

/* Returns 0, or 2 after a message for a bad command line. */
static int parse(int argc, char **argv, dp_options *o) {
  memset(o, 0, sizeof *o);
  o->devices = 1;
  o->batch = 128;
  o->epochs = 1;
  o->hidden = 512;
  o->layers = 2;
  o->seed = 1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--data-parallel")) {
      o->mpi = true;
      continue;
    }
    char name[32];
    const char *val, *eq = strchr(a, '=');
    if (eq) {
      snprintf(name, sizeof name, "%.*s", (int)(eq - a), a);
      val = eq + 1;
    } else {
      snprintf(name, sizeof name, "%s", a);
      val = i + 1 < argc ? argv[++i] : NULL;
    }
    bool ok = val != NULL;
    if (!ok)
      ;
    else if (!strcmp(name, "--devices"))
      ok = cli_parse_i64(val, 1, &o->devices) && o->devices <= LT_MAX_DEVICES;
    else if (!strcmp(name, "--batch"))
      ok = cli_parse_i64(val, 1, &o->batch);
    else if (!strcmp(name, "--epochs"))
      ok = cli_parse_i64(val, 1, &o->epochs);
    else if (!strcmp(name, "--hidden"))
      ok = cli_parse_i64(val, 1, &o->hidden);
    else if (!strcmp(name, "--layers"))
      ok = cli_parse_i64(val, 1, &o->layers);
    else if (!strcmp(name, "--seed"))
      ok = cli_parse_i64(val, 0, &o->seed);
    else if (!strcmp(name, "--limit-steps"))
      ok = cli_parse_i64(val, 1, &o->limit_steps);
    else if (!strcmp(name, "--test-limit"))
      ok = cli_parse_i64(val, 1, &o->test_limit);
    else if (!strcmp(name, "--lr")) {
      char *end;
      o->lr = strtod(val, &end);
      ok = end != val && !*end && o->lr > 0;
      o->lr_set = true;
    } else if (!strcmp(name, "--model")) {
      ok = !strcmp(val, "mlp") || !strcmp(val, "cnn");
      o->cnn = !strcmp(val, "cnn");
      if (!ok) {
        fprintf(stderr,
                "lazytensor-train: --model %s is not supported with --data-parallel or "
                "--devices (mlp, cnn and gpt are)\n",
                val);
        return 2;
      }
    } else if (!strcmp(name, "--data"))
      o->data = val;
    else if (!strcmp(name, "--threads"))
      o->threads = val;
    else if (!strcmp(name, "--save"))
      o->save = val;
    else {
      fprintf(stderr,
              "lazytensor-train: %s is not supported with --data-parallel or --devices (these "
              "take --devices, --batch (per replica), --epochs, --model mlp|cnn|gpt, --hidden, "
              "--layers, --lr, --seed, --limit-steps, --test-limit, --data, --threads, --save; "
              "Adam with a cosine rate)\n",
              name);
      return 2;
    }
    if (!ok) {
      fprintf(stderr, "lazytensor-train: bad or missing value for %s\n", name);
      return 2;
    }
  }
  if (o->mpi && o->devices > 1) {
    fprintf(stderr,
            "lazytensor-train: --data-parallel (one replica per MPI process) and "
            "--devices N (N replicas in this process) exclude each other\n");
    return 2;
  }
  return 0;
}

/* Test accuracy of rank 0's model over the first count test samples: one
 * graph, or chunks of the model's eval_chunk images (the last one padded
 * with zero images, so that every chunk runs the same compiled graph). */
static int evaluate(const train_model *m, lt_device dev, const lt_nn_dataset *test, int64_t count,
                    double *acc) {
  int64_t chunk = m->eval_chunk ? m->eval_chunk : count, hits = 0;
  int64_t *pred = malloc((size_t)chunk * sizeof *pred);
  if (!pred) return LT_ENOMEM;
  int rc = LT_OK;
  for (int64_t s = 0; s < count && rc == LT_OK; s += chunk) {
    int64_t real = count - s < chunk ? count - s : chunk;
    lt_scope_begin();
    lt_tensor *x = lt_nn_dataset_images(test, dev, s, chunk);
    lt_tensor *p = x ? lt_argmax(m->forward(m, x, false), 1, false) : NULL;
    rc = p ? lt_to_data(p, pred, (size_t)chunk * sizeof *pred) : lt_last_status();
    lt_scope_end();
    for (int64_t i = 0; rc == LT_OK && i < real; i++) hits += pred[i] == test->labels[s + i];
  }
  free(pred);
  if (rc == LT_OK) *acc = (double)hits / (double)count;
  return rc;
}

static int replica(int rank, lt_device dev, void *arg) {
  dp_ctx *c = arg;
  const dp_options *o = c->o;
  const lt_nn_dataset *tr = c->train;
  bool lead = rank == 0;
  int64_t classes = tr->num_classes > c->test->num_classes ? tr->num_classes : c->test->num_classes;
  int64_t ntest = o->test_limit && o->test_limit < c->test->n ? o->test_limit : c->test->n;
  lt_set_seed(dev, (uint64_t)o->seed);
  train_model m;
  memset(&m, 0, sizeof m);
  lt_nn_optim *opt = NULL;
  lt_nn_loader *loader = NULL;
  lt_tensor *sum = NULL;
  int rc = o->cnn ? model_cnn_init(&m, dev, tr->rows, tr->cols, classes)
                  : model_mlp_init(&m, dev, tr->features, o->hidden, o->layers, classes);
  lt_nn_optim_config oc = lt_nn_optim_defaults(LT_NN_ADAM);
  if (o->lr_set) oc.lr = o->lr;
  if (rc == LT_OK) opt = lt_nn_optim_create(&oc, m.params, m.nparams);
  if (rc == LT_OK && !opt) rc = lt_last_status();
  int64_t global = o->batch * c->size;
  if (rc == LT_OK) {
    loader = lt_nn_loader_create(tr, dev, global, true);
    rc = loader ? lt_nn_loader_shuffle_ahead(loader, (int)o->epochs) : lt_last_status();
  }
  if (rc == LT_OK) rc = lt_dp_broadcast_params(m.params, m.nparams);
  double zero = 0;
  if (rc == LT_OK) sum = lt_from_data(dev, LT_F64, NULL, 0, &zero);
  if (rc == LT_OK && !sum) rc = lt_last_status();
  if (rc == LT_OK) rc = lt_mark_step(dev);
  if (rc == LT_OK && lead) {
    printf("lazytensor-train: data parallel over %d replica(s) (%s), ", c->size,
           o->mpi ? "MPI processes" : "devices of this process");
    m.describe(&m, stdout);
    printf(", adam lr %g (cosine to 0), batch %lld per replica (%lld in all), %lld epoch(s)\n",
           oc.lr, (long long)o->batch, (long long)global, (long long)o->epochs);
    fflush(stdout);
  }
  int64_t planned = o->epochs * (tr->n / global), total = 0;
  if (o->limit_steps && o->limit_steps < planned) planned = o->limit_steps;
  double train_s = 0;
  for (int64_t e = 1; e <= o->epochs && rc == LT_OK && total < planned; e++) {
    int64_t nb = lt_nn_loader_epoch(loader);
    if (nb < 0) {
      rc = (int)nb;
      break;
    }
    double t0 = cli_now_s(), sum0 = 0;
    rc = lt_item(sum, 0, &sum0);
    int64_t first = total;
    for (int64_t s = 0; s < nb && rc == LT_OK && total < planned; s++) {
      rc = lt_nn_optim_set_lr(
          opt, 0.5 * oc.lr * (1 + cos(3.14159265358979323846 * (double)total / (double)planned)));
      if (rc != LT_OK) break;
      lt_scope_begin();
      lt_tensor *x, *y;
      int got = lt_nn_loader_next(loader, &x, &y);
      const int64_t x0[2] = {rank * o->batch, 0}, x1[2] = {(rank + 1) * o->batch, tr->features};
      const int64_t y0[1] = {rank * o->batch}, y1[1] = {(rank + 1) * o->batch};
      lt_tensor *loss = got == 1 ? lt_nn_cross_entropy(
                                       m.forward(&m, lt_slice_n(x, x0, x1, NULL, lt_ndim(x)), true),
                                       lt_slice_n(y, y0, y1, NULL, lt_ndim(y)))
                                 : NULL;
      rc = loss ? lt_backward(loss) : got < 0 ? got : LT_EINVAL;
      if (rc == LT_OK) rc = lt_dp_optim_step(opt);
      /* the global batch's mean loss, for rank 0's lines */
      lt_tensor *next =
          rc == LT_OK ? lt_add(sum, lt_cast(lt_all_reduce(loss, LT_REDUCE_MEAN), LT_F64)) : NULL;
      if (rc == LT_OK && !next) rc = lt_last_status();
      if (next) lt_retain(next);
      lt_scope_end();
      if (rc != LT_OK) break;
      lt_release(sum);
      sum = next;
      rc = lt_mark_step(dev);
      total++;
    }
    if (rc == LT_OK) rc = lt_wait_device_ops(dev);
    double dt = cli_now_s() - t0, sum1 = 0;
    train_s += dt;
    if (rc == LT_OK) rc = lt_item(sum, 0, &sum1);
    if (rc == LT_OK && lead) {
      double acc = NAN;
      rc = evaluate(&m, dev, c->test, ntest, &acc);
      int64_t steps = total - first;
      c->final_acc = acc;
      if (rc == LT_OK)
        printf(
            "epoch %lld: %lld steps in %.2f s (%.1f steps/s, %.0f samples/s), mean loss "
            "%.4f, test accuracy %.4f\n",
            (long long)e, (long long)steps, dt, (double)steps / (dt > 0 ? dt : 1),
            (double)(steps * global) / (dt > 0 ? dt : 1),
            steps ? (sum1 - sum0) / (double)steps : NAN, acc);
      fflush(stdout);
    }
  }
  if (rc == LT_OK && lead && o->save) {
    rc = lt_nn_params_save(m.state, m.nstate, o->save);
    if (rc == LT_OK) printf("saved %d tensors to %s\n", m.nstate, o->save);
  }
  if (rc == LT_OK && lead)
    printf("summary: %lld steps, %.1f steps/s, final test accuracy %.4f\n", (long long)total,
           train_s > 0 ? (double)total / train_s : 0.0, c->final_acc);
  lt_wait_device_ops(dev);
  lt_release(sum);
  lt_nn_loader_free(loader);
  lt_nn_optim_free(opt);
  if (m.free) m.free(&m);
  return rc;
}

void train_dp_warn_alone(const lt_world *w) {
  if (lt_world_size(w) > 1) return;
  fprintf(stderr,
          "lazytensor-train: warning: --data-parallel runs in a world of 1 process (%s): it "
          "trains alone; start it as mpirun -np N lazytensor-train --data-parallel ...\n",
          cli_mpi_job_size() ? "mpirun started one" : "not started by mpirun");
}

int train_dp_main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) /* the GPT's own options and loop: train_gpt_dp.c */
    if (!strcmp(argv[i], "--model=gpt") ||
        (!strcmp(argv[i], "--model") && i + 1 < argc && !strcmp(argv[i + 1], "gpt")))
      return train_gpt_dp_main(argc, argv);
  dp_options o;
  int prc = parse(argc, argv, &o);
  if (prc) return prc;
  if (o.threads) setenv("LT_NUM_THREADS", o.threads, 1);
  lt_world *w = NULL;
  if ((o.mpi ? lt_world_mpi(&w) : lt_world_local((int)o.devices, &w)) != LT_OK) {
    fprintf(stderr, "lazytensor-train: world: %s\n", lt_last_error());
    return 1;
  }
  if (o.mpi) {
    train_dp_warn_alone(w);
    const rank_option opts[] = {
        rank_opt_text("--model", o.cnn ? "cnn" : "mlp"),
        rank_opt_int("--batch", o.batch),
        rank_opt_int("--epochs", o.epochs),
        rank_opt_int("--hidden", o.hidden),
        rank_opt_int("--layers", o.layers),
        rank_opt_real("--lr", o.lr_set ? o.lr : -1),
        rank_opt_int("--seed", o.seed),
        rank_opt_int("--limit-steps", o.limit_steps),
        rank_opt_int("--test-limit", o.test_limit),
        rank_opt_text("--data", o.data),
    };
    if (rank_agree(w, opts, (int)(sizeof opts / sizeof *opts)) != LT_OK) {
      lt_world_free(w);
      return 2;
    }
  }
  lt_nn_dataset train, test;
  if (lt_nn_fashion_mnist(o.data, true, &train) != LT_OK) {
    fprintf(stderr, "lazytensor-train: training set: %s\n", lt_last_error());
    lt_world_free(w);
    return 1;
  }
  if (lt_nn_fashion_mnist(o.data, false, &test) != LT_OK) {
    fprintf(stderr, "lazytensor-train: test set: %s\n", lt_last_error());
    lt_nn_dataset_free(&train);
    lt_world_free(w);
    return 1;
  }
  dp_ctx c = {&o, &train, &test, lt_world_size(w), NAN};
  int rc = lt_world_run(w, replica, &c);
  if (rc != LT_OK) fprintf(stderr, "lazytensor-train: %s\n", lt_last_error());
  lt_nn_dataset_free(&train);
  lt_nn_dataset_free(&test);
  lt_world_free(w);
  return rc == LT_OK ? 0 : 1;
}
