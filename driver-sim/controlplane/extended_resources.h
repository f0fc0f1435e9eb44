#pragma once
// Extended resources backed by DRA (KEP-5004; resource.k8s.io/v1 DeviceClassSpec
// .extendedResourceName, feature gate DRAExtendedResource: alpha in Kubernetes 1.34, beta from
// 1.36), as kube-scheduler's dynamicresources plugin does it (pkg/scheduler/framework/plugins/
// dynamicresources, preFilterExtendedResources, filterExtendedResources, createDeviceRequests,
// createRequestMappings): a pod that asks `aws.amazon.com/neuron: 4` on a node whose device
// plugin does not serve that resource gets one "special" ResourceClaim in its namespace, named
// `<pod>-extended-resources-<5 characters>`, annotated resource.kubernetes.io/extended-resource-
// claim: "true", with one ExactCount request per (container, mapped resource), named
// `container-<i>-request-<j>` (i: the container's index among init and app containers; j: the
// resource's index among the container's sorted requests), of the DeviceClass whose
// extendedResourceName is the resource (or any class as deviceclass.resource.kubernetes.io/
// <class>); the claim is then allocated as any other, and the pod's
// status.extendedResourceClaimStatus maps each container's resource to its request.
//
// What the real scheduler also does and this does not: own the claim by the pod (the simulator's
// pods live in the kubelet emulator only; the caller passes the claim to `pod run`) and delete it
// with the pod.

#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "driver-sim/controlplane/schedule.h"
#include "nlohmann/json.hpp"

namespace neuron::sim::scheduler {

inline constexpr std::string_view kExtendedResourceClaimAnnotation =
    "resource.kubernetes.io/extended-resource-claim";
inline constexpr std::string_view kImplicitExtendedResourcePrefix =
    "deviceclass.resource.kubernetes.io/";

// A pod's containers and their extended resource requests (limits == requests).
struct PodRequests {
  std::string name_space;
  std::string name;
  struct Container {
    std::string name;
    std::map<std::string, int64_t> requests;  // resource -> count, sorted as the scheduler sorts
  };
  std::vector<Container> containers;  // init containers first, then app containers
};

// pod.status.extendedResourceClaimStatus.requestMappings[i].
struct RequestMapping {
  std::string container;
  std::string resource;
  std::string request;
  bool operator==(const RequestMapping&) const = default;
};

// Extended resource name -> DeviceClass name: each class's spec.extendedResourceName, and its
// implicit deviceclass.resource.kubernetes.io/<name>. Two classes naming one resource are
// refused (FailedPrecondition naming both): which one the real scheduler takes is not ours to
// guess.
absl::StatusOr<std::map<std::string, std::string>> ExtendedResourceClasses(
    const std::vector<nlohmann::json>& classes);

// The special claim's spec.devices.requests and the mappings for `pod` on a node whose
// status.allocatable is `allocatable`: empty when every request is the device plugin's (the node
// has the resource allocatable). Unschedulable (FailedPrecondition) naming the resource when a
// request is neither allocatable nor mapped by a class.
struct ExtendedRequests {
  nlohmann::json requests = nlohmann::json::array();
  std::vector<RequestMapping> mappings;
};
absl::StatusOr<ExtendedRequests> PlanExtendedRequests(
    const PodRequests& pod, const std::map<std::string, std::string>& classes,
    const nlohmann::json& allocatable);

// The whole of it through the API: the classes and the node read, the claim created and
// allocated on `node` (ScheduleClaim). nullopt claim when the node's device plugins serve every
// request.
struct ExtendedResourceClaim {
  std::optional<nlohmann::json> claim;  // as the API server stored it, allocated
  std::vector<RequestMapping> mappings;
};
absl::StatusOr<ExtendedResourceClaim> ScheduleExtendedResources(const Api& api,
                                                                const PodRequests& pod,
                                                                const std::string& node,
                                                                std::mt19937_64& rng);

}  // namespace neuron::sim::scheduler
