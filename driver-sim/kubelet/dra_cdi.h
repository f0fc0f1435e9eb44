#pragma once
// The container runtime's CDI injection, for the emulator (not a public header): CDI device IDs
// ("vendor/class=name") resolved against the spec files in a CDI directory and turned into what
// the container gets. Written from the CDI specification (cncf-tags/container-device-interface
// SPEC.md: cdiVersion, kind, devices[].name, devices[].containerEdits, containerEdits; env as
// "KEY=VALUE"; deviceNodes {path, hostPath (default: path), permissions (default "rwm")}) and
// pkg/cdi's injection ("unresolvable CDI devices ..." when an ID has no spec). Only JSON specs
// (*.json) are read; a spec file that does not parse is skipped and logged, as the CDI cache
// records it and carries on.

#include <spdlog/spdlog.h>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "driver-sim/kubelet/kubelet_emulator.h"
#include "nlohmann/json.hpp"

namespace neuron::sim {

struct CdiEdits {
  std::vector<std::pair<std::string, std::string>> env;  // in the order the edits give them
  std::vector<DeviceSpecOut> devices;
  bool operator==(const CdiEdits&) const = default;
};

// Appends one CDI containerEdits object's env and deviceNodes to `out` (throws
// nlohmann::json::exception on a malformed one); and the inverse, for the emulator's checkpoint.
void AppendCdiEdits(const nlohmann::json& edits, CdiEdits& out);
nlohmann::json CdiEditsJson(const CdiEdits& edits);

// The edits of `ids`: for each spec involved its containerEdits once, then each device's own.
// FailedPrecondition "unresolvable CDI devices ID, ..." naming every ID without a device.
absl::StatusOr<CdiEdits> ResolveCdiDevices(const std::filesystem::path& cdi_dir,
                                           const std::vector<std::string>& ids,
                                           spdlog::logger& log);

}  // namespace neuron::sim
