#pragma once
// The agent's version and where the build came from, compiled into version.cc alone, so every
// binary that prints them (each one's --version, the exporter's neuron_exporter_build_info, the
// plugin's neuron_plugin_build_info, neuron-top's title bar) prints the same and a release changes
// them in one place:
//   version:    CMake's project(VERSION) (CMakeLists.txt), e.g. "0.1.0";
//   revision:   the short git commit id of the source tree when it was built, "-dirty" appended
//               when the work tree differed from it; outside a git checkout the build's
//               NEURON_BUILD_REVISION (the image's, from `make image`) or "unknown";
//   build date: the UTC day of the build (SOURCE_DATE_EPOCH's day when set), "2026-11-24";
//   compiler:   the compiler's id and version, "gcc 12.2.0" or "clang 16.0.6".
// Revision and date are taken at build time by core/base/version.cmake, not when CMake
// configured the tree. Thread-safe: constants.

#include <string>
#include <string_view>

namespace neuron {

std::string_view AgentVersion();
std::string_view AgentRevision();
std::string_view AgentBuildDate();
std::string_view AgentCompiler();

// What `<program> --version` prints, the same shape for every binary (node_exporter's):
//   neuron-exporter, version 0.1.0 (revision: 6dd67b7)
//     build date: 2026-11-24
//     compiler: gcc 12.2.0
// without a trailing newline (CLI11's --version adds one).
std::string VersionLine(std::string_view program);

}  // namespace neuron
