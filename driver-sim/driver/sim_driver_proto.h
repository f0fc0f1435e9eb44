#ifndef NEURON_SIM_DRIVER_PROTO_H_
#define NEURON_SIM_DRIVER_PROTO_H_
/*
 * The wire between the simulated driver's interposer (preload_*.c, in every process that opens a
 * simulated /dev/neuronN) and the node daemon (driver_server.cc), which owns all driver state.
 *
 * One SOCK_SEQPACKET connection per attached process, to ROOT/run/neuron/driver.sock; the
 * daemon learns the caller's PID from SO_PEERCRED and its death from the connection's end
 * (SIGKILL included), which releases everything the process held, as the driver's release of
 * its last fd does. Requests are answered in order, one reply each; a request that must wait
 * (an open while the device is in RESET) simply gets its reply later. Datastore memory is
 * handed over as a memfd (SCM_RIGHTS) on NSIM_OP_MEMFD, read-only for monitors' fds.
 *
 * Plain C, shared by the interposer and the daemon; driver-sim/README.md#device-node documents
 * it.
 */
#include <stdint.h>

#include "core/driver/driver_abi.h"

#define NSIM_DRIVER_SOCKET "run/neuron/driver.sock"

enum nsim_op {
  NSIM_OP_OPEN = 1,    /* open(2) of the device: attaches a normal opener */
  NSIM_OP_FLUSH = 2,   /* close(2) of one fd of a normal open */
  NSIM_OP_RELEASE = 3, /* last reference (fd or mapping) of one open is gone */
  NSIM_OP_IOCTL = 4,   /* ioctl(2): cmd, arg (scalar), data (what the driver copies in) */
  NSIM_OP_MEMFD = 5,   /* the device's datastore memory, for mmap(2) */
};

enum nsim_mode {
  NSIM_MODE_NORMAL = 0, /* O_RDONLY / O_RDWR */
  NSIM_MODE_FREE = 1,   /* O_WRONLY: free access, misc requests only */
  NSIM_MODE_RDWR = 2,   /* with NSIM_OP_MEMFD: the caller's fd can map writable */
};

#define NSIM_MAX_DATA 2448 /* 16 + 16 x 152: the largest GET_ALL_APPS_INFO answer */

struct nsim_request {
  uint32_t op;
  int32_t device; /* host device index */
  uint32_t mode;  /* enum nsim_mode */
  uint32_t cmd;   /* ioctl request */
  int64_t arg;    /* scalar argument (PRINTK size; BDF_EXT target device) */
  uint32_t len;   /* bytes used in data */
  uint32_t pad;
  uint8_t data[NEURON_ABI_PRINTK_MAX]; /* PRINTK's message; other requests' input struct */
};

struct nsim_reply {
  int32_t err; /* 0 or a positive errno */
  uint32_t len;
  /* OPEN, MEMFD: data holds a struct nsim_memfd_info for MEMFD; IOCTL: what the driver copies
   * out to the caller's argument. */
  uint8_t data[NSIM_MAX_DATA];
};

/* The answer to NSIM_OP_MEMFD, with the memfd attached. */
struct nsim_memfd_info {
  uint64_t base_offset; /* mmap offset of slot 0, as ACQUIRE_NEURON_DS reports it */
  uint32_t slot_size;
  uint32_t slots;
};

#endif /* NEURON_SIM_DRIVER_PROTO_H_ */
