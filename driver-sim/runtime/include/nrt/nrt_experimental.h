#pragma once
// libnrt-sim: the experimental half of the runtime API (docs/runtime.md#public-functions, "NRTX"):
// model tensor info, async callbacks and draining, host-driven barrier and all-gather, tracing. Our
// own declarations with the real names and signatures.

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nrt/nrt.h"
#include "nrt/nrt_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum nrt_tensor_usage {
  NRT_TENSOR_USAGE_INPUT = 0,
  NRT_TENSOR_USAGE_OUTPUT,
} nrt_tensor_usage_t;

#define NRT_TENSOR_NAME_MAX 256

typedef struct nrt_tensor_info {
  char name[NRT_TENSOR_NAME_MAX];
  nrt_tensor_usage_t usage;
  size_t size;  // bytes
  nrt_dtype_t dtype;
  uint32_t* shape;
  uint32_t ndim;
} nrt_tensor_info_t;

// A flexible array member, as in libnrt; C++ compilers accept it as an extension.
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"
#endif
typedef struct nrt_tensor_info_array {
  uint64_t tensor_count;
  nrt_tensor_info_t tensor_array[];
} nrt_tensor_info_array_t;
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

// Called on a runtime thread when an async execution completes (job_id counts per core from 1).
typedef void (*NRT_ASYNC_EXEC_STATUS_CALLBACK)(void* params, uint32_t model_id, uint32_t vnc,
                                               uint64_t job_id, NRT_STATUS status);

// The model's inputs and outputs; free only with nrt_free_model_tensor_info.
NRT_STATUS nrt_get_model_tensor_info(nrt_model_t* model, nrt_tensor_info_array_t** tensor_info);
NRT_STATUS nrt_free_model_tensor_info(nrt_tensor_info_array_t* tensor_info);
NRT_STATUS nrt_get_model_instance_count(nrt_model_t* model, uint32_t* instance_count);

typedef struct nrt_model_info {
  uint32_t vnc;
} nrt_model_info_t;
NRT_STATUS nrt_get_model_info(const nrt_model_t* model, nrt_model_info_t* info, size_t info_size_in,
                              size_t* info_size_out);

// Replaces the callback; without one, async results are only logged (failures at WARN).
NRT_STATUS nrt_register_async_exec_callback(NRT_ASYNC_EXEC_STATUS_CALLBACK callback, void* params);
// Blocks until the core's async queue is empty and its execution finished.
NRT_STATUS nrt_async_drain_queued_execs(int32_t vnc);

// Host-driven collectives over every rank of the world keyed by NEURON_RT_ROOT_COMM_ID: a
// barrier (a small all-reduce) and an all-gather of rank_input_size bytes per rank into
// output (g_device_count * rank_input_size bytes, rank order). NRT_EXEC_HW_ERR_COLLECTIVES when a
// peer does not arrive within NEURON_RT_EXEC_TIMEOUT.
NRT_STATUS nrt_barrier(int32_t vnc, uint32_t g_device_id, uint32_t g_device_count);
NRT_STATUS nrt_all_gather(int32_t vnc, uint32_t g_device_id, uint32_t g_device_count,
                          uint32_t rank_input_size, void* input, void* output);

// Tracing of every core: as nrt_profile_start/stop for all models (trace_mem is ignored).
NRT_STATUS nrt_trace_start(bool trace_mem);
NRT_STATUS nrt_trace_stop(const char* filename);

// Not modelled: NRT_INVALID.
NRT_STATUS nrt_memcpy_to_device(void* dest, const void* src, size_t size);

#ifdef __cplusplus
}
#endif
