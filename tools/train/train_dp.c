/* lazytensor-train's data-parallel mode: the MLP or the CNN (--model) trained
 * by the replicas of a world (lazytensor_dist.h), reached from train.c's main by its hook
 * (train_dp_wanted):
 *   --data-parallel   one replica per process under mpirun (lt_world_mpi)
 *   --devices N       N replicas in this process (lt_world_local, lt_world_run)
 * Every replica loads the same shuffled global batch of N x --batch rows
 * (the same seed on every device gives the same permutation) and takes its
 * shard, rows [rank x batch, (rank + 1) x batch), as data of its own (so the
 * step's graph is the same on every replica: one compile for the world);
 * its gradients are averaged
 * by all-reduces inside the step graph (lt_dp_optim_step) and every replica
 * runs the optimizer (--shard-optimizer: on its chunk of every parameter
 * and of Adam's state only, the new parameters all-gathered: ZeRO stage 1,
 * lt_dp_options). Parameters start equal (broadcast from rank 0). So the
 * run follows the single-process run at batch N x --batch with the same
 * seed (the CNN's batch norm excepted: each replica normalises by its own
 * shard's statistics and keeps its own running statistics, as PyTorch's
 * DistributedDataParallel without SyncBatchNorm). Only rank 0 evaluates,
 * prints and writes files. --model gpt goes to train_gpt_dp.c.
 * The rest is the single-process run's: the driver's options, loss sum and
 * schedule (driver.h), the data sets, the model and the test accuracy
 * (classifier.h). What this file adds: the world, the sharded step, rank 0's
 * lines. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lazytensor.h"
#include "lazytensor_dist.h"
#include "lazytensor_nn.h"
#include "classifier.h"
#include "cli.h"
#include "driver.h"
#include "model.h"
#include "rank_agree.h"

int train_dp_main(int argc, char **argv);
int train_gpt_dp_main(int argc, char **argv);
bool train_dp_wanted(int argc, char **argv);
void train_dp_warn_alone(const lt_world *w);

/* d: the driver's options, of which this mode takes --seed, --threads,
 * --data and --save. */
typedef struct dp_options {
  driver_opts d;
  bool mpi, cnn;
  int64_t devices, batch, epochs, hidden, layers, limit_steps, test_limit;
  double lr;
  bool lr_set;
  bool shard_optimizer; /* --shard-optimizer: ZeRO stage 1 (lt_dp_options) */
} dp_options;

/* What every replica reads. */
typedef struct dp_ctx {
  const dp_options *o;
  const lt_nn_dataset *train, *test;
  int size;
  int64_t classes, ntest;
} dp_ctx;

bool train_dp_wanted(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--data-parallel") || !strncmp(argv[i], "--devices", 9)) return true;
  return false;
}

