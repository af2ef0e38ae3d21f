/* lazytensor-train: trains an MLP (by default 784-512-512-10, ReLU) or a CNN
 * (--model cnn, model_cnn.c) on Fashion-MNIST, Adam lr 1e-3, batch 128, with
 * one cached graph per training step.
 *
 * Per step: scope_begin; forward; loss; lt_backward; optimizer step (lazy
 * lt_assign updates; grads dropped); scope_end; lt_mark_step. The loss is
 * never read in the step: each step adds it to a running sum on the device
 * (a new 0-d tensor per step), and the progress line reads the sum of the
 * step before, which lt_mark_step has already waited for, so reading costs
 * no overlap. Graphs of a run: (1) parameter init with every epoch's shuffle,
 * (2) the training step, (3) the test-set forward in eval mode (the CNN's in
 * chunks of one shape). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

#include "lazytensor.h"
#include "lazytensor_nn.h"
#include "cli.h"
#include "model.h"
#include "runlog.h"

#define MAX_LAYERS 16

typedef struct options {
  int64_t hidden, layers, batch, epochs, limit_steps, test_limit, log_every;
  lt_nn_optim_kind optim;
  double lr, momentum, weight_decay;
  bool lr_set, wd_set, nesterov, keep_denormals, cosine, cnn;
  bool hidden_set, layers_set; /* given on the command line (the MLP's alone) */
  uint64_t seed;
  const char *threads, *backend, *data, *save, *load, *cache_dir, *export_path;
  const char *log_path, *plot_path;
} options;

static void usage(FILE *f) {
  fprintf(f,
          "usage: lazytensor-train [options]\n"
          "Trains an MLP or a CNN on Fashion-MNIST; prints test accuracy per epoch and a\n"
          "summary.\n"
          "  --model mlp|cnn|gpt mlp (default): linear layers with ReLU; cnn: conv 3x3 32,\n"
          "                      batch norm, ReLU, max-pool 2, conv 3x3 64, batch norm,\n"
          "                      ReLU, max-pool 2, linear 3136-128, ReLU, dropout 0.25,\n"
          "                      linear 128-10 (tested in eval mode); gpt: a character-level\n"
          "                      transformer on Debian's fortunes (its options:\n"
          "                      --model gpt --help)\n"
          "  --hidden N          mlp hidden layer width (default 512)\n"
          "  --layers N          mlp hidden layers (default 2: 784-512-512-10)\n"
          "  --batch N           batch size (default 128; the last partial batch of an\n"
          "                      epoch is dropped, so no epoch recompiles)\n"
          "  --epochs N          epochs (default 1; 0 only evaluates)\n"
          "  --optimizer NAME    sgd | adam | adamw (default adam)\n"
          "  --lr X              learning rate (default 1e-3; sgd 1e-2)\n"
          "  --schedule NAME     constant | cosine: the learning rate falls from --lr to 0\n"
          "                      over the run along a half cosine (default cosine)\n"
          "  --momentum X        sgd momentum (default 0)\n"
          "  --nesterov          sgd nesterov momentum\n"
          "  --weight-decay X    weight decay (default 0; adamw 1e-2)\n"
          "  --seed N            seed of the device RNG (init, shuffles; default 1)\n"
          "  --threads N         sets LT_NUM_THREADS\n"
          "  --backend ref|cpu   sets LT_BACKEND\n"
          "  --data DIR          dataset directory (default $LT_DATA_DIR or\n"
          "                      " LT_NN_FASHION_MNIST_DIR
          ")\n"
          "  --save FILE         write the parameters (and batch norm's running statistics)\n"
          "                      after training (format: lazytensor_nn.h)\n"
          "  --load FILE         read them before training\n"
          "  --export FILE       after training, save the eval-mode inference program (input\n"
          "                      images [B, features] f32, output logits [B, classes]; B: the\n"
          "                      evaluation's batch) with its weights (lt_program_save;\n"
          "                      examples/classify.c runs it)\n"
          "  --limit-steps N     stop after N training steps in all (tests)\n"
          "  --test-limit N      evaluate on the first N test samples only\n"
          "  --log-every N       steps between progress updates (default 10 on a tty, else 100)\n"
          "  --cache-dir DIR     keep compiled graphs in DIR (created if missing) and reuse\n"
          "                      them in later runs: a warm start compiles nothing\n"
          "  --log FILE          write the training log as CSV (step,epoch,loss,lr,\n"
          "                      steps_per_s,test_acc: a row per progress update and one\n"
          "                      per epoch with its mean loss and test accuracy)\n"
          "  --plot FILE         draw the log's loss and accuracy curves as a PNG (needs\n"
          "                      cairo at build time; without --log the log is a\n"
          "                      temporary file, removed after drawing)\n"
          "The directories of --save, --export, --log and --plot are checked before\n"
          "training starts. A loss that turns non-finite or grows a hundredfold is warned\n"
          "about on stderr.\n"
          "  --keep-denormals    do not flush denormals to zero (see below)\n"
          "  --data-parallel     data-parallel MLP, CNN or GPT, one replica per process\n"
          "                      (under mpirun)\n"
          "  --devices N         data-parallel MLP, CNN or GPT, N replicas in this process\n"
          "                      (both: --batch per replica; see tools/train/train_dp.c and\n"
          "                      train_gpt_dp.c)\n"
          "Denormals are flushed to zero (FTZ/DAZ, as torch.set_flush_denormal(True)) in\n"
          "every thread: Adam's first moment of an input whose grad stays 0 decays\n"
          "through the subnormal range, which otherwise doubles the step time.\n");
}

