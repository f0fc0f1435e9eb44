/*
 * libnrt-sim: the part of the Neuron SDK's ndl/neuron_driver_shared.h that the datastore API
 * needs (docs/driver-interface.md#datastore): the process list entry of ndl_get_all_apps_info
 * and the datastore's counter indices and section geometry. Our own declarations with the SDK's
 * names, values and layouts (aws-neuron/aws-neuron-sdk src/libnrt/include/ndl/
 * neuron_driver_shared.h), so a monitor written against the SDK headers compiles unchanged
 * against libnrt-sim. The rest of that header (DMA, pod election, memory categories) is left out:
 * nothing here implements it.
 */
#ifndef NEURON_DRIVER_SHARED_H
#define NEURON_DRIVER_SHARED_H

#include <linux/types.h>

/* A loaded model's UUID as the driver stores it per locked NeuronCore. */
struct neuron_uuid {
  __u8 value[32];
};

/* Process slots per device: at most this many processes attach to one device. */
#define NEURON_MAX_PROCESS_PER_DEVICE 16

/* ndl_get_all_apps_info flags: which parts of each entry the driver fills. */
#define APP_INFO_PID_NC_LOCK_INFO (1)
#define APP_INFO_PID_MEM_USAGE (1 << 1)
#define APP_INFO_ALL (0xF)

/* The driver reports the lock and model UUID of physical NeuronCores 0-3 only. */
#define APP_INFO_MAX_MODELS_PER_DEVICE (4)

/* One process attached to a device (152 bytes on x86_64). */
struct neuron_app_info {
  __s32 pid;
  __u8 nc_lock_map; /* bit i: the process holds NeuronCore i's lock */
  struct neuron_uuid uuid_data[APP_INFO_MAX_MODELS_PER_DEVICE]; /* where the bit is set */
  size_t host_mem_size;   /* bytes allocated through the driver (APP_INFO_PID_MEM_USAGE) */
  size_t device_mem_size; /* likewise, on the device */
};

/* Device counters of a datastore (nds_get_nd_counter); the order is ABI. */
#define NDS_ND_COUNTER_RESERVED 18
enum {
  NDS_ND_COUNTER_RUNTIME_VERSION,
  NDS_ND_COUNTER_FRAMEWORK_VERSION,
  NDS_ND_COUNTER_FAL_VERSION,
  NDS_ND_COUNTER_FEATURE_BITMAP,
  NDS_ND_COUNTER_MIN_NEFF_VERSION,
  NDS_ND_COUNTER_MAX_NEFF_VERSION,
  NDS_ND_COUNTER_MEM_USAGE_CODE_HOST,
  NDS_ND_COUNTER_MEM_USAGE_TENSORS_HOST,
  NDS_ND_COUNTER_MEM_USAGE_CONSTANTS_HOST,
  NDS_ND_COUNTER_MEM_USAGE_SCRATCHPAD_HOST,
  NDS_ND_COUNTER_MEM_USAGE_MISC_HOST,
  NDS_ND_COUNTER_DYNAMIC_SYSFS_METRIC_BITMAP,
  NDS_ND_COUNTER_DEVICE_CLUSTER_ID,
  NDS_ND_COUNTER_COUNT = NDS_ND_COUNTER_DEVICE_CLUSTER_ID + NDS_ND_COUNTER_RESERVED + 1
};

