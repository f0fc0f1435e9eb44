/*
 * libneuron-sim-driver.so: which files are simulated devices. A device is recognised by the file
 * it is (ROOT/dev/neuronN of a root with a live driver socket), and a pod's /dev/neuronK is
 * translated to its node's device.
 */
#define _GNU_SOURCE
#include "driver-sim/driver/preload_device.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "driver-sim/driver/preload_state.h"
#include "driver-sim/driver/sim_driver_proto.h"

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

int classify(int fd, char* root, size_t root_size, int* device) {
  struct stat st;
  if (plain_fstatat(fd, "", &st, AT_EMPTY_PATH) != 0 ||
      !nsim_may_be_placeholder(st.st_mode, st.st_size)) {
    return 0;
  }
  char path[PATH_MAX];
  return nsim_fd_path(fd, path, sizeof(path)) && nsim_device_of_path(path, root, root_size, device);
}

int host_index(int view) {
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

const char* translate(const char* path, char* buf, size_t size, int* view) {
  *view = -1;
  if (path == NULL || strncmp(path, "/dev/neuron", 11) != 0 || nsim_inert()) return path;
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
