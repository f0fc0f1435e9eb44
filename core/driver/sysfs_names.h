#pragma once
// Names and locations in the Neuron driver's sysfs tree, the datastore and the EFA tree
// (docs/driver-interface.md#sysfs-tree, #datastore, #efa). The reader in core and the writer in
// driver-sim share them, so a name is spelled in exactly one place. Orders are the driver's table
// orders (ABI). The names of single files and directories are in core/driver/sysfs_files.h,
// included here.

#include <array>
#include <filesystem>
#include <string>
#include <string_view>

#include "core/driver/sysfs_files.h"

namespace neuron {

struct StatusCounterName {
  std::string_view sysfs;  // neuron_core<i>/stats/status/<sysfs>/
  int nds_index;           // datastore core counter folded into it at process exit
};

inline constexpr std::array<StatusCounterName, 24> kStatusCounters{{
    {"success", 1},
    {"failure", 16},
    {"timeout", 4},
    {"exec_bad_input", 5},
    {"hw_error", 11},
    {"execute_completed_with_error", 2},
    {"execute_completed_with_num_error", 3},
    {"generic_error", 7},
    {"resource_error", 17},
    {"resource_nc_error", 18},
    {"execute_failed_to_queue", 6},
    {"invalid_error", 19},
    {"unsupported_neff_version", 20},
    {"oob_error", 30},
    {"hw_collectives_error", 31},
    {"hw_hbm_ue_error", 32},
    {"hw_nc_ue_error", 33},
    {"hw_dma_abort_error", 34},
    {"execute_sw_nq_overflow", 35},
    {"execute_sw_semaphore_error", 36},
    {"execute_sw_event_error", 37},
    {"execute_sw_psum_collision", 38},
    {"execute_sw_sequencer_fatal", 39},
    {"hw_repairable_hbm_ue_error", 40},
}};

// Per-core device memory categories (neuron_core<i>/stats/memory_usage/device_mem/<name>/).
inline constexpr std::array<std::string_view, 11> kDeviceMemCategories{
    "model_code",     "tensors",       "constants",    "model_shared_scratchpad",
    "runtime_memory", "driver_memory", "collectives",  "nonshared_scratchpad",
    "notifications",  "dma_rings",     "uncategorized"};

// Per-device host memory categories (stats/memory_usage/host_mem/<name>/).
inline constexpr std::array<std::string_view, 8> kHostMemCategories{
    "dma_buffers",   "tensors",       "constants", "application_memory",
    "driver_memory", "notifications", "dma_rings", "uncategorized"};

// Per-core other_info counters ({total,present}).
inline constexpr std::array<std::string_view, 6> kOtherInfo{"model_load_count", "reset_req_count",
                                                            "reset_fail_count", "inference_count",
                                                            "flop_count",       "nc_time_in_use"};

// stats/hardware/ files.
inline constexpr std::array<std::string_view, 3> kHardwareCounters{
    "sram_ecc_uncorrected", "mem_ecc_uncorrected", "mem_ecc_repairable_uncorrected"};

// stats/hardware/health_status/ files (driver 2.28 on, Trn2 only), "%u\n", mode 0444: cached
// firmware registers (docs/driver-interface.md#driver-generations). Order: HealthStatus in
// core/sample/snapshot.h.
inline constexpr std::array<std::string_view, 4> kHealthStatusFiles{
    "hbm_ecc_err_count", "repairable_hbm_ecc_err_count", "sram_ecc_err_count", "hw_error_event"};
// Announced for health_status/ by the driver 2.30.2 release notes; no source, format unknown, not
// read (only the simulator's future layout writes them).
inline constexpr std::array<std::string_view, 2> kHealthStatusFilesFromNotes{
    "unhealthy_components", "healthcheck_heartbeat"};

// Corrected ECC counters, announced by the driver 2.30.2 release notes; no source, so their
// directory (stats/hardware/, beside the uncorrected ones) and format ("%u\n") are assumed.
inline constexpr std::array<std::string_view, 2> kEccCorrected{"sram_ecc_corrected",
                                                               "mem_ecc_corrected"};

// clang-format off
// EFA port counters (ports/1/hw_counters/), the full set of a current kernel.
inline constexpr std::array<std::string_view, 22> kEfaPortCounters{
    "tx_bytes",         "tx_pkts",          "rx_bytes",
    "rx_pkts",          "rx_drops",         "send_bytes",
    "send_wrs",         "recv_bytes",       "recv_wrs",
    "rdma_read_wrs",    "rdma_read_bytes",  "rdma_read_wr_err",
    "rdma_read_resp_bytes", "rdma_write_wrs", "rdma_write_bytes",
    "rdma_write_wr_err", "rdma_write_recv_bytes", "retrans_bytes",
    "retrans_pkts",     "retrans_timeout_events", "unresponsive_remote_events",
    "impaired_remote_conn_events"};

// EFA device counters (<ibdev>/hw_counters/).
inline constexpr std::array<std::string_view, 12> kEfaDeviceCounters{
    "submitted_cmds", "completed_cmds", "cmds_err",       "no_completion_cmds",
    "keep_alive_rcvd", "alloc_pd_err",  "create_qp_err",  "create_cq_err",
    "reg_mr_err",     "alloc_ucontext_err", "create_ah_err", "mmap_err"};
// clang-format on

// Positions in the tables above of the names that code singles out, so that it does not spell
// them again.
namespace name_index {
inline constexpr size_t kSramEccUncorrected = 0;     // kHardwareCounters: low 16 bits only
inline constexpr size_t kMemEccUncorrected = 1;      // kHardwareCounters
inline constexpr size_t kMemEccRepairable = 2;       // kHardwareCounters
inline constexpr size_t kHealthHbmUe = 0;            // kHealthStatusFiles
inline constexpr size_t kHealthRepairableHbmUe = 1;  // kHealthStatusFiles
inline constexpr size_t kHealthSramUe = 2;           // kHealthStatusFiles
inline constexpr size_t kHealthEvents = 3;           // kHealthStatusFiles
inline constexpr size_t kSramEccCorrected = 0;       // kEccCorrected
inline constexpr size_t kMemEccCorrected = 1;        // kEccCorrected
inline constexpr size_t kResetReqCount = 1;          // kOtherInfo: 1 on every core after probe
inline constexpr size_t kHostDriverMemory = 4;       // kHostMemCategories: the probe's NCDEV memory
}  // namespace name_index

// Device state as the `reset` file prints it (docs/driver-interface.md#reset-and-state).
enum class DeviceState { kReset = 0, kReady = 1, kInvalid = 2 };
std::string_view DeviceStateName(DeviceState s);

inline constexpr std::string_view kPciDriverName = "neuron-driver";
inline constexpr std::string_view kNeuronClass = "neuron_device";

// Paths below an injected root (docs/architecture.md#root-convention). No other code spells /sys or
// /dev.
class RootPaths {
 public:
  explicit RootPaths(std::filesystem::path root) : root_(std::move(root)) {}

