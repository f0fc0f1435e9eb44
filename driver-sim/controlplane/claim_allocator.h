#pragma once
// The simulated scheduler's DRA allocation: a ResourceClaim's devices chosen from the node's
// ResourceSlices the way kube-scheduler's structured-parameters allocator chooses them
// (k8s.io/dynamic-resource-allocation/structured), for what DeviceClasses and the documented claim
// templates use (docs/OPERATIONS.md#dra-claims):
//   - requests with `exactly`: a DeviceClass, CEL selectors (cel_subset.h), allocationMode
//     ExactCount (with count) or All, tolerations of device taints;
//   - constraints with matchAttribute over some or all requests;
//   - claim and class opaque config, carried into the allocation with its source;
//   - pools: only a pool's newest generation counts, and a pool missing slices of it is skipped;
//   - devices other claims hold, and devices with a NoSchedule or NoExecute taint the request
//     does not tolerate, are not allocated;
//   - partitionable devices (DRAPartitionableDevices, on by default since 1.36): a pool's
//     sharedCounters, and each device's consumesCounters; a device is allocated only while, for
//     every counter of its pool, the set's value minus what allocated claims' devices and this
//     claim's picks so far consume stays >= 0 (allocator_experimental.go,
//     checkAvailableCounters). A pool whose device names a counter set or counter the pool lacks,
//     or with two counter sets of one name, is invalid: none of its devices is allocated, and the
//     failure says why (pools_experimental.go, buildPool).
// Outside that (firstAvailable, adminAccess, consumable capacity, a CEL expression outside the
// subset) the claim is refused with InvalidArgument naming it, never allocated as if the part
// were absent. Choosing among equal candidates follows slice order and
// device order, then backtracks, as the reference does; it is not the reference's scoring.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace neuron::sim::scheduler {

struct AllocationInput {
  std::string node_name;
  std::vector<nlohmann::json> slices;            // resource.k8s.io/v1 ResourceSlice objects
  std::vector<nlohmann::json> device_classes;    // resource.k8s.io/v1 DeviceClass objects
  std::vector<nlohmann::json> allocated_claims;  // ResourceClaims whose devices are taken
};

// The claim's `status.allocation` on input.node_name: devices.results, devices.config and the
// nodeSelector. ResourceExhausted when the node cannot satisfy it (the message says which request
// or constraint), InvalidArgument when the claim uses what the allocator does not offer, or
// FailedPrecondition when a selector fails to evaluate on a device (CEL's runtime error).
absl::StatusOr<nlohmann::json> AllocateClaim(const nlohmann::json& claim,
                                             const AllocationInput& input);

}  // namespace neuron::sim::scheduler
