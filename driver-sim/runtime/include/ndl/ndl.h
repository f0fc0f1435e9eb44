/*
 * libnrt-sim: the device-layer part of the Neuron SDK's ndl/ndl.h that a monitor needs to open a
 * device and list its processes (docs/driver-interface.md#abi-listing-pids). Our own declarations
 * with the SDK's names, signatures and struct layouts (aws-neuron/aws-neuron-sdk
 * src/libnrt/include/ndl/ndl.h), so a monitor written against the SDK headers compiles and links
 * unchanged against libnrt-sim's libnrt.so.1. The rest of ndl.h (memory, DMA, notification
 * queues, semaphores) is not declared: nothing here implements it.
 */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "neuron_driver_shared.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MAX_NEURON_DEVICE_COUNT 64
#define NEURON_MAX_DEVICES MAX_NEURON_DEVICE_COUNT
#define MAX_NC_PER_DEVICE 8
#define MAX_HBM_PER_DEVICE 4
#define NEURON_DEVICE_PREFIX "/dev/neuron"

/* How ndl_open_device prepares the device. A monitor passes all false / 0. */
typedef struct ndl_device_init_param {
  bool initialize_device;
  int num_dram_regions;
  bool map_hbm;
} ndl_device_init_param_t;

typedef struct ndl_copy_buf {
  uint64_t mem_handle;
  void* mmap_va;
  pthread_mutex_t lock;
} ndl_copy_buf_t;

/* An open device. libnrt-sim fills device_index, device_type and device_revision and leaves
 * the mappings (CSR, copy buffers, HBM) empty: it maps nothing but datastores. */
typedef struct ndl_device {
  uint8_t device_index;
  uint8_t device_type; /* the driver's architecture: 2 Trainium1, 3 Inferentia2/Trainium2 */
  uint16_t device_revision;
  uint8_t connected_device_count;
  uint8_t connected_devices[MAX_NEURON_DEVICE_COUNT];
  uint64_t csr_base[2];
  uint64_t csr_size[2];
  ndl_copy_buf_t cpy_bufs[MAX_NC_PER_DEVICE];
  void* hbm_va[MAX_HBM_PER_DEVICE];
  size_t hbm_size;
  uint32_t hbm_va_cnt;
  uint32_t shift_hbm_size;
  uint64_t hbm_offset[MAX_HBM_PER_DEVICE];
  /* The library's own (an ndl_device_context_t); a C flexible array member, which C++
   * compilers accept as an extension. */
  __extension__ uint8_t context[];
} ndl_device_t;

typedef struct ndl_device_context {
  int nd_fd; /* the device node, opened for reading and writing */
} ndl_device_context_t;

/** Opens /dev/neuron<device_index> (a process that has it open already takes no second process
 * slot). `params` may be NULL. Returns 0 and sets *device, or -1 with errno set. */
int ndl_open_device(int device_index, ndl_device_init_param_t* params, ndl_device_t** device);

/** Closes a device from ndl_open_device and frees it. Returns 0, or -1 with errno set. */
int ndl_close_device(ndl_device_t* device);

/** The processes attached to the device (GET_ALL_APPS_INFO). On success (0) *info points to
 * *count entries that the caller frees with free(). */
int ndl_get_all_apps_info(ndl_device_t* device, struct neuron_app_info** info, size_t* count,
                          uint16_t apps_info_flags);

#ifdef __cplusplus
}
#endif
