#pragma once
// The DRA face's ResourceSlices (resource.k8s.io/v1 ResourceSliceSpec) built from the plugin's
// NodeView (plugin/node_state.h): a pool per driver and node, named after the node, of
//   neuron-<index>     a Neuron device (host index), driver neuron.aws.com
//   efa-<ifname>       an EFA interface (lower-case), driver efa.neuron.aws.com
// with AWS's attribute names (docs/kubelet-api.md#dra-slice, NEURON-TODAY.md "AWS's Neuron DRA
// driver"), connected groups resource.aws.com/devicegroup{1,4,8,16}_id from core's NeuronLink
// Topology, and a taint per unhealthy device. With `partitionable` (--dra.partitionable) the pool
// also holds a slice of shared counters (one per device: its logical cores), the NeuronCores
//   neuroncore-<c>     logical core c (NEURON_RT_VISIBLE_CORES numbering), in slices of 64,
// and on an UltraServer node `neuron-node` (the whole node) in the first slice; every Neuron
// device, core and neuron-node consumes its cores from the counters, so the scheduler never gives
// a core and its device (or the node and any device) to two claims (docs/kubelet-api.md#dra-pool).
// Pure functions of their inputs; thread-safe.

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/model/topology.h"
#include "nlohmann/json.hpp"
#include "plugin/dra/device_kinds.h"
#include "plugin/node_state.h"

