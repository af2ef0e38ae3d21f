/* Liveness of an MPI world's peers, kept apart from waiting (world_mpi.c).
 *
 * A thread per process sends every peer a small "alive" message every
 * LT_LIVE_BEAT_MS on its own duplicate of the world's communicator, and
 * records when it last heard from each. A collective that waits asks this
 * table, so it tells a peer that is gone (killed, stopped, cut off: silent
 * for LT_LIVE_SILENCE_MS) or that left the world (lt_world_free sends a
 * "leaving" message) from a peer that is alive but busy (a long evaluation,
 * a checkpoint, a slow compile), which may take up to the world's long
 * deadline. The thread needs MPI_THREAD_MULTIPLE; without it there is no
 * liveness and a wait ends only at the deadline. */
#ifndef LT_WORLD_MPI_LIVE_H
#define LT_WORLD_MPI_LIVE_H

#ifdef LT_HAVE_MPI
#include <mpi.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A peer silent this long is gone: 25 beats, room for a loaded host. */
enum { LT_LIVE_BEAT_MS = 200, LT_LIVE_SILENCE_MS = 5000 };

typedef struct lt_mpi_live lt_mpi_live;

/* Starts the heartbeat of rank (of size) on a duplicate of comm. NULL when
 * there is no peer, MPI lacks MPI_THREAD_MULTIPLE or the thread cannot
 * start: the world then runs without liveness. */
lt_mpi_live *lt__live_start(MPI_Comm comm, int rank, int size);

/* Whether a peer will never join this rank's collective number `posted`
 * (0-based, counting the calls this rank has posted): it left the world
 * after posting no more than that many, or went silent. why gets
 * "rank 1 left the world ..." or "rank 1 is gone ...". */
bool lt__live_lost(lt_mpi_live *l, uint64_t posted, char *why, size_t n);

/* Leaves the world: tells every peer that this rank goes after posting
 * `posted` collectives, then waits until every peer has left too or gone
 * silent, or until deadline_ns (lt__now_ns). Returns true and writes why
 * when the ranks' counts differ: the world ended with collectives unmatched. */
bool lt__live_leave(lt_mpi_live *l, uint64_t posted, int64_t deadline_ns, char *why, size_t n);

/* Whether some peer went silent (MPI_Finalize would wait for it). */
bool lt__live_any_gone(lt_mpi_live *l);

/* Stops the thread and frees everything (l may be NULL). */
void lt__live_stop(lt_mpi_live *l);
#endif

#endif
