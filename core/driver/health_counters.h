#pragma once
// The vocabulary of health evidence (docs/architecture.md#health): the classes a health policy
// names, and the counter files whose rise is evidence, a row each with its class and what a rise
// means. core/node/health_evidence.cc polls the rows, core/node/device_health.cc judges them, and
// the simulator's `ctl raise` raises any of them by name: a new counter-based source is a row here,
// its file in core/driver/counters.h and, for a driver not modelled yet, its generation
// (driver_generations.h).
//
// The rows name their files one by one by their typed handles, so that a counter added to
// counters.h never becomes evidence unreviewed: the uncorrected ECC counters of every generation,
// and where the tree has them the driver's health_status/ counts of uncorrected errors
// (docs/driver-interface.md#driver-generations). Not evidence: hw_error_event (it counts register
// changes, a repair's too). The corrected-ECC counters are evidence of a degraded device only
// (docs/metrics.md#health-metrics).
//
// Pure data; thread-safe.

#include <array>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string_view>

#include "core/driver/counters.h"
#include "core/driver/driver_generations.h"
#include "core/driver/health_components.h"
#include "core/driver/sysfs_files.h"

namespace neuron {

// The classes of evidence a policy names (the plugin's health.policy.<class> keys), and their
// names. A class the plugin's policy does not list is `taint` (plugin/config.h).
enum class EvidenceClass : uint8_t {
  kAbsence,       // device or EFA gone (absence is a fault; the driver gone is unknown)
  kState,         // device state not READY, or unreadable
  kEcc,           // uncorrected ECC counters rose (stats/hardware/, health_status/ counts)
  kHwErrors,      // NEURON_HW_ERR kernel records
  kEfaPort,       // EFA port not ACTIVE
  kComponents,    // driver 2.30's unhealthy_components lists something
  kHeartbeat,     // driver 2.30's healthcheck_heartbeat stopped
  kEccCorrected,  // corrected ECC counters rose: degraded, not unhealthy
};
inline constexpr std::array<std::string_view, 8> kEvidenceClassNames{
    "absence", "state", "ecc", "hw_errors", "efa_port", "components", "heartbeat", "ecc_corrected"};
inline constexpr int kEvidenceClassCount = static_cast<int>(kEvidenceClassNames.size());
constexpr std::string_view EvidenceClassName(EvidenceClass c) {  // "absence", "ecc_corrected", ...
  return kEvidenceClassNames[static_cast<size_t>(c)];
}

class EvidenceClasses {
 public:
  constexpr EvidenceClasses() = default;
  constexpr EvidenceClasses(std::initializer_list<EvidenceClass> classes) {
    for (EvidenceClass c : classes) Add(c);
  }
  static constexpr EvidenceClasses All() {
    EvidenceClasses out;
    out.bits_ = (1U << kEvidenceClassCount) - 1;
    return out;
  }
  constexpr bool Has(EvidenceClass c) const { return (bits_ & Bit(c)) != 0; }
  constexpr void Add(EvidenceClass c) { bits_ |= Bit(c); }
  constexpr void Remove(EvidenceClass c) { bits_ &= ~Bit(c); }
  constexpr void Add(EvidenceClasses other) { bits_ |= other.bits_; }
  constexpr bool Intersects(EvidenceClasses other) const { return (bits_ & other.bits_) != 0; }
  constexpr bool empty() const { return bits_ == 0; }
  bool operator==(const EvidenceClasses&) const = default;

 private:
  static constexpr uint16_t Bit(EvidenceClass c) {
    return static_cast<uint16_t>(1U << static_cast<unsigned>(c));
  }
  uint16_t bits_ = 0;
};

// What a counter's rise above its baseline says.
enum class CounterMeaning : uint8_t {
  kFault,     // unhealthy; a file that cannot be read makes the class unknown
  kDegraded,  // degraded, still healthy; a file that cannot be read says nothing
};

struct HealthCounter {
  std::string_view dir;            // under neuronN/
  std::string_view name;           // a file of `dir`
  std::optional<NodeGroup> group;  // needed in the device's tree; none: every generation
  HealthComponent component;       // what its errors are errors of
  EvidenceClass evidence_class;
  CounterMeaning meaning;
  // The v2 chip layer (Trn1, Inf2) prints the file but never moves it: not read there.
  bool still_on_v2 = false;
};

// Whether a device whose info/architecture/instance_type reads `instance_type` is of the v2 chip
// layer, where mem_ecc_repairable_uncorrected always reads 0
// (docs/driver-interface.md#generation-differences). The arch type cannot tell: Inf2 and Trn2
// both read NDv3.
constexpr bool IsV2Chip(std::string_view instance_type) {
  return instance_type == "Trn1" || instance_type == "Inf2";
}

inline constexpr std::array kHealthCounters{
    HealthCounter{sysfs::kHardwareDir, Name(HardwareCounter::sram_ecc_uncorrected), std::nullopt,
                  HealthComponent::kSram, EvidenceClass::kEcc, CounterMeaning::kFault},
    HealthCounter{sysfs::kHardwareDir, Name(HardwareCounter::mem_ecc_uncorrected), std::nullopt,
                  HealthComponent::kHbm, EvidenceClass::kEcc, CounterMeaning::kFault},
    HealthCounter{sysfs::kHardwareDir, Name(HardwareCounter::mem_ecc_repairable_uncorrected),
                  std::nullopt, HealthComponent::kHbm, EvidenceClass::kEcc, CounterMeaning::kFault,
                  /*still_on_v2=*/true},
    HealthCounter{sysfs::kHealthStatusDir, Name(HealthStatusCounter::hbm_ecc_err_count),
                  NodeGroup::kHealthStatus, HealthComponent::kHbm, EvidenceClass::kEcc,
                  CounterMeaning::kFault},
    HealthCounter{sysfs::kHealthStatusDir, Name(HealthStatusCounter::repairable_hbm_ecc_err_count),
                  NodeGroup::kHealthStatus, HealthComponent::kHbm, EvidenceClass::kEcc,
                  CounterMeaning::kFault},
    HealthCounter{sysfs::kHealthStatusDir, Name(HealthStatusCounter::sram_ecc_err_count),
                  NodeGroup::kHealthStatus, HealthComponent::kSram, EvidenceClass::kEcc,
                  CounterMeaning::kFault},
    // Corrected ECC (driver 2.30.2 notes).
    HealthCounter{sysfs::kHardwareDir, Name(EccCorrectedCounter::sram_ecc_corrected),
                  NodeGroup::kEccCorrected, HealthComponent::kSram, EvidenceClass::kEccCorrected,
                  CounterMeaning::kDegraded},
    HealthCounter{sysfs::kHardwareDir, Name(EccCorrectedCounter::mem_ecc_corrected),
                  NodeGroup::kEccCorrected, HealthComponent::kHbm, EvidenceClass::kEccCorrected,
                  CounterMeaning::kDegraded},
};

// The row whose file is `name` (unique across the rows); null when none is.
constexpr const HealthCounter* FindHealthCounter(std::string_view name) {
  for (const HealthCounter& c : kHealthCounters) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

}  // namespace neuron
