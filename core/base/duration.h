#pragma once
// Durations as people write them in flags and config files ("250ms", "2s", "1m"), parsed once for
// every binary: the plugin's config file and neuron-dra-api's --lease-* flags accept the same
// forms and answer a bad one with the same message.
//
// Pure functions; thread-safe.

#include <chrono>
#include <string_view>

#include "absl/status/statusor.h"

namespace neuron {

// "250ms", "1s", "2m" or a bare number of milliseconds.
absl::StatusOr<std::chrono::milliseconds> ParseDuration(std::string_view text);

// A duration within [min, max]; out of it, OutOfRange saying `range` (what must hold).
absl::StatusOr<std::chrono::milliseconds> ParseDurationIn(std::string_view text,
                                                          std::chrono::milliseconds min,
                                                          std::chrono::milliseconds max,
                                                          std::string_view range);

}  // namespace neuron
