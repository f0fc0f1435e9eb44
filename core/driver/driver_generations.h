#pragma once
// The public Neuron driver generations and the parts of the sysfs tree that differ between them
// (docs/driver-interface.md#driver-generations). A generation is data: the optional node groups
// its tree holds. Discovery picks a generation from the module version
// (/sys/module/neuron/version) once per scan; readers ask which groups a device has, never which
// version the driver is. The simulator renders each generation from the same table.
//
// The generations with public driver source (2.24 to 2.29) are transcribed from it; 2.30 is known
// from its release notes only and marked so (`from_source` false: its files' formats are assumed,
// docs/driver-interface.md#driver-generations). Any other version, newer or older, is unknown:
// the tree is read by what it holds and checked against the newest known generation.
//
// Pure data and functions; thread-safe.

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace neuron {

// A part of the tree that some generations, or some chips, lack.
enum class NodeGroup : uint8_t {
  kFwApiVersion,        // neuronN/fw_api_version (2.27)
  kFwBuild,             // neuronN/fw_build (2.28)
  kPlatformClassAttrs,  // class attributes by platform: hbm_7200_capable, current_perf_profile
                        // everywhere, the UltraServer ones only on UltraServers (2.27)
  kReadableTopology,    // core_count and connected_devices 0444 instead of 0400 (2.28)
  kHealthStatus,        // stats/hardware/health_status/ (2.28; Trn2 and Trn3 only)
  kUtilizationRaw,      // stats/power/utilization_raw (2.29)
  kEccCorrected,        // stats/hardware/{sram,mem}_ecc_corrected (2.30.2 notes; no source)
  kHealthComponents,    // health_status/{unhealthy_components, healthcheck_heartbeat} (2.30.2
                        // notes; no source; Trn2 and Trn3 only, as health_status/ itself)
};
inline constexpr int kNodeGroupCount = 8;

// A set of node groups.
class NodeGroups {
 public:
  constexpr NodeGroups() = default;
  constexpr NodeGroups(std::initializer_list<NodeGroup> groups) {
    for (NodeGroup g : groups) Add(g);
  }
  constexpr bool Has(NodeGroup g) const { return (bits_ & Bit(g)) != 0; }
  constexpr void Add(NodeGroup g) { bits_ |= Bit(g); }
  constexpr NodeGroups operator|(NodeGroups o) const { return FromBits(bits_ | o.bits_); }
  constexpr NodeGroups operator&(NodeGroups o) const { return FromBits(bits_ & o.bits_); }
  constexpr NodeGroups Without(NodeGroups o) const { return FromBits(bits_ & ~o.bits_); }
  constexpr bool empty() const { return bits_ == 0; }
  bool operator==(const NodeGroups&) const = default;

 private:
  static constexpr uint32_t Bit(NodeGroup g) { return uint32_t{1} << static_cast<int>(g); }
  static constexpr NodeGroups FromBits(uint32_t bits) {
    NodeGroups out;
    out.bits_ = bits;
    return out;
  }
  uint32_t bits_ = 0;
};

// The groups the agent reads (docs/metrics.md#health-metrics); the others only the simulator
// renders.
inline constexpr NodeGroups kReadGroups{NodeGroup::kHealthStatus, NodeGroup::kUtilizationRaw,
                                        NodeGroup::kEccCorrected, NodeGroup::kHealthComponents};

struct DriverGeneration {
  std::string_view name;  // "2.29": the major.minor every module version of it starts with
  std::string_view source_version;  // "2.29.0.0": the release whose source was transcribed
  NodeGroups groups;                // optional groups its tree holds (on chips that have them)
  bool from_source = true;          // false: known from release notes only (2.30), formats assumed
};

// Every known generation, oldest first.
std::span<const DriverGeneration> KnownGenerations();
const DriverGeneration& NewestGeneration();
// The newest generation transcribed from source (2.29): the simulator's default.
const DriverGeneration& NewestSourcedGeneration();
// The generation of a module version ("2.29.0.0", "2.29.1.0"); null when it is of no known
// generation (older, newer, malformed).
const DriverGeneration* GenerationOfVersion(std::string_view module_version);
// By name ("2.29"); null when unknown.
const DriverGeneration* GenerationNamed(std::string_view name);

// Whether `group` exists on a device whose info/architecture/instance_type is `chip` ("Trn1"):
// the driver creates health_status/ (and so 2.30's files in it) only for the chips whose hardware
// layer enables it.
bool GroupOnChip(NodeGroup group, std::string_view chip);
// `groups` less those that do not exist on `chip`.
NodeGroups GroupsOnChip(NodeGroups groups, std::string_view chip);

// The group's files under the device directory, relative to it ("stats/power/utilization_raw");
// empty for groups without one (class attributes, modes).
std::span<const std::string> GroupDeviceFiles(NodeGroup group);

// Relative paths of every file the agent reads under the directory of a device with
// `physical_cores` cores whose tree holds `groups` (docs/driver-interface.md#sysfs-tree): those of
// every generation, then those of the read groups in `groups`.
std::vector<std::string> ReadDeviceFiles(NodeGroups groups, int physical_cores);

}  // namespace neuron
