/* The MPI world's heartbeat (world_mpi_live.h).
 *
 * Each peer has one receive posted at all times and at most one send in
 * flight: a send still pending (a stopped peer's queue is full) is not
 * stacked on. A message is {type, posted}: BEAT says "alive", LEAVE says
 * "this rank left after posting that many collectives". The thread ticks
 * every TICK_MS; a tick that comes late (this process was stopped, or not
 * scheduled on a loaded host) moves every peer's last-heard time on by the
 * gap, so that our own pause is never taken for the peers' silence. */
#ifdef LT_HAVE_MPI
#include "world_mpi_live.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "lt_metrics.h"
#include "world_mpi_lib.h"

enum { TICK_MS = 20, MSG_BEAT = 1, MSG_LEAVE = 2, TAG = 7 };

typedef struct peer {
  int64_t last_ns; /* when we last heard from it (moved on over our own pauses) */
  bool left, gone;
  uint64_t left_posted;
  MPI_Request rq, sq;
  int64_t rbuf[2], sbuf[2];
} peer;

struct lt_mpi_live {
  MPI_Comm comm;
  int rank, size;
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t cond; /* a peer left or went silent; our LEAVE went out */
  bool stop, leaving;
  int leave_unsent; /* peers still to be sent our LEAVE */
  uint64_t posted;  /* ours, in the LEAVE */
  peer *p;
};

