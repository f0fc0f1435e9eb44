#ifndef NEURON_CORE_DRIVER_ABI_H_
#define NEURON_CORE_DRIVER_ABI_H_
/*
 * The Neuron driver's device-node ABI as a runtime and a monitor use it: request values and
 * argument layouts of the ioctls on /dev/neuronN, and the datastore mapping rules
 * (docs/driver-interface.md "The device node"; facts checked against aws-neuronx-dkms 2.25.4.0).
 *
 * Plain C with fixed-width types so that the agent (C++), the simulated runtime and the
 * simulator's interposer (C, libc only) share one spelling of every value. Only x86_64 is
 * described: the driver has no 32-bit compat ioctls.
 */
#include <stdint.h>

/* dir << 30 | size << 16 | 'N' << 8 | nr. Most of the driver's macros pass a pointer type, so
 * the encoded size is 8 (sizeof a pointer), not the size of the struct; the driver compares the
 * whole value, so a request built from the struct's size falls through to EINVAL. */
#define NEURON_ABI_REQUEST(dir, nr, size) \
  ((uint32_t)(((uint32_t)(dir) << 30) | ((uint32_t)(size) << 16) | (0x4Eu << 8) | (uint32_t)(nr)))
#define NEURON_ABI_DIR_WRITE 1u /* _IOW */
#define NEURON_ABI_DIR_READ 2u  /* _IOR */

/* Normal fds only (O_RDONLY / O_RDWR). */
#define NEURON_ABI_DEVICE_READY NEURON_ABI_REQUEST(NEURON_ABI_DIR_READ, 2, 1)      /* u8 */
#define NEURON_ABI_GET_ALL_APPS_INFO NEURON_ABI_REQUEST(NEURON_ABI_DIR_READ, 7, 8) /* ptr */
#define NEURON_ABI_ACQUIRE_DS NEURON_ABI_REQUEST(NEURON_ABI_DIR_READ, 71, 8)       /* ptr */
#define NEURON_ABI_RELEASE_DS NEURON_ABI_REQUEST(NEURON_ABI_DIR_READ, 72, 8)       /* ptr */
/* Any fd, free-access (O_WRONLY) ones included. */
#define NEURON_ABI_DEVICE_BASIC_INFO NEURON_ABI_REQUEST(NEURON_ABI_DIR_WRITE, 100, 8) /* ptr */
#define NEURON_ABI_DEVICE_BDF_EXT NEURON_ABI_REQUEST(NEURON_ABI_DIR_READ, 106, 8)     /* ptr */
#define NEURON_ABI_PRINTK NEURON_ABI_REQUEST(NEURON_ABI_DIR_WRITE, 113, 16)           /* struct */

/* Process slots per device: the 17th normal opener gets EBUSY (8 before driver 2.18.12). */
#define NEURON_ABI_MAX_PROCESSES 16
/* One datastore slot: the exact length a monitor must mmap. */
#define NEURON_ABI_DS_SIZE 262144u
/* GET_ALL_APPS_INFO flags. */
#define NEURON_ABI_APPS_NC_LOCK_INFO 1u
#define NEURON_ABI_APPS_MEM_USAGE 2u
#define NEURON_ABI_APPS_ALL 0xFu
/* The core map of GET_ALL_APPS_INFO covers physical NeuronCores 0-3 only. */
#define NEURON_ABI_APPS_CORES 4
/* PRINTK: the driver refuses longer messages with EFAULT. */
#define NEURON_ABI_PRINTK_MAX 512u
/* DEVICE_BASIC_INFO architecture values. */
#define NEURON_ABI_ARCH_V2 2u /* Trainium1 (NDv2) */
#define NEURON_ABI_ARCH_V3 3u /* Inferentia2, Trainium2 (NDv3) */

/* ACQUIRE_NEURON_DS / RELEASE_NEURON_DS argument, 24 bytes. */
struct neuron_abi_ds_info {
  int32_t pid; /* in: the process whose slot is wanted; 0 claims one for the caller */
  uint32_t pad0;
  uint64_t mmap_offset; /* out: opaque; pass to mmap with length `size` */
  uint32_t size;        /* out: NEURON_ABI_DS_SIZE */
  uint32_t pad1;
};

/* GET_ALL_APPS_INFO: a 16-byte header followed by `capacity` entries of 152 bytes. */
struct neuron_abi_apps_header {
  uint16_t flags; /* in: NEURON_ABI_APPS_* */
  uint16_t pad0;
  uint32_t capacity; /* in: entries the caller allocated */
  uint32_t size;     /* out: entries written */
  uint32_t pad1;
};
struct neuron_abi_app_info {
  int32_t pid;
  uint8_t nc_lock_map; /* bit i: the process holds physical NeuronCore i's lock (i < 4) */
  uint8_t uuid[4][32]; /* core i's UUID where bit i is set; uninitialised elsewhere */
  uint8_t pad[3];
  uint64_t host_mem_size; /* bytes allocated through the driver; 0 without MEM_USAGE */
  uint64_t device_mem_size;
};

/* DEVICE_BDF_EXT: nd_index is relative to the device the fd was opened on, in the caller's
 * (container's) numbering. */
struct neuron_abi_bdf_ext {
  uint32_t nd_index; /* in */
  uint32_t domain;   /* out */
  uint32_t bus;      /* out */
  uint8_t slot;      /* out */
  uint8_t func;      /* out */
  uint8_t pad[2];
};

struct neuron_abi_basic_info {
  uint32_t architecture;
  uint32_t revision;
};

struct neuron_abi_printk {
  uint64_t buffer; /* a pointer to `size` bytes whose last one is NUL */
  uint32_t size;
  uint32_t action; /* ignored by the driver */
};

#ifdef __cplusplus
static_assert(sizeof(neuron_abi_ds_info) == 24, "ds_info layout");
static_assert(sizeof(neuron_abi_apps_header) == 16, "apps header layout");
static_assert(sizeof(neuron_abi_app_info) == 152, "app_info layout");
static_assert(__builtin_offsetof(neuron_abi_app_info, host_mem_size) == 136, "app_info layout");
static_assert(sizeof(neuron_abi_bdf_ext) == 16, "bdf_ext layout");
static_assert(sizeof(neuron_abi_printk) == 16, "printk layout");
static_assert(NEURON_ABI_GET_ALL_APPS_INFO == 0x80084E07u, "request value");
static_assert(NEURON_ABI_ACQUIRE_DS == 0x80084E47u, "request value");
static_assert(NEURON_ABI_RELEASE_DS == 0x80084E48u, "request value");
static_assert(NEURON_ABI_DEVICE_READY == 0x80014E02u, "request value");
static_assert(NEURON_ABI_DEVICE_BASIC_INFO == 0x40084E64u, "request value");
static_assert(NEURON_ABI_DEVICE_BDF_EXT == 0x80084E6Au, "request value");
static_assert(NEURON_ABI_PRINTK == 0x40104E71u, "request value");
#else
_Static_assert(sizeof(struct neuron_abi_app_info) == 152, "app_info layout");
_Static_assert(sizeof(struct neuron_abi_ds_info) == 24, "ds_info layout");
#endif

#endif /* NEURON_CORE_DRIVER_ABI_H_ */
