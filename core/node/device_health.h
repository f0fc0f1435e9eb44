#pragma once
// A device's and an EFA interface's health, judged from their evidence (health_evidence.h): one of
// three states, the components at fault in driver 2.30's vocabulary
// (core/driver/health_components.h) whatever the driver, and why (docs/architecture.md#health).
//
//   - unhealthy: a counted class of evidence shows a fault;
//   - unknown: no fault shown, but a counted class cannot be read (its files missing or
//     unreadable, the device state unreadable, the heartbeat stalled, the driver not loaded);
//   - healthy: every counted class was read and shows no fault.
// Degraded (corrected ECC rising) is a flag beside the state, never a state: the device still
// works, and only a policy decides what it costs.
//
// Which classes count is the consumer's: the device plugin's health policy, every class for the
// exporter and the tools.
//
// Pure; thread-safe.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/driver/health_components.h"
#include "core/driver/health_counters.h"
#include "core/node/health_evidence.h"

namespace neuron {

enum class HealthState : uint8_t { kHealthy, kUnhealthy, kUnknown };
// "healthy", "unhealthy", "unknown" (the series' `state` label, the health API's words).
std::string_view HealthStateName(HealthState s);
inline constexpr std::array<HealthState, 3> kHealthStates{
    HealthState::kHealthy, HealthState::kUnhealthy, HealthState::kUnknown};

struct DeviceHealth {
  HealthState state = HealthState::kHealthy;
  HealthComponents components;       // at fault (unhealthy only)
  std::vector<std::string> reasons;  // why, first the one that decided ("uncorrected ECC (hbm)")
  EvidenceClasses classes;           // the counted classes that found a fault or could not tell
  std::vector<std::string> hw_error_types;  // NEURON_HW_ERR types since the baseline, as logged
  // The counted classes of kDegraded counters (core/driver/health_counters.h) that rose since the
  // baseline: the device still works, and only a policy decides what that costs.
  EvidenceClasses degraded_classes = {};
  bool degraded() const { return !degraded_classes.empty(); }
  bool operator==(const DeviceHealth&) const = default;
};

// `counted` are the classes that decide; the others are not read into the verdict.
DeviceHealth JudgeDevice(const DeviceEvidence& d, EvidenceClasses counted);
DeviceHealth JudgeEfa(const EfaEvidence& f, EvidenceClasses counted);

// The component a NEURON_HW_ERR type names (docs/driver-interface.md#hardware-errors): SRAM and
// NeuronCore uncorrectable errors are SRAM, HBM is hbm, DMA is the AXI fabric the DMA engines
// move data over, a collectives hang the links between devices. Unknown types name none.
std::optional<HealthComponent> ComponentOfHwError(std::string_view type);

// The Node condition AWS's node-problem-detector sets (docs/driver-interface.md#hardware-errors):
// True while a device is unhealthy by a class in `condemning` (the plugin's policy: the classes
// whose action is `node`), reason NeuronHasError_<TYPE>, <TYPE> the record's type or the type of
// the component's fault; else False, NeuronHasNoError. The default set is the permanent faults
// (uncorrected ECC, a NEURON_HW_ERR record, a component the driver lists): absence, state and EFA
// ports are transient or the device's own business.
struct NodeConditionVerdict {
  bool problem = false;
  std::string reason;   // "NeuronHasError_HBM_UNCORRECTABLE_ERROR" / "NeuronHasNoError"
  std::string message;  // "neuron3: uncorrected ECC (hbm)"
  bool operator==(const NodeConditionVerdict&) const = default;
};
// The condition's type and reasons, as AWS's node-problem-detector spells them; Unknown when the
// evidence went stale or the plugin that judges it is gone.
inline constexpr std::string_view kNodeConditionType = "NeuronHealth";
inline constexpr std::string_view kNodeConditionNoError = "NeuronHasNoError";
inline constexpr std::string_view kNodeConditionErrorPrefix = "NeuronHasError_";
inline constexpr std::string_view kNodeConditionUnknown = "NeuronHealthUnknown";
// `devices` by index.
inline constexpr EvidenceClasses kPermanentClasses{EvidenceClass::kEcc, EvidenceClass::kHwErrors,
                                                   EvidenceClass::kComponents};
NodeConditionVerdict JudgeNodeCondition(const std::vector<std::pair<int, DeviceHealth>>& devices,
                                        EvidenceClasses condemning = kPermanentClasses);

}  // namespace neuron
