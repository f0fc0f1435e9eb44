/*
 * libneuron-sim-driver.so's connection to the node daemon (sim_driver_proto.h is the wire): one
 * SOCK_SEQPACKET connection per root, one request at a time, our fds parked out of the way.
 */
#define _GNU_SOURCE
#include "driver-sim/driver/preload_conn.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

/* Moves an fd of ours out of the low numbers a program expects to own. */
static int park_fd(int fd) {
  const int high = real.fcntl(fd, F_DUPFD_CLOEXEC, OWN_FD_FLOOR);
  if (high < 0) return fd;
  real.close(fd);
  return high;
}

static int connect_locked(struct conn* c) {
  struct sockaddr_un addr;
  memset(&addr, 0, sizeof(addr));
  addr.sun_family = AF_UNIX;
  const int n =
      snprintf(addr.sun_path, sizeof(addr.sun_path), "%s/%s", c->root, NSIM_DRIVER_SOCKET);
  if (n < 0 || (size_t)n >= sizeof(addr.sun_path)) return ENAMETOOLONG;
  const int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (s < 0) return errno;
  if (connect(s, (struct sockaddr*)&addr, sizeof(addr)) != 0) {
    const int err = errno;
    real.close(s);
    /* A placeholder without a live daemon is a device node without a driver. */
    return err == ENOENT || err == ECONNREFUSED ? ENXIO : err;
  }
  const int parked = park_fd(s);
  pthread_mutex_lock(&g_mu);
  c->sock = parked;
  c->generation++;
  pthread_mutex_unlock(&g_mu);
  return 0;
}

static void drop_connection_locked(struct conn* c) {
  pthread_mutex_lock(&g_mu);
  const int s = c->sock;
  c->sock = -1;
  pthread_mutex_unlock(&g_mu);
  if (s >= 0) real.close(s);
}

static int exchange(struct conn* c, const struct nsim_request* rq, struct nsim_reply* rp,
                    int* fd_out) {
  const size_t len = offsetof(struct nsim_request, data) + rq->len;
  if (send(c->sock, rq, len, MSG_NOSIGNAL) != (ssize_t)len) return errno ? errno : EIO;
  char control[CMSG_SPACE(sizeof(int))];
  struct iovec iov = {rp, sizeof(*rp)};
  struct msghdr msg;
  memset(&msg, 0, sizeof(msg));
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t got;
  do {
    got = recvmsg(c->sock, &msg, MSG_CMSG_CLOEXEC);
  } while (got < 0 && errno == EINTR);
  if (got < (ssize_t)offsetof(struct nsim_reply, data)) return got == 0 ? ENODEV : errno;
  for (struct cmsghdr* h = CMSG_FIRSTHDR(&msg); h != NULL; h = CMSG_NXTHDR(&msg, h)) {
    if (h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_RIGHTS) {
      int fd;
      memcpy(&fd, CMSG_DATA(h), sizeof(fd));
      if (fd_out != NULL) {
        *fd_out = park_fd(fd);
      } else {
        real.close(fd);
      }
    }
  }
  return 0;
}

int call(struct conn* c, unsigned generation, const struct nsim_request* rq, struct nsim_reply* rp,
         int* fd_out) {
  pthread_mutex_lock(&c->mu);
  int err = 0;
  if (generation != 0 && (c->sock < 0 || c->generation != generation)) {
    err = ENODEV;
  } else if (c->sock < 0) {
    err = connect_locked(c);
  }
  if (err == 0) {
    err = exchange(c, rq, rp, fd_out);
    if (err != 0) drop_connection_locked(c);
  }
  pthread_mutex_unlock(&c->mu);
  if (err != 0) {
    memset(rp, 0, offsetof(struct nsim_reply, data));
    rp->err = err == ENXIO ? ENXIO : ENODEV;
  }
  return rp->err;
}

struct conn* conn_for(const char* root) {
  pthread_mutex_lock(&g_mu);
  struct conn* found = NULL;
  for (int i = 0; i < MAX_CONNS && found == NULL; ++i) {
    if (g_conns[i] != NULL && strcmp(g_conns[i]->root, root) == 0) found = g_conns[i];
  }
  for (int i = 0; i < MAX_CONNS && found == NULL; ++i) {
    if (g_conns[i] != NULL) continue;
    found = calloc(1, sizeof(*found));
    if (found == NULL) break;
    snprintf(found->root, sizeof(found->root), "%s", root);
    found->sock = -1;
    pthread_mutex_init(&found->mu, NULL);
    g_conns[i] = found;
  }
  if (found != NULL) found->users++;
  pthread_mutex_unlock(&g_mu);
  return found;
}

void release_conn(struct conn* c) {
  pthread_mutex_lock(&g_mu);
  const int last = --c->users == 0;
  if (last) {
    for (int i = 0; i < MAX_CONNS; ++i) {
      if (g_conns[i] == c) g_conns[i] = NULL;
    }
  }
  pthread_mutex_unlock(&g_mu);
  if (!last) return;
  if (c->sock >= 0) real.close(c->sock);
  pthread_mutex_destroy(&c->mu);
  free(c);
}
