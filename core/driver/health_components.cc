#include "core/driver/health_components.h"

#include <algorithm>

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

namespace {

// `s` without the ASCII whitespace (space, tab, newline, CR) at either end. The driver room links
// no other room (core/README.md#arrows), so not core/base's text helpers.
std::string_view TrimSpace(std::string_view s) {
  constexpr std::string_view kSpace = " \t\n\r";
  const size_t first = s.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(kSpace) - first + 1);
}

}  // namespace

ParsedComponents ParseHealthComponents(std::string_view text) {
  ParsedComponents out;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view word = TrimSpace(text.substr(0, comma));
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
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
