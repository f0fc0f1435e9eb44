#pragma once
// The node's inventory: Neuron devices and EFA interfaces as the driver and the RDMA core
// present them under a root. Produced by a Discovery back end; a plain value, so copies are
// thread-safe to read. Refreshed by rescanning when Events report a change.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/discovery/bdf.h"
#include "core/driver/device_attributes.h"
#include "core/driver/driver_generations.h"
#include "core/driver/sysfs_names.h"
#include "core/model/catalog.h"
#include "core/model/topology.h"

namespace neuron {

struct NeuronDevice {
  int index = -1;                        // N of /dev/neuronN; stable across replug
  std::string arch_type;                 // "NDv2"
  std::string instance_type;             // "Trn1" (info/architecture/instance_type)
  std::string device_name;               // "Trainium1"
  std::string nc_arch_type;              // "NCv2" (neuron_core0/info/architecture/arch_type)
  int physical_cores = 0;                // core_count
  std::optional<uint64_t> memory_bytes;  // HBM, from the catalog by chip (sysfs has no file)
  DeviceAttributes attributes;           // what is published as read (device_attributes.h)
  std::vector<int> connected;            // connected_devices, in the driver's order
  std::optional<DeviceState> state;
  std::string bdf;               // "" when the index->BDF map is unavailable
  std::optional<int> numa_node;  // absent when unknown or -1
  std::string cpulist;           // local_cpulist as printed, "" when unknown
  std::string dev_node;          // host path of the character device, "/dev/neuronN"
  // The layout of its sysfs tree, checked once per scan (docs/driver-interface.md#detection):
  // the read groups the tree holds (the sampler reads those), and the files the agent reads that
  // the driver's generation has (an unknown one: the newest known's) but the tree lacks, relative
  // to the device directory. A missing file is absent, never read as 0.
  NodeGroups sysfs_groups;
  std::vector<std::string> missing_nodes;

  bool operator==(const NeuronDevice&) const = default;
};

// The driver module (docs/driver-interface.md#detection).
struct DriverInfo {
  std::optional<std::string>
      version;  // sys/module/neuron/version, "2.29.0.0"; absent with the file
  const DriverGeneration* generation = nullptr;  // null: unknown (no version, or none known)

  // The generation the tree is checked against: its own, or the newest known when unknown.
  const DriverGeneration& Expected() const {
    return generation != nullptr ? *generation : NewestGeneration();
  }
  // "2.29", or "unknown".
  std::string_view GenerationLabel() const {
    return generation != nullptr ? generation->name : std::string_view("unknown");
  }
  bool operator==(const DriverInfo&) const = default;
};

struct EfaInterface {
  std::string name;              // "rdmap16s25"
  std::optional<int> uverbs;     // N of /dev/infiniband/uverbsN
  std::string port_state;        // "ACTIVE" (ports/1/state without the "4: " prefix)
  std::string phys_state;        // "LinkUp"
  std::string rate;              // "100 Gb/sec (4X EDR)"
  std::optional<int> rate_gbps;  // 100
  std::string bdf;
  std::optional<int> numa_node;

  bool operator==(const EfaInterface&) const = default;
};

// The node's place in a Trn2 UltraServer, from the driver's class attributes
// (docs/driver-interface.md#device-nodes), read by core/discovery/ultraserver.h.
struct UltraServerMembership {
  int size = 0;           // 4 or 2: the node configuration (node_id_<size>, server_id_<size>)
  std::string mode;       // the driver's mode for it: "x4", "x2h" or "x2v"
  int node_id = -1;       // this node's id within it
  std::string server_id;  // 16 hex digits, as the driver prints them
  bool operator==(const UltraServerMembership&) const = default;
};
struct UltraServerInfo {
  std::vector<int> supported_modes;                // ultraserver_mode (neuron_ultraserver_mode)
  std::vector<UltraServerMembership> memberships;  // empty: in no UltraServer
  bool operator==(const UltraServerInfo&) const = default;
};

struct Inventory {
  // "trn1.32xlarge", from DMI product_name (docs/architecture.md#instance-identity)
  std::string instance_type;
  std::string instance_id;  // DMI board_asset_tag
  // Logical NeuronCore config in force (docs/architecture.md#lnc)
  int lnc = 1;
  DriverInfo driver;
  std::vector<NeuronDevice> devices;  // ascending index; gaps where a device is absent
  std::vector<EfaInterface> efas;     // ascending name
  // Absent when the driver has no UltraServer class attributes or its election is in progress.
  std::optional<UltraServerInfo> ultraserver;
  // Files that were present but malformed, each message naming the file. Absent files are not
  // warnings: partial data is normal (docs/style.md#partial-data).
  std::vector<std::string> warnings;

  bool operator==(const Inventory&) const = default;

  const NeuronDevice* FindDevice(int index) const;
  const EfaInterface* FindEfa(std::string_view name) const;
  // NeuronCores per device as the runtime numbers them (physical / LNC).
  int LogicalCoresPerDevice() const;
  // Global logical core ids of a device: index * LogicalCoresPerDevice() + k. Stable across a
  // neighbour's unplug, like device indices.
  std::vector<int> CoreIds(int device_index) const;
  // The catalog entry for instance_type, if known.
  const InstanceSpec* Spec() const;
  // NeuronLink graph over device indices (size = highest index + 1).
  Topology LinkTopology() const;
  // Missing sysfs nodes over all devices, and the first one as "neuronN/<path>" ("" when none).
  size_t MissingNodeCount() const;
  std::string FirstMissingNode() const;
};

// One line for the tools' headers and the log when the driver's sysfs layout is not the one the
// agent knows (docs/driver-interface.md#detection): "driver 2.31.7: unknown sysfs layout, 48
// nodes missing (first: neuron0/stats/hardware/sram_ecc_uncorrected)"; for a known generation only
// when nodes are missing ("driver 2.29.0: 3 sysfs nodes of generation 2.29 missing (first: ...)").
// "" when there is nothing to say.
std::string DriverLayoutProblem(const Inventory& inv);

struct DiscoveryOptions {
  // LNC from --lnc / NEURON_LOGICAL_NC_CONFIG; 0 means the instance default.
  int lnc = 0;
  // Device index -> PCI address; null = DEVICE_BDF_EXT on ROOT/dev/neuronN (the driver). Tests
  // of discovery without a simulated driver give their own.
  std::function<std::unique_ptr<BdfResolver>(const RootPaths&)> bdf_resolver = nullptr;
};

// One interface, two back ends (docs/architecture.md#core, docs/architecture.md#discovery). Both
// must give the same Inventory for the same tree; tests/core/discovery_agreement_test proves it.
// Not thread-safe: one owner.
class Discovery {
 public:
  virtual ~Discovery() = default;
  virtual absl::StatusOr<Inventory> Scan() = 0;
  virtual std::string_view name() const = 0;
};

// Reads ROOT/sys directly (the simulator, containers without udev).
std::unique_ptr<Discovery> MakeDirectoryDiscovery(const RootPaths& root, DiscoveryOptions options);
// libudev (production). Sees the host's /sys, or a umockdev testbed when UMOCKDEV_DIR is set;
// non-sysfs files (/dev) still come from `root`.
absl::StatusOr<std::unique_ptr<Discovery>> MakeUdevDiscovery(const RootPaths& root,
                                                             DiscoveryOptions options);

}  // namespace neuron