/* Returns 0 on success, 1 after --help, -1 on a bad command line. */
static int parse_args(int argc, char **argv, options *o) {
  memset(o, 0, sizeof *o);
  o->hidden = 512;
  o->layers = 2;
  o->batch = 128;
  o->epochs = 1;
  o->optim = LT_NN_ADAM;
  o->seed = 1;
  o->cosine = true;
  for (int i = 1; i < argc; i++) {
    char *a = argv[i], *val = NULL;
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage(stdout);
      return 1;
    }
    if (strcmp(a, "--nesterov") == 0) {
      o->nesterov = true;
      continue;
    }
    if (strcmp(a, "--keep-denormals") == 0) {
      o->keep_denormals = true;
      continue;
    }
    char name[64];
    char *eq = strchr(a, '=');
    if (strncmp(a, "--", 2) != 0) goto bad;
    if (eq) {
      snprintf(name, sizeof name, "%.*s", (int)(eq - a), a);
      val = eq + 1;
    } else {
      snprintf(name, sizeof name, "%s", a);
      static const char *const known[] = {
          "--hidden",    "--layers",  "--batch",  "--epochs",   "--limit-steps",  "--test-limit",
          "--log-every", "--seed",    "--lr",     "--momentum", "--weight-decay", "--optimizer",
          "--threads",   "--backend", "--data",   "--save",     "--load",         "--cache-dir",
          "--schedule",  "--model",   "--export", "--log",      "--plot"};
      bool is_known = false;
      for (size_t k = 0; k < sizeof known / sizeof *known; k++) is_known |= !strcmp(name, known[k]);
      if (!is_known) goto bad;
      if (i + 1 >= argc) {
        fprintf(stderr, "lazytensor-train: %s needs a value\n", a);
        return -1;
      }
      val = argv[++i];
    }
    bool ok = true;
    int64_t seed;
    if (!strcmp(name, "--hidden"))
      ok = cli_parse_i64(val, 1, &o->hidden) && (o->hidden_set = true);
    else if (!strcmp(name, "--layers"))
      ok = cli_parse_i64(val, 0, &o->layers) && o->layers < MAX_LAYERS && (o->layers_set = true);
    else if (!strcmp(name, "--batch"))
      ok = cli_parse_i64(val, 1, &o->batch);
    else if (!strcmp(name, "--epochs"))
      ok = cli_parse_i64(val, 0, &o->epochs);
    else if (!strcmp(name, "--limit-steps"))
      ok = cli_parse_i64(val, 1, &o->limit_steps);
    else if (!strcmp(name, "--test-limit"))
      ok = cli_parse_i64(val, 1, &o->test_limit);
    else if (!strcmp(name, "--log-every"))
      ok = cli_parse_i64(val, 1, &o->log_every);
    else if (!strcmp(name, "--seed")) {
      ok = cli_parse_i64(val, 0, &seed);
      o->seed = (uint64_t)seed;
    } else if (!strcmp(name, "--lr"))
      ok = cli_parse_f64(val, &o->lr) && (o->lr_set = true);
    else if (!strcmp(name, "--momentum"))
      ok = cli_parse_f64(val, &o->momentum);
    else if (!strcmp(name, "--weight-decay"))
      ok = cli_parse_f64(val, &o->weight_decay) && (o->wd_set = true);
    else if (!strcmp(name, "--optimizer")) {
      if (!strcmp(val, "sgd"))
        o->optim = LT_NN_SGD;
      else if (!strcmp(val, "adam"))
        o->optim = LT_NN_ADAM;
      else if (!strcmp(val, "adamw"))
        o->optim = LT_NN_ADAMW;
      else
        ok = false;
    } else if (!strcmp(name, "--threads")) {
      int64_t t;
      ok = cli_parse_i64(val, 1, &t);
      o->threads = val;
    } else if (!strcmp(name, "--backend")) {
      ok = !strcmp(val, "ref") || !strcmp(val, "cpu");
      o->backend = val;
    } else if (!strcmp(name, "--data"))
      o->data = val;
    else if (!strcmp(name, "--save"))
      o->save = val;
    else if (!strcmp(name, "--load"))
      o->load = val;
    else if (!strcmp(name, "--export"))
      o->export_path = val;
    else if (!strcmp(name, "--log"))
      o->log_path = val;
    else if (!strcmp(name, "--plot"))
      o->plot_path = val;
    else if (!strcmp(name, "--cache-dir"))
      o->cache_dir = val;
    else if (!strcmp(name, "--model")) {
      ok = !strcmp(val, "mlp") || !strcmp(val, "cnn");
      o->cnn = !strcmp(val, "cnn");
    } else if (!strcmp(name, "--schedule")) {
      ok = !strcmp(val, "constant") || !strcmp(val, "cosine");
      o->cosine = !strcmp(val, "cosine");
    } else
      goto bad;
    if (!ok) {
      fprintf(stderr, "lazytensor-train: bad value '%s' for %s\n", val, name);
      return -1;
    }
    continue;
  bad:
    fprintf(stderr, "lazytensor-train: unknown option '%s' (see --help)\n", a);
    return -1;
  }
  /* as --model gpt does: an option the model has no use for is refused, not ignored */
  if (o->cnn && (o->hidden_set || o->layers_set)) {
    fprintf(stderr,
            "lazytensor-train: %s is an option of the MLP; --model cnn has a fixed "
            "architecture and does not use it\n",
            o->hidden_set ? "--hidden" : "--layers");
    return -1;
  }
  /* before the run, not after it: a typo must not lose the training */
  if (!cli_check_output("--save", o->save) || !cli_check_output("--export", o->export_path) ||
      !cli_check_output("--log", o->log_path) || !cli_check_output("--plot", o->plot_path))
    return -1;
  return 0;
}

