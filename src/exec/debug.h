/* Debug output of the executor: graph dumps (LT_SAVE_GRAPHS, with
 * LT_SAVE_GRAPHS_FORMAT=text|dot) and compile explanations (LT_DEBUG=1). */
#ifndef LT_DEBUG_H
#define LT_DEBUG_H

#include <stdbool.h>

#include "../backend/backend.h"
#include "cache.h"

/* Called by the executor once per synced graph, after its key is known and
 * before it runs. reason: "value read", "sync", "mark_step", "warm-up",
 * "eager" or "program". compiled: true when this sync missed the cache and
 * compiled. dev: the index of the device it runs on; a replica of a world
 * of several ranks writes to LT_SAVE_GRAPHS.<rank> and prefixes its LT_DEBUG
 * lines with its rank. Cheap when neither variable is set (one cached getenv). */
void lt__debug_graph(const lt_graph *g, lt_graph_key key, const char *reason, bool compiled,
                     int dev);

#endif
