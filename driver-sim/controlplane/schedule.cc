// schedule.h: list, allocate, write the status; on a conflict, again from the top.
#include "driver-sim/controlplane/schedule.h"

#include <utility>
#include <vector>

#include "core/base/text.h"
#include "driver-sim/controlplane/claim_allocator.h"

namespace neuron::sim::scheduler {

namespace {

using nlohmann::json;

constexpr int kAttempts = 5;

absl::StatusOr<std::vector<json>> List(const Api& api, const std::string& path) {
  absl::StatusOr<json> list = api.get(path);
  if (!list.ok()) return list.status();
  std::vector<json> items;
  for (const json& item : list->value("items", json::array())) items.push_back(item);
  return items;
}

bool Allocated(const json& claim) {
  return claim.contains("status") && claim["status"].contains("allocation");
}

// One attempt: the inputs as they are now, the allocation, the status write.
absl::StatusOr<json> Attempt(const Api& api, const std::string& claim_path,
                             const std::string& node) {
  absl::StatusOr<json> claim = api.get(claim_path);
  if (!claim.ok() || Allocated(*claim)) return claim;
  AllocationInput input{node, {}, {}, {}};
  for (auto [path, into] : {std::pair{"/resourceslices", &input.slices},
                            std::pair{"/deviceclasses", &input.device_classes},
                            std::pair{"/resourceclaims", &input.allocated_claims}}) {
    absl::StatusOr<std::vector<json>> items = List(api, Cat(kResourceApi, path));
    if (!items.ok()) return items.status();
    *into = *std::move(items);
  }
  std::erase_if(input.allocated_claims, [](const json& c) { return !Allocated(c); });
  absl::StatusOr<json> allocation = AllocateClaim(*claim, input);
  if (!allocation.ok()) return allocation.status();
  (*claim)["status"]["allocation"] = *std::move(allocation);
  return api.put(claim_path + "/status", *claim);  // its resourceVersion makes a race a 409
}

}  // namespace

absl::StatusOr<json> ScheduleClaim(const Api& api, const std::string& name_space,
                                   const std::string& name, const std::string& node) {
  const std::string path = Cat(kResourceApi, "/namespaces/", name_space, "/resourceclaims/", name);
  absl::StatusOr<json> claim = absl::AbortedError("not tried");
  for (int attempt = 0; attempt < kAttempts && absl::IsAborted(claim.status()); ++attempt) {
    claim = Attempt(api, path, node);
  }
  return claim;
}

}  // namespace neuron::sim::scheduler
