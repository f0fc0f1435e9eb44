// The API's rules for the pool's slices (plugin/dra/slice.h CheckPool): what the API server's
// validation of a resource.k8s.io/v1 ResourceSlice refuses, checked before publishing, so that a
// refused slice is an error the plugin names rather than a pool the scheduler never sees.
// Limits: kubernetes/kubernetes staging/src/k8s.io/api/resource/v1/types.go (the constants named
// in the messages).

#include <algorithm>
#include <map>
#include <set>

#include "fmt/format.h"
#include "plugin/dra/slice.h"

namespace neuron::plugin::dra {
namespace {

using nlohmann::json;
using CounterSets = std::map<std::string, std::set<std::string>, std::less<>>;

absl::Status Refused(size_t slice, std::string_view what) {
  return absl::InvalidArgumentError(fmt::format("slice {}: {}", slice, what));
}

absl::Status CheckAttributes(const std::string& device, const json& attributes, size_t capacities) {
  if (attributes.size() + capacities > kMaxAttributesPerDevice) {
    return absl::InvalidArgumentError(
        fmt::format("device {}: {} attributes and capacities, the API allows {}", device,
                    attributes.size() + capacities, kMaxAttributesPerDevice));
  }
  for (const auto& [name, value] : attributes.items()) {
    const size_t slash = name.rfind('/');
    const std::string id = slash == std::string::npos ? name : name.substr(slash + 1);
    if (id.empty() || id.size() > kMaxAttributeIdLength) {
      return absl::InvalidArgumentError(
          fmt::format("device {}: attribute name '{}' breaks the API's rules", device, name));
    }
    if (value.contains("string") &&
        value["string"].get<std::string>().size() > kMaxStringValueLength) {
      return absl::InvalidArgumentError(
          fmt::format("device {}: attribute {} is longer than {} characters", device, name,
                      kMaxStringValueLength));
    }
  }
  return absl::OkStatus();
}

// sharedCounters of slice `k`: at most 8 sets of 1-32 counters, names DNS labels, set names
// unique in the pool (they are referenced by name from any slice of it).
absl::Status CheckCounterSets(size_t k, const json& sets, CounterSets* out) {
  if (!sets.is_array() || sets.empty() || sets.size() > kMaxCounterSetsPerSlice) {
    return Refused(k, fmt::format("{} counter sets; a ResourceSlice holds 1 to {} "
                                  "(ResourceSliceMaxCounterSets)",
                                  sets.size(), kMaxCounterSetsPerSlice));
  }
  for (const json& set : sets) {
    const std::string name = set.value("name", "");
    if (absl::Status s = ValidateDnsLabel("counter set name", name); !s.ok()) return s;
    const json& counters = set.at("counters");
    if (counters.empty() || counters.size() > kMaxCountersPerSet) {
      return Refused(k, fmt::format("counter set {} has {} counters; a set holds 1 to {} "
                                    "(ResourceSliceMaxCountersPerCounterSet)",
                                    name, counters.size(), kMaxCountersPerSet));
    }
    auto [it, fresh] = out->emplace(name, std::set<std::string>{});
    if (!fresh) return Refused(k, fmt::format("counter set {} is defined twice in the pool", name));
    for (const auto& [counter, value] : counters.items()) {
      if (absl::Status s = ValidateDnsLabel("counter name", counter); !s.ok()) return s;
      it->second.insert(counter);
    }
  }
  return absl::OkStatus();
}

// One device's consumesCounters: at most 2 consumptions of 1-32 counters, each a counter of a
// set the pool defines.
absl::Status CheckConsumption(size_t k, const std::string& device, const json& consumes,
                              const CounterSets& sets) {
  if (consumes.size() > kMaxConsumptionsPerDevice) {
    return Refused(k, fmt::format("device {} has {} counter consumptions; a device has at most {} "
                                  "(ResourceSliceMaxDeviceCounterConsumptionsPerDevice)",
                                  device, consumes.size(), kMaxConsumptionsPerDevice));
  }
  for (const json& c : consumes) {
    const std::string set = c.value("counterSet", "");
    const auto it = sets.find(set);
    if (it == sets.end()) {
      return Refused(k, fmt::format("device {} consumes from counter set '{}', which the pool "
                                    "does not define",
                                    device, set));
    }
    const json& counters = c.at("counters");
    if (counters.empty() || counters.size() > kMaxCountersPerConsumption) {
      return Refused(k, fmt::format("device {} consumes {} counters at once; a consumption holds "
                                    "1 to {} (ResourceSliceMaxCountersPerDeviceCounterConsumption)",
                                    device, counters.size(), kMaxCountersPerConsumption));
    }
    for (const auto& [counter, value] : counters.items()) {
      if (!it->second.count(counter)) {
        return Refused(k, fmt::format("device {} consumes counter {}, which set {} does not hold",
                                      device, counter, set));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CheckDevices(size_t k, const json& devices, const CounterSets& sets,
                          std::set<std::string>* names) {
  if (devices.size() > kMaxDevicesPerSlice) {
    return Refused(k, fmt::format("{} devices; a ResourceSlice holds at most {} "
                                  "(ResourceSliceMaxDevices)",
                                  devices.size(), kMaxDevicesPerSlice));
  }
  const bool limited = std::any_of(devices.begin(), devices.end(), [](const json& d) {
    return d.contains("taints") || d.contains("consumesCounters");
  });
  if (limited && devices.size() > kMaxDevicesPerSliceWithTaints) {
    return Refused(k, fmt::format("{} devices with a taint or counter consumption among them; such "
                                  "a ResourceSlice holds at most {} "
                                  "(ResourceSliceMaxDevicesWithTaintsOrConsumesCounters)",
                                  devices.size(), kMaxDevicesPerSliceWithTaints));
  }
  for (const json& d : devices) {
    const std::string name = d["name"].get<std::string>();
    if (absl::Status s = ValidateDnsLabel("device name", name); !s.ok()) return s;
    if (!names->insert(name).second) {
      return Refused(k, fmt::format("device {} is twice in the pool", name));
    }
    const size_t capacities = d.contains("capacity") ? d["capacity"].size() : 0;
    if (absl::Status s = CheckAttributes(name, d["attributes"], capacities); !s.ok()) return s;
    if (d.contains("consumesCounters")) {
      if (absl::Status s = CheckConsumption(k, name, d["consumesCounters"], sets); !s.ok()) {
        return s;
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateDnsLabel(std::string_view what, std::string_view name) {
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  const bool ok =
      !name.empty() && name.size() <= kMaxDnsLabelLength && alnum(name.front()) &&
      alnum(name.back()) &&
      std::all_of(name.begin(), name.end(), [&](char c) { return alnum(c) || c == '-'; });
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(fmt::format(
      "{} '{}' is not a DNS label (1-63 of a-z, 0-9 and '-', alphanumeric at both ends)", what,
      name));
}

absl::Status ValidateDnsSubdomain(std::string_view what, std::string_view name) {
  if (name.empty() || name.size() > 253) {
    return absl::InvalidArgumentError(fmt::format("{} '{}' is not 1-253 characters", what, name));
  }
  size_t start = 0;
  while (start <= name.size()) {
    size_t dot = name.find('.', start);
    if (dot == std::string_view::npos) dot = name.size();
    if (absl::Status s = ValidateDnsLabel(what, name.substr(start, dot - start)); !s.ok()) {
      return absl::InvalidArgumentError(
          fmt::format("{} '{}' is not a DNS subdomain (dot-separated DNS labels)", what, name));
    }
    start = dot + 1;
  }
  return absl::OkStatus();
}

absl::Status CheckPool(const std::vector<json>& slices) {
  CounterSets sets;
  for (size_t k = 0; k < slices.size(); ++k) {
    const bool devices = slices[k].contains("devices");
    const bool counters = slices[k].contains("sharedCounters");
    if (devices == counters) {
      return Refused(k,
                     "holds both or neither of devices and sharedCounters (types.go: only one "
                     "of Devices and SharedCounters can be set in a ResourceSlice)");
    }
    if (counters) {
      if (absl::Status s = CheckCounterSets(k, slices[k]["sharedCounters"], &sets); !s.ok()) {
        return s;
      }
    }
  }
  std::set<std::string> names;
  for (size_t k = 0; k < slices.size(); ++k) {
    if (!slices[k].contains("devices")) continue;
    if (absl::Status s = CheckDevices(k, slices[k]["devices"], sets, &names); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace neuron::plugin::dra
