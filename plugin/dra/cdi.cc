#include "plugin/dra/cdi.h"

#include <algorithm>
#include <system_error>

#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "plugin/dra/checkpoint.h"
#include "plugin/dra/device_kinds.h"

namespace neuron::plugin::dra {

namespace fs = std::filesystem;

std::string_view CdiKindOf(std::string_view driver) {
  return driver == kEfaDriverName ? kEfaCdiKind : kCdiKind;
}

std::string CdiId(std::string_view kind, std::string_view claim_uid, std::string_view device) {
  return fmt::format("{}={}-{}", kind, claim_uid, device);
}

fs::path CdiSpecPath(const CdiSpecs& specs, std::string_view claim_uid) {
  // CDI's file naming convention: vendor-class_name (no '/').
  std::string vendor_class(specs.kind);
  std::replace(vendor_class.begin(), vendor_class.end(), '/', '-');
  return specs.dir / fmt::format("{}_{}.json", vendor_class, claim_uid);
}

absl::StatusOr<std::vector<std::string>> WriteCdiSpec(const CdiSpecs& specs,
                                                      std::string_view claim_uid,
                                                      const std::vector<CdiDevice>& devices) {
  nlohmann::json list = nlohmann::json::array();
  std::vector<std::string> ids;
  for (const CdiDevice& d : devices) {
    nlohmann::json nodes = nlohmann::json::array();
    for (const std::string& path : d.device_nodes) nodes.push_back({{"path", path}});
    nlohmann::json edits = {{"deviceNodes", nodes}};
    if (!d.env.empty()) edits["env"] = d.env;
    list.push_back({{"name", fmt::format("{}-{}", claim_uid, d.name)}, {"containerEdits", edits}});
    ids.push_back(CdiId(specs.kind, claim_uid, d.name));
  }
  const nlohmann::json spec = {
      {"cdiVersion", kCdiVersion}, {"kind", specs.kind}, {"devices", list}};
  std::error_code ec;
  fs::create_directories(specs.dir, ec);
  // 0644: the container runtime reads it; it holds no secret.
  // Under /var/run (tmpfs): gone at a reboot whatever we do, so not fsynced.
  if (absl::Status s = WriteFileAtomic(CdiSpecPath(specs, claim_uid), spec.dump(1) + "\n", 0644,
                                       /*durable=*/false);
      !s.ok()) {
    return s;
  }
  return ids;
}

absl::Status RemoveCdiSpec(const CdiSpecs& specs, std::string_view claim_uid) {
  std::error_code ec;
  const fs::path path = CdiSpecPath(specs, claim_uid);
  fs::remove(path, ec);
  if (ec) {
    return absl::InternalError(fmt::format("cannot remove {}: {}", path.string(), ec.message()));
  }
  return absl::OkStatus();
}

}  // namespace neuron::plugin::dra