namespace neuron::plugin::dra {

inline constexpr std::string_view kTaintKey = "neuron.aws.com/unhealthy";
// The API's limits (kubernetes/kubernetes staging/src/k8s.io/api/resource/v1/types.go:
// ResourceSliceMaxDevices, ResourceSliceMaxAttributesAndCapacitiesPerDevice,
// DeviceMaxIDLength, DeviceAttributeMaxValueLength; device names are DNS-1123 labels).
inline constexpr size_t kMaxDevicesPerSlice = 128;
// ResourceSliceMaxDevicesWithTaintsOrConsumesCounters: a slice with any device taint holds fewer.
inline constexpr size_t kMaxDevicesPerSliceWithTaints = 64;
inline constexpr size_t kMaxAttributesPerDevice = 32;
inline constexpr size_t kMaxAttributeIdLength = 32;
inline constexpr size_t kMaxStringValueLength = 64;
inline constexpr size_t kMaxDnsLabelLength = 63;
// Counters (types.go: ResourceSliceMaxCounterSets, ResourceSliceMaxCountersPerCounterSet,
// ResourceSliceMaxDeviceCounterConsumptionsPerDevice,
// ResourceSliceMaxCountersPerDeviceCounterConsumption). A slice holds devices or sharedCounters,
// never both; a slice where a device consumes counters holds at most 64 devices, as with taints.
inline constexpr size_t kMaxCounterSetsPerSlice = 8;
inline constexpr size_t kMaxCountersPerSet = 32;
inline constexpr size_t kMaxConsumptionsPerDevice = 2;
inline constexpr size_t kMaxCountersPerConsumption = 32;

inline constexpr std::string_view kCounterSetName = "neuron-devices";

// None (resource.k8s.io from Kubernetes 1.35) marks a degraded device without keeping anything
// off it; an older API server refuses it, and neuron-dra-api then writes NoSchedule
// (plugin/kubeapi/slice_publisher.h). dra.taint_effect takes the other two only.
enum class TaintEffect { kNoSchedule, kNoExecute, kNone };
std::string_view TaintEffectName(TaintEffect e);
absl::StatusOr<TaintEffect> ParseTaintEffect(std::string_view text);

// What the slice needs beyond the NodeView.
struct SliceOptions {
  std::string node_name;           // pool name and nodeName
  std::string dra_driver_version;  // draDriverVersion: our agent's version
  TaintEffect taint_effect = TaintEffect::kNoSchedule;
  bool partitionable = false;  // --dra.partitionable: counters, NeuronCores, neuron-node
  // --dra.efa: the EFA interfaces as the pool of driver efa.neuron.aws.com; false where AWS's
  // EFA DRA driver publishes them (the devicegroup1_id of a Neuron device still names its EFA).
  bool efa = true;
};

// The node is part of a Trn2 UltraServer: the driver lists UltraServer modes it supports
// (core/discovery/ultraserver.h). Only there is `neuron-node` offered.
bool IsUltraServerNode(const NodeView& view);
// The first device (by index) that keeps the node from being whole: unhealthy or absent (unknown
// health is no fault); nullptr when none. neuron-node's taint and health name it.
const HardwareDevice* FirstFaultyDevice(const NodeView& view);
// The indices of the node's present Neuron devices, ascending: what `neuron-node` stands for (its
// counters, its device nodes, the cores it holds).
std::vector<int> PresentDevices(const NodeView& view);
// RFC 1123 label: 1-63 of [a-z0-9-], alphanumeric at both ends.
absl::Status ValidateDnsLabel(std::string_view what, std::string_view name);
// RFC 1123 subdomain (node names): up to 253 characters of dot-separated labels.
absl::Status ValidateDnsSubdomain(std::string_view what, std::string_view name);

// The group of `size` devices that `device` belongs to: the aligned index block
// [g*size, (g+1)*size) when all of it is on the node (index < node_devices) and connected on
// the NeuronLink graph; nullopt otherwise. The device plugin's rule (contiguous indices, a
// connected set, docs/architecture.md#allocation) seen as fixed groups.
std::optional<int> ConnectedGroup(const Topology& topology, int node_devices, int device, int size);

// Which EFA interface sits beside each Neuron device (docs/kubelet-api.md#dra-slice): the EFAs
// on the device's PCI bus, else on its NUMA node, dealt to those devices in index order so that
// aligned groups get whole EFAs. Indexed like `devices` (ascending index); "" for none.
std::vector<std::string> EfaBeside(const NodeView& view);

// The node's slice specs for `generation` (pool.generation), each {driver, pool, nodeName,
// devices or sharedCounters}, in two pools named after the node. Driver neuron.aws.com: [0] the
// Neuron devices (and neuron-node); with `partitionable`, [1] the counter slice and [2..] the
// NeuronCores, 64 per slice. Then, with `efa` and an EFA present, one slice of driver
// efa.neuron.aws.com: the EFA interfaces, with the connected-group attributes of the devices
// beside them (claims wanting both align on resource.aws.com/devicegroup*_id). Errors: a name,
// attribute or count that breaks the API's rules or limits (CheckPool, per pool), naming it; the
// API would refuse the slice.
absl::StatusOr<std::vector<nlohmann::json>> BuildPool(const NodeView& view,
                                                      const SliceOptions& options,
                                                      uint64_t generation);

// The API's rules for a pool's slices (slice_limits.cc, kubernetes/kubernetes
// staging/src/k8s.io/api/resource/v1/types.go): device and counter names are DNS labels, a slice
// holds devices or counters, the limits above, each consumption names a counter set of the pool
// and counters of that set. The error names the slice, the device and the limit.
absl::Status CheckPool(const std::vector<nlohmann::json>& slices);

// What GET /dra/resourceslice serves (docs/kubelet-api.md#dra-slice): 503 until the first
// hardware scan, then 200 with {"generation": N, "nodeName": ..., "slices": [<slice spec>...]}.
// N starts at `first_generation` (the plugin passes the Unix time of its start, so it still rises
// across a restart of the plugin) and increases by one whenever any slice of the pool changes,
// health taints included; a view that changes nothing in the pool (a holding, a numa update)
// leaves it alone. A reader that already has generation N asks with `unless` = N and gets 304
// with no body while N is current (neuron-dra-api polls so every 250 ms for next to nothing).
// Thread-safe.
class SliceState {
 public:
  SliceState(SliceOptions options, uint64_t first_generation);

  void Update(const NodeView& view);

  struct Document {
    int status = 503;
    std::string body;
  };
  Document Get(std::optional<uint64_t> unless = std::nullopt) const;
  uint64_t generation() const;

 private:
  const SliceOptions options_;
  mutable std::mutex mu_;
  uint64_t generation_;                                // guarded by mu_
  bool ready_ = false;                                 // guarded by mu_
  std::optional<std::vector<nlohmann::json>> slices_;  // guarded by mu_; the last good pool
  std::string error_;             // guarded by mu_; why the last view made no slice
  uint64_t view_generation_ = 0;  // guarded by mu_; views from racing threads may be late
};

}  // namespace neuron::plugin::dra