/* Hits of the argmax of the logits of x against labels (count rows, the
 * rest padding): one graph in eval mode, read once. */
static int eval_hits(const train_model *m, lt_tensor *x, const int64_t *labels, int64_t rows,
                     int64_t count, int64_t *hits) {
  size_t bytes = (size_t)rows * sizeof(int64_t);
  int64_t *pred = malloc(bytes);
  if (!pred) {
    fprintf(stderr, "lazytensor-train: out of memory\n");
    return LT_ENOMEM;
  }
  lt_scope_begin();
  lt_tensor *p = lt_argmax(m->forward(m, x, false), 1, false);
  int rc = p ? lt_to_data(p, pred, bytes) : lt_last_status();
  lt_scope_end();
  if (rc == LT_OK)
    for (int64_t i = 0; i < count; i++) *hits += pred[i] == labels[i];
  free(pred);
  return rc;
}

/* Test accuracy over the first count samples of the test set: with no
 * eval_chunk, one graph over test_x (their images as a device tensor);
 * otherwise chunks of eval_chunk images, the last one padded with zero
 * images, so that every chunk runs the same compiled graph. */
static int evaluate(const train_model *m, lt_device dev, lt_tensor *test_x,
                    const lt_nn_dataset *test, int64_t count, double *acc) {
  int64_t hits = 0, chunk = m->eval_chunk;
  int rc = LT_OK;
  if (!chunk) {
    rc = eval_hits(m, test_x, test->labels, count, count, &hits);
  } else {
    for (int64_t s = 0; s < count && rc == LT_OK; s += chunk) {
      int64_t real = count - s < chunk ? count - s : chunk;
      lt_scope_begin();
      lt_tensor *x = lt_nn_dataset_images(test, dev, s, chunk);
      rc = x ? eval_hits(m, x, test->labels + s, chunk, real, &hits) : lt_last_status();
      lt_scope_end();
    }
  }
  if (rc == LT_OK) *acc = (double)hits / (double)count;
  return rc;
}

