#pragma once
// Joining and splitting text. Debian's Abseil is built with its own string_view, so absl::StrCat
// and absl::StrSplit do not take std::string_view; these stand in for them wherever we build
// messages and paths from std::string_view pieces.
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "fmt/format.h"

namespace neuron {

// The pieces, each formatted as fmt's "{}" does, one after another.
template <typename... Pieces>
std::string Cat(const Pieces&... pieces) {
  std::string out;
  (fmt::format_to(std::back_inserter(out), "{}", pieces), ...);
  return out;
}

// `s` cut at every `sep`: n separators give n + 1 pieces, empty ones included.
inline std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  for (size_t start = 0;;) {
    const size_t end = s.find(sep, start);
    out.push_back(s.substr(start, end == std::string_view::npos ? end : end - start));
    if (end == std::string_view::npos) return out;
    start = end + 1;
  }
}

}  // namespace neuron
