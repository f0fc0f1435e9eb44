/*
 * libneuron-sim-driver.so's stat family (preload_state.h maps the library): a simulated device
 * node is a character device to every stat variant, as docs/driver-interface.md#device-nodes says
 * the kernel's is. On hardware udev makes /dev/neuronN from the class device's uevent, so its
 * number is what ROOT/sys/class/neuron_device/neuronN/dev says ("major:minor", the dynamic major of
 * "neuron" in /proc/devices; core/driver/sysfs_names.h names the same file for the agent).
 * Whoever asks (a monitor written apart from us, the agent's /proc scan by st_rdev, Python's mmap
 * module, `ls -l`) sees a device: size and blocks 0, everything else the placeholder's own.
 *
 * Only an empty regular file is looked at twice, so every other stat costs one check. Plain C,
 * libc only, like the rest of the library; inert in the node daemon.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <unistd.h>

#include "driver-sim/driver/preload_device.h"
#include "driver-sim/driver/preload_state.h"

/* The real libc entries, resolved once. */
static struct {
  int (*openat)(int, const char*, int, ...);
  int (*close)(int);
  int (*stat)(const char*, struct stat*);
  int (*stat64)(const char*, struct stat64*);
  int (*lstat)(const char*, struct stat*);
  int (*lstat64)(const char*, struct stat64*);
  int (*fstat)(int, struct stat*);
  int (*fstat64)(int, struct stat64*);
  int (*fstatat)(int, const char*, struct stat*, int);
  int (*fstatat64)(int, const char*, struct stat64*, int);
  int (*statx)(int, const char*, int, unsigned, struct statx*);
  int (*xstat)(int, const char*, struct stat*);
  int (*xstat64)(int, const char*, struct stat64*);
  int (*lxstat)(int, const char*, struct stat*);
  int (*lxstat64)(int, const char*, struct stat64*);
  int (*fxstat)(int, int, struct stat*);
  int (*fxstat64)(int, int, struct stat64*);
  int (*fxstatat)(int, int, const char*, struct stat*, int);
  int (*fxstatat64)(int, int, const char*, struct stat64*, int);
} real_stat;

static pthread_once_t g_stat_once = PTHREAD_ONCE_INIT;

#define RESOLVE(field, name) real_stat.field = dlsym(RTLD_NEXT, name)
static void stat_resolve(void) {
  RESOLVE(openat, "openat");
  RESOLVE(close, "close");
  RESOLVE(stat, "stat");
  RESOLVE(stat64, "stat64");
  RESOLVE(lstat, "lstat");
  RESOLVE(lstat64, "lstat64");
  RESOLVE(fstat, "fstat");
  RESOLVE(fstat64, "fstat64");
  RESOLVE(fstatat, "fstatat");
  RESOLVE(fstatat64, "fstatat64");
  RESOLVE(statx, "statx");
  RESOLVE(xstat, "__xstat");
  RESOLVE(xstat64, "__xstat64");
  RESOLVE(lxstat, "__lxstat");
  RESOLVE(lxstat64, "__lxstat64");
  RESOLVE(fxstat, "__fxstat");
  RESOLVE(fxstat64, "__fxstat64");
  RESOLVE(fxstatat, "__fxstatat");
  RESOLVE(fxstatat64, "__fxstatat64");
}
#undef RESOLVE

static void stat_ensure(void) { pthread_once(&g_stat_once, stat_resolve); }

/* The device number of ROOT/dev/neuronN, 0 when its class device has no readable `dev` (an
 * unplugged device: then the node is just a file). */