  const std::filesystem::path& root() const { return root_; }
  std::filesystem::path Sys() const { return root_ / "sys"; }
  std::filesystem::path NeuronDevicesDir() const {
    return Sys() / "devices/virtual" / kNeuronClass;
  }
  std::filesystem::path NeuronDevice(int index) const {
    return NeuronDevicesDir() / DeviceName(index);
  }
  std::filesystem::path NeuronClassDir() const { return Sys() / "class" / kNeuronClass; }
  std::filesystem::path PciDevice(std::string_view bdf) const {
    return root_ / "sys/bus/pci/devices" / bdf;
  }
  std::filesystem::path InfinibandClassDir() const {
    return Sys() / "class" / sysfs::kInfinibandClass;
  }
  std::filesystem::path UverbsClassDir() const { return Sys() / "class" / sysfs::kUverbsClass; }
  std::filesystem::path DmiDir() const {
    return Sys() / "class" / sysfs::kDmiSubsystem / sysfs::kDmiSysname;
  }
  // The module's version as MODULE_VERSION gives it ("2.29.0.0\n").
  std::filesystem::path ModuleVersion() const {
    return Sys() / sysfs::part::kModule / sysfs::kModuleName / sysfs::kModuleVersion;
  }
  std::filesystem::path Dev() const { return root_ / "dev"; }
  std::filesystem::path DevNeuron(int index) const { return Dev() / DeviceName(index); }
  std::filesystem::path Kmsg() const { return root_ / "dev/kmsg"; }
  std::filesystem::path Proc() const { return root_ / "proc"; }

 private:
  // "neuronN": the class device's name and its device node's.
  static std::string DeviceName(int index) {
    return std::string(sysfs::kDevicePrefix) + std::to_string(index);
  }

  std::filesystem::path root_;
};

}  // namespace neuron
