#pragma once
// The instance catalog: every figure of docs/hardware.md that the agent and the
// simulator need, as constant data. Thread-safe (immutable after static initialisation).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace neuron {

enum class Chip { kTrainium, kTrainium2, kInferentia2 };
enum class LinkTopology { kNone, kTorus4x4, kRing, kChain };

// Per-chip identity (driver strings, PCI id) and the per-core timing figures of
// docs/hardware.md#roofline.
struct ChipSpec {
  Chip chip;
  uint16_t pci_device_id;          // vendor is always kPciVendorAmazon
  std::string_view arch_type;      // info/architecture/arch_type, e.g. "NDv2"
  std::string_view instance_type;  // info/architecture/instance_type, e.g. "Trn1"
  std::string_view device_name;    // info/architecture/device_name, e.g. "Trainium1"
  std::string_view nc_arch_type;   // neuron_core<i>/info/architecture/arch_type, e.g. "NCv2"
  int physical_cores;              // core_count
  uint64_t hbm_bytes;              // per device
  double hbm_bytes_per_s;          // per device
  // Per physical core (docs/hardware.md#roofline); a logical core at LNC=2 runs at twice these.
  double peak_bf16_flops;
  double peak_fp8_flops;
  double peak_fp32_flops;
  double core_mem_bytes_per_s;
  // Chip totals, for display only (docs/hardware.md#peak-compute and #unverified-figures: they do
  // not equal cores x per-core).
  double chip_bf16_flops;
  double chip_fp32_flops;
  bool has_serial_number;  // info/serial_number (absent on Inf1, which we do not model)
};

inline constexpr uint16_t kPciVendorAmazon = 0x1d0f;

struct DevicePlacement {
  std::string bdf;  // "0000:10:1c.0"
  int numa_node;
  std::string cpulist;  // local_cpulist, e.g. "0-31,64-95"
};

struct EfaPlacement {
  std::string bdf;
  std::string name;  // RDMA device name after rdma-core's rename, e.g. "rdmap16s25"
  int numa_node;
};

struct InstanceSpec {
  std::string_view name;  // "trn1.32xlarge"
  const ChipSpec* chip = nullptr;
  int devices = 0;
  int default_lnc = 1;            // 2 on trn2, 1 elsewhere
  bool lnc_configurable = false;  // LNC applies only to Trn2
  int vcpus = 0;
  uint64_t host_mem_bytes = 0;
  int numa_nodes = 1;
  LinkTopology topology = LinkTopology::kNone;
  // Per device, all links together (docs/hardware.md#instance-catalog)
  double neuronlink_bytes_per_s = 0;
  int efa_count = 0;
  int efa_gbps = 0;  // per EFA device
  // Instances of one UltraServer (4 on trn2u.48xlarge, docs/hardware.md#neuronlink-topology); 0
  // for a type that is never in one. The driver writes its UltraServer class attributes on these
  // types only (docs/driver-interface.md#device-nodes).
  int ultraserver_instances = 0;
  // False where docs/hardware.md#unverified-figures lists the PCI/NUMA layout as unpublished and
  // ours is derived.
  bool placement_published = false;
  std::vector<DevicePlacement> placement = {};  // indexed by device index (probe order)
  std::vector<EfaPlacement> efas = {};
};

// Every modelled instance type, in catalog order.
const std::vector<InstanceSpec>& AllInstances();

// Looks up an instance type by name ("trn2.48xlarge"); NotFound names the known types.
absl::StatusOr<const InstanceSpec*> FindInstance(std::string_view name);

// Validates an LNC setting for the instance; 0 means "the instance's default".
absl::StatusOr<int> ResolveLnc(const InstanceSpec& spec, int requested_lnc);

// NeuronCores per device as the runtime numbers them (logical cores; physical / LNC).
int LogicalCoresPerDevice(const InstanceSpec& spec, int lnc);

// Neighbours of device d in the order the driver prints connected_devices
// (docs/driver-interface.md#connected-devices).
std::vector<int> ConnectedDevices(const InstanceSpec& spec, int device);

// "100 Gb/sec (4X EDR)": the EFA port rate string for the given speed.
std::string EfaRateString(int gbps);

// Whether `id` has the form of an EC2 instance id: "i-" and 17 lowercase hex digits, or 8 for
// instances older than 2016 (docs/architecture.md#instance-identity).
bool IsInstanceId(std::string_view id);

}  // namespace neuron
