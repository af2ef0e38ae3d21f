/* The fingerprint of the graph around a collective, which ranks compare
 * in each collective (lt_coll_call.graph) so that ranks running different
 * programs fail at the first call they disagree on instead of pairing
 * calls that merely have the same kind and shape.
 *
 * It hashes the graph's ops, dtypes and edges (in post-order), its
 * parameters' positions and its roots: not shapes, attribute values or
 * scalar constants, which may rightly differ between replicas (a replica
 * slicing its own shard of the batch at rank * batch, a last batch of
 * another size), and not the backend. The executor's graph key, which
 * holds all of those, names the fingerprint: it is noted when a sync looks
 * its graph up (lt__coll_fp_note) and found again when the executable runs
 * (lt__coll_fp_of). Only while some device belongs to a world. */
#ifndef LT_COLL_FINGERPRINT_H
#define LT_COLL_FINGERPRINT_H

#include <stdint.h>

#include "../backend/backend.h"

/* Notes the fingerprint of g, whose graph key's low word is key. */
void lt__coll_fp_note(const lt_graph *g, uint64_t key);
/* The fingerprint noted for key; 0 when none (the ranks then do not
 * compare fingerprints). */
uint64_t lt__coll_fp_of(uint64_t key);

#endif
