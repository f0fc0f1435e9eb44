#include "core/base/version.h"

#ifndef NEURON_AGENT_VERSION
#error "NEURON_AGENT_VERSION comes from core/CMakeLists.txt (project(VERSION))"
#endif

namespace neuron {

std::string_view AgentVersion() { return NEURON_AGENT_VERSION; }

}  // namespace neuron
