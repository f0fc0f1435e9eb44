#pragma once
// libnrt-sim: the Neuron runtime C API (docs/runtime.md#public-functions), our own declarations
// with the real names, signatures and enum values, implemented by driver-sim/runtime on a simulated
// node (NEURON_ROOT). driver-sim/README.md, section "libnrt-sim", says what each call does in
// the simulator and where it differs from the real runtime.
//
// Every core index (`vnc`) is a logical index inside the process, counted from 0 whatever the
// global numbers in NEURON_RT_VISIBLE_CORES. Calls other than nrt_get_version,
// nrt_get_status_as_str, nrt_get_total_*_count, nrt_get_visible_*_count, nrt_get_instance_info
// and the tensor-set container calls return NRT_UNINITIALIZED before nrt_init and NRT_CLOSED
// after nrt_close. All calls are thread-safe.

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nrt/nrt_status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NRT_MAJOR_VERSION 2
#define NRT_MINOR_VERSION 0

typedef struct nrt_model nrt_model_t;
typedef struct nrt_tensor nrt_tensor_t;
typedef void nrt_tensor_set_t;  // a container of named tensors

typedef enum {
  NRT_TENSOR_PLACEMENT_DEVICE,   // the core's HBM
  NRT_TENSOR_PLACEMENT_HOST,     // deprecated; at most 4 MiB
  NRT_TENSOR_PLACEMENT_VIRTUAL,  // host memory
} nrt_tensor_placement_t;

typedef enum {
  NRT_FRAMEWORK_TYPE_INVALID = 0,
  NRT_FRAMEWORK_TYPE_NO_FW = 1,  // direct use of the API
  NRT_FRAMEWORK_TYPE_TENSORFLOW,
  NRT_FRAMEWORK_TYPE_PYTORCH,
  NRT_FRAMEWORK_TYPE_MXNET,
  NRT_FRAMEWORK_TYPE_PRECHECK,
} nrt_framework_type_t;

// nrt_instance_info_t.family
enum {
  NRT_INSTANCE_UNKNOWN = 0,
  NRT_INSTANCE_INF1 = 1,
  NRT_INSTANCE_TRN1 = 2,
  NRT_INSTANCE_TRN1N = 3,
  NRT_INSTANCE_INF2 = 4,
  NRT_INSTANCE_TRN2 = 5,
  NRT_INSTANCE_TRN2N = 6,
  NRT_INSTANCE_INF2E = 7,
  NRT_INSTANCE_TRN2P = 8,
  NRT_INSTANCE_TRN2U = 9,
};

// nrt_instance_info_t.size
enum {
  NRT_INSTANCE_SIZE_1XL = 0,
  NRT_INSTANCE_SIZE_2XL = 1,
  NRT_INSTANCE_SIZE_4XL = 2,
  NRT_INSTANCE_SIZE_6XL = 3,
  NRT_INSTANCE_SIZE_8XL = 4,
  NRT_INSTANCE_SIZE_24XL = 5,
  NRT_INSTANCE_SIZE_32XL = 6,
  NRT_INSTANCE_SIZE_48XL = 7,
  NRT_INSTANCE_SIZE_3XL = 8,
  NRT_INSTANCE_SIZE_UNKNOWN = 9,
};

typedef enum nrt_dtype {
  NRT_DTYPE_UNKNOWN = 0x0,
  NRT_DTYPE_INVALID = 0x0,
  NRT_DTYPE_UINT64 = 0x1,
  NRT_DTYPE_INT8 = 0x2,
  NRT_DTYPE_UINT8 = 0x3,
  NRT_DTYPE_INT16 = 0x4,
  NRT_DTYPE_UINT16 = 0x5,
  NRT_DTYPE_BFLOAT16 = 0x6,
  NRT_DTYPE_FLOAT16 = 0x7,
  NRT_DTYPE_INT32 = 0x8,
  NRT_DTYPE_UINT32 = 0x9,
  NRT_DTYPE_FLOAT32 = 0xA,
  NRT_DTYPE_FP32R = 0xB,
  NRT_DTYPE_INT64 = 0xC,
  NRT_DTYPE_FP8_E3 = 0xD,
  NRT_DTYPE_FP8_E4 = 0xE,
  NRT_DTYPE_FP8_E5 = 0xF,
} nrt_dtype_t;

typedef enum nrt_cc_op_type {
  NRT_CC_ALLGATHER,
  NRT_CC_ALLREDUCE,
  NRT_CC_REDUCESCATTER,
} nrt_cc_op_type_t;

typedef struct nrt_instance_info {
  uint32_t family;  // NRT_INSTANCE_*
  uint32_t size;    // NRT_INSTANCE_SIZE_*
  char arch_name[16];
  char device_revision[8];
} nrt_instance_info_t;

#define RT_VERSION_DETAIL_LEN 128
#define GIT_HASH_LEN 64

