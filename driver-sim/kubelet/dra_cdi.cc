// CDI spec reading and injection (dra_cdi.h).
#include "driver-sim/kubelet/dra_cdi.h"

#include <fmt/format.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "nlohmann/json.hpp"

namespace neuron::sim {

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// One parsed spec file: its kind, its own edits and its devices' edits by name. Only built inside
// ReadSpecs' try block, so a throwing member constructor is caught there.
struct Spec {  // NOLINT(bugprone-exception-escape)
  std::string kind;
  json edits;
  std::map<std::string, json> devices;
};

std::vector<Spec> ReadSpecs(const fs::path& dir, spdlog::logger& log) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() == ".json") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  std::vector<Spec> specs;
  for (const fs::path& file : files) {
    std::ifstream in(file);
    std::stringstream text;
    text << in.rdbuf();
    const json doc = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
    try {
      if (doc.is_discarded()) throw std::runtime_error("not JSON");
      Spec spec;
      if (!doc.at("cdiVersion").is_string()) throw std::runtime_error("no cdiVersion");
      spec.kind = doc.at("kind").get<std::string>();
      spec.edits = doc.value("containerEdits", json::object());
      for (const json& d : doc.at("devices")) {
        spec.devices[d.at("name").get<std::string>()] = d.value("containerEdits", json::object());
      }
      specs.push_back(std::move(spec));
    } catch (const std::exception& e) {
      log.error("CDI: skipping spec {}: {}", file.string(), e.what());
    }
  }
  return specs;
}

}  // namespace

void AppendCdiEdits(const json& edits, CdiEdits& out) {
  for (const json& e : edits.value("env", json::array())) {
    const std::string kv = e.get<std::string>();
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) continue;  // not KEY=VALUE: ignored
    out.env.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
  }
  for (const json& n : edits.value("deviceNodes", json::array())) {
    const std::string path = n.at("path").get<std::string>();
    out.devices.push_back({path, n.value("hostPath", path), n.value("permissions", "rwm")});
  }
}

json CdiEditsJson(const CdiEdits& edits) {
  json env = json::array();
  for (const auto& [k, v] : edits.env) env.push_back(fmt::format("{}={}", k, v));
  json nodes = json::array();
  for (const DeviceSpecOut& d : edits.devices) {
    nodes.push_back(
        {{"path", d.container_path}, {"hostPath", d.host_path}, {"permissions", d.permissions}});
  }
  return {{"env", env}, {"deviceNodes", nodes}};
}

absl::StatusOr<CdiEdits> ResolveCdiDevices(const fs::path& cdi_dir,
                                           const std::vector<std::string>& ids,
                                           spdlog::logger& log) {
  const std::vector<Spec> specs = ReadSpecs(cdi_dir, log);
  std::vector<std::pair<const Spec*, const json*>> found;
  std::vector<std::string> unresolved;
  for (const std::string& id : ids) {
    const size_t eq = id.find('=');
    const std::string kind = eq == std::string::npos ? "" : id.substr(0, eq);
    const std::string name = eq == std::string::npos ? "" : id.substr(eq + 1);
    const json* device = nullptr;
    const Spec* owner = nullptr;
    for (const Spec& s : specs) {
      if (s.kind != kind) continue;
      if (auto it = s.devices.find(name); it != s.devices.end()) {
        device = &it->second;
        owner = &s;
      }
    }
    if (device == nullptr) {
      unresolved.push_back(id);
    } else {
      found.emplace_back(owner, device);
    }
  }
  if (!unresolved.empty()) {
    std::string list;
    for (const std::string& id : unresolved) list += (list.empty() ? "" : ", ") + id;
    return absl::FailedPreconditionError(fmt::format("unresolvable CDI devices {}", list));
  }
  CdiEdits out;
  try {
    std::set<const Spec*> applied;
    for (const auto& [spec, device] : found) {
      if (applied.insert(spec).second) AppendCdiEdits(spec->edits, out);
    }
    for (const auto& [spec, device] : found) AppendCdiEdits(*device, out);
  } catch (const json::exception& e) {
    return absl::FailedPreconditionError(fmt::format("CDI: bad containerEdits: {}", e.what()));
  }
  return out;
}

}  // namespace neuron::sim
