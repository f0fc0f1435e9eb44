#include "core/base/duration.h"

#include <charconv>
#include <cstdint>
#include <limits>

#include "fmt/format.h"

namespace neuron {

absl::StatusOr<std::chrono::milliseconds> ParseDuration(std::string_view text) {
  int64_t value = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  const std::string_view unit(ptr, text.data() + text.size() - ptr);
  if (ec != std::errc() || value < 0 || ptr == text.data()) {
    return absl::InvalidArgumentError(
        fmt::format("'{}' is not a duration (e.g. 250ms, 1s, 2m)", text));
  }
  // "9223372036854775807m" must not wrap around to a negative duration.
  const int64_t scale = unit.empty() || unit == "ms" ? 1
                        : unit == "s"                ? 1000
                        : unit == "m"                ? 60000
                                                     : 0;
  if (scale != 0 && value > std::numeric_limits<int64_t>::max() / scale) {
    return absl::InvalidArgumentError(fmt::format("'{}' is too long a duration", text));
  }
  if (scale != 0) return std::chrono::milliseconds(value * scale);
  return absl::InvalidArgumentError(
      fmt::format("'{}' has an unknown unit '{}' (ms, s or m)", text, unit));
}

absl::StatusOr<std::chrono::milliseconds> ParseDurationIn(std::string_view text,
                                                          std::chrono::milliseconds min,
                                                          std::chrono::milliseconds max,
                                                          std::string_view range) {
  absl::StatusOr<std::chrono::milliseconds> d = ParseDuration(text);
  if (!d.ok()) return d.status();
  if (*d < min || *d > max) {
    return absl::OutOfRangeError(fmt::format("'{}' is out of range: {}", text, range));
  }
  return d;
}

}  // namespace neuron
