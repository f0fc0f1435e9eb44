/*
 * libneuron-sim-driver.so: opening and letting go. The bookkeeping follows the kernel's objects:
 * an open file description (`struct desc`) has fds and mappings; the driver's flush runs on
 * every close of a normal fd and its release when the last fd or mapping is gone.
 */
#define _GNU_SOURCE
#include "driver-sim/driver/preload_attach.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "driver-sim/driver/preload_conn.h"
#include "driver-sim/driver/preload_device.h"

unsigned gen_of(const struct desc* d) { return d->inherited ? 0 : d->generation; }

void request_init(struct nsim_request* rq, uint32_t op, const struct desc* d) {
  memset(rq, 0, offsetof(struct nsim_request, data));
  rq->op = op;
  rq->device = d->device;
  rq->mode = (uint32_t)d->mode;
}

int attach(int fd, int flags, int view) {
  if (nsim_inert()) return 0;
  char root[PATH_MAX];
  int device = -1;
  if (!classify(fd, root, sizeof(root), &device) || !owned()) return 0;
  struct desc* d = calloc(1, sizeof(*d));
  struct conn* c = conn_for(root);
  if (d == NULL || c == NULL) {
    free(d);
    if (c != NULL) release_conn(c);
    return ENOMEM;
  }
  d->conn = c;
  d->device = device;
  d->view = view >= 0 ? view : device;
  d->mode = (flags & O_ACCMODE) == O_WRONLY ? NSIM_MODE_FREE : NSIM_MODE_NORMAL;
  d->rdwr = (flags & O_ACCMODE) == O_RDWR;
  d->memfd = -1;
  struct nsim_request rq;
  struct nsim_reply rp;
  request_init(&rq, NSIM_OP_OPEN, d);
  if (call(c, 0, &rq, &rp, NULL) != 0) {
    const int err = rp.err;
    free(d);
    release_conn(c);
    return err;
  }
  pthread_mutex_lock(&g_mu);
  d->generation = c->generation;
  track_locked(fd, d);
  pthread_mutex_unlock(&g_mu);
  return 0;
}

int maybe_device(const char* path) {
  const char* base = strrchr(path, '/');
  return strncmp(base != NULL ? base + 1 : path, "neuron", 6) == 0;
}

int finish_open(int fd, int flags, int view, const char* path) {
  if (fd < 0 || !maybe_device(path)) return fd;
  const int err = attach(fd, flags, view);
  if (err == 0) return fd;
  real.close(fd);
  errno = err;
  return -1;
}

void let_go(struct desc* d, int was_fd) {
  pthread_mutex_lock(&g_mu);
  const int last_fd = was_fd && --d->fds == 0;
  const int last = --d->refs == 0;
  const int speak = !d->inherited;
  pthread_mutex_unlock(&g_mu);
  struct nsim_request rq;
  struct nsim_reply rp;
  if (speak && last_fd && d->mode == NSIM_MODE_NORMAL) {
    request_init(&rq, NSIM_OP_FLUSH, d);
    call(d->conn, gen_of(d), &rq, &rp, NULL);
  }
  if (!last) return;
  if (speak) {
    request_init(&rq, NSIM_OP_RELEASE, d);
    call(d->conn, gen_of(d), &rq, &rp, NULL);
  }
  pthread_mutex_lock(&g_mu);
  const int memfd = d->memfd;
  d->memfd = -1;
  pthread_mutex_unlock(&g_mu);
  if (memfd >= 0) real.close(memfd);
  if (speak) release_conn(d->conn);
  free(d);
}

struct desc* adopt(int fd) {
  struct desc* d = lookup(fd);
  if (d != NULL || nsim_inert()) return d;
  const int flags = real.fcntl(fd, F_GETFL);
  if (flags < 0 || attach(fd, flags, -1) != 0) return NULL;
  return lookup(fd);
}

void dup_tracked(int from, int to) {
  if (to < 0) return;
  struct desc* d = lookup(from);
  if (d == NULL || !owned()) return;
  pthread_mutex_lock(&g_mu);
  track_locked(to, d);
  pthread_mutex_unlock(&g_mu);
}

void evacuate(int fd) {
  pthread_mutex_lock(&g_mu);
  const int own = is_own_fd_locked(fd);
  pthread_mutex_unlock(&g_mu);
  if (!own) return;
  const int moved = real.fcntl(fd, F_DUPFD_CLOEXEC, OWN_FD_FLOOR);
  if (moved < 0) return;
  pthread_mutex_lock(&g_mu);
  for (int i = 0; i < MAX_CONNS; ++i) {
    if (g_conns[i] != NULL && g_conns[i]->sock == fd) g_conns[i]->sock = moved;
  }
  for (int i = 0; i < g_nfds; ++i) {
    if (g_fds[i] != NULL && g_fds[i]->memfd == fd) g_fds[i]->memfd = moved;
  }
  pthread_mutex_unlock(&g_mu);
}
