// extended_resources.h: the special claim's requests, its creation and its allocation.
#include "driver-sim/controlplane/extended_resources.h"

#include "core/base/text.h"

namespace neuron::sim::scheduler {

namespace {

using nlohmann::json;

// The API server's generateName suffix: 5 characters of [bcdfghjklmnpqrstvwxz2456789].
std::string NameSuffix(std::mt19937_64& rng) {
  static constexpr std::string_view kAlphabet = "bcdfghjklmnpqrstvwxz2456789";
  std::uniform_int_distribution<size_t> pick(0, kAlphabet.size() - 1);
  std::string out;
  for (int i = 0; i < 5; ++i) out += kAlphabet[pick(rng)];
  return out;
}

// A quantity of the node's status.allocatable that is more than zero ("0" and absent are not).
bool Allocatable(const json& allocatable, const std::string& resource) {
  const auto it = allocatable.find(resource);
  if (it == allocatable.end() || !it->is_string()) return false;
  const std::string& q = it->get_ref<const std::string&>();
  return !q.empty() && q.find_first_not_of('0') != std::string::npos;
}

// The index of `resource` among the container's requests in sorted order.
size_t RequestIndex(const PodRequests::Container& c, const std::string& resource) {
  size_t i = 0;
  for (const auto& [name, count] : c.requests) {
    if (name == resource) return i;
    ++i;
  }
  return i;
}

}  // namespace

absl::StatusOr<std::map<std::string, std::string>> ExtendedResourceClasses(
    const std::vector<json>& classes) {
  std::map<std::string, std::string> out;
  for (const json& c : classes) {
    const std::string name = c.value("/metadata/name"_json_pointer, std::string());
    if (name.empty()) continue;
    std::vector<std::string> names = {Cat(kImplicitExtendedResourcePrefix, name)};
    const std::string explicit_name =
        c.value("/spec/extendedResourceName"_json_pointer, std::string());
    if (!explicit_name.empty()) names.push_back(explicit_name);
    for (const std::string& resource : names) {
      const auto [it, fresh] = out.emplace(resource, name);
      if (!fresh) {
        return absl::FailedPreconditionError(Cat("DeviceClasses ", it->second, " and ", name,
                                                 " both name extended resource ", resource,
                                                 "; the stand-in does not choose between them"));
      }
    }
  }
  return out;
}

absl::StatusOr<ExtendedRequests> PlanExtendedRequests(
    const PodRequests& pod, const std::map<std::string, std::string>& classes,
    const json& allocatable) {
  ExtendedRequests out;
  for (size_t i = 0; i < pod.containers.size(); ++i) {
    const PodRequests::Container& c = pod.containers[i];
    for (const auto& [resource, count] : c.requests) {
      if (count == 0 || Allocatable(allocatable, resource)) continue;  // the device plugin's
      const auto mapped = classes.find(resource);
      if (mapped == classes.end()) {
        return absl::FailedPreconditionError(
            Cat("pod ", pod.name_space, "/", pod.name, " does not fit: ", resource,
                " is neither allocatable on the node nor the extended resource of a DeviceClass"));
      }
      const std::string request = Cat("container-", std::to_string(i), "-request-",
                                      std::to_string(RequestIndex(c, resource)));
      out.requests.push_back({{"name", request},
                              {"exactly",
                               {{"deviceClassName", mapped->second},
                                {"allocationMode", "ExactCount"},
                                {"count", count}}}});
      out.mappings.push_back({c.name, resource, request});
    }
  }
  return out;
}

absl::StatusOr<ExtendedResourceClaim> ScheduleExtendedResources(const Api& api,
                                                                const PodRequests& pod,
                                                                const std::string& node,
                                                                std::mt19937_64& rng) {
  absl::StatusOr<json> classes = api.get(Cat(kResourceApi, "/deviceclasses"));
  if (!classes.ok()) return classes.status();
  absl::StatusOr<std::map<std::string, std::string>> mapping =
      ExtendedResourceClasses(classes->value("items", json::array()).get<std::vector<json>>());
  if (!mapping.ok()) return mapping.status();
  absl::StatusOr<json> node_object = api.get(Cat("/api/v1/nodes/", node));
  if (!node_object.ok()) return node_object.status();
  absl::StatusOr<ExtendedRequests> planned = PlanExtendedRequests(
      pod, *mapping, node_object->value("/status/allocatable"_json_pointer, json::object()));
  if (!planned.ok()) return planned.status();
  if (planned->mappings.empty()) return ExtendedResourceClaim{std::nullopt, {}};
  // generateName: the base cut so that base and suffix fit a name of 63 characters.
  const std::string base = Cat(pod.name, "-extended-resources-").substr(0, 58);
  const json claim = {
      {"apiVersion", "resource.k8s.io/v1"},
      {"kind", "ResourceClaim"},
      {"metadata",
       {{"name", Cat(base, NameSuffix(rng))},
        {"namespace", pod.name_space},
        {"annotations", {{std::string(kExtendedResourceClaimAnnotation), "true"}}}}},
      {"spec", {{"devices", {{"requests", planned->requests}}}}}};
  absl::StatusOr<json> made =
      api.post(Cat(kResourceApi, "/namespaces/", pod.name_space, "/resourceclaims"), claim);
  if (!made.ok()) return made.status();
  absl::StatusOr<json> allocated =
      ScheduleClaim(api, pod.name_space, claim["metadata"]["name"].get<std::string>(), node);
  if (!allocated.ok()) return allocated.status();
  return ExtendedResourceClaim{*std::move(allocated), planned->mappings};
}

}  // namespace neuron::sim::scheduler
