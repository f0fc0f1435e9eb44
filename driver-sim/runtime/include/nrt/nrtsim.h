#pragma once
// libnrt-sim's own additions to the runtime API (no real libnrt has them): building a simulated
// NEFF from an op list, and read-only views of what the simulator did. driver-sim/README.md,
// section "libnrt-sim", documents the op-list format field by field.
//
// A simulated NEFF is the real 1024-byte NEFF header (docs/runtime.md#neff-header) followed by the
// op list (UTF-8 JSON) where a real NEFF has its tarball. nrt_load checks the header as the runtime
// does (versions, num_tpb, lnc_size) and parses the op list.
//
// Environment read by nrt_init besides the runtime's own variables (docs/runtime.md#environment):
//   NEURON_ROOT          the simulated node's root (default "/").
//   NEURON_SIM_CLOCK     "steady" (default): executions take wall-clock time;
//                        "manual": simulated time only, executions never sleep (benchmarks).
//
// All functions are thread-safe.

#include <stddef.h>
#include <stdint.h>

#include "nrt/nrt.h"
#include "nrt/nrt_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nrtsim_neff_options {
  const char* name;             // header `name` (at most 255 bytes); NULL: "nrtsim"
  uint32_t num_tpb;             // cores the NEFF needs; 0 means 1
  uint32_t lnc_size;            // 0: loads at any LNC (ours); else must equal the node's LNC
  uint64_t neff_version_major;  // 0 means 2 (the simulator supports NEFF 1.x and 2.x)
  uint64_t neff_version_minor;
  const uint8_t* uuid;  // 16 bytes; NULL: derived from a hash of name and op list
} nrtsim_neff_options_t;

// Validates `op_list_json` and builds a NEFF in a buffer the caller frees with
// nrtsim_free_neff. `options` may be NULL (all defaults). NRT_INVALID on a malformed op list;
// nrtsim_last_error() then says what and where.
NRT_STATUS nrtsim_build_neff(const char* op_list_json, const nrtsim_neff_options_t* options,
                             void** neff, size_t* size);
void nrtsim_free_neff(void* neff);

// The message of the last NRT_INVALID from nrtsim_build_neff or nrt_load on this thread ("" if
// none). Valid until the thread's next runtime call.
const char* nrtsim_last_error(void);

// Where logical core `vnc` of this process lives (after nrt_init).
typedef struct nrtsim_core_info {
  uint32_t global_core;  // instance-wide logical index (NEURON_RT_VISIBLE_CORES numbering)
  uint32_t device;       // device index
  uint32_t device_core;  // logical core within the device (the datastore slot)
  uint32_t lnc;          // physical cores per logical core
} nrtsim_core_info_t;
NRT_STATUS nrtsim_get_core_info(uint32_t vnc, nrtsim_core_info_t* info);

// What the timing model predicts for one execution of `model` without waiting for peers
// (docs/runtime.md#execution-time, #collectives): launch + each op on the engine model + each
// collective's cost.
typedef struct nrtsim_model_estimate {
  uint64_t duration_ns;    // total
  uint64_t compute_ns;     // launch + compute and DMA ops
  uint64_t collective_ns;  // ring cost of the collectives, no waiting
  double flops;            // all engines
  double mac_count;        // TensorE MACs (what MAC_COUNT adds per execution)
} nrtsim_model_estimate_t;
NRT_STATUS nrtsim_get_model_estimate(const nrt_model_t* model, nrtsim_model_estimate_t* estimate);

// Totals of this process's executions on core `vnc` since nrt_init (the same figures go to the
// datastore, in microseconds).
typedef struct nrtsim_core_stats {
  uint64_t executions;     // completed, any status
  uint64_t busy_ns;        // TIME_IN_USE, collective waits included
  uint64_t collective_ns;  // CC_TIME
  uint64_t last_exec_ns;   // duration of the most recent execution
} nrtsim_core_stats_t;
NRT_STATUS nrtsim_get_core_stats(uint32_t vnc, nrtsim_core_stats_t* stats);

#ifdef __cplusplus
}
#endif
