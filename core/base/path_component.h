#pragma once
// Names from outside the agent (DMI, a config value, the hostname) that become part of a file name
// we create or remove. Pure functions; thread-safe.

#include <string_view>

#include "absl/status/status.h"

namespace neuron {

// OK when `name` can be used as (part of) one path component: non-empty, at most 255 bytes (the
// kernel's NAME_MAX), and holding no '/', no "..", no NUL and no control character (C0, DEL).
// The error names `what` ("--socket-suffix") and shows the name with its bytes escaped.
absl::Status CheckPathComponent(std::string_view what, std::string_view name);

}  // namespace neuron
