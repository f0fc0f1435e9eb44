#pragma once
// The counter files the agent reads, each spelled once (docs/driver-interface.md#sysfs-tree,
// #efa). Everything else is generated from these lists: the names the reader opens and
// driver-sim writes, a typed handle per counter (the enums below), and the snapshot's typed fields
// (core/sample/snapshot.h). A consumer names a counter by its field or handle, so a misspelt
// counter does not compile; a misspelt file name fails the fixture tests (tests/fixtures/driver/
// spells the tree independently).
//
// Why X-macros rather than a constexpr table of member pointers: the field name is the file name,
// so a table would spell each counter twice (a field and a string) and could let them drift. This
// is how Envoy declares its stats (envoyproxy/envoy envoy/stats/stats_macros.h: one
// ALL_..._STATS(COUNTER, GAUGE) list makes the struct of typed fields and their names). The
// handles' enumerators are the file names, lower_snake, for the same reason.
//
// Columns: X(file, ...). Single-value lists add the sweep that reads the counter
// (docs/architecture.md#sampling-cost): kHot files are read by every sample, kFull files by
// full sweeps only and carried forward in between. The status list adds the datastore counter the
// driver folds into the file at process exit.
//
// Adding a counter: one line here, then a consumer (a collector) that reads its field.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace neuron {

enum class Sweep : uint8_t { kHot, kFull };

// stats/hardware/ of a device: ECC counters every generation has, "%u\n".
// sram_ecc_uncorrected: the driver keeps only its low 16 bits.
#define NEURON_HARDWARE_COUNTERS(X) \
  X(sram_ecc_uncorrected, kHot)     \
  X(mem_ecc_uncorrected, kHot)      \
  X(mem_ecc_repairable_uncorrected, kHot)

// stats/hardware/health_status/ (driver 2.28 on, Trn2 only), "%u\n", mode 0444: cached firmware
// registers (docs/driver-interface.md#driver-generations).
#define NEURON_HEALTH_STATUS_COUNTERS(X) \
  X(hbm_ecc_err_count, kFull)            \
  X(repairable_hbm_ecc_err_count, kFull) \
  X(sram_ecc_err_count, kFull)           \
  X(hw_error_event, kFull)

// Corrected ECC counters, announced by the driver 2.30.2 release notes; no source, so their
// directory (stats/hardware/, beside the uncorrected ones) and format ("%u\n") are assumed.
#define NEURON_ECC_CORRECTED_COUNTERS(X) \
  X(sram_ecc_corrected, kFull)           \
  X(mem_ecc_corrected, kFull)

// neuron_core<i>/stats/other_info/<name>/{total,present}. reset_req_count is 1 on every core
// after the probe's reset.
#define NEURON_OTHER_INFO_COUNTERS(X) \
  X(model_load_count)                 \
  X(reset_req_count)                  \
  X(reset_fail_count)                 \
  X(inference_count)                  \
  X(flop_count)                       \
  X(nc_time_in_use)

// EFA port counters (ports/1/hw_counters/), the full set of a current kernel. EFA is read by full
// sweeps only (Sampler::PlanUnits), so every row is kFull (checked below).
#define NEURON_EFA_PORT_COUNTERS(X)    \
  X(tx_bytes, kFull)                   \
  X(tx_pkts, kFull)                    \
  X(rx_bytes, kFull)                   \
  X(rx_pkts, kFull)                    \
  X(rx_drops, kFull)                   \
  X(send_bytes, kFull)                 \
  X(send_wrs, kFull)                   \
  X(recv_bytes, kFull)                 \
  X(recv_wrs, kFull)                   \
  X(rdma_read_wrs, kFull)              \
  X(rdma_read_bytes, kFull)            \
  X(rdma_read_wr_err, kFull)           \
  X(rdma_read_resp_bytes, kFull)       \
  X(rdma_write_wrs, kFull)             \
  X(rdma_write_bytes, kFull)           \
  X(rdma_write_wr_err, kFull)          \
  X(rdma_write_recv_bytes, kFull)      \
  X(retrans_bytes, kFull)              \
  X(retrans_pkts, kFull)               \
  X(retrans_timeout_events, kFull)     \
  X(unresponsive_remote_events, kFull) \
  X(impaired_remote_conn_events, kFull)

