/* lazytensor-train: trains an MLP (by default 784-512-512-10, ReLU) or a CNN
 * (--model cnn, model_cnn.c) on Fashion-MNIST, Adam lr 1e-3, batch 128, with
 * one cached graph per training step. What this file adds to the driver
 * (driver.h; train_gpt.c is the GPT's) and to what it shares with the
 * data-parallel run (classifier.h: the data sets, the model, the test
 * accuracy): the models' options, the step (next batch, forward,
 * cross-entropy, backward, optimizer step), epochs, progress and the log,
 * --export.
 *
 * Per step: scope_begin; forward; loss; lt_backward; optimizer step (lazy
 * lt_assign updates; grads dropped); scope_end; lt_mark_step. The loss is
 * never read in the step: each step adds it to a running sum on the device,
 * and the progress line and the log's row read the sum of the step before,
 * which lt_mark_step has already waited for, so reading costs no overlap.
 * Graphs of a run: (1) parameter init with every epoch's shuffle, (2) the
 * training step, (3) the test-set forward in eval mode (the CNN's in chunks
 * of one shape). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lazytensor.h"
#include "lazytensor_nn.h"
#include "classifier.h"
#include "cli.h"
#include "driver.h"
#include "model.h"
#include "runlog.h"

#define MAX_LAYERS 16

/* The options of the MLP and the CNN; d: those of every model (driver.h). */
typedef struct options {
  driver_opts d;
  int64_t hidden, layers, batch, epochs, limit_steps, test_limit;
  lt_nn_optim_kind optim;
  double lr, momentum, weight_decay;
  bool lr_set, wd_set, nesterov, cosine, cnn;
  bool hidden_set, layers_set; /* given on the command line (the MLP's alone) */
  const char *load, *export_path;
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
          "                      steps_per_s,test_acc: a row every max(1, steps per epoch\n"
          "                      / 50) steps and one at the end of each epoch with its\n"
          "                      test accuracy)\n"
          "  --plot FILE         draw the log's loss and accuracy curves as a PNG (needs\n"
          "                      cairo at build time; without --log the log is a\n"
          "                      temporary file, removed after drawing)\n"
          "The directories of --save, --export, --log and --plot are checked before\n"
          "training starts. A loss that turns non-finite or grows a hundredfold is warned\n"
          "about on stderr.\n"
          "  --precision f32|bf16  f32 (default), or bf16: the forward and the loss under\n"
          "                      autocast (bf16 products and convolutions; f32 parameters,\n"
          "                      gradients of parameters and optimizer state)\n"
          "  --keep-denormals    do not flush denormals to zero (see below)\n"
          "  --data-parallel     data-parallel MLP, CNN or GPT, one replica per process\n"
          "                      (under mpirun)\n"
          "  --devices N         data-parallel MLP, CNN or GPT, N replicas in this process\n"
          "                      (both: --batch per replica; see tools/train/train_dp.c and\n"
          "                      train_gpt_dp.c)\n"
          "  --shard-optimizer   with --data-parallel or --devices (MLP, CNN): each replica\n"
          "                      keeps only its share of Adam's state (ZeRO stage 1)\n"
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
  o->d.seed = 1;
  o->cosine = true;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *val;
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage(stdout);
      return 1;
    }
    if (strcmp(a, "--nesterov") == 0) {
      o->nesterov = true;
      continue;
    }
    if (strcmp(a, "--keep-denormals") == 0) {
      o->d.keep_denormals = true;
      continue;
    }
    if (strncmp(a, "--", 2) != 0) goto bad;
    char name[64];
    val = cli_option_name(a, name, sizeof name);
    if (!val) {
      static const char *const known[] = {
          "--hidden",    "--layers",  "--batch",  "--epochs",   "--limit-steps",  "--test-limit",
          "--log-every", "--seed",    "--lr",     "--momentum", "--weight-decay", "--optimizer",
          "--threads",   "--backend", "--data",   "--save",     "--load",         "--cache-dir",
          "--schedule",  "--model",   "--export", "--log",      "--plot",         "--precision"};
      bool is_known = false;
      for (size_t k = 0; k < sizeof known / sizeof *known; k++) is_known |= !strcmp(name, known[k]);
      if (!is_known) goto bad;
      if (!(val = cli_next_value(argc, argv, &i, ""))) return -1;
    }
    bool ok = true;
    if (driver_parse_option(&o->d, name, val, &ok))
      ;
    else if (!strcmp(name, "--hidden"))
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
    else if (!strcmp(name, "--lr"))
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
    } else if (!strcmp(name, "--load"))
      o->load = val;
    else if (!strcmp(name, "--export"))
      o->export_path = val;
    else if (!strcmp(name, "--model")) {
      ok = !strcmp(val, "mlp") || !strcmp(val, "cnn");
      o->cnn = !strcmp(val, "cnn");
    } else if (!strcmp(name, "--schedule")) {
      ok = !strcmp(val, "constant") || !strcmp(val, "cosine");
      o->cosine = !strcmp(val, "cosine");
    } else
      goto bad;
    if (!ok) return cli_bad_value(name, val);
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
  if (!cli_check_output("--save", o->d.save) || !cli_check_output("--export", o->export_path) ||
      !cli_check_output("--log", o->d.log_path) || !cli_check_output("--plot", o->d.plot_path))
    return -1;
  return 0;
}

