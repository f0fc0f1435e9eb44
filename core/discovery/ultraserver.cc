#include "core/discovery/ultraserver.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <string_view>

#include "core/base/file_io.h"

namespace neuron {
namespace {

constexpr std::string_view kBusy = "busy";
constexpr size_t kServerIdDigits = 16;  // "%016llx"

// "1,3,4" to {1, 3, 4}; "" to {}.
absl::StatusOr<std::vector<int>> ParseModes(std::string_view text,
                                            const std::filesystem::path& path) {
  std::vector<int> modes;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view part = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    absl::StatusOr<int64_t> m = ParseI64(part, path);
    if (!m.ok()) return m.status();
    if (*m < kUltraServerModeX4 || *m > kUltraServerModeX1) {
      return absl::InvalidArgumentError(fmt::format(
          "{}: mode {} is not one of 1-4 (neuron_ultraserver_mode)", path.string(), *m));
    }
    modes.push_back(static_cast<int>(*m));
  }
  return modes;
}

bool ValidServerId(std::string_view text) {
  return text.size() == kServerIdDigits &&
         std::all_of(text.begin(), text.end(), [](char c) { return std::isxdigit(c) != 0; });
}

// The node's membership in the `size`-node configuration, if it is in one.
std::optional<UltraServerMembership> ReadMembership(const RootPaths& root, int size,
                                                    const std::vector<int>& modes,
                                                    std::vector<std::string>* warnings) {
  const std::filesystem::path node_file =
      root.NeuronClassDir() / fmt::format("{}{}", sysfs::kUsNodeIdPrefix, size);
  const std::filesystem::path server_file =
      root.NeuronClassDir() / fmt::format("{}{}", sysfs::kUsServerIdPrefix, size);
  absl::StatusOr<std::string> node_text = ReadText(node_file);
  absl::StatusOr<std::string> server_text = ReadText(server_file);
  if (!node_text.ok() || !server_text.ok()) {
    const absl::Status& s = node_text.ok() ? server_text.status() : node_text.status();
    warnings->push_back(std::string{s.message()});
    return std::nullopt;
  }
  // "busy" and "invalid" say the node's id in this configuration is not known.
  if (*node_text == kBusy || *node_text == "invalid") return std::nullopt;
  absl::StatusOr<int64_t> node_id = ParseI64(*node_text, node_file);
  if (!node_id.ok()) {
    warnings->push_back(std::string{node_id.status().message()});
    return std::nullopt;
  }
  if (!ValidServerId(*server_text)) {
    warnings->push_back(fmt::format("{}: malformed value \"{}\" (expected 16 hex digits)",
                                    server_file.string(), server_text->substr(0, 40)));
    return std::nullopt;
  }
  if (*node_id < 0 || *server_text == std::string(kServerIdDigits, '0')) return std::nullopt;
  UltraServerMembership m;
  m.size = size;
  if (size == 4) {
    m.mode = UltraServerModeName(kUltraServerModeX4);
  } else {
    const bool x2h = std::find(modes.begin(), modes.end(), kUltraServerModeX2H) != modes.end();
    m.mode = UltraServerModeName(x2h ? kUltraServerModeX2H : kUltraServerModeX2V);
  }
  m.node_id = static_cast<int>(*node_id);
  m.server_id = *server_text;
  return m;
}

}  // namespace

std::string UltraServerModeName(int mode) {
  switch (mode) {
    case kUltraServerModeX4:
      return "x4";
    case kUltraServerModeX2H:
      return "x2h";
    case kUltraServerModeX2V:
      return "x2v";
    case kUltraServerModeX1:
      return "x1";
    default:
      return "";
  }
}

std::optional<UltraServerInfo> ReadUltraServer(const RootPaths& root,
                                               std::vector<std::string>* warnings) {
  const std::filesystem::path mode_file = root.NeuronClassDir() / sysfs::kUltraserverMode;
  absl::StatusOr<std::string> mode_text = ReadText(mode_file);
  if (absl::IsNotFound(mode_text.status())) return std::nullopt;
  if (!mode_text.ok()) {
    warnings->push_back(std::string{mode_text.status().message()});
    return std::nullopt;
  }
  if (*mode_text == kBusy) {
    warnings->push_back(fmt::format(
        "{}: busy (the driver's UltraServer election is in progress; the node's place in its "
        "UltraServer is unknown until the next rescan)",
        mode_file.string()));
    return std::nullopt;
  }
  absl::StatusOr<std::vector<int>> modes = ParseModes(*mode_text, mode_file);
  if (!modes.ok()) {
    warnings->push_back(std::string{modes.status().message()});
    return std::nullopt;
  }
  UltraServerInfo info;
  info.supported_modes = *modes;
  for (const int size : sysfs::kUsConfigSizes) {
    if (auto m = ReadMembership(root, size, info.supported_modes, warnings)) {
      info.memberships.push_back(std::move(*m));
    }
  }
  return info;
}

}  // namespace neuron
