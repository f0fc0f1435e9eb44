#include "core/base/path_component.h"

#include <algorithm>
#include <string>

#include "fmt/format.h"

namespace neuron {
namespace {

// The name as an error message can show it: printable ASCII kept, every other byte as \xNN.
std::string Escaped(std::string_view name) {
  std::string out;
  for (const char c : name.substr(0, 64)) {
    const auto b = static_cast<unsigned char>(c);
    if (b >= 0x20 && b < 0x7f) {
      out.push_back(c);
    } else {
      out += fmt::format("\\x{:02x}", b);
    }
  }
  if (name.size() > 64) out += "...";
  return out;
}

}  // namespace

absl::Status CheckPathComponent(std::string_view what, std::string_view name) {
  constexpr size_t kNameMax = 255;
  std::string_view why;
  if (name.empty()) {
    why = "is empty";
  } else if (name.size() > kNameMax) {
    why = "is longer than 255 bytes";
  } else if (name.find('/') != std::string_view::npos) {
    why = "holds a '/'";
  } else if (name.find("..") != std::string_view::npos) {
    why = "holds \"..\"";
  } else if (std::any_of(name.begin(), name.end(), [](char c) {
               const auto b = static_cast<unsigned char>(c);
               return b < 0x20 || b == 0x7f;
             })) {
    why = "holds a NUL or control character";
  }
  if (why.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      fmt::format("{} \"{}\" {}: it would become part of a file name, so it may not", what,
                  Escaped(name), why));
}

}  // namespace neuron