/* NeuronCore counters (nds_get_nc_counter), 0-30; the order is ABI. */
#define NDS_NC_COUNTER_RESERVED 0
enum {
  NDS_NC_COUNTER_TIME_IN_USE = 0,
  NDS_NC_COUNTER_INFER_COMPLETED,
  NDS_NC_COUNTER_INFER_COMPLETED_WITH_ERR,
  NDS_NC_COUNTER_INFER_COMPLETED_WITH_NUM_ERR,
  NDS_NC_COUNTER_INFER_TIMED_OUT,
  NDS_NC_COUNTER_INFER_INCORRECT_INPUT,
  NDS_NC_COUNTER_INFER_FAILED_TO_QUEUE,
  NDS_NC_COUNTER_ERR_GENERIC, /* 7 + the runtime's error class, in this order */
  NDS_NC_COUNTER_ERR_NUMERICAL,
  NDS_NC_COUNTER_ERR_MODEL,
  NDS_NC_COUNTER_ERR_TRANSIENT,
  NDS_NC_COUNTER_ERR_HW,
  NDS_NC_COUNTER_ERR_RT,
  NDS_NC_COUNTER_LATENCY_DEVICE,
  NDS_NC_COUNTER_LATENCY_TOTAL,
  NDS_NC_COUNTER_NC_TIME,
  NDS_NC_COUNTER_GENERIC_FAIL,
  NDS_NC_COUNTER_ERR_RESOURCE,
  NDS_NC_COUNTER_ERR_RESOURCE_NC,
  NDS_NC_COUNTER_ERR_INVALID,
  NDS_NC_COUNTER_ERR_UNSUPPORTED_NEFF_VERSION,
  NDS_NC_COUNTER_CC_TIME,
  NDS_NC_COUNTER_MEM_USAGE_CODE_DEVICE,
  NDS_NC_COUNTER_MEM_USAGE_TENSORS_DEVICE,
  NDS_NC_COUNTER_MEM_USAGE_CONSTANTS_DEVICE,
  NDS_NC_COUNTER_MEM_USAGE_SCRATCHPAD_DEVICE,
  NDS_NC_COUNTER_MEM_USAGE_MISC_DEVICE,
  NDS_NC_COUNTER_MODEL_LOAD_COUNT,
  NDS_NC_COUNTER_INFERENCE_COUNT,
  NDS_NC_COUNTER_MAC_COUNT,
  NDS_NC_COUNTER_OOB,
  NDS_NC_COUNTER_COUNT = NDS_NC_COUNTER_OOB + NDS_NC_COUNTER_RESERVED + 1
};

/* Counter sets: cores 0-3 have the original 31 plus an extension; cores 4-15 a full set. */
#define NDS_MAX_NEURONCORE_COUNT (4)
#define NDS_EXT_MAX_NEURONCORE_COUNT (12)

/* Extended NeuronCore counters: their indices continue after NDS_NC_COUNTER_COUNT. */
#define NDS_EXT_NC_COUNTER_ADDED_RESERVED 54
enum {
  NDS_EXT_NC_COUNTER_HW_ERR_COLLECTIVES = NDS_NC_COUNTER_COUNT,
  NDS_EXT_NC_COUNTER_HW_ERR_HBM_UE,
  NDS_EXT_NC_COUNTER_HW_ERR_NC_UE,
  NDS_EXT_NC_COUNTER_HW_ERR_DMA_ABORT,
  NDS_EXT_NC_COUNTER_ERR_SW_NQ_OVERFLOW,
  NDS_EXT_NC_COUNTER_ERR_SW_SEMAPHORE_ERROR,
  NDS_EXT_NC_COUNTER_ERR_SW_EVENT_ERROR,
  NDS_EXT_NC_COUNTER_ERR_SW_PSUM_COLLISION,
  NDS_EXT_NC_COUNTER_ERR_SW_SEQUENCER_FATAL,
  NDS_EXT_NC_COUNTER_HW_ERR_REPAIRABLE_HBM_UE,
  NDS_EXT_NC_COUNTER_LAST,
  NDS_EXT_NC_COUNTER_COUNT =
      NDS_EXT_NC_COUNTER_LAST - NDS_NC_COUNTER_COUNT + NDS_EXT_NC_COUNTER_ADDED_RESERVED
};
/* 31 + 64 = 95 counters per NeuronCore. */
#define NDS_TOTAL_NC_COUNTER_COUNT (NDS_NC_COUNTER_COUNT + NDS_EXT_NC_COUNTER_COUNT)

/* The datastore's first 8 bytes: 'n', 'd', 's', 0 and the format version. */
typedef struct nds_header {
  char signature[4];
  int version;
} nds_header_t;

#endif /* NEURON_DRIVER_SHARED_H */
