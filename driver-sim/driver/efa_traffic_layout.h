// The simulator's extension of the datastore: the EFA traffic of the process that owns the slot
// (D15, driver-sim/README.md#deviations). No real driver or runtime writes or reads it, so it lives
// here, beside the code that does, and not in core's transcription of the driver's layout. It is
// in namespace nds because its offsets extend that layout and read alike.
#pragma once

#include <cstddef>

#include "core/driver/datastore_layout.h"

namespace neuron::nds {

// The runtime cannot write sysfs (the daemon is the driver,
// docs/architecture.md#daemon-is-the-driver), so it counts the bytes and packets its collectives
// moved over each EFA here; the daemon adds the growth to the EFA's ports/1/hw_counters live. Per
// EFA index (the node's EFA in catalog order), kEfaTrafficFields u64.
inline constexpr char kEfaTrafficMagic[4] = {'e', 'f', 'a', 't'};
// Past the real layout (which ends at kRealLayoutEnd), at the offset it had beside the retired
// latency histogram extension (driver-sim/README.md#datastores).
inline constexpr size_t kEfaTrafficOffset = 70472;  // magic, u32 n
inline constexpr int kMaxEfas = 32;
enum EfaTrafficField : int {
  kEfaTxBytes = 0,
  kEfaTxPkts,
  kEfaRxBytes,
  kEfaRxPkts,
  kEfaTrafficFields
};
inline constexpr size_t EfaTrafficFieldOffset(int efa, int field) {
  return kEfaTrafficOffset + 8 + (static_cast<size_t>(efa) * kEfaTrafficFields + field) * 8;
}
static_assert(EfaTrafficFieldOffset(kMaxEfas, 0) <= kSize);

}  // namespace neuron::nds
