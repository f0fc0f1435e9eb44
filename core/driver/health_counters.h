#pragma once
// The counter files whose rise is health evidence (docs/architecture.md#health), named one by one
// by their typed handles, so that a counter added to core/driver/counters.h never becomes evidence
// unreviewed: the uncorrected ECC counters of every generation, and where the tree has them the
// driver's health_status/ counts of uncorrected errors
// (docs/driver-interface.md#driver-generations). Not evidence: hw_error_event (it counts register
// changes, a repair's too) and the corrected-ECC counters, whose meaning no driver source defines
// (docs/metrics.md#health-metrics).
//
// Pure data; thread-safe.

#include <array>
#include <optional>
#include <string_view>

#include "core/driver/counters.h"
#include "core/driver/driver_generations.h"
#include "core/driver/sysfs_files.h"

namespace neuron {

struct HealthEvidenceFile {
  std::string_view dir;            // under neuronN/
  std::string_view name;           // a file of `dir`
  std::optional<NodeGroup> group;  // needed in the device's tree; none: every generation
};

inline constexpr std::array<HealthEvidenceFile, 6> kHealthEvidence{{
    {sysfs::kHardwareDir, Name(HardwareCounter::sram_ecc_uncorrected), std::nullopt},
    {sysfs::kHardwareDir, Name(HardwareCounter::mem_ecc_uncorrected), std::nullopt},
    {sysfs::kHardwareDir, Name(HardwareCounter::mem_ecc_repairable_uncorrected), std::nullopt},
    {sysfs::kHealthStatusDir, Name(HealthStatusCounter::hbm_ecc_err_count),
     NodeGroup::kHealthStatus},
    {sysfs::kHealthStatusDir, Name(HealthStatusCounter::repairable_hbm_ecc_err_count),
     NodeGroup::kHealthStatus},
    {sysfs::kHealthStatusDir, Name(HealthStatusCounter::sram_ecc_err_count),
     NodeGroup::kHealthStatus},
}};

}  // namespace neuron
