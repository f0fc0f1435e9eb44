#include "core/model/device_id.h"

#include <fmt/format.h>

#include <algorithm>

#include "absl/strings/ascii.h"

namespace neuron {

std::string_view ResourceName(Resource r) {
  switch (r) {
    case Resource::kNeuron:
      return kResourceNeuron;
    case Resource::kNeuronCore:
      return kResourceNeuronCore;
    case Resource::kEfa:
      return kResourceEfa;
    case Resource::kNeuronDevice:
      return kResourceNeuronDevice;
  }
  return "";
}

absl::StatusOr<Resource> ParseResourceName(std::string_view name) {
  for (Resource r :
       {Resource::kNeuron, Resource::kNeuronCore, Resource::kEfa, Resource::kNeuronDevice}) {
    if (ResourceName(r) == name) return r;
  }
  return absl::InvalidArgumentError(fmt::format("unknown resource name '{}'", name));
}

std::string IndexId(int index) { return std::to_string(index); }

absl::StatusOr<int> ParseIndexId(std::string_view id, int limit) {
  const bool digits_only = !id.empty() && id.size() <= 9 &&
                           std::all_of(id.begin(), id.end(), absl::ascii_isdigit) &&
                           !(id.size() > 1 && id[0] == '0');
  if (!digits_only) {
    return absl::InvalidArgumentError(fmt::format("device ID '{}' is not a decimal index", id));
  }
  int value = 0;
  for (char c : id) value = value * 10 + (c - '0');
  if (value >= limit) {
    return absl::OutOfRangeError(
        fmt::format("device ID '{}' is out of range (at most {})", id, limit - 1));
  }
  return value;
}

absl::Status ValidateEfaId(std::string_view id) {
  const bool ok = !id.empty() && id.size() <= 64 && std::all_of(id.begin(), id.end(), [](char c) {
    return absl::ascii_isalnum(c) || c == '_';
  });
  if (!ok) return absl::InvalidArgumentError(fmt::format("'{}' is not an EFA device name", id));
  return absl::OkStatus();
}

}  // namespace neuron
