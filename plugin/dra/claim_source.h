#pragma once
// Where NodePrepareResources learns a claim's allocation. The privileged plugin never talks to
// the API server (docs/OPERATIONS.md#privilege-model): the unprivileged `neuron-dra-api`
// container does, and serves each claim pruned to the fields below on a Unix socket
// (docs/kubelet-api.md#dra-claims):
//   GET /claims/<namespace>/<name> -> 200 application/json
//     {"metadata":{"namespace","name","uid"},"status":{"allocation":{"devices":{
//       "results":[{"request","driver","pool","device","adminAccess"?}...],
//       "config":[{"source","requests":[...],"opaque":{"driver","parameters":{...}}}...]}}}}
//   404 when the API says NotFound; 503 with a one-line reason when it cannot be reached.
// The answer is parsed strictly (every named field of the right type, bounded sizes): what comes
// from the network side is checked before the privileged side acts on it.

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace neuron::plugin::dra {

struct AllocationResult {
  std::string request;
  std::string driver;
  std::string pool;
  std::string device;
  // adminAccess (GA in 1.36): the device is shared with whoever else holds it, for monitoring;
  // the API server grants it only in namespaces labelled resource.kubernetes.io/admin-access.
  bool admin_access = false;
  bool operator==(const AllocationResult&) const = default;
};

// nlohmann::json's members may throw in principle (allocation); so may std::string's.
struct ClaimConfig {                  // NOLINT(bugprone-exception-escape)
  std::string source;                 // "FromClass" or "FromClaim"
  std::vector<std::string> requests;  // empty: every request of the claim
  std::string driver;                 // opaque.driver
  nlohmann::json parameters;          // opaque.parameters (an object)
};

struct ResourceClaim {
  std::string namespace_;
  std::string name;
  std::string uid;
  bool allocated = false;  // status.allocation present
  std::vector<AllocationResult> results;
  std::vector<ClaimConfig> config;
};

// Bounds of what is accepted: a claim has at most 32 requests and results of at most 32
// devices each in the API (resource.k8s.io/v1 DeviceRequestsMaxSize, AllocationResultsMaxSize
// 128 and DeviceConfigMaxSize 32); the body is bounded by the client.
inline constexpr size_t kMaxClaimBytes = 1 << 20;
inline constexpr size_t kMaxResults = 128;
inline constexpr size_t kMaxConfigs = 32;

// Parses one /claims answer; InvalidArgument naming the first bad field.
absl::StatusOr<ResourceClaim> ParseClaim(std::string_view body);

class ClaimSource {
 public:
  virtual ~ClaimSource() = default;
  // NotFound when the claim does not exist, Unavailable when it cannot be learnt now.
  virtual absl::StatusOr<ResourceClaim> Get(std::string_view namespace_, std::string_view name) = 0;
};

// The real one: an HTTP client of neuron-dra-api's socket (http/local_client.h).
class HttpClaimSource : public ClaimSource {
 public:
  // `address` as LocalGet takes it: "unix:/run/neuron-node-agent/dra-api.sock".
  explicit HttpClaimSource(std::string address,
                           std::chrono::milliseconds timeout = std::chrono::seconds(5));
  absl::StatusOr<ResourceClaim> Get(std::string_view namespace_, std::string_view name) override;

 private:
  const std::string address_;
  const std::chrono::milliseconds timeout_;
};

}  // namespace neuron::plugin::dra
