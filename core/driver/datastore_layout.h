#pragma once
// Byte layout of the per-process datastore (NDS), docs/driver-interface.md#datastore: the header
// and the counter sections of the driver's neuron_driver_shared.h, whose offsets and index order
// are ABI shared with the real runtime, plus the simulator's EFA traffic extension (D15,
// driver-sim/README.md#deviations), which the simulated driver reads and the agent never does. The
// object area holds the runtime's records in the runtime's own, unpublished format: nothing here
// describes it, and the agent reads records only through libnrt's API
// (core/sample/runtime_records.h). Values are little-endian u64, written without locking.

#include <cstddef>
#include <cstdint>
#include <optional>

namespace neuron::nds {

inline constexpr size_t kSize = 262144;
inline constexpr char kMagic[4] = {'n', 'd', 's', '\0'};
// The real value is unverified (docs/driver-interface.md#datastore-layout)
inline constexpr int32_t kFormatVersion = 1;

inline constexpr size_t kDeviceCountersOffset = 8;
inline constexpr int kDeviceCounterCount = 31;
inline constexpr size_t kCoreCountersOffset = 256;  // cores 0-3, 31 counters each
inline constexpr int kOriginalCoreCounters = 31;
inline constexpr size_t kObjectAreaOffset = 1248;
inline constexpr size_t kObjectAreaEnd = 44588;
inline constexpr size_t kExtendedOffset = 55936;  // cores 0-3, counters 31..94, 64 slots each
inline constexpr int kExtendedSlots = 64;
inline constexpr size_t kFullSetsOffset = 57984;  // cores 4-15, 96 slots each (95 used)
inline constexpr int kFullSetSlots = 96;
inline constexpr size_t kRealLayoutEnd = 67200;

inline constexpr int kMaxCores = 16;
inline constexpr int kCoreCounterCount = 95;  // NC indices 0..94; 41..94 reserved

// Core counter indices (order is ABI, docs/driver-interface.md#core-counter-indices).
enum CoreCounter : int {
  kTimeInUse = 0,
  kInferCompleted = 1,
  kInferCompletedWithErr = 2,
  kInferCompletedWithNumErr = 3,
  kInferTimedOut = 4,
  kInferIncorrectInput = 5,
  kInferFailedToQueue = 6,
  kErrGeneric = 7,
  kErrNumerical = 8,
  kErrModel = 9,
  kErrTransient = 10,
  kErrHw = 11,
  kErrRt = 12,
  kLatencyDevice = 13,
  kLatencyTotal = 14,
  kNcTime = 15,
  kGenericFail = 16,
  kErrResource = 17,
  kErrResourceNc = 18,
  kErrInvalid = 19,
  kErrUnsupportedNeffVersion = 20,
  kCcTime = 21,
  kMemUsageCodeDevice = 22,
  kMemUsageTensorsDevice = 23,
  kMemUsageConstantsDevice = 24,
  kMemUsageScratchpadDevice = 25,
  kMemUsageMiscDevice = 26,
  kModelLoadCount = 27,
  kInferenceCount = 28,
  kMacCount = 29,
  kOob = 30,
  kHwErrCollectives = 31,
  kHwErrHbmUe = 32,
  kHwErrNcUe = 33,
  kHwErrDmaAbort = 34,
  kErrSwNqOverflow = 35,
  kErrSwSemaphoreError = 36,
  kErrSwEventError = 37,
  kErrSwPsumCollision = 38,
  kErrSwSequencerFatal = 39,
  kHwErrRepairableHbmUe = 40,
};

// Device counter indices (docs/driver-interface.md#device-counter-indices).
enum DeviceCounter : int {
  kRuntimeVersion = 0,
  kFrameworkVersion = 1,
  kFalVersion = 2,
  kFeatureBitmap = 3,
  kMinNeffVersion = 4,
  kMaxNeffVersion = 5,
  kMemUsageCodeHost = 6,
  kMemUsageTensorsHost = 7,
  kMemUsageConstantsHost = 8,
  kMemUsageScratchpadHost = 9,
  kMemUsageMiscHost = 10,
  kDynamicSysfsMetricBitmap = 11,
  kDeviceClusterId = 12,
};

// Byte offset of core counter `index` of core `core`, or nullopt where the driver reads 0
// (get_neuroncore_counter_value: cores >= 16, indices >= 95, or 95 on cores 4-15).
constexpr std::optional<size_t> CoreCounterOffset(int core, int index) {
  if (core < 0 || core >= kMaxCores || index < 0 || index >= kCoreCounterCount) return std::nullopt;
  if (core < 4) {
    if (index < kOriginalCoreCounters) {
      return kCoreCountersOffset + static_cast<size_t>(core * kOriginalCoreCounters + index) * 8;
    }
    return kExtendedOffset +
           static_cast<size_t>(core * kExtendedSlots + (index - kOriginalCoreCounters)) * 8;
  }
  return kFullSetsOffset + static_cast<size_t>((core - 4) * kFullSetSlots + index) * 8;
}

constexpr size_t DeviceCounterOffset(int index) {
  return kDeviceCountersOffset + static_cast<size_t>(index) * 8;
}

}  // namespace neuron::nds
