#pragma once
// The counter files whose rise is health evidence (docs/architecture.md#health), named one by one
// by their typed handles, so that a counter added to core/driver/counters.h never becomes evidence
// unreviewed: the uncorrected ECC counters of every generation, and where the tree has them the
// driver's health_status/ counts of uncorrected errors
// (docs/driver-interface.md#driver-generations). Not evidence: hw_error_event (it counts register
// changes, a repair's too). The corrected-ECC counters are evidence of a degraded device only
// (docs/metrics.md#health-metrics).
//
// Pure data; thread-safe.

#include <array>
#include <optional>
#include <string_view>

#include "core/driver/counters.h"
#include "core/driver/driver_generations.h"
#include "core/driver/health_components.h"
#include "core/driver/sysfs_files.h"

namespace neuron {

struct HealthEvidenceFile {
  std::string_view dir;            // under neuronN/
  std::string_view name;           // a file of `dir`
  std::optional<NodeGroup> group;  // needed in the device's tree; none: every generation
  HealthComponent component = HealthComponent::kHbm;  // the memory whose errors it counts
};

inline constexpr std::array<HealthEvidenceFile, 6> kHealthEvidence{{
    {sysfs::kHardwareDir, Name(HardwareCounter::sram_ecc_uncorrected), std::nullopt,
     HealthComponent::kSram},
    {sysfs::kHardwareDir, Name(HardwareCounter::mem_ecc_uncorrected), std::nullopt,
     HealthComponent::kHbm},
    {sysfs::kHardwareDir, Name(HardwareCounter::mem_ecc_repairable_uncorrected), std::nullopt,
     HealthComponent::kHbm},
    {sysfs::kHealthStatusDir, Name(HealthStatusCounter::hbm_ecc_err_count),
     NodeGroup::kHealthStatus, HealthComponent::kHbm},
    {sysfs::kHealthStatusDir, Name(HealthStatusCounter::repairable_hbm_ecc_err_count),
     NodeGroup::kHealthStatus, HealthComponent::kHbm},
    {sysfs::kHealthStatusDir, Name(HealthStatusCounter::sram_ecc_err_count),
     NodeGroup::kHealthStatus, HealthComponent::kSram},
}};

// The corrected-ECC counters (driver 2.30.2 notes), in kEccCorrected's order: evidence of a
// degraded device only (docs/metrics.md#health-metrics).
inline constexpr std::array<HealthEvidenceFile, 2> kDegradedEvidence{{
    {sysfs::kHardwareDir, Name(EccCorrectedCounter::sram_ecc_corrected), NodeGroup::kEccCorrected,
     HealthComponent::kSram},
    {sysfs::kHardwareDir, Name(EccCorrectedCounter::mem_ecc_corrected), NodeGroup::kEccCorrected,
     HealthComponent::kHbm},
}};

}  // namespace neuron
