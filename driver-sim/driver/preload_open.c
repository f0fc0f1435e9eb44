/*
 * libneuron-sim-driver.so's open, fopen, close, close_range, dup and fcntl families: a device is
 * attached when it is opened and let go when its last fd closes; our own fds survive the
 * program's close(), close_range() and dup2() onto them (preload_state.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "driver-sim/driver/preload_attach.h"
#include "driver-sim/driver/preload_device.h"
#include "driver-sim/driver/preload_state.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

/* ------------------------------------------------------------------------------------------
 * The wrapped entries. */

static int has_mode_arg(int flags) {
  return (flags & O_CREAT) != 0 || (flags & __O_TMPFILE) == __O_TMPFILE;
}

static int do_openat(int dirfd, const char* path, int flags, mode_t mode) {
  ensure();
  char buf[PATH_MAX];
  int view = -1;
  const char* target = translate(path, buf, sizeof(buf), &view);
  if (target == NULL) return -1;
  return finish_open(real.openat(dirfd, target, flags, mode), flags, view, target);
}

#define MODE_ARG(flags, mode)         \
  do {                                \
    if (has_mode_arg(flags)) {        \
      va_list ap;                     \
      va_start(ap, flags);            \
      mode = (mode_t)va_arg(ap, int); \
      va_end(ap);                     \
    }                                 \
  } while (0)

EXPORT int open(const char* path, int flags, ...) {
  mode_t mode = 0;
  MODE_ARG(flags, mode);
  return do_openat(AT_FDCWD, path, flags, mode);
}

EXPORT int open64(const char* path, int flags, ...) {
  mode_t mode = 0;
  MODE_ARG(flags, mode);
  return do_openat(AT_FDCWD, path, flags, mode);
}

EXPORT int openat(int dirfd, const char* path, int flags, ...) {
  mode_t mode = 0;
  MODE_ARG(flags, mode);
  return do_openat(dirfd, path, flags, mode);
}

EXPORT int openat64(int dirfd, const char* path, int flags, ...) {
  mode_t mode = 0;
  MODE_ARG(flags, mode);
  return do_openat(dirfd, path, flags, mode);
}

EXPORT int __open_2(const char* path, int flags) { return do_openat(AT_FDCWD, path, flags, 0); }
EXPORT int __open64_2(const char* path, int flags) { return do_openat(AT_FDCWD, path, flags, 0); }
EXPORT int __openat_2(int dirfd, const char* path, int flags) {
  return do_openat(dirfd, path, flags, 0);
}
EXPORT int __openat64_2(int dirfd, const char* path, int flags) {
  return do_openat(dirfd, path, flags, 0);
}

static int fopen_flags(const char* how) {
  const int plus = strchr(how, '+') != NULL;
  if (how[0] == 'r') return plus ? O_RDWR : O_RDONLY;
  return plus ? O_RDWR : O_WRONLY;
}

static FILE* do_fopen(const char* path, const char* how) {
  ensure();
  char buf[PATH_MAX];
  int view = -1;
  const char* target = translate(path, buf, sizeof(buf), &view);
  if (target == NULL) return NULL;
  FILE* f = real.fopen(target, how);
  if (f == NULL || !maybe_device(target)) return f;
  const int err = attach(fileno(f), fopen_flags(how), view);
  if (err == 0) return f;
  real.fclose(f);
  errno = err;
  return NULL;
}

EXPORT FILE* fopen(const char* path, const char* how) { return do_fopen(path, how); }
EXPORT FILE* fopen64(const char* path, const char* how) { return do_fopen(path, how); }

EXPORT int fclose(FILE* f) {
  ensure();
  struct desc* d = f != NULL && lookup(fileno(f)) != NULL && owned() ? untrack(fileno(f)) : NULL;
  const int rc = real.fclose(f);
  if (d != NULL) let_go(d, 1);
  return rc;
}

EXPORT int close(int fd) {
  ensure();
  if (is_own_fd(fd)) return owned() ? 0 : real.close(fd); /* ours stays open: see the top */
  struct desc* d = lookup(fd) != NULL && owned() ? untrack(fd) : NULL;
  const int rc = real.close(fd);
  if (d != NULL) let_go(d, 1);
  return rc;
}

