#pragma once
// The two allocation RPCs as pure functions of an immutable NodeView (no I/O, no locks), so they
// answer from memory in microseconds (docs/kubelet-api.md#allocate, #get-preferred-allocation) and
// are unit-testable without gRPC. Thread-safe (no state).

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "deviceplugin/v1beta1/api.pb.h"
#include "plugin/config.h"
#include "plugin/node_state.h"

namespace neuron::plugin {

// One container's validated request.
struct ContainerPlan {
  std::vector<std::string> ids;  // as requested
  bool noncontiguous = false;    // allowed by policy warn; the caller logs and counts it
};

// Allocate, step 1: every container request must name known, healthy, unmasked, distinct IDs,
// at least one and no more than the resource has; non-contiguous sets are refused under policy
// reject. InvalidArgument names every bad ID with its reason, per container request.
absl::StatusOr<std::vector<ContainerPlan>> ValidateAllocate(const NodeView& view, Resource resource,
                                                            const v1beta1::AllocateRequest& request,
                                                            NonContiguousPolicy policy);

// Allocate, step 2: device specs (host paths never prefixed by --root:
// docs/architecture.md#allocation), NEURON_RT_VISIBLE_CORES, and CDI names (host IDs) when `cdi`.
// `numbering` decides what the container sees (docs/architecture.md#device-numbering,
// plugin/README.md#device-numbering): kHost keeps host paths and global core indices; kContainer
// names the k-th host device (ascending) /dev/neuronk and each core k * cores_per_device + its
// position within its device. EFA specs are never renumbered.
v1beta1::AllocateResponse BuildAllocateResponse(const NodeView& view, Resource resource,
                                                const std::vector<ContainerPlan>& plans, bool cdi,
                                                DeviceNumbering numbering = DeviceNumbering::kHost);

// GetPreferredAllocation: never an error. Unknown or malformed IDs are dropped from the
// candidates; each answer holds all valid must_include IDs and exactly allocation_size IDs when
// that many candidates exist (a best effort otherwise).
v1beta1::PreferredAllocationResponse PreferredAllocation(
    const NodeView& view, Resource resource, const v1beta1::PreferredAllocationRequest& request);

// EFA preference: interfaces packed by NUMA node (the nodes of must_include first, then the
// smallest node that fits the rest, then larger ones), then by name.
std::vector<std::string> PreferEfa(const NodeView& view, const std::vector<std::string>& available,
                                   const std::vector<std::string>& must_include, int size);

// The CDI name of a device ("aws.amazon.com/neuron=3") or EFA ("vpc.amazonaws.com/efa=rdmap16s27").
std::string CdiName(Resource resource, const std::string& id);

}  // namespace neuron::plugin