// EFA device counters (<ibdev>/hw_counters/).
#define NEURON_EFA_DEVICE_COUNTERS(X) \
  X(submitted_cmds, kFull)            \
  X(completed_cmds, kFull)            \
  X(cmds_err, kFull)                  \
  X(no_completion_cmds, kFull)        \
  X(keep_alive_rcvd, kFull)           \
  X(alloc_pd_err, kFull)              \
  X(create_qp_err, kFull)             \
  X(create_cq_err, kFull)             \
  X(reg_mr_err, kFull)                \
  X(alloc_ucontext_err, kFull)        \
  X(create_ah_err, kFull)             \
  X(mmap_err, kFull)

// The sets below are read and exported as sets (one series per name), so the snapshot keeps them
// as arrays in list order; the handles name a member where code singles one out.

// neuron_core<i>/stats/status/<name>/{total,present}, and the datastore core counter folded into
// it at process exit. Order: the driver's table order.
#define NEURON_STATUS_COUNTERS(X)        \
  X(success, 1)                          \
  X(failure, 16)                         \
  X(timeout, 4)                          \
  X(exec_bad_input, 5)                   \
  X(hw_error, 11)                        \
  X(execute_completed_with_error, 2)     \
  X(execute_completed_with_num_error, 3) \
  X(generic_error, 7)                    \
  X(resource_error, 17)                  \
  X(resource_nc_error, 18)               \
  X(execute_failed_to_queue, 6)          \
  X(invalid_error, 19)                   \
  X(unsupported_neff_version, 20)        \
  X(oob_error, 30)                       \
  X(hw_collectives_error, 31)            \
  X(hw_hbm_ue_error, 32)                 \
  X(hw_nc_ue_error, 33)                  \
  X(hw_dma_abort_error, 34)              \
  X(execute_sw_nq_overflow, 35)          \
  X(execute_sw_semaphore_error, 36)      \
  X(execute_sw_event_error, 37)          \
  X(execute_sw_psum_collision, 38)       \
  X(execute_sw_sequencer_fatal, 39)      \
  X(hw_repairable_hbm_ue_error, 40)

// Per-core device memory categories (neuron_core<i>/stats/memory_usage/device_mem/<name>/).
#define NEURON_DEVICE_MEM_CATEGORIES(X) \
  X(model_code)                         \
  X(tensors)                            \
  X(constants)                          \
  X(model_shared_scratchpad)            \
  X(runtime_memory)                     \
  X(driver_memory)                      \
  X(collectives)                        \
  X(nonshared_scratchpad)               \
  X(notifications)                      \
  X(dma_rings)                          \
  X(uncategorized)

// Per-device host memory categories (stats/memory_usage/host_mem/<name>/). driver_memory holds the
// probe's NCDEV memory.
#define NEURON_HOST_MEM_CATEGORIES(X) \
  X(dma_buffers)                      \
  X(tensors)                          \
  X(constants)                        \
  X(application_memory)               \
  X(driver_memory)                    \
  X(notifications)                    \
  X(dma_rings)                        \
  X(uncategorized)

// ---- Generated below; nothing is spelled again. ----

#define NEURON_COUNTER_ENUMERATOR(file, ...) file,
#define NEURON_COUNTER_NAME(file, ...) std::string_view(#file),
#define NEURON_COUNTER_SWEEP(file, sweep) Sweep::sweep,

// Typed handles, in list order.
enum class HardwareCounter : uint8_t { NEURON_HARDWARE_COUNTERS(NEURON_COUNTER_ENUMERATOR) };
enum class HealthStatusCounter : uint8_t {
  NEURON_HEALTH_STATUS_COUNTERS(NEURON_COUNTER_ENUMERATOR)
};
enum class EccCorrectedCounter : uint8_t {
  NEURON_ECC_CORRECTED_COUNTERS(NEURON_COUNTER_ENUMERATOR)
};
enum class OtherInfoCounter : uint8_t { NEURON_OTHER_INFO_COUNTERS(NEURON_COUNTER_ENUMERATOR) };
enum class EfaPortCounter : uint8_t { NEURON_EFA_PORT_COUNTERS(NEURON_COUNTER_ENUMERATOR) };
enum class EfaDeviceCounter : uint8_t { NEURON_EFA_DEVICE_COUNTERS(NEURON_COUNTER_ENUMERATOR) };
enum class StatusCounter : uint8_t { NEURON_STATUS_COUNTERS(NEURON_COUNTER_ENUMERATOR) };
enum class DeviceMemCategory : uint8_t { NEURON_DEVICE_MEM_CATEGORIES(NEURON_COUNTER_ENUMERATOR) };
enum class HostMemCategory : uint8_t { NEURON_HOST_MEM_CATEGORIES(NEURON_COUNTER_ENUMERATOR) };