/* Under l->lock: takes every message that came from q, then reposts. */
static void drain(lt_mpi_live *l, int q, int64_t now) {
  peer *p = &l->p[q];
  for (int k = 0; k < 64 && p->rq != lt__mpi.request_null; k++) {
    int flag = 0;
    if (lt__mpi.Test(&p->rq, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS || !flag) return;
    p->last_ns = now;
    if (p->rbuf[0] == MSG_LEAVE && !p->left) {
      p->left = true;
      p->left_posted = (uint64_t)p->rbuf[1];
      pthread_cond_broadcast(&l->cond);
    }
    if (lt__mpi.Irecv(p->rbuf, 2, lt__mpi.t_int64, q, TAG, l->comm, &p->rq) != MPI_SUCCESS)
      p->rq = lt__mpi.request_null;
  }
}

/* Under l->lock: sends q a BEAT (when due) or our LEAVE, unless a send is
 * still in flight. */
static void send_to(lt_mpi_live *l, int q, bool beat_due, bool *leave_done) {
  peer *p = &l->p[q];
  *leave_done = false;
  if (p->sq != lt__mpi.request_null) {
    int flag = 0;
    if (lt__mpi.Test(&p->sq, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS || !flag) return;
  }
  if (p->sbuf[0] == MSG_LEAVE) return; /* said our last word */
  if (!beat_due && !l->leaving) return;
  p->sbuf[0] = l->leaving ? MSG_LEAVE : MSG_BEAT;
  p->sbuf[1] = (int64_t)l->posted;
  if (lt__mpi.Isend(p->sbuf, 2, lt__mpi.t_int64, q, TAG, l->comm, &p->sq) != MPI_SUCCESS)
    p->sq = lt__mpi.request_null;
  *leave_done = p->sbuf[0] == MSG_LEAVE;
}

static void *beat_main(void *arg) {
  lt_mpi_live *l = arg;
  int64_t last_tick = lt__now_ns(), last_beat = 0;
  pthread_mutex_lock(&l->lock);
  while (!l->stop) {
    int64_t now = lt__now_ns(), gap = now - last_tick;
    last_tick = now;
    bool beat_due = now - last_beat >= (int64_t)LT_LIVE_BEAT_MS * 1000000;
    if (beat_due) last_beat = now;
    for (int q = 0; q < l->size; q++) {
      if (q == l->rank) continue;
      peer *p = &l->p[q];
      if (gap > 1000000000) p->last_ns += gap; /* our pause, not its silence */
      drain(l, q, now);
      bool sent_leave;
      send_to(l, q, beat_due, &sent_leave);
      if (sent_leave || (l->leaving && p->gone && p->sbuf[0] != MSG_LEAVE)) {
        if (p->sbuf[0] != MSG_LEAVE) p->sbuf[0] = MSG_LEAVE; /* gone: never send it */
        l->leave_unsent--;
        pthread_cond_broadcast(&l->cond);
      }
      if (!p->left && !p->gone && now - p->last_ns > (int64_t)LT_LIVE_SILENCE_MS * 1000000) {
        p->gone = true; /* for good: the world breaks on it anyway */
        pthread_cond_broadcast(&l->cond);
      }
    }
    pthread_mutex_unlock(&l->lock);
    struct timespec ts = {0, TICK_MS * 1000000};
    nanosleep(&ts, NULL);
    pthread_mutex_lock(&l->lock);
  }
  pthread_mutex_unlock(&l->lock);
  return NULL;
}

lt_mpi_live *lt__live_start(MPI_Comm comm, int rank, int size) {
  int level = 0;
  lt__mpi.Query_thread(&level);
  if (size < 2 || level < MPI_THREAD_MULTIPLE) return NULL;
  lt_mpi_live *l = calloc(1, sizeof *l);
  peer *p = calloc((size_t)size, sizeof *p);
  if (!l || !p) {
    free(l);
    free(p);
    return NULL;
  }
  l->p = p;
  l->rank = rank;
  l->size = size;
  l->leave_unsent = size - 1;
  if (lt__mpi.Comm_dup(comm, &l->comm) != MPI_SUCCESS) {
    free(p);
    free(l);
    return NULL;
  }
  lt__mpi.Comm_set_errhandler(l->comm, lt__mpi.errors_return);
  int64_t now = lt__now_ns();
  for (int q = 0; q < size; q++) {
    p[q].rq = p[q].sq = lt__mpi.request_null;
    p[q].last_ns = now;
    if (q != rank) lt__mpi.Irecv(p[q].rbuf, 2, lt__mpi.t_int64, q, TAG, l->comm, &p[q].rq);
  }
  pthread_mutex_init(&l->lock, NULL);
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(&l->cond, &attr);
  pthread_condattr_destroy(&attr);
  if (pthread_create(&l->thread, NULL, beat_main, l) != 0) {
    l->stop = true; /* no thread: stop frees the rest */
    l->thread = pthread_self();
    lt__live_stop(l);
    return NULL;
  }
  return l;
}

bool lt__live_lost(lt_mpi_live *l, uint64_t posted, char *why, size_t n) {
  if (!l) return false;
  bool lost = false;
  pthread_mutex_lock(&l->lock);
  for (int q = 0; q < l->size && !lost; q++) {
    const peer *p = &l->p[q];
    if (q == l->rank) continue;
    if (p->left && p->left_posted <= posted) {
      snprintf(why, n,
               "rank %d left the world (lt_world_free) after %llu collective(s), without "
               "joining this one",
               q, (unsigned long long)p->left_posted);
      lost = true;
    } else if (p->gone) {
      snprintf(why, n,
               "rank %d is gone: no heartbeat from it for %d s (a process killed, stopped or cut "
               "off)",
               q, LT_LIVE_SILENCE_MS / 1000);
      lost = true;
    }
  }
  pthread_mutex_unlock(&l->lock);
  return lost;
}

static bool settled(const lt_mpi_live *l) {
  if (l->leave_unsent > 0) return false;
  for (int q = 0; q < l->size; q++)
    if (q != l->rank && !l->p[q].left && !l->p[q].gone) return false;
  return true;
}

bool lt__live_leave(lt_mpi_live *l, uint64_t posted, int64_t deadline_ns, char *why, size_t n) {
  if (!l) return false;
  pthread_mutex_lock(&l->lock);
  l->posted = posted;
  l->leaving = true;
  struct timespec dl = {(time_t)(deadline_ns / 1000000000), (long)(deadline_ns % 1000000000)};
  /* lt__now_ns is CLOCK_MONOTONIC, as the condition's clock */
  while (!settled(l) && pthread_cond_timedwait(&l->cond, &l->lock, &dl) == 0) {
  }
  size_t k = 0;
  why[0] = '\0';
  for (int q = 0; q < l->size && k < n; q++) {
    const peer *p = &l->p[q];
    if (q == l->rank || !p->left || p->left_posted == posted) continue;
    int w = snprintf(why + k, n - k, "%srank %d ran %llu", k ? ", " : "", q,
                     (unsigned long long)p->left_posted);
    k = w < 0 ? n : k + (size_t)w;
  }
  pthread_mutex_unlock(&l->lock);
  return k > 0;
}

bool lt__live_any_gone(lt_mpi_live *l) {
  if (!l) return false;
  bool gone = false;
  pthread_mutex_lock(&l->lock);
  for (int q = 0; q < l->size; q++) gone = gone || l->p[q].gone;
  pthread_mutex_unlock(&l->lock);
  return gone;
}

void lt__live_stop(lt_mpi_live *l) {
  if (!l) return;
  pthread_mutex_lock(&l->lock);
  bool started = !l->stop;
  l->stop = true;
  pthread_mutex_unlock(&l->lock);
  if (started) pthread_join(l->thread, NULL);
  for (int q = 0; q < l->size; q++) {
    peer *p = &l->p[q];
    if (p->rq != lt__mpi.request_null) { /* a posted receive can be cancelled */
      lt__mpi.Cancel(&p->rq);
      lt__mpi.Wait(&p->rq, MPI_STATUS_IGNORE);
    }
    /* a send to a peer that is gone may never complete: let MPI drop it */
    if (p->sq != lt__mpi.request_null) lt__mpi.Request_free(&p->sq);
  }
  lt__mpi.Comm_free(&l->comm);
  pthread_cond_destroy(&l->cond);
  pthread_mutex_destroy(&l->lock);
  free(l->p);
  free(l);
}
#endif
