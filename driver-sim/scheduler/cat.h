#pragma once
// Message building for the scheduler's errors. Debian's Abseil is built with its own string_view,
// which absl::StrCat does not take from std::string_view, so fmt joins the pieces instead.
#include <iterator>
#include <string>

#include "fmt/format.h"

namespace neuron::sim::scheduler {

template <typename... Pieces>
std::string Cat(const Pieces&... pieces) {
  std::string out;
  (fmt::format_to(std::back_inserter(out), "{}", pieces), ...);
  return out;
}

}  // namespace neuron::sim::scheduler
