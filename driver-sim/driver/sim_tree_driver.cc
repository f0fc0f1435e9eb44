#include "driver-sim/driver/sim_tree_driver.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "core/base/file_io.h"
#include "core/driver/health_counters.h"
#include "core/driver/sysfs_names.h"
#include "driver-sim/driver/sim_tree.h"
#include "driver-sim/driver/sim_tree_fs.h"

namespace neuron::sim {
namespace {

namespace fs = std::filesystem;

// Made up: the driver prints the firmware's numbers, which no public source gives. 7 is the
// newest API version the 2.29 source tests for (readless reads on v3; health_status assumes 6).
constexpr uint32_t kSimFwApiVersion = 7;
constexpr uint32_t kSimFwBuild = 1048576;

// The invented directory stats/hardware/ moves to in the future layout (driver-sim/README.md).
constexpr std::string_view kFutureHardwareDir = "stats/health";

// Dice per device by info/architecture/instance_type (DRV v2/v3/v4 address_map.h
// V<n>_NUM_DIE_PER_DEVICE: v2 1, v3 and v4 2); utilization_raw has a row per die.
int Dice(const ChipSpec& chip) {
  return chip.instance_type == "Trn2" || chip.instance_type == "Trn3" ? 2 : 1;
}

bool HasHealthStatus(const ChipSpec& chip, const SimDriver& driver) {
  return driver.groups.Has(NodeGroup::kHealthStatus) &&
         GroupOnChip(NodeGroup::kHealthStatus, chip.instance_type);
}

uint64_t ReadOrZero(const fs::path& file) {
  absl::StatusOr<uint64_t> v = ReadU64(file);
  return v.ok() ? *v : 0;
}

}  // namespace

absl::StatusOr<SimDriver> ParseSimDriver(std::string_view value) {
  if (value.empty()) return NewestSimDriver();
  if (value == "future") {
    return SimDriver{"future", std::string(kFutureModuleVersion), NewestGeneration().groups, true};
  }
  if (const DriverGeneration* g = GenerationNamed(value)) {
    return SimDriver{std::string(g->name), std::string(g->source_version), g->groups, false};
  }
  return absl::InvalidArgumentError(
      fmt::format("unknown driver version '{}'; known: {}", value, SimDriverChoices()));
}

SimDriver NewestSimDriver() {
  const DriverGeneration& g = NewestSourcedGeneration();
  return SimDriver{std::string(g.name), std::string(g.source_version), g.groups, false};
}

std::string SimDriverChoices() {
  std::string out;
  for (const DriverGeneration& g : KnownGenerations()) out += fmt::format("{}, ", g.name);
  return out + "future";
}

fs::path HardwareDir(const SimDriver& driver) {
  return driver.future ? fs::path(kFutureHardwareDir) : fs::path(sysfs::kHardwareDir);
}

bool HasHealthComponents(const ChipSpec& chip, const SimDriver& driver) {
  return driver.groups.Has(NodeGroup::kHealthComponents) &&
         GroupOnChip(NodeGroup::kHealthComponents, chip.instance_type);
}

fs::path HealthFile(const SimDriver& driver, std::string_view name) {
  return HardwareDir(driver) / sysfs::part::kHealthStatus / name;
}

absl::Status WriteHealthFile(const fs::path& device_dir, const ChipSpec& chip,
                             const SimDriver& driver, std::string_view name,
                             std::string_view content) {
  if (!HasHealthComponents(chip, driver)) {
    return absl::FailedPreconditionError(fmt::format("driver {} on {} has no health_status/{}",
                                                     driver.name, chip.instance_type, name));
  }
  return WriteFileAtomic(device_dir / HealthFile(driver, name), content, kReadOnly);
}

mode_t TopologyMode(const SimDriver& driver) {
  return driver.groups.Has(NodeGroup::kReadableTopology) ? 0444 : 0400;
}

std::vector<std::pair<std::string, std::string>> ClassAttributes(
    const SimDriver& driver, bool ultraserver_platform,
    std::vector<std::pair<std::string, std::string>> ultraserver_files) {
  std::vector<std::pair<std::string, std::string>> out;
  const bool by_platform = driver.groups.Has(NodeGroup::kPlatformClassAttrs);
  if (!by_platform || ultraserver_platform) out = std::move(ultraserver_files);
  if (by_platform) {
    // No device supports HBM at 7200 on v2; unverified on v3. Profile 0 is the default.
    out.emplace_back(sysfs::kHbm7200Capable, "0\n");
    out.emplace_back(sysfs::kCurrentPerfProfile, "0\n");
  }
  return out;
}

absl::Status WriteGroupFiles(const fs::path& dir, const ChipSpec& chip, const SimDriver& driver) {
  const NodeGroups& g = driver.groups;
  if (g.Has(NodeGroup::kFwApiVersion)) {
    SIM_RETURN_IF_ERROR(
        WriteNewFile(dir / sysfs::kFwApiVersion, fmt::format("{}\n", kSimFwApiVersion), kReadOnly));
  }
  if (g.Has(NodeGroup::kFwBuild)) {
    SIM_RETURN_IF_ERROR(
        WriteNewFile(dir / sysfs::kFwBuild, fmt::format("{}\n", kSimFwBuild), kReadOnly));
  }
  if (HasHealthStatus(chip, driver)) {
    for (std::string_view f : kHealthStatusFiles) {
      SIM_RETURN_IF_ERROR(WriteNewFile(dir / sysfs::kHealthStatusDir / f, "0\n", kReadOnly));
    }
    if (HasHealthComponents(chip, driver)) {  // content assumed: the notes give no format
      SIM_RETURN_IF_ERROR(WriteNewFile(dir / sysfs::kUnhealthyComponents, "\n", kReadOnly));
      SIM_RETURN_IF_ERROR(WriteNewFile(dir / sysfs::kHealthcheckHeartbeat, "0\n", kReadOnly));
    }
  }
  if (g.Has(NodeGroup::kUtilizationRaw)) {
    SIM_RETURN_IF_ERROR(WriteNewFile(dir / sysfs::kPowerUtilizationRaw,
                                     PowerRawText(chip, std::nullopt, 0), kMetric));
  }
  // Every health counter row of a group this driver writes on this chip, at 0
  // (core/driver/health_counters.h): a new row's file is in the tree without a line here.
  const NodeGroups on_chip = GroupsOnChip(g, chip.instance_type);
  for (const HealthCounter& c : kHealthCounters) {
    const fs::path file = dir / c.dir / c.name;
    if (!c.group || !on_chip.Has(*c.group) || fs::exists(file)) continue;
    SIM_RETURN_IF_ERROR(WriteNewFile(file, "0\n", kMetric));
  }
  if (driver.future) return RenamePath(dir / sysfs::kHardwareDir, dir / HardwareDir(driver));
  return absl::OkStatus();
}

std::string PowerRawText(const ChipSpec& chip, std::optional<uint32_t> util_bips,
                         uint32_t counter) {
  std::string out = "die,util_bips,counter\n";
  for (int die = 0; die < Dice(chip); ++die) {
    out += util_bips ? fmt::format("{},{},{}\n", die, *util_bips, counter & 0xffff)
                     : fmt::format("{},unavailable\n", die);
  }
  return out;
}

absl::Status RaiseHealthStatus(const fs::path& device_dir, const ChipSpec& chip,
                               const SimDriver& driver, std::string_view counter, uint64_t n) {
  if (!HasHealthStatus(chip, driver) || n == 0) return absl::OkStatus();
  // DRV nsysfsmetric_show_cached_values_metrics: HBM UE = four 4-bit register fields (plus one
  // for a failed repair), repairable = four 12-bit fields, SRAM = the low 16 bits. How the fields
  // behave when full is unknown: the model stops at their sum.
  struct Derived {
    HardwareCounter from;
    HealthStatusCounter file;
    uint64_t limit;
    bool wraps;
  };
  using H = HealthStatusCounter;
  constexpr std::array<Derived, 3> kDerived{{
      {HardwareCounter::mem_ecc_uncorrected, H::hbm_ecc_err_count, uint64_t{4} * 0xf, false},
      {HardwareCounter::mem_ecc_repairable_uncorrected, H::repairable_hbm_ecc_err_count,
       uint64_t{4} * 0xfff, false},
      {HardwareCounter::sram_ecc_uncorrected, H::sram_ecc_err_count, 0xffff, true},
  }};
  const fs::path dir = device_dir / HardwareDir(driver) / sysfs::part::kHealthStatus;
  for (const Derived& d : kDerived) {
    if (Name(d.from) != counter) continue;
    const fs::path file = dir / Name(d.file);
    const uint64_t sum = ReadOrZero(file) + n;
    const uint64_t v = d.wraps ? sum & d.limit : std::min(sum, d.limit);
    SIM_RETURN_IF_ERROR(WriteFileAtomic(file, fmt::format("{}\n", v), kReadOnly));
    const fs::path event = dir / Name(H::hw_error_event);
    return WriteFileAtomic(event, fmt::format("{}\n", ReadOrZero(event) + 1), kReadOnly);
  }
  return absl::OkStatus();
}

}  // namespace neuron::sim
