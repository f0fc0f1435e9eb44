#pragma once
// Which Neuron driver the simulator plays (`neuron-sim up --driver-version`,
// driver-sim/README.md#driver-versions) and the parts of the tree that depend on it: every known
// generation as core/driver/driver_generations.h describes it, and "future", a layout invented for
// the tests of the agent's missing-node rule. Used by SimTree (driver-sim internal).
//
// Thread-safe (no shared state).

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/driver/driver_generations.h"
#include "core/model/catalog.h"

namespace neuron::sim {

struct SimDriver {
  std::string name;            // "2.29", "2.30" or "future", as --driver-version gives it
  std::string module_version;  // sys/module/neuron/version: "2.29.0.0"
  NodeGroups groups;           // its optional node groups (before the per-chip filter)
  // The invented future layout: the newest known generation's tree (2.30, with the files its
  // release notes announce: corrected ECC, two more health_status files) with stats/hardware/
  // moved to stats/health/.
  bool future = false;
};

// A known generation's name ("2.24" .. "2.30"), "future", or "" for the newest with public source
// (2.29: 2.30's formats are assumed, so it is played only when asked for).
absl::StatusOr<SimDriver> ParseSimDriver(std::string_view value);
SimDriver NewestSimDriver();
// "2.24, 2.25, ..., 2.30, future", for help and errors.
std::string SimDriverChoices();

// The module version the future layout reports: a release the agent cannot know.
inline constexpr std::string_view kFutureModuleVersion = "2.31.7.0";

// Where the device's stats/hardware/ files lie under its directory: stats/hardware, or
// stats/health in the future layout (invented).
std::filesystem::path HardwareDir(const SimDriver& driver);

// Mode of core_count and connected_devices: 0400, 0444 from 2.28.
mode_t TopologyMode(const SimDriver& driver);

// The class's own attributes (sys/class/neuron_device/) with their values: the UltraServer
// identities `ultraserver_files` (driver/ultraserver.h: an UltraServer node's place, or -1 and
// zeros outside one) on every platform up to 2.26; from 2.27 the platform's set, the UltraServer
// ones only on an UltraServer (`ultraserver_platform`).
std::vector<std::pair<std::string, std::string>> ClassAttributes(
    const SimDriver& driver, bool ultraserver_platform,
    std::vector<std::pair<std::string, std::string>> ultraserver_files);

// Writes the files of the driver's optional node groups into the device directory `dir` that is
// being built (not yet visible), in their post-probe state, then applies the future layout's move.
absl::Status WriteGroupFiles(const std::filesystem::path& dir, const ChipSpec& chip,
                             const SimDriver& driver);

// stats/power/utilization_raw: the header, then a row per die of `chip`: `util_bips` and the
// sample counter when a sample exists, "unavailable" otherwise.
std::string PowerRawText(const ChipSpec& chip, std::optional<uint32_t> util_bips, uint32_t counter);

// Whether a device of `chip` has driver 2.30's health_status/{unhealthy_components,
// healthcheck_heartbeat} (NodeGroup::kHealthComponents: Trn2 and Trn3 only).
bool HasHealthComponents(const ChipSpec& chip, const SimDriver& driver);
// Where the driver's health files lie under the device's directory: stats/hardware/health_status/
// `name`, or under stats/health/ in the future layout. `name` is sysfs::kUnhealthyComponentsName
// or sysfs::kHealthcheckHeartbeatName.
std::filesystem::path HealthFile(const SimDriver& driver, std::string_view name);
// Writes `content` to that file of the device at `device_dir`, whole; FailedPrecondition, naming
// the driver and the chip, where the device has no such file.
absl::Status WriteHealthFile(const std::filesystem::path& device_dir, const ChipSpec& chip,
                             const SimDriver& driver, std::string_view name,
                             std::string_view content);

// Raises the health_status/ files that the driver derives from the same firmware registers as
// stats/hardware/<counter> (one of kHardwareCounters) by `n`, and hw_error_event by one, when
// the device has them (driver 2.28, Trn2). `device_dir` is the device's directory.
absl::Status RaiseHealthStatus(const std::filesystem::path& device_dir, const ChipSpec& chip,
                               const SimDriver& driver, std::string_view counter, uint64_t n);

}  // namespace neuron::sim
