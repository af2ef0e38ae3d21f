/* What lazytensor-train's two runs of the Fashion-MNIST classifiers (the MLP
 * and the CNN) share: the single-process run (train.c) and the
 * data-parallel one (train_dp.c) load the same data sets, build the model
 * that --model names and measure the test accuracy the same way; each adds
 * its own loop. */
#ifndef LT_TRAIN_CLASSIFIER_H
#define LT_TRAIN_CLASSIFIER_H

#include <stdbool.h>
#include <stdint.h>

#include "lazytensor.h"
#include "lazytensor_nn.h"
#include "model.h"

/* The training and the test set of Fashion-MNIST in dir (NULL: the default).
 * 0, or 1 after a message naming the set (driver_fail), with neither kept. */
int classifier_load(const char *dir, lt_nn_dataset *train, lt_nn_dataset *test);

/* The classes the model tells apart: the larger label count of the sets. */
int64_t classifier_classes(const lt_nn_dataset *train, const lt_nn_dataset *test);

/* The test samples an evaluation takes: the first test_limit (0: all). */
int64_t classifier_test_count(const lt_nn_dataset *test, int64_t test_limit);

/* The CNN (cnn) or the MLP (hidden x layers) for the images of train. A
 * status, with lt_last_error() set on failure. */
int classifier_model_init(train_model *m, lt_device dev, bool cnn, const lt_nn_dataset *train,
                          int64_t hidden, int64_t layers, int64_t classes);

/* Test accuracy of m (eval mode) over the first count samples of test. A
 * model with no eval_chunk takes them in one graph: over images when given
 * (those count images as a device tensor, made once by the caller), else
 * over images made here. Otherwise chunks of eval_chunk images, the last one
 * padded with zero images, so that every chunk runs the same compiled graph.
 * A status. */
int classifier_accuracy(const train_model *m, lt_device dev, lt_tensor *images,
                        const lt_nn_dataset *test, int64_t count, double *acc);

#endif
