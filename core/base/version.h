#pragma once
// The agent's version, "0.1.0": CMake's project(VERSION) (CMakeLists.txt), compiled into
// version.cc alone, so every binary that prints a version (the exporter's
// neuron_exporter_build_info, neuron-top's title bar, the device plugin's start-up line) prints
// the same one and a release changes it in one place.

#include <string_view>

namespace neuron {

std::string_view AgentVersion();

}  // namespace neuron
