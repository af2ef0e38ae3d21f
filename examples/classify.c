/* Loads a program that `lazytensor-train --export FILE` saved (the trained
 * model's eval-mode forward, weights included) and classifies the
 * Fashion-MNIST test set with it: no model code, no tracing, only
 * lt_program_load and lt_program_run.
 *
 *   lazytensor-classify FILE [DATA_DIR]
 *
 * The program's input fixes the batch: the test set runs in batches of that
 * size, the last one padded with zero images whose predictions are ignored. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lazytensor.h"
#include "lazytensor_nn.h"

static int fail(const char *what) {
  fprintf(stderr, "lazytensor-classify: %s: %s\n", what, lt_last_error());
  return 1;
}

int main(int argc, char **argv) {
  const bool help = argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"));
  if (help || argc < 2 || argc > 4) { /* help as GNU tools: stdout, 0 */
    fprintf(help ? stdout : stderr,
            "usage: lazytensor-classify PROGRAM_FILE [FASHION_MNIST_DIR [PREDICTIONS_OUT]]\n");
    return help ? 0 : 2;
  }
  lt_program *p = lt_program_load(argv[1]);
  if (!p) return fail(argv[1]);
  lt_dtype dt, odt;
  int64_t in_shape[LT_MAX_DIMS], out_shape[LT_MAX_DIMS];
  int ndim, ondim;
  if (lt_program_count(p, false) != 1 || lt_program_count(p, true) < 1 ||
      lt_program_signature(p, false, 0, &dt, in_shape, &ndim) != LT_OK ||
      lt_program_signature(p, true, 0, &odt, out_shape, &ondim) != LT_OK || dt != LT_F32 ||
      ndim != 2 || odt != LT_F32 || ondim != 2 || out_shape[0] != in_shape[0]) {
    fprintf(stderr,
            "lazytensor-classify: %s is not an image classifier (one f32 input [B, "
            "features], f32 logits [B, classes] first)\n",
            argv[1]);
    lt_program_free(p);
    return 1;
  }
  int64_t batch = in_shape[0], classes = out_shape[1];
  lt_nn_dataset test;
  if (lt_nn_fashion_mnist(argc > 2 ? argv[2] : NULL, false, &test) != LT_OK) {
    lt_program_free(p);
    return fail("test set");
  }
  int status = 1;
  FILE *pred = NULL; /* one predicted class per line, to compare with another runner's */
  float *logits = malloc((size_t)(batch * classes) * sizeof *logits);
  if (!logits || test.features != in_shape[1]) {
    fprintf(stderr, "lazytensor-classify: %s\n",
            logits ? "the program's input width is not the images' size" : "out of memory");
    goto out;
  }
  if (argc > 3 && !(pred = fopen(argv[3], "w"))) {
    perror(argv[3]);
    goto out;
  }
  int64_t hits = 0;
  int nout = lt_program_count(p, true);
  for (int64_t s = 0; s < test.n; s += batch) {
    lt_scope_begin();
    lt_tensor *x = lt_nn_dataset_images(&test, lt_cpu(0), s, batch);
    lt_tensor *outs[8] = {NULL};
    int rc = x && nout <= 8 ? lt_program_run(p, &x, 1, outs) : LT_EINVAL;
    if (rc == LT_OK) rc = lt_to_data(outs[0], logits, (size_t)(batch * classes) * sizeof *logits);
    lt_scope_end(); /* releases x and the outputs */
    if (rc != LT_OK) {
      fail("run");
      goto out;
    }
    for (int64_t i = 0; i < batch && s + i < test.n; i++) {
      const float *row = logits + i * classes;
      int64_t best = 0; /* the first maximum, as lt_argmax */
      for (int64_t c = 1; c < classes; c++)
        if (row[c] > row[best]) best = c;
      hits += best == test.labels[s + i];
      if (pred) fprintf(pred, "%lld\n", (long long)best);
    }
  }
  printf("classified %lld test images: accuracy %.4f\n", (long long)test.n,
         (double)hits / (double)test.n);
  status = pred && fclose(pred) != 0 ? 1 : 0;
  pred = NULL;
out:
  if (pred) fclose(pred);
  free(logits);
  lt_nn_dataset_free(&test);
  lt_program_free(p);
  return status;
}
