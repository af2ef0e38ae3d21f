/* lazytensor-train --model gpt: a character-level GPT (model_gpt.c) on the
 * text of Debian's fortunes package (lt_nn_text_load), with the recipe of
 * issue #15 (AdamW 1e-3, betas 0.9/0.999, weight decay 0.1 on the weight
 * matrices, clipping at global norm 1, 100 warm-up steps then a cosine to
 * a tenth, batch 32 random windows of 65 characters). bench/train_gpt_torch.py
 * is the PyTorch peer of the same run. What this file adds to the driver
 * (driver.h; train.c is the MLP's and the CNN's): the GPT's options, the
 * corpus, the step (gpt_trainer_step), a run counted in steps with
 * evaluations on the validation split, and the sampling after training.
 *
 * Graphs of a run, each compiled once: (1) the parameters' init, (2) the
 * training step (the rate is data), (3) the evaluation forward (fixed
 * windows in chunks of one shape), (4) the generation step (a fixed-shape
 * window; the position to read and the temperature are data). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lazytensor.h"
#include "lazytensor_nn.h"
#include "cli.h"
#include "driver.h"
#include "model.h"
#include "runlog.h"

static void gpt_usage(FILE *f) {
  fprintf(f,
          "usage: lazytensor-train --model gpt [options]\n"
          "Trains a character-level GPT on the text of Debian's fortunes package; prints the\n"
          "training and validation loss, then --generate N sampled characters.\n"
          "  --steps N           training steps (default 2000)\n"
          "  --batch N           random windows per step (default 32)\n"
          "  --lr X              peak learning rate of AdamW (default 1e-3): linear warm-up\n"
          "                      over --warmup steps, then a half cosine down to X / 10\n"
          "  --warmup N          warm-up steps (default 100)\n"
          "  --weight-decay X    AdamW's decay of the weight matrices (default 0.1; biases,\n"
          "                      norms and embeddings get none)\n"
          "  --clip X            clip the grads' global norm to X (default 1; 0: off)\n"
          "  --context N         tokens per window (default 64)\n"
          "  --width N           model width (default 128)\n"
          "  --layers N          transformer blocks (default 4)\n"
          "  --heads N           attention heads (default 4)\n"
          "  --seed N            seed of the device RNG (init), the windows and sampling\n"
          "                      (default 1)\n"
          "  --eval-every N      steps between evaluations (default 500; 0: at the end only)\n"
          "  --eval-windows N    validation windows (default 256: the first N windows of\n"
          "                      65 characters at stride 64 from the split's start)\n"
          "  --log-every N       steps between progress lines (default 100)\n"
          "  --generate N        sample N characters after training (default 0)\n"
          "  --temperature X     sampling temperature (default 1; 0: most likely)\n"
          "  --prompt TEXT       text the sample continues (default a newline)\n"
          "  --threads N         sets LT_NUM_THREADS\n"
          "  --backend ref|cpu   sets LT_BACKEND\n"
          "  --data DIR          text directory (default " LT_NN_FORTUNES_DIR
          ")\n"
          "  --save FILE         write the parameters after training\n"
          "  --cache-dir DIR     keep compiled graphs in DIR across runs\n"
          "  --log FILE          write the training log as CSV (step,epoch,loss,lr,\n"
          "                      steps_per_s,val_loss: a row every max(1, steps / 50)\n"
          "                      steps, at each evaluation and at the end; val_loss on\n"
          "                      the rows of an evaluation and on the last row)\n"
          "  --plot FILE         draw the log's training and validation loss as a PNG\n"
          "                      (without --log the log is a temporary file, removed\n"
          "                      after drawing)\n"
          "  --precision f32|bf16  f32 (default), or bf16: the forward and the loss under\n"
          "                      autocast (bf16 products and convolutions; f32 parameters,\n"
          "                      gradients of parameters and optimizer state)\n"
          "  --keep-denormals    do not flush denormals to zero\n"
          "  --composite-ops     attention, tanh gelu and the embedding lookup built from\n"
          "                      other ops (matmul, mask, softmax; the formula;\n"
          "                      index_select) instead of the fused library ops\n"
          "  --devices N         data parallel: N replicas in this process, --batch windows\n"
          "                      each (tools/train/train_gpt_dp.c; not with --generate,\n"
          "                      --temperature, --prompt, --backend, --cache-dir, --log,\n"
          "                      --plot)\n"
          "  --data-parallel     the same, one replica per process under mpirun\n");
}

int gpt_parse(int argc, char **argv, gpt_options *o) {
  memset(o, 0, sizeof *o);
  o->steps = 2000;
  o->batch = 32;
  o->warmup = 100;
  o->eval_every = 500;
  o->eval_windows = 256;
  o->d.log_every = 100;
  o->c = (gpt_config){0, 64, 128, 4, 4, 4, false};
  o->lr = 1e-3;
  o->weight_decay = 0.1;
  o->clip = 1.0;
  o->temperature = 1.0;
  o->d.seed = 1;
  o->prompt = "\n";
  o->devices = 1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *val;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      gpt_usage(stdout);
      return 1;
    }
    if (!strcmp(a, "--keep-denormals")) {
      o->d.keep_denormals = true;
      continue;
    }
    if (!strcmp(a, "--composite-ops")) {
      o->c.composite = true;
      continue;
    }
    if (!strcmp(a, "--data-parallel")) {
      o->mpi = true;
      continue;
    }
    if (strncmp(a, "--", 2) != 0) goto bad;
    char name[64];
    val = cli_option_name(a, name, sizeof name);
    if (!val && !(val = cli_next_value(argc, argv, &i, " (see --model gpt --help)"))) return -1;
    bool ok = true;
    if (driver_parse_option(&o->d, name, val, &ok))
      ;
    else if (!strcmp(name, "--model"))
      ok = !strcmp(val, "gpt");
    else if (!strcmp(name, "--devices"))
      ok = cli_parse_i64(val, 1, &o->devices) && o->devices <= LT_MAX_DEVICES;
    else if (!strcmp(name, "--steps"))
      ok = cli_parse_i64(val, 0, &o->steps);
    else if (!strcmp(name, "--batch"))
      ok = cli_parse_i64(val, 1, &o->batch) && o->batch <= 4096;
    else if (!strcmp(name, "--warmup"))
      ok = cli_parse_i64(val, 0, &o->warmup);
    else if (!strcmp(name, "--eval-every"))
      ok = cli_parse_i64(val, 0, &o->eval_every);
    else if (!strcmp(name, "--eval-windows"))
      ok = cli_parse_i64(val, 1, &o->eval_windows);
    else if (!strcmp(name, "--generate"))
      ok = cli_parse_i64(val, 0, &o->generate);
    else if (!strcmp(name, "--context"))
      ok = cli_parse_i64(val, 1, &o->c.context) && o->c.context <= 4096;
    else if (!strcmp(name, "--width"))
      ok = cli_parse_i64(val, 1, &o->c.width);
    else if (!strcmp(name, "--layers"))
      ok = cli_parse_i64(val, 0, &o->c.layers);
    else if (!strcmp(name, "--heads"))
      ok = cli_parse_i64(val, 1, &o->c.heads);
    else if (!strcmp(name, "--lr"))
      ok = cli_parse_f64(val, &o->lr);
    else if (!strcmp(name, "--weight-decay"))
      ok = cli_parse_f64(val, &o->weight_decay);
    else if (!strcmp(name, "--clip"))
      ok = cli_parse_f64(val, &o->clip);
    else if (!strcmp(name, "--temperature"))
      ok = cli_parse_f64(val, &o->temperature);
    else if (!strcmp(name, "--prompt"))
      o->prompt = val;
    else
      goto bad;
    if (!ok) return cli_bad_value(name, val);
    continue;
  bad:
    fprintf(stderr, "lazytensor-train: unknown option '%s' for --model gpt (see --help)\n", a);
    return -1;
  }
  if (o->c.width % o->c.heads) {
    fprintf(stderr, "lazytensor-train: --width %lld is not a multiple of --heads %lld\n",
            (long long)o->c.width, (long long)o->c.heads);
    return -1;
  }
  /* before the run, not after it: a typo must not lose the training */
  if (!cli_check_output("--save", o->d.save) || !cli_check_output("--log", o->d.log_path) ||
      !cli_check_output("--plot", o->d.plot_path))
    return -1;
  return 0;
}