static dev_t class_dev_number(const char* root, int device) {
  char path[PATH_MAX + 64];
  snprintf(path, sizeof(path), "%s/sys/class/neuron_device/neuron%d/dev", root, device);
  const int fd = real_stat.openat(AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[32];
  const ssize_t n = read(fd, buf, sizeof(buf) - 1);
  real_stat.close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  unsigned maj = 0;
  unsigned min = 0;
  if (sscanf(buf, "%u:%u", &maj, &min) != 2) return 0;
  return makedev(maj, min);
}

/* What a stat call named, as fstatat's (dirfd, path, flags) name it, when it is a simulated
 * device's placeholder: its device number, else 0. The name is resolved through an O_PATH fd,
 * so a relative path, a symlink or another process's /proc/PID/fd/N link all lead to it. */
static dev_t placeholder_number(int dirfd, const char* path, int flags) {
  char resolved[PATH_MAX];
  if (path == NULL || (path[0] == '\0' && (flags & AT_EMPTY_PATH) != 0)) {
    if (!nsim_fd_path(dirfd, resolved, sizeof(resolved))) return 0;
  } else {
    const int nofollow = (flags & AT_SYMLINK_NOFOLLOW) != 0 ? O_NOFOLLOW : 0;
    const int fd = real_stat.openat(dirfd, path, O_PATH | O_CLOEXEC | nofollow);
    if (fd < 0) return 0;
    const int ok = nsim_fd_path(fd, resolved, sizeof(resolved));
    real_stat.close(fd);
    if (!ok) return 0;
  }
  char root[PATH_MAX];
  int device = -1;
  if (!nsim_device_of_path(resolved, root, sizeof(root), &device)) return 0;
  return class_dev_number(root, device);
}

/* After a successful stat into `st` (a struct stat or stat64: the same fields): a placeholder
 * becomes the character device. errno is left as the call left it. */
#define AS_DEVICE(rc, st, dirfd, path, flags)                                                  \
  do {                                                                                         \
    if ((rc) == 0 && nsim_may_be_placeholder((st)->st_mode, (st)->st_size) && !nsim_inert()) { \
      const int saved_errno = errno;                                                           \
      const dev_t number = placeholder_number((dirfd), (path), (flags));                       \
      if (number != 0) {                                                                       \
        (st)->st_mode = S_IFCHR | ((st)->st_mode & 07777);                                     \
        (st)->st_rdev = number;                                                                \
        (st)->st_blocks = 0;                                                                   \
      }                                                                                        \
      errno = saved_errno;                                                                     \
    }                                                                                          \
  } while (0)

/* ------------------------------------------------------------------------------------------
 * The wrapped entries. glibc 2.33+ exports stat, fstat, lstat and fstatat (and their 64 names)
 * as functions; programs built against older glibc call __xstat and friends, which it still
 * exports. A symbol this libc lacks fails with ENOSYS. */

#define REAL_OR_ENOSYS(name)      \
  do {                            \
    stat_ensure();                \
    if (real_stat.name == NULL) { \
      errno = ENOSYS;             \
      return -1;                  \
    }                             \
  } while (0)

EXPORT int stat(const char* path, struct stat* st) {
  REAL_OR_ENOSYS(stat);
  const int rc = real_stat.stat(path, st);
  AS_DEVICE(rc, st, AT_FDCWD, path, 0);
  return rc;
}

EXPORT int stat64(const char* path, struct stat64* st) {
  REAL_OR_ENOSYS(stat64);
  const int rc = real_stat.stat64(path, st);
  AS_DEVICE(rc, st, AT_FDCWD, path, 0);
  return rc;
}

EXPORT int lstat(const char* path, struct stat* st) {
  REAL_OR_ENOSYS(lstat);
  const int rc = real_stat.lstat(path, st);
  AS_DEVICE(rc, st, AT_FDCWD, path, AT_SYMLINK_NOFOLLOW);
  return rc;
}

EXPORT int lstat64(const char* path, struct stat64* st) {
  REAL_OR_ENOSYS(lstat64);
  const int rc = real_stat.lstat64(path, st);
  AS_DEVICE(rc, st, AT_FDCWD, path, AT_SYMLINK_NOFOLLOW);
  return rc;
}

EXPORT int fstat(int fd, struct stat* st) {
  REAL_OR_ENOSYS(fstat);
  const int rc = real_stat.fstat(fd, st);
  AS_DEVICE(rc, st, fd, "", AT_EMPTY_PATH);
  return rc;
}

EXPORT int fstat64(int fd, struct stat64* st) {
  REAL_OR_ENOSYS(fstat64);
  const int rc = real_stat.fstat64(fd, st);
  AS_DEVICE(rc, st, fd, "", AT_EMPTY_PATH);
  return rc;
}

EXPORT int fstatat(int dirfd, const char* path, struct stat* st, int flags) {
  REAL_OR_ENOSYS(fstatat);
  const int rc = real_stat.fstatat(dirfd, path, st, flags);
  AS_DEVICE(rc, st, dirfd, path, flags);
  return rc;
}

EXPORT int fstatat64(int dirfd, const char* path, struct stat64* st, int flags) {
  REAL_OR_ENOSYS(fstatat64);
  const int rc = real_stat.fstatat64(dirfd, path, st, flags);
  AS_DEVICE(rc, st, dirfd, path, flags);
  return rc;
}

EXPORT int statx(int dirfd, const char* path, int flags, unsigned mask, struct statx* stx) {
  REAL_OR_ENOSYS(statx);
  const int rc = real_stat.statx(dirfd, path, flags, mask, stx);
  if (rc != 0 || nsim_inert()) return rc;
  /* The type comes with every answer; the size only when asked for (or cheap), so without it
   * any regular file is a candidate. */
  const int empty = (stx->stx_mask & STATX_SIZE) == 0 || stx->stx_size == 0;
  if ((stx->stx_mask & STATX_TYPE) == 0 || !S_ISREG(stx->stx_mode) || !empty) return rc;
  const int saved_errno = errno;
  const dev_t number = placeholder_number(dirfd, path, flags);
  if (number != 0) {
    stx->stx_mode = (uint16_t)(S_IFCHR | (stx->stx_mode & 07777));
    stx->stx_rdev_major = major(number);
    stx->stx_rdev_minor = minor(number);
    stx->stx_blocks = 0;
    stx->stx_size = 0;
  }
  errno = saved_errno;
  return rc;
}

/* The pre-2.33 entry points: `ver` is the struct's version, passed on unchanged. */
int __xstat(int ver, const char* path, struct stat* st);
int __xstat64(int ver, const char* path, struct stat64* st);
int __lxstat(int ver, const char* path, struct stat* st);
int __lxstat64(int ver, const char* path, struct stat64* st);
int __fxstat(int ver, int fd, struct stat* st);
int __fxstat64(int ver, int fd, struct stat64* st);
int __fxstatat(int ver, int dirfd, const char* path, struct stat* st, int flags);
int __fxstatat64(int ver, int dirfd, const char* path, struct stat64* st, int flags);

EXPORT int __xstat(int ver, const char* path, struct stat* st) {
  REAL_OR_ENOSYS(xstat);
  const int rc = real_stat.xstat(ver, path, st);
  AS_DEVICE(rc, st, AT_FDCWD, path, 0);
  return rc;
}

EXPORT int __xstat64(int ver, const char* path, struct stat64* st) {
  REAL_OR_ENOSYS(xstat64);
  const int rc = real_stat.xstat64(ver, path, st);
  AS_DEVICE(rc, st, AT_FDCWD, path, 0);
  return rc;
}

EXPORT int __lxstat(int ver, const char* path, struct stat* st) {
  REAL_OR_ENOSYS(lxstat);
  const int rc = real_stat.lxstat(ver, path, st);
  AS_DEVICE(rc, st, AT_FDCWD, path, AT_SYMLINK_NOFOLLOW);
  return rc;
}

EXPORT int __lxstat64(int ver, const char* path, struct stat64* st) {
  REAL_OR_ENOSYS(lxstat64);
  const int rc = real_stat.lxstat64(ver, path, st);
  AS_DEVICE(rc, st, AT_FDCWD, path, AT_SYMLINK_NOFOLLOW);
  return rc;
}

EXPORT int __fxstat(int ver, int fd, struct stat* st) {
  REAL_OR_ENOSYS(fxstat);
  const int rc = real_stat.fxstat(ver, fd, st);
  AS_DEVICE(rc, st, fd, "", AT_EMPTY_PATH);
  return rc;
}

EXPORT int __fxstat64(int ver, int fd, struct stat64* st) {
  REAL_OR_ENOSYS(fxstat64);
  const int rc = real_stat.fxstat64(ver, fd, st);
  AS_DEVICE(rc, st, fd, "", AT_EMPTY_PATH);
  return rc;
}

EXPORT int __fxstatat(int ver, int dirfd, const char* path, struct stat* st, int flags) {
  REAL_OR_ENOSYS(fxstatat);
  const int rc = real_stat.fxstatat(ver, dirfd, path, st, flags);
  AS_DEVICE(rc, st, dirfd, path, flags);
  return rc;
}

EXPORT int __fxstatat64(int ver, int dirfd, const char* path, struct stat64* st, int flags) {
  REAL_OR_ENOSYS(fxstatat64);
  const int rc = real_stat.fxstatat64(ver, dirfd, path, st, flags);
  AS_DEVICE(rc, st, dirfd, path, flags);
  return rc;
}
