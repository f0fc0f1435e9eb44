#pragma once
// Hooks for tests and benchmarks of libnrt-sim (C++ only; not part of the C API).
// Thread-safety: call between nrt_close and nrt_init, or from the thread that calls them.

#include <memory>

#include "driver-sim/runtime/clock.h"

namespace neuron::nrt {

class Runtime;

// The clock the next nrt_init uses instead of NEURON_SIM_CLOCK; nullptr restores the default.
void SetClockForTesting(std::shared_ptr<Clock> clock);
// The live runtime (nullptr before nrt_init and after nrt_close).
Runtime* RuntimeForTesting();
// One fault-watch poll now: faults.json and device states as they are on disk.
void RefreshForTesting();

}  // namespace neuron::nrt
