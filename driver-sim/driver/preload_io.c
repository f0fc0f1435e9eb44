/*
 * libneuron-sim-driver.so's ioctl, mmap and munmap: the driver's requests and datastore
 * mappings on a device fd, forwarded to the node daemon; every other fd gets libc's.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include "driver-sim/driver/preload_attach.h"
#include "driver-sim/driver/preload_conn.h"
#include "driver-sim/driver/preload_device.h"
#include "driver-sim/driver/preload_state.h"
#include "driver-sim/driver/sim_driver_proto.h"

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
 * The wrapped entries. */

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
