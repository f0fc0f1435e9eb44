#pragma once
// The names of the files and directories the agent reads: the Neuron driver's sysfs tree, the
// PCI, RDMA and DMI attributes beside it, and procfs (docs/driver-interface.md#sysfs-tree,
// #efa). Each name is spelled here once. core's readers and driver-sim's writer both take them
// from here; tests/fixtures/driver/ spells them again, independently, from the driver's
// interface, so a misspelling here fails the fixture tests instead of passing silently on both
// sides. Included by core/driver/sysfs_names.h, which holds the name tables and RootPaths.
//
// Composed paths are built at compile time from their parts (kPath), so no part is spelled
// twice. Every name is a NUL-terminated std::string_view: data() may go to C APIs.

#include <array>
#include <cstddef>
#include <string>
#include <string_view>

namespace neuron {
namespace sysfs_internal {

template <const std::string_view&... Parts>
struct JoinedPath {
  static constexpr size_t kSize = (Parts.size() + ...) + sizeof...(Parts) - 1;
  static constexpr std::array<char, kSize + 1> Chars() {
    std::array<char, kSize + 1> out{};  // zero-filled: the last char stays the terminator
    size_t i = 0;
    for (std::string_view part : {Parts...}) {
      if (i != 0) out[i++] = '/';
      for (char c : part) out[i++] = c;
    }
    return out;
  }
  static constexpr std::array<char, kSize + 1> kChars = Chars();
};

}  // namespace sysfs_internal

namespace sysfs {

// "a/b/c" from named parts.
template <const std::string_view&... Parts>
inline constexpr std::string_view kPath{sysfs_internal::JoinedPath<Parts...>::kChars.data(),
                                        sysfs_internal::JoinedPath<Parts...>::kSize};

// Single path components, for composing below and for readers that hold a directory open.
namespace part {
inline constexpr std::string_view kInfo = "info";
inline constexpr std::string_view kArchitecture = "architecture";
inline constexpr std::string_view kNotifyDelay = "notify_delay";
inline constexpr std::string_view kSerialNumber = "serial_number";
inline constexpr std::string_view kArchType = "arch_type";
inline constexpr std::string_view kInstanceType = "instance_type";
inline constexpr std::string_view kDeviceName = "device_name";
inline constexpr std::string_view kStats = "stats";
inline constexpr std::string_view kHardware = "hardware";
inline constexpr std::string_view kPower = "power";
inline constexpr std::string_view kUtilization = "utilization";
inline constexpr std::string_view kUtilizationRaw = "utilization_raw";  // 2.29
inline constexpr std::string_view kHealthStatus = "health_status";      // 2.28, Trn2
inline constexpr std::string_view kMemoryUsage = "memory_usage";
inline constexpr std::string_view kHostMem = "host_mem";
inline constexpr std::string_view kDeviceMem = "device_mem";
inline constexpr std::string_view kStatus = "status";
inline constexpr std::string_view kOtherInfo = "other_info";
inline constexpr std::string_view kTensorEngine = "tensor_engine";
inline constexpr std::string_view kPeCounters = "pe_cntrs";
inline constexpr std::string_view kPorts = "ports";
inline constexpr std::string_view kPortOne = "1";  // EFA has one port
inline constexpr std::string_view kState = "state";
inline constexpr std::string_view kPhysState = "phys_state";
inline constexpr std::string_view kRate = "rate";
inline constexpr std::string_view kHwCounters = "hw_counters";
inline constexpr std::string_view kDevice = "device";  // a class device's link to its parent
inline constexpr std::string_view kDriver = "driver";  // a PCI function's link to its driver
inline constexpr std::string_view kModule = "module";  // sys/module/<name>/
}  // namespace part

// ---- A Neuron device: sys/devices/virtual/neuron_device/neuronN/ (RootPaths::NeuronDevice).
inline constexpr std::string_view kDevicePrefix = "neuron";                 // neuronN, /dev/neuronN
inline constexpr std::string_view kReset = "reset";                         // device state, 0600
inline constexpr std::string_view kCoreCount = "core_count";                // 0400, no newline
inline constexpr std::string_view kConnectedDevices = "connected_devices";  // 0400
inline constexpr std::string_view kDevNumber = "dev";  // "<major>:<minor>\n" of /dev/neuronN
// Firmware identity: "%u\n", or "busy\n" during a reset; 0444 (fw_api_version from driver 2.27,
// fw_build from 2.28; not read by the agent).
inline constexpr std::string_view kFwApiVersion = "fw_api_version";
inline constexpr std::string_view kFwBuild = "fw_build";
inline constexpr std::string_view kNotifyDelay = kPath<part::kInfo, part::kNotifyDelay>;
inline constexpr std::string_view kSerialNumber = kPath<part::kInfo, part::kSerialNumber>;
// The device's, and under neuron_core<i>/ the core's (NCv2, NCv3).
inline constexpr std::string_view kArchType =
    kPath<part::kInfo, part::kArchitecture, part::kArchType>;
inline constexpr std::string_view kInstanceType =
    kPath<part::kInfo, part::kArchitecture, part::kInstanceType>;
inline constexpr std::string_view kDeviceName =
    kPath<part::kInfo, part::kArchitecture, part::kDeviceName>;
inline constexpr std::string_view kHardwareDir = kPath<part::kStats, part::kHardware>;
inline constexpr std::string_view kPowerUtilization =
    kPath<part::kStats, part::kPower, part::kUtilization>;
// "die,util_bips,counter" then a row per die (driver 2.29).
inline constexpr std::string_view kPowerUtilizationRaw =
    kPath<part::kStats, part::kPower, part::kUtilizationRaw>;
// The driver's cached health registers (driver 2.28, Trn2; kHealthStatusFiles).
inline constexpr std::string_view kHealthStatusDir =
    kPath<part::kStats, part::kHardware, part::kHealthStatus>;
// Announced for health_status/ by the driver 2.30.2 release notes (no source; Trn2, Trn3): the
// components the driver judges unhealthy, a comma list of kHealthComponentNames
// (core/node/device_health.h), and a heartbeat. Their formats are not published: the agent
// assumes "<list>\n" (empty when none) and a counter "%llu\n" that the driver moves once per
// period (docs/driver-interface.md#driver-generations).
inline constexpr std::string_view kUnhealthyComponentsName = "unhealthy_components";
inline constexpr std::string_view kHealthcheckHeartbeatName = "healthcheck_heartbeat";
inline constexpr std::string_view kUnhealthyComponents =
    kPath<part::kStats, part::kHardware, part::kHealthStatus, kUnhealthyComponentsName>;
inline constexpr std::string_view kHealthcheckHeartbeat =
    kPath<part::kStats, part::kHardware, part::kHealthStatus, kHealthcheckHeartbeatName>;
inline constexpr std::string_view kMemoryUsageDir = kPath<part::kStats, part::kMemoryUsage>;
// The device's host memory by category (kHostMemCategories), and a core's host memory triple.
inline constexpr std::string_view kHostMemDir =
    kPath<part::kStats, part::kMemoryUsage, part::kHostMem>;

// ---- The class's own attributes: sys/class/neuron_device/ (driver 2.27 on: on every platform,
// beside the UltraServer ones).
inline constexpr std::string_view kHbm7200Capable = "hbm_7200_capable";
inline constexpr std::string_view kCurrentPerfProfile = "current_perf_profile";

// ---- The module: sys/module/neuron/ (RootPaths::ModuleVersion).
inline constexpr std::string_view kModuleName = "neuron";
inline constexpr std::string_view kModuleVersion = "version";  // MODULE_VERSION: "2.29.0.0\n"

// ---- One physical core: neuronN/neuron_core<i>/.
inline constexpr std::string_view kCorePrefix = "neuron_core";
inline std::string CoreDir(int physical_core) {
  return std::string(kCorePrefix) + std::to_string(physical_core);
}
inline constexpr std::string_view kStatusDir = kPath<part::kStats, part::kStatus>;
inline constexpr std::string_view kDeviceMemDir =
    kPath<part::kStats, part::kMemoryUsage, part::kDeviceMem>;
inline constexpr std::string_view kOtherInfoDir = kPath<part::kStats, part::kOtherInfo>;
inline constexpr std::string_view kTensorEngineDir = kPath<part::kStats, part::kTensorEngine>;
inline constexpr std::string_view kPeCounters =
    kPath<part::kStats, part::kTensorEngine, part::kPeCounters>;

// ---- The files of one counter (docs/driver-interface.md#total-present-peak): status and
// other_info counters have total and present, memory counters also peak.
inline constexpr std::string_view kTotal = "total";
inline constexpr std::string_view kPresent = "present";
inline constexpr std::string_view kPeak = "peak";
inline constexpr std::array<std::string_view, 3> kCounterFields{kTotal, kPresent, kPeak};

// ---- A PCI function: sys/bus/pci/devices/<BDF>/ (RootPaths::PciDevice).
inline constexpr std::string_view kNumaNode = "numa_node";          // "%d\n", -1 when none
inline constexpr std::string_view kLocalCpulist = "local_cpulist";  // "0-31,64-95\n"
inline constexpr std::string_view kPciSubsystem = "pci";            // udev subsystem

// ---- An RDMA device: sys/class/infiniband/<ibdev>/ (a link into its PCI function).
inline constexpr std::string_view kInfinibandClass = "infiniband";
inline constexpr std::string_view kPortDir = kPath<part::kPorts, part::kPortOne>;
inline constexpr std::string_view kPortState = kPath<part::kPorts, part::kPortOne, part::kState>;
inline constexpr std::string_view kPortPhysState =
    kPath<part::kPorts, part::kPortOne, part::kPhysState>;
inline constexpr std::string_view kPortRate = kPath<part::kPorts, part::kPortOne, part::kRate>;
// Port counters (kEfaPortCounters) under kPortDir, device counters (kEfaDeviceCounters) here.
inline constexpr std::string_view kHwCountersDir = part::kHwCounters;
inline constexpr std::string_view kPortHwCountersDir =
    kPath<part::kPorts, part::kPortOne, part::kHwCounters>;
inline constexpr std::string_view kDeviceLink = part::kDevice;  // -> the PCI function
// Its basename tells an EFA from other RDMA devices, never the device's name.
inline constexpr std::string_view kDeviceDriverLink = kPath<part::kDevice, part::kDriver>;
inline constexpr std::string_view kEfaDriverName = "efa";

// ---- A uverbs node: sys/class/infiniband_verbs/uverbsN/.
inline constexpr std::string_view kUverbsClass = "infiniband_verbs";
inline constexpr std::string_view kUverbsPrefix = "uverbs";  // uverbsN, /dev/infiniband/uverbsN
inline constexpr std::string_view kIbdev = "ibdev";          // the RDMA device's name

// ---- The instance's identity: sys/class/dmi/id/ (RootPaths::DmiDir).
inline constexpr std::string_view kDmiSubsystem = "dmi";
inline constexpr std::string_view kDmiSysname = "id";
inline constexpr std::string_view kDmiSysVendor = "sys_vendor";           // "Amazon EC2"
inline constexpr std::string_view kDmiProductName = "product_name";       // the instance type
inline constexpr std::string_view kDmiBoardAssetTag = "board_asset_tag";  // the instance id

// ---- UltraServer class attributes: sys/class/neuron_device/ (RootPaths::NeuronClassDir;
// docs/driver-interface.md#device-nodes). node_id_<N> and server_id_<N> for N = 2, 4.
inline constexpr std::string_view kUsNodeIdPrefix = "node_id_";
inline constexpr std::string_view kUsServerIdPrefix = "server_id_";
inline constexpr std::string_view kUltraserverMode = "ultraserver_mode";
inline constexpr std::array<int, 2> kUsConfigSizes{4, 2};

}  // namespace sysfs

// ---- procfs: /proc/<pid>/ and /proc itself (RootPaths::Proc).
namespace procfs {
inline constexpr std::string_view kStat = "stat";  // /proc/stat and /proc/<pid>/stat
inline constexpr std::string_view kCmdline = "cmdline";
inline constexpr std::string_view kCgroup = "cgroup";
inline constexpr std::string_view kFdDir = "fd";
inline constexpr std::string_view kFdInfoDir = "fdinfo";  // "flags:\t0%o" per descriptor
inline constexpr std::string_view kSelf = "self";         // the reader's own PID, as it numbers it
inline constexpr std::string_view kSelfPidNamespace = "self/ns/pid";  // "pid:[<inode>]"
}  // namespace procfs

}  // namespace neuron
