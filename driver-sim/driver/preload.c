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
 *     (preload_stat.c, the library's other half).
 *   - Bookkeeping follows the kernel's objects: an open file description (`struct desc`) has
 *     fds and mappings; the driver's flush runs on every close of a normal fd and its release
 *     when the last fd or mapping is gone (a live mapping keeps sysfs reset blocked).
 *   - Our own fds (the daemon connection, datastore memfds) survive the program's close(),
 *     close_range() and dup2() onto them, so a program that tidies its fds cannot detach itself
 *     by accident.
 *   - Forked children start unattached (their copy of the connection is closed; mappings are
 *     MADV_DONTFORK, as the driver's VM_DONTCOPY); a child attaches when it opens.
 *   - Inert when NEURON_SIM_DRIVER_INERT is set (the node daemon itself).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "driver-sim/driver/preload_internal.h"
#include "driver-sim/driver/sim_driver_proto.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

/* ------------------------------------------------------------------------------------------
 * The real libc entries, resolved once. */

static struct {
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
} real;

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

static void ensure(void) { pthread_once(&g_once, resolve); }

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
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pid_t g_owner; /* the process the state below belongs to (see owned()) */
static struct conn* g_conns[MAX_CONNS];
static struct desc** g_fds; /* indexed by fd */
static int g_nfds;
static struct mapping* g_maps;

static int inert(void) { return getenv("NEURON_SIM_DRIVER_INERT") != NULL; }
int nsim_inert(void) { return inert(); }

/* False in a vfork child (or a raw clone without fork handlers): it shares this process's
 * memory, so it must neither change the tables nor speak on our connection; its fds are its
 * own, so it simply gets libc. Asked only when a device fd or one of ours is involved. */
static int owned(void) { return getpid() == g_owner; }

/* Our own fds are parked at or above this number (park_fd), which keeps the check off every
 * ordinary close: a program's files stay below it. */
#define OWN_FD_FLOOR 600

static int is_own_fd_locked(int fd) {
  if (fd < OWN_FD_FLOOR) return 0;
  for (int i = 0; i < MAX_CONNS; ++i) {
    if (g_conns[i] != NULL && g_conns[i]->sock == fd) return 1;
  }
  for (int i = 0; i < g_nfds; ++i) {
    if (g_fds[i] != NULL && g_fds[i]->memfd == fd) return 1;
  }
  return 0;
}

static int is_own_fd(int fd) {
  if (fd < OWN_FD_FLOOR) return 0; /* no lock for a program's own files */
  pthread_mutex_lock(&g_mu);
  const int own = is_own_fd_locked(fd);
  pthread_mutex_unlock(&g_mu);
  return own;
}

static void track_locked(int fd, struct desc* d) {
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

static struct desc* lookup(int fd) {
  pthread_mutex_lock(&g_mu);
  struct desc* d = fd >= 0 && fd < g_nfds ? g_fds[fd] : NULL;
  pthread_mutex_unlock(&g_mu);
  return d;
}

static struct desc* untrack(int fd) {
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
 * The daemon connection. */

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

/* One request, one reply. A lost daemon reads as a vanished device (ENODEV), and so does any
 * later request on an open made under it: a restarted daemon is a reloaded driver that never
 * saw that open (`generation` 0: any connection, for a new open). */
static int call(struct conn* c, unsigned generation, const struct nsim_request* rq,
                struct nsim_reply* rp, int* fd_out) {
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

/* The connection to `root`'s driver, with one more user reserved (release_conn gives it back). */
static struct conn* conn_for(const char* root) {
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

/* One user fewer; the last one closes the connection, which tells the driver this process has
 * nothing of it open any more. */
static void release_conn(struct conn* c) {
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

/* ------------------------------------------------------------------------------------------
 * Which files are simulated devices. */

/* libc's fstatat, for our own looks (the exported one, in preload_stat.c, is ours). */
static int plain_fstatat(int dirfd, const char* path, struct stat* st, int flags) {
  if (real.fstatat == NULL) {
    errno = ENOSYS;
    return -1;
  }
  return real.fstatat(dirfd, path, st, flags);
}

int nsim_fd_path(int fd, char* path, size_t size) {
  char link[64];
  snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
  const ssize_t n = readlink(link, path, size - 1);
  if (n <= 0) return 0;
  path[n] = '\0';
  return 1;
}

int nsim_device_of_path(char* path, char* root, size_t root_size, int* device) {
  char* at = strstr(path, "/dev/neuron");
  while (at != NULL && strstr(at + 1, "/dev/neuron") != NULL) at = strstr(at + 1, "/dev/neuron");
  if (at == NULL) return 0;
  const char* digits = at + strlen("/dev/neuron");
  if (*digits < '0' || *digits > '9' || strlen(digits) > 4) return 0;
  for (const char* p = digits; *p != '\0'; ++p) {
    if (*p < '0' || *p > '9') return 0;
  }
  *at = '\0';
  char sock[PATH_MAX + 32];
  snprintf(sock, sizeof(sock), "%s/%s", path, NSIM_DRIVER_SOCKET);
  struct stat st;
  if (plain_fstatat(AT_FDCWD, sock, &st, 0) != 0 || !S_ISSOCK(st.st_mode)) return 0;
  snprintf(root, root_size, "%s", path);
  *device = atoi(digits);
  return 1;
}

int nsim_may_be_placeholder(mode_t mode, long long size) { return S_ISREG(mode) && size == 0; }

/* True when `fd` is ROOT/dev/neuronN of a root with a live driver socket. */
static int classify(int fd, char* root, size_t root_size, int* device) {
  struct stat st;
  if (plain_fstatat(fd, "", &st, AT_EMPTY_PATH) != 0 ||
      !nsim_may_be_placeholder(st.st_mode, st.st_size)) {
    return 0;
  }
  char path[PATH_MAX];
  return nsim_fd_path(fd, path, sizeof(path)) && nsim_device_of_path(path, root, root_size, device);
}

/* NEURON_SIM_DEVICE_MAP "C=H,..." (the container runtime's device mapping): the host index of
 * container device `view`, -1 when the container has no such device; `view` itself without
 * a map. */
static int host_index(int view) {
  const char* map = getenv("NEURON_SIM_DEVICE_MAP");
  if (map == NULL || *map == '\0') return view;
  for (const char* p = map; p != NULL && *p != '\0';) {
    char* end = NULL;
    const long c = strtol(p, &end, 10);
    if (end == p || *end != '=') return -1;
    const long h = strtol(end + 1, &end, 10);
    if (c == view) return (int)h;
    p = *end == ',' ? end + 1 : NULL;
  }
  return -1;
}

/* A pod's runtime opens /dev/neuronK, which on the simulated node is NEURON_ROOT/dev/neuronH
 * (H from the container's device map). Returns `path` unchanged otherwise; NULL with errno
 * ENOENT when the container has no device K. */
static const char* translate(const char* path, char* buf, size_t size, int* view) {
  *view = -1;
  if (path == NULL || strncmp(path, "/dev/neuron", 11) != 0 || inert()) return path;
  const char* root = getenv("NEURON_ROOT");
  if (root == NULL || *root == '\0' || strcmp(root, "/") == 0) return path;
  char* end = NULL;
  const long k = strtol(path + 11, &end, 10);
  if (end == path + 11 || *end != '\0' || k < 0 || k > 9999) return path;
  const int host = host_index((int)k);
  if (host < 0) {
    errno = ENOENT;
    return NULL;
  }
  snprintf(buf, size, "%s/dev/neuron%d", root, host);
  *view = (int)k;
  return buf;
}

/* ------------------------------------------------------------------------------------------
 * Opening and letting go. */

/* The connection an open's requests must go to: the one it was opened on. A forked child's
 * copies go to its own connection. */
static unsigned gen_of(const struct desc* d) { return d->inherited ? 0 : d->generation; }

static void request_init(struct nsim_request* rq, uint32_t op, const struct desc* d) {
  memset(rq, 0, offsetof(struct nsim_request, data));
  rq->op = op;
  rq->device = d->device;
  rq->mode = (uint32_t)d->mode;
}

/* After a successful real open of `fd`: attaches it when it is a simulated device. Returns 0
 * (a plain file, or attached) or an errno, the open then failing as the driver's would. */
static int attach(int fd, int flags, int view) {
  if (inert()) return 0;
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

/* Whether an open of `path` may be of a device node, so that it is checked at once: a name
 * starting with "neuron". Every other open (sysfs counters by the thousand) costs nothing more
 * than libc's; a device reached through another name (a symlink) is recognised by its identity
 * at its first ioctl or mmap, which attaches it then (adopt). */
static int maybe_device(const char* path) {
  const char* base = strrchr(path, '/');
  return strncmp(base != NULL ? base + 1 : path, "neuron", 6) == 0;
}

static int finish_open(int fd, int flags, int view, const char* path) {
  if (fd < 0 || !maybe_device(path)) return fd;
  const int err = attach(fd, flags, view);
  if (err == 0) return fd;
  real.close(fd);
  errno = err;
  return -1;
}

/* One reference of `d` is gone: an fd (`was_fd`) or a mapping. The driver's flush runs when the
 * process closes its last fd of the open (dup'ed fds share it); its release when nothing
 * refers to the open any more (a mapping keeps it). */
static void let_go(struct desc* d, int was_fd) {
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

/* An fd nobody tracked (inherited across exec) that turns out to be a device is attached on
 * first use, as the open it came from would have. */
static struct desc* adopt(int fd) {
  struct desc* d = lookup(fd);
  if (d != NULL || inert()) return d;
  const int flags = real.fcntl(fd, F_GETFL);
  if (flags < 0 || attach(fd, flags, -1) != 0) return NULL;
  return lookup(fd);
}

static void dup_tracked(int from, int to) {
  if (to < 0) return;
  struct desc* d = lookup(from);
  if (d == NULL || !owned()) return;
  pthread_mutex_lock(&g_mu);
  track_locked(to, d);
  pthread_mutex_unlock(&g_mu);
}

/* dup2/dup3 onto one of our own fds: ours moves elsewhere first. */
static void evacuate(int fd) {
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

/* ------------------------------------------------------------------------------------------
 * ioctl: the interposer copies in what the driver reads from the caller and copies out what
 * it writes, through process_vm_{read,write}v so that a bad pointer gives the driver's answer
 * (a positive count of bytes not copied) instead of a crash. */

static int copy_in(void* to, const void* from, size_t n) {
  struct iovec local = {to, n};
  struct iovec remote = {(void*)from, n};
  return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == (ssize_t)n ? 0 : (int)n;
}

static int copy_out(void* to, const void* from, size_t n) {
  struct iovec local = {(void*)from, n};
  struct iovec remote = {to, n};
  return process_vm_writev(getpid(), &local, 1, &remote, 1, 0) == (ssize_t)n ? 0 : (int)n;
}

/* What the request reads from the caller's argument before the daemon sees it. Returns 0, a
 * positive uncopied count, or -errno. */
static int marshal(const struct desc* d, uint32_t cmd, void* arg, struct nsim_request* rq) {
  switch (cmd) {
    case NEURON_ABI_GET_ALL_APPS_INFO:
      rq->len = sizeof(struct neuron_abi_apps_header);
      return copy_in(rq->data, arg, rq->len);
    case NEURON_ABI_ACQUIRE_DS:
    case NEURON_ABI_RELEASE_DS:
      rq->len = sizeof(struct neuron_abi_ds_info);
      return copy_in(rq->data, arg, rq->len);
    case NEURON_ABI_DEVICE_BDF_EXT: {
      struct neuron_abi_bdf_ext in;
      const int left = copy_in(&in, arg, sizeof(in));
      if (left != 0) return left;
      /* Relative to the device the fd was opened on, in the caller's numbering. */
      const long view = (long)d->view + (long)in.nd_index;
      rq->arg = view > 9999 ? -1 : host_index((int)view);
      return 0;
    }
    case NEURON_ABI_PRINTK: {
      struct neuron_abi_printk in;
      const int left = copy_in(&in, arg, sizeof(in));
      if (left != 0) return left;
      if (in.size > NEURON_ABI_PRINTK_MAX || in.size == 0) return -EFAULT;
      rq->arg = in.size;
      rq->len = in.size;
      return copy_in(rq->data, (const void*)(uintptr_t)in.buffer, in.size) ? -EFAULT : 0;
    }
    default:
      return 0;
  }
}

static int device_ioctl(struct desc* d, uint32_t cmd, void* arg) {
  struct nsim_request rq;
  struct nsim_reply rp;
  request_init(&rq, NSIM_OP_IOCTL, d);
  rq.cmd = cmd;
  const int in = marshal(d, cmd, arg, &rq);
  if (in > 0) return in;
  if (in < 0) {
    errno = -in;
    return -1;
  }
  if (call(d->conn, gen_of(d), &rq, &rp, NULL) != 0) {
    errno = rp.err;
    return -1;
  }
  if (rp.len > 0) return copy_out(arg, rp.data, rp.len);
  return 0;
}

/* ------------------------------------------------------------------------------------------
 * mmap of a datastore slot: the offset ACQUIRE_NEURON_DS reported, with exactly its length,
 * lands on the daemon's memory for that slot (read-only memfd for a read-only fd, so a
 * monitor cannot map it writable). */

static int fetch_memfd(struct desc* d) {
  if (d->memfd >= 0) return 0;
  struct nsim_request rq;
  struct nsim_reply rp;
  request_init(&rq, NSIM_OP_MEMFD, d);
  rq.mode = d->rdwr ? NSIM_MODE_RDWR : NSIM_MODE_NORMAL;
  int fd = -1;
  if (call(d->conn, gen_of(d), &rq, &rp, &fd) != 0) return rp.err;
  if (fd < 0 || rp.len != sizeof(d->mem)) return ENODEV;
  pthread_mutex_lock(&g_mu);
  memcpy(&d->mem, rp.data, sizeof(d->mem));
  d->memfd = fd;
  pthread_mutex_unlock(&g_mu);
  return 0;
}

static void* device_mmap(struct desc* d, void* addr, size_t len, int prot, int flags, off_t off) {
  if (d->mode == NSIM_MODE_FREE) { /* the VFS refuses mmap without read access */
    errno = EACCES;
    return MAP_FAILED;
  }
  const int err = fetch_memfd(d);
  if (err != 0) {
    errno = err;
    return MAP_FAILED;
  }
  const uint64_t o = (uint64_t)off;
  const uint64_t size = d->mem.slot_size;
  if (o < d->mem.base_offset || (o - d->mem.base_offset) % size != 0 ||
      (o - d->mem.base_offset) / size >= d->mem.slots || len != size) {
    /* The driver's special path: refused to non-root; root would get device BAR space, which
     * the simulator does not model. */
    errno = geteuid() == 0 ? EINVAL : EPERM;
    return MAP_FAILED;
  }
  void* m = real.mmap(addr, len, prot, flags, d->memfd, (off_t)(o - d->mem.base_offset));
  if (m == MAP_FAILED) return m;
  madvise(m, len, MADV_DONTFORK);
  struct mapping* map = malloc(sizeof(*map));
  if (map == NULL) return m; /* untracked: its release is then not reported */
  map->addr = m;
  map->len = len;
  map->desc = d;
  pthread_mutex_lock(&g_mu);
  d->refs++;
  map->next = g_maps;
  g_maps = map;
  pthread_mutex_unlock(&g_mu);
  return m;
}

static struct desc* unmap_tracked(void* addr) {
  pthread_mutex_lock(&g_mu);
  struct desc* d = NULL;
  for (struct mapping** p = &g_maps; *p != NULL; p = &(*p)->next) {
    if ((*p)->addr != addr) continue;
    struct mapping* m = *p;
    *p = m->next;
    d = m->desc;
    free(m);
    break;
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

EXPORT int ioctl(int fd, unsigned long request, ...) {
  ensure();
  va_list ap;
  va_start(ap, request);
  void* arg = va_arg(ap, void*);
  va_end(ap);
  /* Only the driver's own request type ('N') can be for us: other ioctls (terminals,
   * sockets) go straight through without a look at the fd. */
  struct desc* d = ((request >> 8) & 0xffu) == 0x4Eu ? adopt(fd) : NULL;
  if (d == NULL) return real.ioctl(fd, request, arg);
  return device_ioctl(d, (uint32_t)request, arg);
}

EXPORT void* mmap(void* addr, size_t len, int prot, int flags, int fd, off_t off) {
  ensure();
  struct desc* d = fd >= 0 && (flags & MAP_ANONYMOUS) == 0 ? adopt(fd) : NULL;
  if (d == NULL) return real.mmap(addr, len, prot, flags, fd, off);
  return device_mmap(d, addr, len, prot, flags, off);
}

EXPORT void* mmap64(void* addr, size_t len, int prot, int flags, int fd, off_t off) {
  return mmap(addr, len, prot, flags, fd, off);
}

EXPORT int munmap(void* addr, size_t len) {
  ensure();
  const int rc = real.munmap(addr, len);
  if (rc != 0) return rc;
  struct desc* d = unmap_tracked(addr);
  if (d != NULL) let_go(d, 0);
  return rc;
}

/* `neuron-sim run` asks for this (dlsym) to know whether it already runs under the simulated
 * driver. */
EXPORT int neuron_sim_driver_loaded(void) { return 1; }
