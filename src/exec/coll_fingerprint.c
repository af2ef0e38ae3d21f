/* Graph fingerprints for the collectives' check (coll_fingerprint.h): a
 * direct-mapped table from graph key to fingerprint. A key evicted between
 * its sync and its execution (thousands of other graphs traced meanwhile)
 * reads as 0, which the transports take as "not known": no comparison. */
#include "coll_fingerprint.h"

#include <pthread.h>
#include <stdlib.h>
#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t */
#include <xxhash.h>

#include "../core/lt_collective.h"
#include "../core/lt_node.h"

enum { SLOTS = 4096 };

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct { uint64_t key, fp; } g_table[SLOTS];

static uint64_t fingerprint(const lt_graph *g) {
  XXH3_state_t st;
  XXH3_64bits_reset(&st);
  for (int i = 0; i < g->nnodes; i++) {
    const lt_node *n = g->nodes[i];
    uint64_t w[2] = {(uint64_t)n->op << 32 | (uint64_t)n->dtype << 16 | n->noperands,
                     (uint64_t)(int64_t)g->param_of[i]};
    XXH3_64bits_update(&st, w, sizeof w);
    /* a collective's attributes (reduction, axes, world size, root, a
     * permute's pairs): graphs whose collectives differ only there differ */
    if (lt__op_info[n->op].family == LT_FAM_COLLECTIVE && n->nattrs)
      XXH3_64bits_update(&st, n->attrs, (size_t)n->nattrs * sizeof *n->attrs);
    for (int j = 0; j < n->noperands; j++) {
      uint64_t e = (uint64_t)n->operands[j].index << 32 | (uint32_t)n->operands[j].node->order;
      XXH3_64bits_update(&st, &e, sizeof e);
    }
  }
  for (int r = 0; r < g->nroots; r++) {
    uint64_t e = (uint64_t)(int64_t)g->roots[r];
    XXH3_64bits_update(&st, &e, sizeof e);
  }
  return XXH3_64bits_digest(&st) | 1; /* never 0: "not known" */
}

void lt__coll_fp_note(const lt_graph *g, uint64_t key) {
  if (!g || !lt__coll_any_bound()) return; /* no world: nothing compares it */
  size_t slot = (size_t)(key ^ key >> 32) % SLOTS;
  pthread_mutex_lock(&g_lock);
  bool known = g_table[slot].key == key && g_table[slot].fp;
  pthread_mutex_unlock(&g_lock);
  if (known) return;
  uint64_t fp = fingerprint(g);
  pthread_mutex_lock(&g_lock);
  g_table[slot].key = key;
  g_table[slot].fp = fp;
  pthread_mutex_unlock(&g_lock);
}

uint64_t lt__coll_fp_of(uint64_t key) {
  size_t slot = (size_t)(key ^ key >> 32) % SLOTS;
  pthread_mutex_lock(&g_lock);
  uint64_t fp = g_table[slot].key == key ? g_table[slot].fp : 0;
  pthread_mutex_unlock(&g_lock);
  return fp;
}
