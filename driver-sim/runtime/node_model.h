#pragma once
// The node as libnrt-sim sees it: ROOT/run/neuron/node.json (instance type, LNC) joined with the
// catalog (docs/hardware.md), giving logical core locations, per-core performance and HBM,
// NeuronLink routes and the EFA nearest each device. Immutable after Load; thread-safe.

#include <cmath>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "core/driver/sysfs_names.h"
#include "core/model/catalog.h"
#include "core/model/topology.h"
#include "driver-sim/driver/node_info.h"

namespace neuron::nrt {

// The model's seconds as the nanoseconds execution times are kept in, rounded.
inline int64_t SecondsToNs(double seconds) {
  return static_cast<int64_t>(std::llround(seconds * 1e9));
}

// Peak rates of one logical core (docs/hardware.md#roofline; a logical core at LNC=2 is twice a
// physical one), in FLOP/s and bytes/s.
struct CorePerf {
  double p_bf16 = 0;  // also FP16/TF32
  double p_fp8 = 0;
  double p_fp32 = 0;
  double p_int8 = 0;
  double p_vector = 0;
  double p_scalar = 0;
  double mem_bw = 0;  // HBM bandwidth of the core
};

struct CoreLocation {
  int global = 0;       // instance-wide logical index
  int device = 0;       // device index
  int device_core = 0;  // logical core within the device (datastore slot)
};

class NodeModel {
 public:
  // Reads node.json under `root` and finds the instance in the catalog. NotFound when there is
  // no simulated node at the root (node.json missing), with a message saying so.
  static absl::StatusOr<NodeModel> Load(const RootPaths& root);
  // For tests: a model from a spec without reading files.
  NodeModel(RootPaths root, NodeInfo info, const InstanceSpec* spec, int lnc);

  const RootPaths& root() const { return root_; }
  const NodeInfo& info() const { return info_; }
  const InstanceSpec& spec() const { return *spec_; }
  int lnc() const { return lnc_; }
  int cores_per_device() const { return cores_per_device_; }
  int total_cores() const { return cores_per_device_ * spec_->devices; }

  CoreLocation Locate(int global_core) const;
  CorePerf Perf() const;
  // HBM one logical core may use: the device's HBM per physical core times LNC
  // (docs/hardware.md#core-parameters: 16 GiB on NC-v2; trn2 12 GiB at LNC=1, 24 GiB at LNC=2).
  uint64_t CoreHbmBytes() const;

  // One NeuronLink's bandwidth (bytes/s): the device's total over its ports
  // (docs/hardware.md#neuronlink-topology).
  double LinkBytesPerS() const;
  // The node's EFA bandwidth per logical core (bytes/s; docs/hardware.md#efa-per-instance "per
  // rank"); without EFA, the 25 Gbps front-end network shared the same way.
  double EfaShareBytesPerS() const;
  // The devices a transfer from a to b passes, a and b included (shortest NeuronLink path, ties
  // broken by the driver's neighbour order); {a} when a == b; empty when unreachable.
  std::vector<int> Route(int a, int b) const;
  // The EFA (index in the catalog's list) nearest the device: on the same PCI bus, shared by
  // the bus's devices in BDF order; else on the same NUMA node, shared in device-index order;
  // -1 on instances without EFA.
  int NearestEfa(int device) const;

 private:
  RootPaths root_;
  NodeInfo info_;
  const InstanceSpec* spec_;
  int lnc_;
  int cores_per_device_;
  Topology topology_;
};

}  // namespace neuron::nrt
