/* Placeholder until graph dumps and compile explanations land. */
#include "debug.h"

void lt__debug_graph(const lt_graph *g, lt_graph_key key, const char *reason, bool compiled) {
  (void)g;
  (void)key;
  (void)reason;
  (void)compiled;
}
