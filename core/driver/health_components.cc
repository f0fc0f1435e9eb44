#include "core/driver/health_components.h"

#include <algorithm>

#include "core/base/text.h"

namespace neuron {

std::optional<HealthComponent> HealthComponentNamed(std::string_view name) {
  const auto it = std::find(kHealthComponentNames.begin(), kHealthComponentNames.end(), name);
  if (it == kHealthComponentNames.end()) return std::nullopt;
  return static_cast<HealthComponent>(it - kHealthComponentNames.begin());
}

std::vector<HealthComponent> HealthComponents::List() const {
  std::vector<HealthComponent> out;
  for (size_t i = 0; i < kHealthComponentNames.size(); ++i) {
    const auto c = static_cast<HealthComponent>(i);
    if (Has(c)) out.push_back(c);
  }
  return out;
}

std::string HealthComponents::Join(std::string_view separator) const {
  std::string out;
  for (HealthComponent c : List()) {
    if (!out.empty()) out += separator;
    out += HealthComponentName(c);
  }
  return out;
}

ParsedComponents ParseHealthComponents(std::string_view text) {
  ParsedComponents out;
  for (std::string_view piece : Split(text, ',')) {
    const std::string_view word = TrimSpace(piece);
    if (word.empty()) continue;
    if (std::optional<HealthComponent> c = HealthComponentNamed(word)) {
      out.known.Add(*c);
    } else {
      out.unknown.emplace_back(word);
    }
  }
  return out;
}

}  // namespace neuron
