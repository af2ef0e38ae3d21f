/* A small traced graph: y = sum(relu(x @ w + b)) over a batch, read back, then
 * traced again with new data to show that the second run hits the cache. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lazytensor.h"

static int run_once(float scale) {
  float x[2 * 3], w[3 * 2], b[2] = {0.5f, -0.5f};
  for (int i = 0; i < 6; i++) {
    x[i] = scale * (float)(i + 1);
    w[i] = (float)(i % 3) - 1.0f;
  }
  lt_scope_begin(); /* every temporary below is released at the end */
  lt_tensor *X = lt_from_data(lt_cpu(0), LT_F32, (int64_t[]){2, 3}, 2, x);
  lt_tensor *W = lt_from_data(lt_cpu(0), LT_F32, (int64_t[]){3, 2}, 2, w);
  lt_tensor *B = lt_from_data(lt_cpu(0), LT_F32, (int64_t[]){2}, 1, b);
  lt_tensor *h = lt_relu(lt_add(lt_matmul(X, W), B));
  lt_tensor *y = lt_sum(h, NULL, 0, false);
  float out[4] = {0}, total = 0;
  int rc = lt_to_data(h, out, sizeof out);
  if (rc == LT_OK) rc = lt_to_data(y, &total, sizeof total);
  if (rc != LT_OK) {
    fprintf(stderr, "example: %s\n", lt_last_error());
  } else {
    printf("scale %.1f: relu(x@w+b) = [[%g, %g], [%g, %g]], sum = %g\n", scale, out[0], out[1],
           out[2], out[3], total);
  }
  lt_scope_end();
  return rc;
}

int main(int argc, char **argv) {
  if (argc > 1) { /* no options: --help (as GNU tools: stdout, 0) or a usage error */
    const bool help = !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h");
    fprintf(help ? stdout : stderr,
            "usage: lazytensor-example\n"
            "Traces relu(x @ w + b) twice (the second run hits the compilation cache)\n"
            "and prints the results and the metrics report.\n");
    return help ? 0 : 2;
  }
  if (run_once(1.0f) != LT_OK || run_once(2.0f) != LT_OK) return 1;
  char report[4096];
  lt_metrics_report(report, sizeof report);
  printf("%s", report);
  return 0;
}