/* A counter's value (-1 for an unknown name). */
static long long counter(const char *name) {
  int64_t v = -1;
  lt_get_counter(name, &v);
  return (long long)v;
}

static double metric_ms(const char *name) {
  lt_metric_stats st;
  return lt_get_metric(name, &st) == LT_OK ? st.total / 1e6 : 0.0;
}

static int fail(const char *what) {
  fflush(stdout);
  fprintf(stderr, "lazytensor-train: %s: %s\n", what, lt_last_error());
  return 1;
}

/* The progress display: a bar redrawn in place on a terminal, plain lines
 * otherwise. */
typedef struct progress {
  bool tty;
  double t0;
  int64_t last_step; /* steps summed in last_sum */
  double last_sum;
  double last_t; /* when the last line was shown, and the steps done then */
  int64_t last_total;
} progress;

static void progress_show(progress *pg, int64_t epoch, int64_t epochs, int64_t step, int64_t steps,
                          int64_t done_total, double loss, double rate) {
  if (pg->tty) {
    int width = 30, fill = steps ? (int)(width * step / steps) : width;
    char bar[64];
    for (int i = 0; i < width; i++) bar[i] = i < fill ? '#' : '.';
    bar[width] = 0;
    fprintf(stdout, "\repoch %lld/%lld [%s] %lld/%lld  %.1f steps/s  loss %.4f ", (long long)epoch,
            (long long)epochs, bar, (long long)step, (long long)steps, rate, loss);
  } else {
    fprintf(stdout, "epoch %lld/%lld step %lld/%lld (total %lld)  %.1f steps/s  loss %.4f\n",
            (long long)epoch, (long long)epochs, (long long)step, (long long)steps,
            (long long)done_total, rate, loss);
  }
  fflush(stdout);
}

/* Whether the command line asks for --model gpt (train_gpt.c runs it). */
static bool wants_gpt(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--model=gpt")) return true;
    if (!strcmp(argv[i], "--model") && i + 1 < argc && !strcmp(argv[i + 1], "gpt")) return true;
  }
  return false;
}

/* --export: the eval-mode forward over a batch of the evaluation's size (the
 * whole evaluated test set, or one chunk) as a program whose only input is
 * the images; the weights are captured, so the file holds them. */
static int export_program(const train_model *m, lt_device dev, const lt_nn_dataset *test,
                          int64_t ntest, const char *path) {
  int64_t batch = m->eval_chunk ? m->eval_chunk : ntest;
  lt_scope_begin();
  lt_tensor *x = lt_nn_dataset_images(test, dev, 0, batch);
  lt_tensor *logits = x ? m->forward(m, x, false) : NULL;
  lt_program *p = logits ? lt_program_create(&logits, 1, &x, 1) : NULL;
  int rc = p ? lt_program_save(p, path) : lt_last_status();
  lt_program_free(p);
  lt_scope_end();
  if (rc == LT_OK)
    printf("exported the inference program (batch %lld) to %s\n", (long long)batch, path);
  return rc;
}

