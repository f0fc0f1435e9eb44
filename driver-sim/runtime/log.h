#pragma once
// The runtime's logger, "nrt": stderr, in libnrt's line shape
//   2025-Jan-01 10:00:00.123456 4711:4711 ERROR  NRT:nrt_allocate_neuron_cores <message>
// so the messages users search for (docs/runtime.md#reservation-and-indices) read as on a real
// node. The level comes from NEURON_RT_LOG_LEVEL (or NEURON_RT_LOG_LEVEL_NRT): ERROR by default;
// TRACE, DEBUG, INFO, WARN, WARNING, ERROR, FATAL, OFF. Callers start the message with the function
// name, as libnrt does. Thread-safe.

#include <spdlog/spdlog.h>

#include <memory>

namespace neuron::nrt {

std::shared_ptr<spdlog::logger> Log();
// Re-reads NEURON_RT_LOG_LEVEL (nrt_init calls it).
void ConfigureLogLevelFromEnv();

}  // namespace neuron::nrt
