#ifndef NEURON_SIM_PRELOAD_STATE_H_
#define NEURON_SIM_PRELOAD_STATE_H_
/*
 * libneuron-sim-driver.so: the simulated Neuron driver's device node, served inside the
 * process that opens it. `neuron-sim exec` puts this library in LD_PRELOAD; from then on
 * open/ioctl/mmap/munmap/close on ROOT/dev/neuronN (a placeholder file the node daemon
 * created) behave as docs/driver-interface.md "The device node" says the kernel driver's do,
 * because every request is answered by the node daemon, which owns all driver state.
 *
 * Why it looks the way it does:
 *   - Plain C, libc only, no sanitizer instrumentation: it runs in every process of a
 *     simulated node, sanitized or not, before or after umockdev's preload.
 *   - A device fd is recognised by the file it refers to (fstat + /proc/self/fd), not by its
 *     number: checked after opening a name that starts with "neuron" (dirfd-relative ones
 *     included), and at the first ioctl or mmap of any other fd (symlinks, fds inherited across
 *     exec), so ordinary opens cost nothing extra. The fd handed out is a real fd on the
 *     placeholder, so /proc/PID/fd shows the device path as on hardware.
 *   - Every stat variant says a placeholder is the character device the kernel would show
 *     (preload_stat.c).
 *   - Bookkeeping follows the kernel's objects: an open file description (`struct desc`) has
 *     fds and mappings; the driver's flush runs on every close of a normal fd and its release
 *     when the last fd or mapping is gone (a live mapping keeps sysfs reset blocked).
 *   - Our own fds (the daemon connection, datastore memfds) survive the program's close(),
 *     close_range() and dup2() onto them, so a program that tidies its fds cannot detach itself
 *     by accident.
 *   - Forked children start unattached (their copy of the connection is closed; mappings are
 *     MADV_DONTFORK, as the driver's VM_DONTCOPY); a child attaches when it opens.
 *   - Inert when NEURON_SIM_DRIVER_INERT is set (the node daemon itself).
 *
 * The library's files, each using only those below it (nothing below calls up):
 *   preload_open.c, preload_io.c, preload_stat.c   the interposed libc entries
 *   preload_attach.{h,c}                            opening and letting go of a device
 *   preload_conn.{h,c}, preload_device.{h,c}        the daemon connection; which files are devices
 *   preload_state.{h,c}                             libc's real entries, the tables, fork
 * The library's symbols are hidden by default, so what these headers declare stays inside it;
 * EXPORT marks the entries that interpose on libc's.
 */
#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "driver-sim/driver/sim_driver_proto.h"

#define EXPORT __attribute__((visibility("default")))

/* ------------------------------------------------------------------------------------------
 * The real libc entries, resolved once. */

struct nsim_real {
  int (*openat)(int, const char*, int, ...);
  FILE* (*fopen)(const char*, const char*);
  int (*fclose)(FILE*);
  int (*dup)(int);
  int (*dup2)(int, int);
  int (*dup3)(int, int, int);
  int (*fcntl)(int, int, ...);
  int (*close)(int);
  int (*close_range)(unsigned, unsigned, int);
  int (*ioctl)(int, unsigned long, ...);
  void* (*mmap)(void*, size_t, int, int, int, off_t);
  int (*munmap)(void*, size_t);
  int (*fstatat)(int, const char*, struct stat*,
                 int); /* for our own looks: ours is in preload_stat.c */
};
extern struct nsim_real real;

/* Resolves the real entries once (and registers the fork handlers); every entry calls it first. */
void ensure(void);

/* ------------------------------------------------------------------------------------------
 * State. g_mu guards the tables below and is held only for bookkeeping, never across a call
 * to the daemon (an open may wait there for a reset to finish). */

struct conn {
  char root[PATH_MAX]; /* "" for "/" */
  int sock;            /* -1 until connected */
  unsigned generation; /* counts connections: a new one is a new driver instance */
  int users;           /* descs (and attaches in progress) using it; 0 frees it */
  pthread_mutex_t mu;  /* one request at a time on the socket */
};

struct desc {
  struct conn* conn;
  int device;          /* host index */
  int view;            /* the index the process opened it by (container numbering) */
  int mode;            /* NSIM_MODE_NORMAL or NSIM_MODE_FREE */
  int rdwr;            /* opened O_RDWR: may map writable */
  int fds;             /* fds of this process on it */
  int refs;            /* fds + mappings */
  int inherited;       /* copied by fork: the parent owns it, the child only uses it */
  unsigned generation; /* the connection it was opened on; another one means a new driver */
  int memfd;           /* datastore memory, -1 until the first mmap */
  struct nsim_memfd_info mem;
};

struct mapping {
  void* addr;
  size_t len;
  struct desc* desc;
  struct mapping* next;
};

#define MAX_CONNS 16
extern pthread_mutex_t g_mu;
extern struct conn* g_conns[MAX_CONNS];
extern struct desc** g_fds; /* indexed by fd */
extern int g_nfds;
extern struct mapping* g_maps;

/* Whether this process is the node daemon, where the interposer does nothing. */
int nsim_inert(void);
/* False in a vfork child (or a raw clone without fork handlers): it shares this process's
 * memory, so it must neither change the tables nor speak on our connection; its fds are its
 * own, so it simply gets libc. Asked only when a device fd or one of ours is involved. */
int owned(void);

/* Our own fds are parked at or above this number (park_fd), which keeps the check off every
 * ordinary close: a program's files stay below it. */
#define OWN_FD_FLOOR 600

/* Whether `fd` is one of ours: the _locked one with g_mu held. */
int is_own_fd_locked(int fd);
int is_own_fd(int fd);
/* Tracks `fd` as one more fd of `d` (g_mu held). */
void track_locked(int fd, struct desc* d);
/* The open `fd` is tracked as, NULL for none; untrack also forgets it. */
struct desc* lookup(int fd);
struct desc* untrack(int fd);

#endif /* NEURON_SIM_PRELOAD_STATE_H_ */