/* The driver's options that this mode takes (it refuses the others). */
static bool takes_driver_option(const char *name) {
  static const char *const taken[] = {"--seed", "--threads", "--data", "--save"};
  for (size_t k = 0; k < sizeof taken / sizeof *taken; k++)
    if (!strcmp(name, taken[k])) return true;
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
  o->d.seed = 1;
  /* the integer options of this mode, each at least 1 */
  const struct {
    const char *name;
    int64_t *v;
  } ints[] = {{"--devices", &o->devices},      {"--batch", &o->batch},
              {"--epochs", &o->epochs},        {"--hidden", &o->hidden},
              {"--layers", &o->layers},        {"--limit-steps", &o->limit_steps},
              {"--test-limit", &o->test_limit}};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--data-parallel")) {
      o->mpi = true;
      continue;
    }
    if (!strcmp(a, "--shard-optimizer")) {
      o->shard_optimizer = true;
      continue;
    }
    char name[32];
    const char *val = cli_option_name(a, name, sizeof name);
    if (!val) val = i + 1 < argc ? argv[++i] : NULL;
    int64_t *num = NULL;
    for (size_t k = 0; k < sizeof ints / sizeof *ints; k++)
      if (!strcmp(name, ints[k].name)) num = ints[k].v;
    bool ok = val != NULL;
    if (!ok)
      ;
    else if (takes_driver_option(name) && driver_parse_option(&o->d, name, val, &ok))
      ;
    else if (num)
      ok = cli_parse_i64(val, 1, num) && (num != &o->devices || o->devices <= LT_MAX_DEVICES);
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
    } else {
      fprintf(stderr,
              "lazytensor-train: %s is not supported with --data-parallel or --devices (these "
              "take --devices, --batch (per replica), --epochs, --model mlp|cnn|gpt, --hidden, "
              "--layers, --lr, --seed, --limit-steps, --test-limit, --data, --threads, --save, "
              "--shard-optimizer; "
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

/* A replica's step (driver_trace_step's trace): its shard of the global
 * batch, forward, cross-entropy, backward, the grads averaged over the
 * replicas and the optimizer's step (lt_dp_optim_step). The global batch's
 * mean loss, for rank 0's lines. */
typedef struct shard_step {
  const train_model *m;
  lt_nn_loader *loader;
  lt_nn_optim *opt;
  int64_t first, rows; /* rows [rank x batch, (rank + 1) x batch) */
} shard_step;

/* Rows [first, first + rows) of the loader's host tensor t as a new host
 * tensor on t's device. The step reads its shard as data: a graph leaf,
 * uploaded alone, whose place in the global batch is not part of the graph,
 * so every replica traces the same graph and the world compiles the step
 * once (a slice at the rank's offset would give each replica a graph, and
 * a compile, of its own). */
static lt_tensor *rows_of(lt_tensor *t, int64_t first, int64_t rows) {
  int64_t n = lt_numel(t), per = n / lt_dim(t, 0);
  size_t esz = lt_dtype_size(lt_get_dtype(t));
  unsigned char *all = malloc((size_t)n * esz + 1);
  lt_tensor *r = NULL;
  if (all && lt_to_data(t, all, (size_t)n * esz) == LT_OK) { /* host data: a copy */
    int64_t shape[LT_MAX_DIMS];
    for (int d = 0; d < lt_ndim(t); d++) shape[d] = d ? lt_dim(t, d) : rows;
    r = lt_from_data(lt_get_device(t), lt_get_dtype(t), shape, lt_ndim(t),
                     all + (size_t)(first * per) * esz);
  }
  free(all);
  return r;
}

static lt_tensor *trace_shard(void *ctx) {
  const shard_step *c = ctx;
  lt_tensor *x, *y;
  int got = lt_nn_loader_next(c->loader, &x, &y);
  lt_tensor *loss =
      got == 1 ? lt_nn_cross_entropy(c->m->forward(c->m, rows_of(x, c->first, c->rows), true),
                                     rows_of(y, c->first, c->rows))
               : NULL;
  int rc = loss ? lt_backward(loss) : LT_EINVAL;
  if (rc == LT_OK) rc = lt_dp_optim_step(c->opt);
  return rc == LT_OK ? lt_all_reduce(loss, LT_REDUCE_MEAN) : NULL;
}

static int replica(int rank, lt_device dev, void *arg) {
  const dp_ctx *c = arg;
  const dp_options *o = c->o;
  const lt_nn_dataset *tr = c->train;
  bool lead = rank == 0;
  int64_t global = o->batch * c->size;
  lt_set_seed(dev, o->d.seed);
  train_model m;
  memset(&m, 0, sizeof m);
  shard_step st = {&m, NULL, NULL, rank * o->batch, o->batch};
  driver_loss ls = {dev, NULL, NULL};
  int rc = classifier_model_init(&m, dev, o->cnn, tr, o->hidden, o->layers, c->classes);
  lt_nn_optim_config oc = lt_nn_optim_defaults(LT_NN_ADAM);
  if (o->lr_set) oc.lr = o->lr;
  lt_dp_options dpo = {.shard_optimizer = o->shard_optimizer};
  if (rc == LT_OK && !(st.opt = lt_dp_optim_create(&oc, m.params, m.nparams, &dpo)))
    rc = lt_last_status();
  if (rc == LT_OK && !(st.loader = lt_nn_loader_create(tr, dev, global, true)))
    rc = lt_last_status();
  if (rc == LT_OK) rc = lt_nn_loader_shuffle_ahead(st.loader, (int)o->epochs);
  if (rc == LT_OK) rc = lt_dp_broadcast_params(m.params, m.nparams);
  if (rc == LT_OK) rc = driver_loss_begin(&ls, dev);
  if (rc == LT_OK) rc = lt_mark_step(dev);
  if (rc == LT_OK && lead) {
    printf("lazytensor-train: data parallel over %d replica(s) (%s), ", c->size,
           o->mpi ? "MPI processes" : "devices of this process");
    m.describe(&m, stdout);
    printf(", adam%s lr %g (cosine to 0), batch %lld per replica (%lld in all), %lld epoch(s)\n",
           o->shard_optimizer ? " (state sharded over the replicas)" : "", oc.lr,
           (long long)o->batch, (long long)global, (long long)o->epochs);
    fflush(stdout);
  }
  int64_t planned = driver_planned_steps(o->epochs, tr->n / global, o->limit_steps), total = 0;
  double train_s = 0, final_acc = NAN; /* rank 0's */
  for (int64_t e = 1; e <= o->epochs && rc == LT_OK && total < planned; e++) {
    int64_t nb = lt_nn_loader_epoch(st.loader);
    if (nb < 0) {
      rc = (int)nb;
      break;
    }
    driver_window w = {total, 0, total, cli_now_s()}; /* the epoch's */
    rc = lt_item(ls.acc, 0, &w.sum);
    for (int64_t s = 0; s < nb && rc == LT_OK && total < planned; s++) {
      rc = lt_nn_optim_set_lr(st.opt, driver_cosine_lr(oc.lr, total, planned));
      if (rc == LT_OK) rc = driver_trace_step(&ls, trace_shard, &st);
      if (rc == LT_OK) rc = lt_mark_step(dev);
      if (rc == LT_OK) total++;
    }
    if (rc == LT_OK) rc = lt_wait_device_ops(dev);
    double dt = cli_now_s() - w.t, sum = 0;
    train_s += dt;
    if (rc == LT_OK) rc = lt_item(ls.acc, 0, &sum);
    if (rc == LT_OK && lead) {
      rc = classifier_accuracy(&m, dev, NULL, c->test, c->ntest, &final_acc);
      int64_t steps = total - w.step;
      if (rc == LT_OK)
        printf(
            "epoch %lld: %lld steps in %.2f s (%.1f steps/s, %.0f samples/s), mean loss "
            "%.4f, test accuracy %.4f\n",
            (long long)e, (long long)steps, dt, (double)steps / (dt > 0 ? dt : 1),
            (double)(steps * global) / (dt > 0 ? dt : 1), driver_window_loss(&w, total, sum),
            final_acc);
      fflush(stdout);
    }
  }
  if (rc == LT_OK && lead && o->d.save) {
    rc = lt_nn_params_save(m.state, m.nstate, o->d.save);
    if (rc == LT_OK) printf("saved %d tensors to %s\n", m.nstate, o->d.save);
  }
  if (rc == LT_OK && lead)
    printf("summary: %lld steps, %.1f steps/s, final test accuracy %.4f\n", (long long)total,
           train_s > 0 ? (double)total / train_s : 0.0, final_acc);
  lt_wait_device_ops(dev);
  driver_loss_free(&ls);
  lt_nn_loader_free(st.loader);
  lt_nn_optim_free(st.opt);
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

/* The world of the replicas; under mpirun, its ranks' options compared.
 * 0, or 1 or 2 (the exit status) after a message. */
static int open_world(const dp_options *o, lt_world **w) {
  if ((o->mpi ? lt_world_mpi(w) : lt_world_local((int)o->devices, w)) != LT_OK) {
    fprintf(stderr, "lazytensor-train: world: %s\n", lt_last_error());
    return 1;
  }
  if (!o->mpi) return 0;
  train_dp_warn_alone(*w);
  const rank_option opts[] = {
      rank_opt_text("--model", o->cnn ? "cnn" : "mlp"),
      rank_opt_int("--batch", o->batch),
      rank_opt_int("--epochs", o->epochs),
      rank_opt_int("--hidden", o->hidden),
      rank_opt_int("--layers", o->layers),
      rank_opt_real("--lr", o->lr_set ? o->lr : -1),
      rank_opt_int("--seed", (int64_t)o->d.seed),
      rank_opt_int("--limit-steps", o->limit_steps),
      rank_opt_int("--test-limit", o->test_limit),
      rank_opt_text("--data", o->d.data),
      rank_opt_int("--shard-optimizer", o->shard_optimizer),
  };
  if (rank_agree(*w, opts, (int)(sizeof opts / sizeof *opts)) == LT_OK) return 0;
  lt_world_free(*w);
  return 2;
}

int train_dp_main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) /* the GPT's own options and loop: train_gpt_dp.c */
    if (!strcmp(argv[i], "--model=gpt") ||
        (!strcmp(argv[i], "--model") && i + 1 < argc && !strcmp(argv[i + 1], "gpt")))
      return train_gpt_dp_main(argc, argv);
  dp_options o;
  lt_world *w = NULL;
  int rc = parse(argc, argv, &o);
  if (rc) return rc;
  if (o.d.threads) setenv("LT_NUM_THREADS", o.d.threads, 1);
  if ((rc = open_world(&o, &w))) return rc;
  lt_nn_dataset train, test;
  if (classifier_load(o.d.data, &train, &test)) {
    lt_world_free(w);
    return 1;
  }
  dp_ctx c = {&o,
              &train,
              &test,
              lt_world_size(w),
              classifier_classes(&train, &test),
              classifier_test_count(&test, o.test_limit)};
  rc = lt_world_run(w, replica, &c);
  if (rc != LT_OK) fprintf(stderr, "lazytensor-train: %s\n", lt_last_error());
  /* the compiles and times of all this process's replicas (under mpirun:
   * rank 0's process), as the one-device run's summary counts them */
  if (rc == LT_OK && lt_world_rank(w) == 0) driver_print_summary();
  lt_nn_dataset_free(&train);
  lt_nn_dataset_free(&test);
  lt_world_free(w);
  return rc == LT_OK ? 0 : 1;
}
