/*
 * libneuron-sim-driver.so's bottom: libc's real entries, the tables of connections, opens and
 * mappings, and what fork does to them (preload_state.h says why the library looks as it does).
 */
#define _GNU_SOURCE
#include "driver-sim/driver/preload_state.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct nsim_real real;

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static void nsim_init(void);

#define RESOLVE(name) real.name = dlsym(RTLD_NEXT, #name)
static void resolve(void) {
  RESOLVE(openat);
  RESOLVE(fopen);
  RESOLVE(fclose);
  RESOLVE(dup);
  RESOLVE(dup2);
  RESOLVE(dup3);
  RESOLVE(fcntl);
  RESOLVE(close);
  RESOLVE(close_range);
  RESOLVE(ioctl);
  RESOLVE(mmap);
  RESOLVE(munmap);
  RESOLVE(fstatat);
  nsim_init();
}
#undef RESOLVE

void ensure(void) { pthread_once(&g_once, resolve); }

pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pid_t g_owner; /* the process the state below belongs to (see owned()) */
struct conn* g_conns[MAX_CONNS];
struct desc** g_fds;
int g_nfds;
struct mapping* g_maps;

int nsim_inert(void) { return getenv("NEURON_SIM_DRIVER_INERT") != NULL; }

int owned(void) { return getpid() == g_owner; }

int is_own_fd_locked(int fd) {
  if (fd < OWN_FD_FLOOR) return 0;
  for (int i = 0; i < MAX_CONNS; ++i) {
    if (g_conns[i] != NULL && g_conns[i]->sock == fd) return 1;
  }
  for (int i = 0; i < g_nfds; ++i) {
    if (g_fds[i] != NULL && g_fds[i]->memfd == fd) return 1;
  }
  return 0;
}

int is_own_fd(int fd) {
  if (fd < OWN_FD_FLOOR) return 0; /* no lock for a program's own files */
  pthread_mutex_lock(&g_mu);
  const int own = is_own_fd_locked(fd);
  pthread_mutex_unlock(&g_mu);
  return own;
}

void track_locked(int fd, struct desc* d) {
  if (fd >= g_nfds) {
    int n = g_nfds ? g_nfds : 64;
    while (n <= fd) n *= 2;
    struct desc** grown = realloc(g_fds, (size_t)n * sizeof(*grown));
    if (grown == NULL) return; /* untracked: the fd then behaves as a plain file */
    memset(grown + g_nfds, 0, (size_t)(n - g_nfds) * sizeof(*grown));
    g_fds = grown;
    g_nfds = n;
  }
  g_fds[fd] = d;
  d->fds++;
  d->refs++;
}

struct desc* lookup(int fd) {
  pthread_mutex_lock(&g_mu);
  struct desc* d = fd >= 0 && fd < g_nfds ? g_fds[fd] : NULL;
  pthread_mutex_unlock(&g_mu);
  return d;
}

struct desc* untrack(int fd) {
  pthread_mutex_lock(&g_mu);
  struct desc* d = NULL;
  if (fd >= 0 && fd < g_nfds) {
    d = g_fds[fd];
    g_fds[fd] = NULL;
  }
  pthread_mutex_unlock(&g_mu);
  return d;
}

/* ------------------------------------------------------------------------------------------
 * fork: the child starts unattached. */

static void before_fork(void) { pthread_mutex_lock(&g_mu); }
static void after_fork_parent(void) { pthread_mutex_unlock(&g_mu); }

static void after_fork_child(void) {
  g_owner = getpid();
  for (int i = 0; i < MAX_CONNS; ++i) {
    struct conn* c = g_conns[i];
    if (c == NULL) continue;
    if (c->sock >= 0) real.close(c->sock); /* the parent's connection, not ours */
    c->sock = -1;
    pthread_mutex_init(&c->mu, NULL);
  }
  for (int i = 0; i < g_nfds; ++i) {
    if (g_fds[i] != NULL) g_fds[i]->inherited = 1;
  }
  for (struct mapping* m = g_maps; m != NULL;) { /* not inherited (MADV_DONTFORK) */
    struct mapping* next = m->next;
    m->desc->refs--;
    free(m);
    m = next;
  }
  g_maps = NULL;
  pthread_mutex_unlock(&g_mu);
}

static void nsim_init(void) {
  g_owner = getpid();
  pthread_atfork(before_fork, after_fork_parent, after_fork_child);
}

/* `neuron-sim run` asks for this (dlsym) to know whether it already runs under the simulated
 * driver. */
EXPORT int neuron_sim_driver_loaded(void) { return 1; }