/* Our own fds in [first, last], ascending, at most `max`. */
static int own_fds_in(unsigned first, unsigned last, int* out, int max) {
  int n = 0;
  pthread_mutex_lock(&g_mu);
  for (int i = 0; i < MAX_CONNS && n < max; ++i) {
    if (g_conns[i] != NULL && g_conns[i]->sock >= 0) out[n++] = g_conns[i]->sock;
  }
  for (int i = 0; i < g_nfds && n < max; ++i) {
    if (g_fds[i] != NULL && g_fds[i]->memfd >= 0) out[n++] = g_fds[i]->memfd;
  }
  pthread_mutex_unlock(&g_mu);
  int kept = 0;
  for (int i = 0; i < n; ++i) {
    if ((unsigned)out[i] >= first && (unsigned)out[i] <= last) out[kept++] = out[i];
  }
  for (int i = 1; i < kept; ++i) { /* insertion sort: a handful of fds */
    for (int j = i; j > 0 && out[j - 1] > out[j]; --j) {
      const int t = out[j];
      out[j] = out[j - 1];
      out[j - 1] = t;
    }
  }
  return kept;
}

/* Closes [first, last] around our own fds. */
static int close_range_around_own(unsigned first, unsigned last, int flags) {
  int own[64];
  const int n = own_fds_in(first, last, own, 64);
  unsigned from = first;
  int rc = 0;
  for (int i = 0; i < n; ++i) {
    const unsigned fd = (unsigned)own[i];
    if (fd > from && real.close_range(from, fd - 1, flags) != 0) rc = -1;
    from = fd + 1;
  }
  if (from <= last && real.close_range(from, last, flags) != 0) rc = -1;
  return rc;
}

EXPORT int close_range(unsigned first, unsigned last, int flags) {
  ensure();
  if ((flags & (int)CLOSE_RANGE_CLOEXEC) != 0 || !owned()) {
    return real.close_range(first, last, flags);
  }
  struct desc** gone = NULL;
  int ngone = 0;
  pthread_mutex_lock(&g_mu);
  for (int fd = 0; fd < g_nfds; ++fd) {
    if ((unsigned)fd < first || (unsigned)fd > last || g_fds[fd] == NULL) continue;
    struct desc** grown = realloc(gone, (size_t)(ngone + 1) * sizeof(*gone));
    if (grown == NULL) break;
    gone = grown;
    gone[ngone++] = g_fds[fd];
    g_fds[fd] = NULL;
  }
  pthread_mutex_unlock(&g_mu);
  const int rc = close_range_around_own(first, last, flags);
  for (int i = 0; i < ngone; ++i) let_go(gone[i], 1);
  free(gone);
  return rc;
}

EXPORT int dup(int fd) {
  ensure();
  const int to = real.dup(fd);
  dup_tracked(fd, to);
  return to;
}

static int dup_onto(int from, int to, int flags, int use_dup3) {
  ensure();
  if ((from == to && !use_dup3) || !owned()) {
    return use_dup3 ? real.dup3(from, to, flags) : real.dup2(from, to);
  }
  evacuate(to);
  struct desc* replaced = from != to ? untrack(to) : NULL;
  const int rc = use_dup3 ? real.dup3(from, to, flags) : real.dup2(from, to);
  if (replaced != NULL) let_go(replaced, 1);
  if (rc >= 0) dup_tracked(from, rc);
  return rc;
}

EXPORT int dup2(int from, int to) { return dup_onto(from, to, 0, 0); }
EXPORT int dup3(int from, int to, int flags) { return dup_onto(from, to, flags, 1); }

static int do_fcntl(int fd, int cmd, void* arg) {
  ensure();
  const int rc = real.fcntl(fd, cmd, arg);
  if (rc >= 0 && (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC)) dup_tracked(fd, rc);
  return rc;
}

EXPORT int fcntl(int fd, int cmd, ...) {
  va_list ap;
  va_start(ap, cmd);
  void* arg = va_arg(ap, void*);
  va_end(ap);
  return do_fcntl(fd, cmd, arg);
}

EXPORT int fcntl64(int fd, int cmd, ...) {
  va_list ap;
  va_start(ap, cmd);
  void* arg = va_arg(ap, void*);
  va_end(ap);
  return do_fcntl(fd, cmd, arg);
}
