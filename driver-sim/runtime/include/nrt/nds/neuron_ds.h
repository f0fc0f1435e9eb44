/*
 * libnrt-sim: the Neuron datastore (NDS) API of the Neuron SDK's nrt/nds/neuron_ds.h, reader
 * side: open another process's datastore read-only and read its counters, process information
 * and model records (docs/driver-interface.md#process-records). Our own declarations with the
 * SDK's names, signatures and struct layouts (aws-neuron/aws-neuron-sdk
 * src/libnrt/include/nrt/nds/neuron_ds.h), so a monitor written against the SDK headers
 * compiles and links unchanged against libnrt-sim's libnrt.so.1.
 *
 * Where the records sit inside the datastore is the runtime's own business (the real runtime's
 * placement is unpublished; libnrt-sim's is private to it, driver-sim/README.md): these
 * functions are the only way to them. The writer half of the SDK API (nds_obj_new,
 * nds_obj_commit, the counter setters) is not declared: libnrt-sim's runtime writes its own
 * datastore internally.
 *
 * Thread-safety: distinct instances may be used from different threads; one instance and the
 * objects read from it are not to be shared between threads without a lock.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ndl/ndl.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef void* nds_obj_handle_t;

/* Object types (the handle's kind). */
#define OBJECT_TYPE_MODEL_NODE_INFO (0)
#define OBJECT_TYPE_PROCESS_INFO (1)
#define OBJECT_TYPE_PROCESS_INFO_EXT (2)

#define MODEL_MEM_USAGE_LOCATION_COUNT 2

/* Memory usage slots of a model node: the runtime folds its many usage types into these. */
enum {
  NDS_DMA_MEM_USAGE_SLOT_CODE,
  NDS_DMA_MEM_USAGE_SLOT_TENSORS,
  NDS_DMA_MEM_USAGE_SLOT_CONSTANTS,
  NDS_DMA_MEM_USAGE_SLOT_SCRATCHPAD,
  NDS_DMA_MEM_USAGE_SLOT_MISC,
  NDS_DMA_MEM_USAGE_SLOT_COUNT = 12
};

/* All chunks of one usage slot and location, summed. */
typedef struct nds_mem_usage_info {
  size_t total_size;
  uint32_t chunk_count;
} nds_mem_usage_info_t;

/* One loaded model node (284 bytes). */
typedef struct nds_model_node_info {
  uint32_t model_id;
  uint32_t model_node_id;
  char name[256];
  char uuid[16];
  uint8_t nc_index; /* the NeuronCore within the device */
  uint8_t sg_index; /* subgraph */
} nds_model_node_info_t;

/* A model node's memory by location and usage slot (384 bytes). */
typedef struct nds_model_node_mem_usage_info {
  nds_mem_usage_info_t model_mem_usage[MODEL_MEM_USAGE_LOCATION_COUNT]
                                      [NDS_DMA_MEM_USAGE_SLOT_COUNT];
} nds_model_node_mem_usage_info_t;

typedef struct nds_version_info {
  uint8_t major;
  uint8_t minor;
  uint32_t build;
} nds_version_info_t;

/* The process's identity (60 bytes). */
typedef struct nds_process_info {
  int8_t framework_type;
  char tag[32];
  nds_version_info_t framework_version;
  nds_version_info_t fal_version;
  nds_version_info_t runtime_version;
} nds_process_info_t;

/* The process's long tag (NEURON_PROCESS_TAG). */
typedef struct nds_process_info_ext {
  char tag[256];
} nds_process_info_ext_t;

typedef struct nds_instance nds_instance_t;

/** Opens the datastore of `pid` on `device` read-only (pid 0, the caller's own read-write
 * datastore, is refused by libnrt-sim's reader: its runtime writes internally). Returns 0 and
 * sets *inst, or nonzero with errno set (ENOENT: the process has no datastore there). */
int nds_open(ndl_device_t* device, pid_t pid, nds_instance_t** inst);

/** Unmaps and frees an instance; objects read from it stay valid. Returns 0. */
int nds_close(nds_instance_t* inst);

/** Counter `counter_index` of NeuronCore set `pnc_index` (0-15) or of the device. Returns 0, or
 * nonzero (errno EINVAL) for an index the datastore has no slot for. */
int nds_get_nc_counter(nds_instance_t* inst, int pnc_index, uint32_t counter_index,
                       uint64_t* value);
int nds_get_nd_counter(nds_instance_t* inst, uint32_t counter_index, uint64_t* value);

/** The process information records, as objects the caller frees with nds_obj_delete. NULL with
 * errno set when they cannot be read (EPROTO: written in a format this library does not know). */
nds_obj_handle_t nds_read_process_info(nds_instance_t* inst);
nds_obj_handle_t nds_read_process_info_ext(nds_instance_t* inst);

/** Every loaded model node: *models is an array of *count objects; the caller frees each with
 * nds_obj_delete and the array with free(). Returns 0, or nonzero with errno set (EPROTO as
 * above). */
int nds_read_all_model_nodes(nds_instance_t* inst, nds_obj_handle_t** models, size_t* count);

/** An object's contents; NULL when the object is of another type. */
nds_process_info_t* nds_obj_handle_to_process_info(nds_obj_handle_t obj);
nds_process_info_ext_t* nds_obj_handle_to_process_info_ext(nds_obj_handle_t obj);
nds_model_node_info_t* nds_obj_handle_to_model_node_info(nds_obj_handle_t obj);
nds_model_node_mem_usage_info_t* nds_obj_handle_to_model_node_mem_usage(nds_obj_handle_t obj);

/** Frees an object read from a datastore (a read-only instance's datastore is left as it is). */
int nds_obj_delete(nds_obj_handle_t obj);

#ifdef __cplusplus
}
#endif
