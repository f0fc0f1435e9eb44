#pragma once
// Reading samples out of Prometheus text exposition, for tests. Header-only; thread-safe.

#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace neuron::testing {

// The value of the one sample `series` (name{labels} exactly as rendered), or nullopt.
inline std::optional<double> SampleValue(const std::string& text, const std::string& series) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  }
  return std::nullopt;
}

// The lines of `text` that start with `prefix`.
inline std::vector<std::string> LinesStartingWith(const std::string& text,
                                                  const std::string& prefix) {
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(prefix, 0) == 0) out.push_back(line);
  }
  return out;
}

}  // namespace neuron::testing