// File names, in list order (the same order as the handles and the snapshot's fields).
inline constexpr std::array kHardwareCounters{NEURON_HARDWARE_COUNTERS(NEURON_COUNTER_NAME)};
inline constexpr std::array kHealthStatusFiles{NEURON_HEALTH_STATUS_COUNTERS(NEURON_COUNTER_NAME)};
inline constexpr std::array kEccCorrected{NEURON_ECC_CORRECTED_COUNTERS(NEURON_COUNTER_NAME)};
inline constexpr std::array kOtherInfo{NEURON_OTHER_INFO_COUNTERS(NEURON_COUNTER_NAME)};
inline constexpr std::array kEfaPortCounters{NEURON_EFA_PORT_COUNTERS(NEURON_COUNTER_NAME)};
inline constexpr std::array kEfaDeviceCounters{NEURON_EFA_DEVICE_COUNTERS(NEURON_COUNTER_NAME)};
inline constexpr std::array kDeviceMemCategories{NEURON_DEVICE_MEM_CATEGORIES(NEURON_COUNTER_NAME)};
inline constexpr std::array kHostMemCategories{NEURON_HOST_MEM_CATEGORIES(NEURON_COUNTER_NAME)};

// The sweep of each single-value counter, in list order.
inline constexpr std::array kHardwareSweeps{NEURON_HARDWARE_COUNTERS(NEURON_COUNTER_SWEEP)};
inline constexpr std::array kHealthStatusSweeps{
    NEURON_HEALTH_STATUS_COUNTERS(NEURON_COUNTER_SWEEP)};
inline constexpr std::array kEccCorrectedSweeps{
    NEURON_ECC_CORRECTED_COUNTERS(NEURON_COUNTER_SWEEP)};
inline constexpr std::array kEfaPortSweeps{NEURON_EFA_PORT_COUNTERS(NEURON_COUNTER_SWEEP)};
inline constexpr std::array kEfaDeviceSweeps{NEURON_EFA_DEVICE_COUNTERS(NEURON_COUNTER_SWEEP)};

struct StatusCounterName {
  std::string_view sysfs;  // neuron_core<i>/stats/status/<sysfs>/
  int nds_index;           // datastore core counter folded into it at process exit
};
#define NEURON_STATUS_COUNTER_ROW(file, nds) StatusCounterName{#file, nds},
inline constexpr std::array kStatusCounters{NEURON_STATUS_COUNTERS(NEURON_STATUS_COUNTER_ROW)};
#undef NEURON_STATUS_COUNTER_ROW
#undef NEURON_COUNTER_SWEEP
#undef NEURON_COUNTER_NAME
#undef NEURON_COUNTER_ENUMERATOR

// A handle's position in its list (and in the snapshot's arrays for the set-like lists).
template <typename Handle>
constexpr size_t Index(Handle h) {
  return static_cast<size_t>(h);
}

// A handle's file name.
constexpr std::string_view Name(HardwareCounter c) { return kHardwareCounters[Index(c)]; }
constexpr std::string_view Name(HealthStatusCounter c) { return kHealthStatusFiles[Index(c)]; }
constexpr std::string_view Name(EccCorrectedCounter c) { return kEccCorrected[Index(c)]; }
constexpr std::string_view Name(OtherInfoCounter c) { return kOtherInfo[Index(c)]; }
constexpr std::string_view Name(EfaPortCounter c) { return kEfaPortCounters[Index(c)]; }
constexpr std::string_view Name(EfaDeviceCounter c) { return kEfaDeviceCounters[Index(c)]; }
constexpr std::string_view Name(StatusCounter c) { return kStatusCounters[Index(c)].sysfs; }
constexpr std::string_view Name(DeviceMemCategory c) { return kDeviceMemCategories[Index(c)]; }
constexpr std::string_view Name(HostMemCategory c) { return kHostMemCategories[Index(c)]; }

// EFA counters are refreshed by full sweeps only; a kHot row would be read no oftener.
constexpr bool AllFull(auto sweeps) {
  for (Sweep s : sweeps) {
    if (s != Sweep::kFull) return false;
  }
  return true;
}
static_assert(AllFull(kEfaPortSweeps) && AllFull(kEfaDeviceSweeps),
              "EFA counters are read by full sweeps only");

}  // namespace neuron