/* The progress display: a bar redrawn in place on a terminal, plain lines
 * otherwise. */
static void progress_show(bool tty, int64_t epoch, int64_t epochs, int64_t step, int64_t steps,
                          int64_t done_total, double loss, double rate) {
  if (tty) {
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

/* One training step of the MLP or the CNN (driver_step's trace): the next
 * batch, forward, cross-entropy, backward, the optimizer's step. */
typedef struct step_ctx {
  const train_model *m;
  lt_nn_loader *loader;
  lt_nn_optim *opt;
} step_ctx;

static lt_tensor *trace_step(void *ctx) {
  const step_ctx *c = ctx;
  lt_tensor *x, *y, *loss = NULL;
  int rc = lt_nn_loader_next(c->loader, &x, &y);
  if (rc == 1 && model_precision_begin(c->m, lt_get_device(x)) == LT_OK) {
    loss = lt_nn_cross_entropy(c->m->forward(c->m, x, true), y);
    model_precision_end(c->m, lt_get_device(x));
  }
  rc = loss ? lt_backward(loss) : LT_EINVAL;
  if (rc == LT_OK) rc = lt_nn_optim_step(c->opt);
  return rc == LT_OK ? loss : NULL;
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
  lt_device dev;
  if (driver_setup(&o.d, &dev)) return 1;

  lt_nn_dataset train, test;
  if (classifier_load(o.d.data, &train, &test)) return 1;
  int64_t classes = classifier_classes(&train, &test);
  int64_t ntest = classifier_test_count(&test, o.test_limit);
  lt_nn_optim_config oc = lt_nn_optim_defaults(o.optim);
  if (o.lr_set) oc.lr = o.lr;
  if (o.wd_set) oc.weight_decay = o.weight_decay;
  oc.momentum = o.momentum;
  oc.nesterov = o.nesterov;
  const char *oname = o.optim == LT_NN_SGD ? "sgd" : o.optim == LT_NN_ADAM ? "adam" : "adamw";

  int status = 1;
  runlog rlog;
  if (runlog_start(&rlog, o.d.log_path, o.d.plot_path, "test_acc")) {
    lt_nn_dataset_free(&train);
    lt_nn_dataset_free(&test);
    return 1;
  }
  train_model m;
  lt_nn_optim *opt = NULL;
  lt_nn_loader *loader = NULL;
  lt_tensor *test_x = NULL;
  driver_loss ls = {dev, NULL, NULL};
  int mrc = classifier_model_init(&m, dev, o.cnn, &train, o.hidden, o.layers, classes);
  if (mrc != LT_OK) {
    driver_fail("model");
    goto out;
  }
  m.precision = o.d.precision;
  printf("lazytensor-train: %lld train / %lld test samples, ", (long long)train.n,
         (long long)ntest);
  m.describe(&m, stdout);
  printf(", %s lr %g (%s), batch %lld, %lld epoch(s), backend %s, threads %s, precision %s\n",
         oname, oc.lr, o.cosine ? "cosine to 0" : "constant", (long long)o.batch,
         (long long)o.epochs, driver_backend_name(), driver_threads_name(),
         driver_precision_name(&o.d, dev));

  if (o.load && lt_nn_params_load(m.state, m.nstate, o.load) != LT_OK) {
    driver_fail("--load");
    goto out;
  }
  opt = lt_nn_optim_create(&oc, m.params, m.nparams);
  if (!opt) {
    driver_fail("optimizer");
    goto out;
  }
  if (o.epochs > 0) {
    loader = lt_nn_loader_create(&train, dev, o.batch, true);
    if (!loader || lt_nn_loader_shuffle_ahead(loader, (int)o.epochs) != LT_OK) {
      driver_fail("loader");
      goto out;
    }
  }
  /* The MLP's test images as one device tensor (uploaded with the init); a
   * chunked evaluation makes its chunks when it runs. */
  if (!m.eval_chunk) test_x = lt_nn_dataset_images(&test, dev, 0, ntest);
  if (driver_loss_init(&ls, dev, "test set")) goto out;
  if (!m.eval_chunk && !test_x) {
    driver_fail("test set");
    goto out;
  }
  /* Graph 1: the parameters' init and every epoch's shuffle; uploads. */
  if (lt_mark_step(dev) != LT_OK || lt_wait_device_ops(dev) != LT_OK) {
    driver_fail("init");
    goto out;
  }

  bool tty = isatty(STDOUT_FILENO) == 1;
  int64_t log_every = o.d.log_every ? o.d.log_every : tty ? 10 : 100;
  int64_t total = 0;
  /* The schedule's length: every step the run will take. */
  int64_t planned = driver_planned_steps(o.epochs, train.n / o.batch, o.limit_steps);
  double train_s = 0, final_acc = NAN, cur_lr = oc.lr;
  double prev_lr = oc.lr; /* the rate of the step before the current one (the log's rows) */
  bool stop = false;
  cli_loss_watch watch = cli_loss_watch_for(classes);
  step_ctx sc = {&m, loader, opt};
  for (int64_t e = 1; e <= o.epochs && !stop; e++) {
    int64_t nb = lt_nn_loader_epoch(loader);
    if (nb < 0) {
      driver_fail("shuffle");
      goto out;
    }
    int64_t row_every = driver_log_every(nb); /* the log's rows: its curve's points */
    double t0 = cli_now_s(), epoch_sum0 = 0;
    if (driver_read_sum(ls.acc, &epoch_sum0)) goto out; /* ready: the last epoch was waited for */
    int64_t epoch_first = total;
    /* the windows of the progress lines and of the log's rows */
    driver_window pw = {total, epoch_sum0, total, t0}, lw = pw;
    for (int64_t s = 0; s < nb; s++) {
      if (o.limit_steps && total >= o.limit_steps) {
        stop = true;
        break;
      }
      /* The rate is a graph parameter: changing it every step recompiles nothing. */
      prev_lr = cur_lr;
      if (o.cosine && planned > 0) cur_lr = driver_cosine_lr(oc.lr, total, planned);
      if (o.cosine && planned > 0 && lt_nn_optim_set_lr(opt, cur_lr) != LT_OK) {
        driver_fail("learning rate");
        goto out;
      }
      if (driver_step(&ls, trace_step, &sc)) goto out;
      total++;
      /* ls.prev: the running sum through the step before this one, which
       * lt_mark_step has waited for: reading it costs no overlap. */
      int64_t upto = total - 1; /* steps summed in prev */
      bool show = (s + 1) % log_every == 0 && upto > pw.step;
      bool row = rlog.f && (s + 1) % row_every == 0 && upto > lw.step;
      if (!show && !row) continue;
      double sum;
      if (driver_read_sum(ls.prev, &sum)) goto out;
      double t = cli_now_s();
      if (show) {
        /* the step rate over the window since the last line */
        double wloss = driver_window_loss(&pw, upto, sum);
        progress_show(tty, e, o.epochs, s + 1, nb, total, wloss, driver_window_rate(&pw, total, t));
        cli_loss_check(&watch, upto, wloss);
        pw = (driver_window){upto, sum, total, t};
      }
      if (row) {
        if (runlog_row(&rlog, upto, e, driver_window_loss(&lw, upto, sum), prev_lr,
                       driver_window_rate(&lw, total, t), NAN))
          goto out;
        lw = (driver_window){upto, sum, total, t};
      }
    }
    if (lt_wait_device_ops(dev) != LT_OK) {
      driver_fail("training step");
      goto out;
    }
    double dt = cli_now_s() - t0;
    train_s += dt;
    int64_t steps = total - epoch_first;
    double sum_end = 0;
    if (driver_read_sum(ls.acc, &sum_end)) goto out;
    if (tty) printf("\n");
    if (steps) cli_loss_check(&watch, total, (sum_end - epoch_sum0) / (double)steps);
    double a;
    if (classifier_accuracy(&m, dev, test_x, &test, ntest, &a) != LT_OK) {
      driver_fail("evaluation");
      goto out;
    }
    final_acc = a;
    /* The epoch's row continues the loss curve: the mean over the steps since
     * the last row (as every other row), not the epoch's mean. */
    if (steps && runlog_row(&rlog, total, e, driver_window_loss(&lw, total, sum_end), cur_lr,
                            (double)steps / (dt > 0 ? dt : 1), a))
      goto out;
    printf("epoch %lld: %lld steps in %.2f s (%.1f steps/s), mean loss %.4f, test accuracy %.4f\n",
           (long long)e, (long long)steps, dt, (double)steps / (dt > 0 ? dt : 1),
           steps ? (sum_end - epoch_sum0) / (double)steps : NAN, a);
    fflush(stdout);
  }
  if (o.epochs == 0) {
    if (classifier_accuracy(&m, dev, test_x, &test, ntest, &final_acc) != LT_OK) {
      driver_fail("evaluation");
      goto out;
    }
    printf("test accuracy %.4f\n", final_acc);
  }
  if (o.d.save) {
    if (lt_nn_params_save(m.state, m.nstate, o.d.save) != LT_OK) {
      driver_fail("--save");
      goto out;
    }
    printf("saved %d tensors to %s\n", m.nstate, o.d.save);
  }
  if (o.export_path && export_program(&m, dev, &test, ntest, o.export_path) != LT_OK) {
    driver_fail("--export");
    goto out;
  }
  printf("summary: %lld steps, %.1f steps/s, final test accuracy %.4f\n", (long long)total,
         train_s > 0 ? (double)total / train_s : 0.0, final_acc);
  driver_print_summary();
  status = 0;
out:
  /* also after a failure: the curve so far */
  if (runlog_finish(&rlog, o.d.plot_path)) status = 1;
  lt_wait_device_ops(dev);
  driver_loss_free(&ls);
  lt_release(test_x);
  lt_nn_loader_free(loader);
  lt_nn_optim_free(opt);
  if (m.free) m.free(&m);
  lt_nn_dataset_free(&train);
  lt_nn_dataset_free(&test);
  return status;
}
