#include "driver-sim/driver/node_info.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "core/base/file_io.h"
#include "driver-sim/driver/sim_paths.h"

namespace neuron {

std::string NodeInfoToJson(const NodeInfo& info) {
  nlohmann::json devices = nlohmann::json::array();
  for (size_t i = 0; i < info.device_bdf.size(); ++i) {
    devices.push_back({{"index", i}, {"bdf", info.device_bdf[i]}});
  }
  const nlohmann::json doc = {{"instance_type", info.instance_type},
                              {"instance_id", info.instance_id},
                              {"node_name", info.node_name},
                              {"lnc", info.lnc},
                              {"devices", devices}};
  return doc.dump(2) + "\n";
}

absl::StatusOr<NodeInfo> ParseNodeInfo(std::string_view json, std::string_view source) {
  const nlohmann::json doc = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  auto bad = [&](std::string_view what) {
    return absl::DataLossError(fmt::format("{}: {}", source, what));
  };
  if (doc.is_discarded() || !doc.is_object()) return bad("not a JSON object");
  NodeInfo info;
  if (!doc.contains("instance_type") || !doc["instance_type"].is_string()) {
    return bad("missing string field instance_type");
  }
  info.instance_type = doc["instance_type"].get<std::string>();
  if (doc.contains("instance_id") && doc["instance_id"].is_string()) {
    info.instance_id = doc["instance_id"].get<std::string>();
  }
  if (doc.contains("node_name") && doc["node_name"].is_string()) {
    info.node_name = doc["node_name"].get<std::string>();
  }
  if (doc.contains("lnc")) {
    if (!doc["lnc"].is_number_integer() || (doc["lnc"] != 1 && doc["lnc"] != 2)) {
      return bad("lnc must be 1 or 2");
    }
    info.lnc = doc["lnc"].get<int>();
  }
  if (!doc.contains("devices") || !doc["devices"].is_array()) return bad("missing array devices");
  for (const nlohmann::json& d : doc["devices"]) {
    if (!d.is_object() || !d.contains("index") || !d["index"].is_number_unsigned() ||
        !d.contains("bdf") || !d["bdf"].is_string()) {
      return bad("each device needs an unsigned index and a string bdf");
    }
    const size_t index = d["index"].get<size_t>();
    if (index >= 64) return bad(fmt::format("device index {} exceeds the driver's 64", index));
    if (info.device_bdf.size() <= index) info.device_bdf.resize(index + 1);
    info.device_bdf[index] = d["bdf"].get<std::string>();
  }
  return info;
}

absl::StatusOr<NodeInfo> ReadNodeInfo(const RootPaths& paths) {
  const std::filesystem::path file = sim::NodeJsonPath(paths);
  absl::StatusOr<std::string> text = ReadAttribute(file);
  if (!text.ok()) return text.status();
  return ParseNodeInfo(*text, file.string());
}

}  // namespace neuron