/* The data-parallel mode (train_dp.c): --data-parallel, --devices N. */
bool train_dp_wanted(int argc, char **argv);
int train_dp_main(int argc, char **argv);

/* Whether the command line has the flag (exactly). */
static bool has_flag(int argc, char **argv, const char *flag) {
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], flag)) return true;
  return false;
}

int main(int argc, char **argv) {
  int64_t job = cli_mpi_job_size();
  if (job > 1 && !has_flag(argc, argv, "--data-parallel") && !has_flag(argc, argv, "--help") &&
      !has_flag(argc, argv, "-h"))
    fprintf(stderr,
            "lazytensor-train: warning: mpirun started %lld processes without --data-parallel: "
            "each trains alone, the same run %lld times, and their --save, --export, --log and "
            "--plot files overwrite each other (add --data-parallel to train one model "
            "together)\n",
            (long long)job, (long long)job);
  if (train_dp_wanted(argc, argv)) return train_dp_main(argc, argv);
  if (wants_gpt(argc, argv)) return train_gpt_main(argc, argv);
  options o;
  int prc = parse_args(argc, argv, &o);
  if (prc) return prc > 0 ? 0 : 2;
#if defined(__SSE__)
  /* Before the library starts its threads, which inherit the FP environment. */
  if (!o.keep_denormals) _mm_setcsr(_mm_getcsr() | 0x8040); /* FTZ | DAZ */
#endif
  /* Before the library's first use: both are read once. */
  if (o.threads) setenv("LT_NUM_THREADS", o.threads, 1);
  if (o.backend) setenv("LT_BACKEND", o.backend, 1);
  /* Before the first compile (the model's initialisation is one). */
  if (o.cache_dir && lt_set_persistent_cache(o.cache_dir, false) != LT_OK)
    return fail("--cache-dir");
  lt_device dev = lt_cpu(0);
  lt_set_seed(dev, o.seed);

  lt_nn_dataset train, test;
  if (lt_nn_fashion_mnist(o.data, true, &train) != LT_OK) return fail("training set");
  if (lt_nn_fashion_mnist(o.data, false, &test) != LT_OK) {
    lt_nn_dataset_free(&train);
    return fail("test set");
  }
  int64_t classes = train.num_classes > test.num_classes ? train.num_classes : test.num_classes;
  int64_t ntest = o.test_limit && o.test_limit < test.n ? o.test_limit : test.n;
  lt_nn_optim_config oc = lt_nn_optim_defaults(o.optim);
  if (o.lr_set) oc.lr = o.lr;
  if (o.wd_set) oc.weight_decay = o.weight_decay;
  oc.momentum = o.momentum;
  oc.nesterov = o.nesterov;
  const char *oname = o.optim == LT_NN_SGD ? "sgd" : o.optim == LT_NN_ADAM ? "adam" : "adamw";
  const char *be = getenv("LT_BACKEND");

  int status = 1;
  runlog rlog;
  if (runlog_start(&rlog, o.log_path, o.plot_path, "test_acc")) {
    lt_nn_dataset_free(&train);
    lt_nn_dataset_free(&test);
    return 1;
  }
  train_model m;
  lt_nn_optim *opt = NULL;
  lt_nn_loader *loader = NULL;
  lt_tensor *test_x = NULL, *acc = NULL, *prev = NULL;
  int mrc = o.cnn ? model_cnn_init(&m, dev, train.rows, train.cols, classes)
                  : model_mlp_init(&m, dev, train.features, o.hidden, o.layers, classes);
  if (mrc != LT_OK) {
    fail("model");
    goto out;
  }
  printf("lazytensor-train: %lld train / %lld test samples, ", (long long)train.n,
         (long long)ntest);
  m.describe(&m, stdout);
  printf(", %s lr %g (%s), batch %lld, %lld epoch(s), backend %s, threads %s\n", oname, oc.lr,
         o.cosine ? "cosine to 0" : "constant", (long long)o.batch, (long long)o.epochs,
         be && *be ? be : "default",
         getenv("LT_NUM_THREADS") ? getenv("LT_NUM_THREADS") : "default");

  if (o.load && lt_nn_load(o.load, m.state, m.nstate) != LT_OK) {
    fail("--load");
    goto out;
  }
  opt = lt_nn_optim_create(&oc, m.params, m.nparams);
  if (!opt) {
    fail("optimizer");
    goto out;
  }
  if (o.epochs > 0) {
    loader = lt_nn_loader_create(&train, dev, o.batch, true);
    if (!loader || lt_nn_loader_shuffle_ahead(loader, (int)o.epochs) != LT_OK) {
      fail("loader");
      goto out;
    }
  }
  /* The MLP's test images as one device tensor (uploaded with the init); a
   * chunked evaluation makes its chunks when it runs. */
  if (!m.eval_chunk) test_x = lt_nn_dataset_images(&test, dev, 0, ntest);
  double zero = 0;
  acc = lt_from_data(dev, LT_F64, NULL, 0, &zero);
  if ((!m.eval_chunk && !test_x) || !acc) {
    fail("test set");
    goto out;
  }
  /* Graph 1: the parameters' init and every epoch's shuffle; uploads. */
  if (lt_mark_step(dev) != LT_OK || lt_wait_device_ops(dev) != LT_OK) {
    fail("init");
    goto out;
  }

  progress pg = {isatty(STDOUT_FILENO) == 1, 0, 0, 0, 0, 0};
  int64_t log_every = o.log_every ? o.log_every : pg.tty ? 10 : 100;
  int64_t total = 0;
  /* The schedule's length: every step the run will take. */
  int64_t planned = o.epochs * (train.n / o.batch);
  if (o.limit_steps && o.limit_steps < planned) planned = o.limit_steps;
  double train_s = 0, final_acc = NAN, cur_lr = oc.lr;
  double prev_lr = oc.lr; /* the rate of the step before the current one (the log's rows) */
  bool stop = false;
  cli_loss_watch watch = cli_loss_watch_for(classes);
  for (int64_t e = 1; e <= o.epochs && !stop; e++) {
    int64_t nb = lt_nn_loader_epoch(loader);
    if (nb < 0) {
      fail("shuffle");
      goto out;
    }
    double t0 = cli_now_s(), epoch_sum0 = 0;
    if (lt_item(acc, 0, &epoch_sum0) != LT_OK) { /* ready: the last epoch was waited for */
      fail("reading the loss");
      goto out;
    }
    int64_t epoch_first = total;
    pg.t0 = pg.last_t = t0;
    pg.last_total = total;
    pg.last_step = total;
    pg.last_sum = epoch_sum0;
    for (int64_t s = 0; s < nb; s++) {
      if (o.limit_steps && total >= o.limit_steps) {
        stop = true;
        break;
      }
      /* The rate is a graph parameter: changing it every step recompiles nothing. */
      prev_lr = cur_lr;
      if (o.cosine && planned > 0)
        cur_lr = 0.5 * oc.lr * (1 + cos(3.14159265358979323846 * (double)total / (double)planned));
      if (o.cosine && planned > 0 && lt_nn_optim_set_lr(opt, cur_lr) != LT_OK) {
        fail("learning rate");
        goto out;
      }
      lt_scope_begin();
      lt_tensor *x, *y;
      int rc = lt_nn_loader_next(loader, &x, &y);
      lt_tensor *loss = rc == 1 ? lt_nn_cross_entropy(m.forward(&m, x, true), y) : NULL;
      rc = loss ? lt_backward(loss) : LT_EINVAL;
      if (rc == LT_OK) rc = lt_nn_optim_step(opt);
      lt_tensor *next = rc == LT_OK ? lt_add(acc, lt_cast(loss, LT_F64)) : NULL;
      if (next) lt_retain(next);
      lt_scope_end();
      if (!next) {
        fail("training step");
        goto out;
      }
      lt_release(prev);
      prev = acc;
      acc = next;
      if (lt_mark_step(dev) != LT_OK) {
        fail("training step (mark_step)");
        goto out;
      }
      total++;
      /* prev: the running sum through the step before this one, which
       * lt_mark_step has waited for: reading it costs no overlap. */
      int64_t upto = total - 1; /* steps summed in prev */
      if ((s + 1) % log_every == 0 && upto > pg.last_step) {
        double sum;
        if (lt_item(prev, 0, &sum) != LT_OK) {
          fail("reading the loss");
          goto out;
        }
        double t = cli_now_s();
        /* the step rate over the window since the last line */
        double wloss = (sum - pg.last_sum) / (double)(upto - pg.last_step);
        double wrate = (double)(total - pg.last_total) / (t - pg.last_t);
        progress_show(&pg, e, o.epochs, s + 1, nb, total, wloss, wrate);
        cli_loss_check(&watch, upto, wloss);
        if (runlog_row(&rlog, upto, e, wloss, prev_lr, wrate, NAN)) goto out;
        pg.last_t = t;
        pg.last_total = total;
        pg.last_sum = sum;
        pg.last_step = upto;
      }
    }
    if (lt_wait_device_ops(dev) != LT_OK) {
      fail("training step");
      goto out;
    }
    double dt = cli_now_s() - t0;
    train_s += dt;
    int64_t steps = total - epoch_first;
    double sum_end = 0;
    if (lt_item(acc, 0, &sum_end) != LT_OK) {
      fail("reading the loss");
      goto out;
    }
    if (pg.tty) printf("\n");
    if (steps) cli_loss_check(&watch, total, (sum_end - epoch_sum0) / (double)steps);
    double a;
    if (evaluate(&m, dev, test_x, &test, ntest, &a) != LT_OK) {
      fail("evaluation");
      goto out;
    }
    final_acc = a;
    /* The epoch's row continues the loss curve: the mean over the steps since
     * the last row (as every other row), not the epoch's mean. */
    if (steps &&
        runlog_row(
            &rlog, total, e,
            total > pg.last_step ? (sum_end - pg.last_sum) / (double)(total - pg.last_step) : NAN,
            cur_lr, (double)steps / (dt > 0 ? dt : 1), a))
      goto out;
    printf("epoch %lld: %lld steps in %.2f s (%.1f steps/s), mean loss %.4f, test accuracy %.4f\n",
           (long long)e, (long long)steps, dt, (double)steps / (dt > 0 ? dt : 1),
           steps ? (sum_end - epoch_sum0) / (double)steps : NAN, a);
    fflush(stdout);
  }
  if (o.epochs == 0) {
    if (evaluate(&m, dev, test_x, &test, ntest, &final_acc) != LT_OK) {
      fail("evaluation");
      goto out;
    }
    printf("test accuracy %.4f\n", final_acc);
  }
  if (o.save) {
    if (lt_nn_save(o.save, m.state, m.nstate) != LT_OK) {
      fail("--save");
      goto out;
    }
    printf("saved %d tensors to %s\n", m.nstate, o.save);
  }
  if (o.export_path && export_program(&m, dev, &test, ntest, o.export_path) != LT_OK) {
    fail("--export");
    goto out;
  }
  printf("summary: %lld steps, %.1f steps/s, final test accuracy %.4f\n", (long long)total,
         train_s > 0 ? (double)total / train_s : 0.0, final_acc);
  printf("summary: compiles %lld uncached, %lld cached (cache hits)\n", counter("UncachedCompile"),
         counter("CachedCompile"));
  /* Tracing and waiting apart: a step traced faster than the device runs the
   * one before waits for the lock, and that wait is not tracing. */
  printf("summary: trace %.1f ms, lock wait %.1f ms, compile %.1f ms, execute %.1f ms\n",
         metric_ms("TraceTime"), metric_ms("DeviceLockWait"), metric_ms("CompileTime"),
         metric_ms("ExecuteTime"));
  status = 0;
out:
  /* also after a failure: the curve so far */
  if (runlog_finish(&rlog, o.plot_path)) status = 1;
  lt_wait_device_ops(dev);
  lt_release(prev);
  lt_release(acc);
  lt_release(test_x);
  lt_nn_loader_free(loader);
  lt_nn_optim_free(opt);
  if (m.free) m.free(&m);
  lt_nn_dataset_free(&train);
  lt_nn_dataset_free(&test);
  return status;
}
