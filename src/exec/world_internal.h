/* The world object shared by the in-process worlds (world.c) and the MPI
 * world (world_mpi.c). */
#ifndef LT_WORLD_INTERNAL_H
#define LT_WORLD_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "lazytensor_world.h"
#include "../core/lt_collective.h"

struct lt_world {
  int n;
  /* An MPI world (one replica per process) when mpi is set: this process
   * is rank self, on CPU:0; else every rank lives here (self is -1). */
  void *mpi;
  int self;
  int64_t timeout_ms;
  pthread_mutex_t lock;
  pthread_cond_t cond; /* CLOCK_MONOTONIC: a wall-clock jump does not cut a wait short */
  uint64_t round;      /* rounds completed */
  int arrived, done;
  bool open; /* every rank arrived and the calls agree: compute */
  /* Ranks whose lt_world_run function returned and whose device is idle:
   * they will join no collective again, so waiting for them fails at once. */
  bool gone[LT_MAX_DEVICES];
  int broken;
  char broken_msg[1024];
  lt_coll_call *slot[LT_MAX_DEVICES];
};

/* The collective deadline when LT_COLLECTIVE_TIMEOUT_MS is unset: long, as
 * a live peer may be busy for minutes (an evaluation, a checkpoint, a first
 * compile); ranks that are gone are found apart from it (MPI: heartbeats;
 * in-process: a replica whose function returned). The largest deadline
 * keeps the deadline's nanoseconds within int64. */
#define LT_COLL_DEFAULT_TIMEOUT_MS ((int64_t)600000)
#define LT_COLL_MAX_TIMEOUT_MS ((int64_t)1000000000000)
/* LT_COLLECTIVE_TIMEOUT_MS (whole milliseconds), the default when unset or
 * empty, or -1 with LT_EINVAL recorded naming fn when it is anything else. */
int64_t lt__coll_env_timeout_ms(const char *fn);
/* The MPI world's parts (world_mpi.c; stubs when built without MPI). */
int lt__mpi_set_timeout_ms(lt_world *w, int64_t ms);
void lt__mpi_free(lt_world *w);

#endif