typedef struct nrt_version {
  uint64_t rt_major;
  uint64_t rt_minor;
  uint64_t rt_patch;
  uint64_t rt_maintenance;
  char rt_detail[RT_VERSION_DETAIL_LEN];
  char git_hash[GIT_HASH_LEN];
} nrt_version_t;

// ---- Versions and the instance (callable before nrt_init) ----
// Fills at most `size` bytes of *ver.
NRT_STATUS nrt_get_version(nrt_version_t* ver, size_t size);
// Family and size of the node NEURON_ROOT describes; fills at most `instance_info_len` bytes.
NRT_STATUS nrt_get_instance_info(nrt_instance_info_t* info, size_t instance_info_len);
// Logical cores on the instance, ignoring the environment.
NRT_STATUS nrt_get_total_nc_count(uint32_t* vnc_count);  // deprecated name
NRT_STATUS nrt_get_total_vnc_count(uint32_t* vnc_count);
// Cores this process may use: after nrt_init the cores it reserved, before it what the
// environment asks for (NEURON_RT_VISIBLE_CORES / NEURON_RT_NUM_CORES, else all).
NRT_STATUS nrt_get_visible_nc_count(uint32_t* vnc_count);  // deprecated name
NRT_STATUS nrt_get_visible_vnc_count(uint32_t* vnc_count);

// ---- Life cycle ----
// Reads the environment, finds the node (NEURON_ROOT, default "/") and reserves cores
// exclusively. NRT_INVALID for a malformed NEURON_RT_VISIBLE_CORES, NRT_RESOURCE when the cores
// are taken (logged as "NeuronCore(s) not available - Requested:nc<A>-nc<B> Available:<K>").
NRT_STATUS nrt_init(nrt_framework_type_t framework, const char* fw_version,
                    const char* fal_version);
// Waits for running executions, drops queued ones, frees memory, releases the cores and marks
// the process's datastores released. Later calls return NRT_CLOSED.
void nrt_close(void);

// ---- Models ----
// vnc -1: the visible core with the fewest loaded models, lowest index first. vnc_count is
// deprecated (pass -1). 2 bad NEFF, 10 unsupported NEFF version, 9 not enough cores, 4 no HBM.
NRT_STATUS nrt_load(const void* neff_bytes, size_t size, int32_t vnc, int32_t vnc_count,
                    nrt_model_t** model);
// As nrt_load for a NEFF with collectives: this model is rank `ctx_device_id` of a world of
// `ctx_device_count` ranks keyed by NEURON_RT_ROOT_COMM_ID (required).
NRT_STATUS nrt_load_collectives(const void* neff_bytes, size_t size, int32_t vnc, int32_t vnc_count,
                                uint32_t ctx_device_id, uint32_t ctx_device_count,
                                nrt_model_t** model);
NRT_STATUS nrt_unload(nrt_model_t* model);
NRT_STATUS nrt_get_model_nc_count(const nrt_model_t* model, uint32_t* vnc_count);  // deprecated
NRT_STATUS nrt_get_model_vnc_count(const nrt_model_t* model, uint32_t* vnc_count);

// ---- Tensor sets ----
NRT_STATUS nrt_allocate_tensor_set(nrt_tensor_set_t** result);
void nrt_destroy_tensor_set(nrt_tensor_set_t** tensor_set);  // sets *tensor_set to NULL
// Adds or replaces by name; the tensor must outlive the set.
NRT_STATUS nrt_add_tensor_to_tensor_set(nrt_tensor_set_t* tensor_set, const char* tensor_name,
                                        nrt_tensor_t* tensor);
// NRT_FAILURE when no tensor has that name.
NRT_STATUS nrt_get_tensor_from_tensor_set(nrt_tensor_set_t* tensor_set, const char* tensor_name,
                                          nrt_tensor_t** tensor);

// ---- Execution ----
// Synchronous unless NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS > 0: then the execution is
// queued on the model's core and the result goes to the async callback (nrt_experimental.h);
// NRT_QUEUE_FULL when that many are already queued or running on the core.
NRT_STATUS nrt_execute(nrt_model_t* model, const nrt_tensor_set_t* input_set,
                       nrt_tensor_set_t* output_set);
NRT_STATUS nrt_execute_repeat(nrt_model_t* model, const nrt_tensor_set_t* input_set,
                              nrt_tensor_set_t* output_set, int repeat_count);

// ---- Collectives plumbing ----
NRT_STATUS nrt_build_global_comm(int32_t vnc, uint32_t g_device_id, uint32_t g_device_count);

// ---- Tensors ----
// vnc is ignored (pass -1) for HOST and VIRTUAL. NRT_RESOURCE when the core's HBM is exhausted.
NRT_STATUS nrt_tensor_allocate(nrt_tensor_placement_t tensor_placement, int vnc, size_t size,
                               const char* name, nrt_tensor_t** tensor);
