#pragma once
// libnrt-sim: status codes of the Neuron runtime API (docs/runtime.md#status-codes). Our own
// declarations with the real names and values, so code written against libnrt compiles and
// behaves the same against the simulator.

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  NRT_SUCCESS = 0,
  NRT_FAILURE = 1,         // unspecific failure; lookup misses
  NRT_INVALID = 2,         // bad NEFF, argument, tensor name/size; unsupported plumbing
  NRT_INVALID_HANDLE = 3,  // null or unknown model
  NRT_RESOURCE = 4,        // HBM exhausted; cores taken at nrt_init
  NRT_TIMEOUT = 5,         // execution exceeded NEURON_RT_EXEC_TIMEOUT
  NRT_HW_ERROR = 6,        // device gone, in reset or INVALID
  NRT_QUEUE_FULL = 7,      // async depth exceeded
  NRT_LOAD_NOT_ENOUGH_NC = 9,
  NRT_UNSUPPORTED_NEFF_VERSION = 10,
  NRT_FAIL_HOST_MEM_ALLOC = 11,  // deprecated; never returned
  NRT_UNINITIALIZED = 13,        // call before nrt_init
  NRT_CLOSED = 14,               // call after nrt_close
  NRT_QUEUE_EMPTY = 15,
  NRT_EXEC_UNIT_UNRECOVERABLE = 101,  // core FAULTED until a device reset
  NRT_EXEC_BAD_INPUT = 1002,
  NRT_EXEC_COMPLETED_WITH_NUM_ERR = 1003,  // produced NaN
  NRT_EXEC_COMPLETED_WITH_ERR = 1004,
  NRT_EXEC_NC_BUSY = 1005,
  NRT_EXEC_OOB = 1006,
  NRT_COLL_PENDING = 1100,
  NRT_EXEC_HW_ERR_COLLECTIVES = 1200,  // stuck in a collective (a peer never arrived)
  NRT_EXEC_HW_ERR_HBM_UE = 1201,
  NRT_EXEC_HW_ERR_NC_UE = 1202,
  NRT_EXEC_HW_ERR_DMA_ABORT = 1203,
  NRT_EXEC_SW_NQ_OVERFLOW = 1204,
  NRT_EXEC_HW_ERR_REPAIRABLE_HBM_UE = 1205,
  NRT_NETWORK_PROXY_FAILURE = 1206,
} NRT_STATUS;

// The status's name ("NRT_TIMEOUT"); "NRT_UNKNOWN_STATUS" for values outside the enum. Callable
// at any time; the string is static.
const char* nrt_get_status_as_str(NRT_STATUS status);

#ifdef __cplusplus
}
#endif
