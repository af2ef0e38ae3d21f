/* The Fashion-MNIST classifiers' shared parts (classifier.h). */
#include "classifier.h"

#include <stdio.h>
#include <stdlib.h>

#include "driver.h"

int classifier_load(const char *dir, lt_nn_dataset *train, lt_nn_dataset *test) {
  if (lt_nn_fashion_mnist(dir, true, train) != LT_OK) return driver_fail("training set");
  if (lt_nn_fashion_mnist(dir, false, test) != LT_OK) {
    lt_nn_dataset_free(train);
    return driver_fail("test set");
  }
  return 0;
}

int64_t classifier_classes(const lt_nn_dataset *train, const lt_nn_dataset *test) {
  return train->num_classes > test->num_classes ? train->num_classes : test->num_classes;
}

int64_t classifier_test_count(const lt_nn_dataset *test, int64_t test_limit) {
  return test_limit && test_limit < test->n ? test_limit : test->n;
}

int classifier_model_init(train_model *m, lt_device dev, bool cnn, const lt_nn_dataset *train,
                          int64_t hidden, int64_t layers, int64_t classes) {
  return cnn ? model_cnn_init(m, dev, train->rows, train->cols, classes)
             : model_mlp_init(m, dev, train->features, hidden, layers, classes);
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
  lt_device dev = lt_get_device(x);
  lt_tensor *p = NULL;
  if (model_precision_begin(m, dev) == LT_OK) {
    p = lt_argmax(m->forward(m, x, false), 1, false);
    model_precision_end(m, dev);
  }
  int rc = p ? lt_to_data(p, pred, bytes) : lt_last_status();
  lt_scope_end();
  if (rc == LT_OK)
    for (int64_t i = 0; i < count; i++) *hits += pred[i] == labels[i];
  free(pred);
  return rc;
}

int classifier_accuracy(const train_model *m, lt_device dev, lt_tensor *images,
                        const lt_nn_dataset *test, int64_t count, double *acc) {
  int64_t hits = 0, chunk = m->eval_chunk ? m->eval_chunk : count;
  int rc = LT_OK;
  if (!m->eval_chunk && images) {
    rc = eval_hits(m, images, test->labels, count, count, &hits);
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