void nrt_tensor_free(nrt_tensor_t** tensor);  // sets *tensor to NULL
NRT_STATUS nrt_tensor_read(const nrt_tensor_t* tensor, void* buf, size_t offset, size_t size);
NRT_STATUS nrt_tensor_write(nrt_tensor_t* tensor, const void* buf, size_t offset, size_t size);

typedef uint64_t nrt_tensor_batch_offset_t;
typedef uint64_t nrt_tensor_batch_size_t;
typedef struct nrt_tensor_batch_op {
  nrt_tensor_batch_offset_t offset;
  nrt_tensor_batch_size_t size;
  void* buffer;
} nrt_tensor_batch_op_t;
typedef struct nrt_tensor_batch {
  const nrt_tensor_t* tensor;
  const nrt_tensor_batch_op_t* ops;
  uint32_t num_ops;
} nrt_tensor_batch_t;
NRT_STATUS nrt_tensor_read_batch(const nrt_tensor_batch_t* batches, uint64_t num_batches,
                                 bool unsafe);
NRT_STATUS nrt_tensor_write_batch(const nrt_tensor_batch_t* batches, uint64_t num_batches,
                                  bool unsafe);

// Device to device requires both tensors on the same core (else NRT_INVALID).
NRT_STATUS nrt_tensor_copy(const nrt_tensor_t* src, size_t src_offset, nrt_tensor_t* dst,
                           size_t dst_offset, size_t size);
size_t nrt_tensor_get_size(const nrt_tensor_t* tensor);  // 0 for NULL
NRT_STATUS nrt_tensor_memset(nrt_tensor_t* tensor, uint64_t offset, int value, size_t size);
// A tensor without storage; nrt_tensor_attach_buffer gives it a caller-owned buffer (VIRTUAL).
NRT_STATUS nrt_tensor_allocate_empty(const char* name, nrt_tensor_t** tensor);
NRT_STATUS nrt_tensor_attach_buffer(nrt_tensor_t* tensor, void* buffer, size_t size);
// A view of [offset, offset + size) of the source; the storage lives while any view does.
NRT_STATUS nrt_tensor_allocate_slice(const nrt_tensor_t* tensor_source, size_t offset, size_t size,
                                     const char* name, nrt_tensor_t** tensor_slice);
// Host address of the tensor's bytes (the simulator keeps device tensors in host memory too);
// NULL on failure or without storage.
void* nrt_tensor_get_va(const nrt_tensor_t* tensor);

typedef struct nrt_tensor_device_allocation_info {
  uint64_t physical_address;
  size_t size;
  int hbm_index;
} nrt_tensor_device_allocation_info_t;
NRT_STATUS nrt_tensor_get_device_allocation_info(const nrt_tensor_t* tensor,
                                                 nrt_tensor_device_allocation_info_t* alloc_info);

// Output completion counters (each execution that writes the tensor adds one).
NRT_STATUS nrt_tensor_check_output_completion(const nrt_tensor_t* output_tensor, int64_t timeout,
                                              uint64_t expected_completion_count);
NRT_STATUS nrt_tensor_reset_output_completion(nrt_tensor_t* output_tensor);

// ---- Memory ----
typedef struct nrt_vnc_memory_stats {
  size_t bytes_used;
  size_t bytes_limit;
} nrt_vnc_memory_stats_t;
NRT_STATUS nrt_get_vnc_memory_stats(uint32_t vnc, nrt_vnc_memory_stats_t* stats,
                                    size_t stats_size_in, size_t* stats_size_out);

// ---- Profiling (nrt_profile.h on the real runtime) ----
// Records the engine spans of `model`'s executions until nrt_profile_stop, which writes them to
// `filename` as Chrome trace JSON (not NTFF; docs/runtime.md#public-functions).
NRT_STATUS nrt_profile_start(nrt_model_t* model, const char* filename);
NRT_STATUS nrt_profile_stop(const char* filename);

// ---- Device and EFA plumbing: not modelled, NRT_INVALID ----
NRT_STATUS nrt_get_dmabuf_fd(uint64_t va, uint64_t size, int* fd);
NRT_STATUS nrt_host_device_id_get(int neuron_dev, uint32_t* host_device_id);
NRT_STATUS nrt_host_device_id_rid_map_get(uint32_t* count, uint32_t* host_did_to_rid_map);
NRT_STATUS nrt_get_hbm_mmap_va(int device_id, int hbm_idx, void** addr, size_t* size);
NRT_STATUS nrt_get_attached_efa_bdf(const void* va, char* efa_bdf, size_t* len);
NRT_STATUS nrt_cc_global_comm_init(uint32_t vnc, uint32_t g_device_id, uint32_t g_device_count);

#ifdef __cplusplus
}
#endif
