/* Classifies the Fashion-MNIST test set with an object file that
 * lazytensor-aot made from a saved program (lazytensor-aot FILE -o model):
 * links model.o, libc and libm, nothing of lazytensor.
 *
 *   cc classify_aot.c model.o -I. -lm -o classify_aot
 *   ./classify_aot t10k-images-idx3-ubyte t10k-labels-idx1-ubyte   (gunzipped)
 *
 * The model's input fixes the batch: the set runs in batches of that size,
 * the last one padded with zero images whose predictions are ignored. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

/* An IDX file's payload after a header of ndims big-endian u32 sizes. */
static unsigned char *read_idx(const char *path, int ndims, long *dims) {
  FILE *f = fopen(path, "rb");
  unsigned char h[16];
  if (!f || fread(h, 1, 4 + 4 * (size_t)ndims, f) != 4 + 4 * (size_t)ndims || h[3] != ndims) {
    fprintf(stderr, "classify_aot: %s is not an IDX file of %d dimension(s)\n", path, ndims);
    if (f) fclose(f);
    return NULL;
  }
  long n = 1;
  for (int d = 0; d < ndims; d++) {
    const unsigned char *p = h + 4 + 4 * d;
    dims[d] = (long)p[0] << 24 | (long)p[1] << 16 | (long)p[2] << 8 | (long)p[3];
    n *= dims[d];
  }
  unsigned char *b = malloc((size_t)n + 1);
  if (!b || fread(b, 1, (size_t)n, f) != (size_t)n) {
    fprintf(stderr, "classify_aot: %s is truncated\n", path);
    free(b);
    b = NULL;
  }
  fclose(f);
  return b;
}

int main(int argc, char **argv) {
  if (argc != 3 && argc != 4) {
    fprintf(stderr, "usage: classify_aot IMAGES_IDX LABELS_IDX [PREDICTIONS_OUT] (uncompressed)\n");
    return 2;
  }
  long idims[3], ldims[1];
  unsigned char *images = read_idx(argv[1], 3, idims);
  unsigned char *labels = read_idx(argv[2], 1, ldims);
  if (!images || !labels || idims[0] != ldims[0]) return 1;
  long n = idims[0], features = idims[1] * idims[2];
  long batch = model_INPUT_NUMEL / features, classes = model_OUTPUT_NUMEL / batch;
  if (batch * features != model_INPUT_NUMEL || classes * batch != model_OUTPUT_NUMEL) {
    fprintf(stderr, "classify_aot: the model's input is not a batch of %ld-pixel images\n",
            features);
    return 1;
  }
  float *x = malloc(sizeof(float) * (size_t)model_INPUT_NUMEL);
  float *y = malloc(sizeof(float) * (size_t)model_OUTPUT_NUMEL);
  if (!x || !y) return 1;
  /* One predicted class per line, to compare with the JIT's. */
  FILE *pred = argc > 3 ? fopen(argv[3], "w") : NULL;
  if (argc > 3 && !pred) return 1;
  long hits = 0;
  for (long s = 0; s < n; s += batch) {
    memset(x, 0, sizeof(float) * (size_t)model_INPUT_NUMEL);
    long real = n - s < batch ? n - s : batch;
    for (long i = 0; i < real * features; i++) x[i] = (float)images[s * features + i] / 255.0f;
    if (model_run(x, y) != 0) return 1;
    for (long i = 0; i < real; i++) {
      long best = 0; /* the first maximum, as lt_argmax */
      for (long c = 1; c < classes; c++)
        if (y[i * classes + c] > y[i * classes + best]) best = c;
      hits += best == labels[s + i];
      if (pred) fprintf(pred, "%ld\n", best);
    }
  }
  printf("classified %ld test images: accuracy %.4f\n", n, (double)hits / (double)n);
  if (pred && fclose(pred) != 0) return 1;
  free(x);
  free(y);
  free(images);
  free(labels);
  return 0;
}
