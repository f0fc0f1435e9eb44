#include "core/driver/device_attributes.h"

#include <charconv>

namespace neuron {

const std::optional<std::string>& DeviceAttributes::Get(std::string_view key) const {
  static const std::optional<std::string> kAbsent;
  for (size_t i = 0; i < kDeviceAttributes.size(); ++i) {
    if (kDeviceAttributes[i].key == key) return values_[i];
  }
  return kAbsent;
}

std::optional<int64_t> DeviceAttributes::AsInt(size_t row) const {
  const std::optional<std::string>& v = values_.at(row);
  if (!v) return std::nullopt;
  const std::string_view text = *v;
  int64_t n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return n;
}

}  // namespace neuron
