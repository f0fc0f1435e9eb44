#pragma once
// The scheduler's part in a DRA claim's life, as kube-scheduler plays it: read the node's
// ResourceSlices, the DeviceClasses and every allocated claim through the API server, allocate
// the claim (claim_allocator.h) and write its status.allocation, retrying when another writer got
// there first (409: re-read and allocate again). `neuron-sim schedule` is its command line.
//
// What the real scheduler also does and this does not: pick the node (the caller names it),
// bind a pod, and add the pod to status.reservedFor (the simulator's pods live only in the
// kubelet emulator; the plugin and the kubelet emulator do not read reservedFor).

#include <functional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace neuron::sim::scheduler {

inline constexpr std::string_view kResourceApi = "/apis/resource.k8s.io/v1";

// The API server as the scheduler uses it: GET and PUT of JSON at a path below the server.
// Statuses as the Kubernetes client maps them (Aborted for a 409 conflict, NotFound, ...).
struct Api {
  std::function<absl::StatusOr<nlohmann::json>(const std::string& path)> get;
  std::function<absl::StatusOr<nlohmann::json>(const std::string& path, const nlohmann::json& body)>
      put;
  // POST (create); only extended resources (extended_resources.h) create a claim.
  std::function<absl::StatusOr<nlohmann::json>(const std::string& path, const nlohmann::json& body)>
      post = nullptr;
};

// Allocates claim `name_space`/`name` on `node` and returns the claim as the API server stored
// it. A claim already allocated is returned as it is.
absl::StatusOr<nlohmann::json> ScheduleClaim(const Api& api, const std::string& name_space,
                                             const std::string& name, const std::string& node);

}  // namespace neuron::sim::scheduler