/* The GPT's step (driver_step's trace): the next batch of windows. */
static lt_tensor *trace_step(void *ctx) { return gpt_trainer_step(ctx); }

int train_gpt_main(int argc, char **argv) {
  gpt_options o;
  int prc = gpt_parse(argc, argv, &o);
  if (prc) return prc > 0 ? 0 : 2;
  lt_device dev;
  if (driver_setup(&o.d, &dev)) return 1;
  lt_nn_text text;
  if (lt_nn_text_load(o.d.data, &text) != LT_OK) return driver_fail("corpus");
  o.c.vocab = text.vocab_size;
  gpt_trainer tr;
  int status = 1;
  driver_loss ls = {dev, NULL, NULL};
  runlog rlog;
  if (runlog_start(&rlog, o.d.log_path, o.d.plot_path, "val_loss")) {
    lt_nn_text_free(&text);
    return 1;
  }
  if (gpt_trainer_init(&tr, dev, &text, &o.c, o.batch, o.lr, o.weight_decay, o.clip, o.d.seed) !=
      LT_OK) {
    lt_nn_text_free(&text);
    runlog_close(&rlog);
    return driver_fail("model");
  }
  tr.m.precision = o.d.precision;
  printf("lazytensor-train: %lld characters from %d files (%lld train, %lld validation), ",
         (long long)text.n, text.files, (long long)text.n_train,
         (long long)(text.n - text.n_train));
  tr.m.describe(&tr.m, stdout);
  printf(
      ", adamw lr %g (warm-up %lld, cosine to %g), weight decay %g, clip %g, batch %lld, %lld "
      "steps, backend %s, threads %s, precision %s\n",
      o.lr, (long long)o.warmup, o.lr / 10, o.weight_decay, o.clip, (long long)o.batch,
      (long long)o.steps, driver_backend_name(), driver_threads_name(),
      driver_precision_name(&o.d, dev));
  /* Graph 1: the parameters' init (and the uploads). */
  if (driver_loss_init(&ls, dev, "init")) goto out;
  if (lt_mark_step(dev) != LT_OK || lt_wait_device_ops(dev) != LT_OK) {
    driver_fail("init");
    goto out;
  }
  double t0 = cli_now_s(), train_s = 0, val = NAN, trn = NAN;
  /* the windows of the progress lines and of the log's rows */
  driver_window pw = {0, 0, 0, t0}, lw = pw;
  int64_t row_every = driver_log_every(o.steps);
  double last_loss = NAN, last_rate = NAN; /* the last step's row waits for the final evaluation */
  cli_loss_watch watch = cli_loss_watch_for(o.c.vocab);
  for (int64_t s = 0; s < o.steps; s++) {
    if (gpt_trainer_set_lr(&tr, gpt_lr_at(o.lr, s, o.steps, o.warmup)) != LT_OK) {
      driver_fail("learning rate");
      goto out;
    }
    if (driver_step(&ls, trace_step, &tr)) goto out;
    bool last = s + 1 == o.steps;
    bool show = (s + 1) % o.d.log_every == 0 || last;
    bool eval = o.eval_every && (s + 1) % o.eval_every == 0 && !last;
    bool row = rlog.f && ((s + 1) % row_every == 0 || eval || last);
    if (!show && !row && !eval) continue;
    /* the running sum through this step (waits for it) */
    double sum;
    if (driver_read_sum(ls.acc, &sum)) goto out;
    double t = cli_now_s();
    if (show || eval) {
      double wloss = driver_window_loss(&pw, s + 1, sum);
      printf("step %lld/%lld  lr %.2e  train loss %.4f  %.2f steps/s\n", (long long)(s + 1),
             (long long)o.steps, gpt_lr_at(o.lr, s, o.steps, o.warmup), wloss,
             driver_window_rate(&pw, s + 1, t));
      cli_loss_check(&watch, s + 1, wloss);
      pw = (driver_window){s + 1, sum, s + 1, t};
    }
    double rloss = driver_window_loss(&lw, s + 1, sum), rrate = driver_window_rate(&lw, s + 1, t);
    if (row) {
      last_loss = rloss;
      last_rate = rrate;
      lw = (driver_window){s + 1, sum, s + 1, t};
    }
    if (eval) {
      if (gpt_evaluate(&tr, true, o.eval_windows, &val) != LT_OK) {
        driver_fail("evaluation");
        goto out;
      }
      printf("step %lld/%lld  validation loss %.4f\n", (long long)(s + 1), (long long)o.steps, val);
    }
    if (row && !last &&
        runlog_row(&rlog, s + 1, 1, rloss, gpt_lr_at(o.lr, s, o.steps, o.warmup), rrate,
                   eval ? val : NAN))
      goto out;
    fflush(stdout);
    /* the evaluation and the output are not training: the windows' clocks skip them */
    double now = cli_now_s();
    train_s += t - t0;
    t0 = now;
    pw.t += now - t;
    lw.t += now - t;
  }
  if (lt_wait_device_ops(dev) != LT_OK) {
    driver_fail("training step");
    goto out;
  }
  train_s += cli_now_s() - t0;
  if (gpt_evaluate(&tr, false, o.eval_windows, &trn) != LT_OK ||
      gpt_evaluate(&tr, true, o.eval_windows, &val) != LT_OK) {
    driver_fail("evaluation");
    goto out;
  }
  /* the parseable line, the same as bench/train_gpt_torch.py's */
  printf("final: steps %lld train_loss %.4f val_loss %.4f\n", (long long)o.steps, trn, val);
  if (o.steps > 0 && runlog_row(&rlog, o.steps, 1, last_loss,
                                gpt_lr_at(o.lr, o.steps - 1, o.steps, o.warmup), last_rate, val))
    goto out;
  if (o.generate > 0) {
    char *sample = malloc((size_t)o.generate + 1);
    if (!sample) {
      fprintf(stderr, "lazytensor-train: out of memory\n");
      goto out;
    }
    double g0 = cli_now_s();
    int rc = gpt_generate(&tr.m, &text, o.prompt, o.generate, o.temperature, o.d.seed, sample);
    if (rc != LT_OK) {
      free(sample);
      driver_fail("generation");
      goto out;
    }
    sample[o.generate] = 0;
    printf("--- %lld characters sampled at temperature %g in %.2f s ---\n%s%s\n---\n",
           (long long)o.generate, o.temperature, cli_now_s() - g0, o.prompt, sample);
    free(sample);
  }
  if (o.d.save) {
    if (lt_nn_params_save(tr.m.state, tr.m.nstate, o.d.save) != LT_OK) {
      driver_fail("--save");
      goto out;
    }
    printf("saved %d tensors to %s\n", tr.m.nstate, o.d.save);
  }
  printf("summary: %lld steps, %.2f steps/s\n", (long long)o.steps,
         train_s > 0 ? (double)o.steps / train_s : 0.0);
  driver_print_summary();
  status = 0;
out:
  if (runlog_finish(&rlog, o.d.plot_path)) status = 1;
  lt_wait_device_ops(dev);
  driver_loss_free(&ls);
  gpt_trainer_free(&tr);
  lt_nn_text_free(&text);
  return status;
}
