#pragma once
// Running a program under the simulated driver (`neuron-sim exec`): the interposer
// (driver/preload_*.c) goes into LD_PRELOAD, after a sanitizer runtime and before other preloads
// (umockdev's), and the program then opens ROOT/dev/neuronN as it would open a real
// device node. driver-sim/README.md#device-node describes the contract.

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "core/driver/sysfs_names.h"

namespace neuron::sim {

// The interposer's path: NEURON_SIM_DRIVER_LIB if set, else the one this build made.
std::string SimDriverLibrary();

// True when this process already runs under the interposer (nested exec is a no-op).
bool SimDriverLoaded();

// LD_PRELOAD with `library` after the sanitizer runtimes `current` starts with and before its
// other entries (umockdev's preload calls libc directly, past anything listed after it);
// unchanged when it is there already.
std::string PreloadWith(std::string_view current, std::string_view library);

// The directory of libnrt-sim's libnrt.so.1: NEURON_SIM_LIBNRT_DIR if set, else this build's.
std::string SimLibnrtDir();

// The environment changes exec makes, applied to this process's environment: LD_PRELOAD,
// NEURON_ROOT (the runtime finds the node through it), libnrt-sim's directory first on
// LD_LIBRARY_PATH (a monitor that loads libnrt.so.1, the agent's exporter and tools included,
// finds the simulator's, as it would find the Neuron runtime's on a node) and, in a sanitized
// process, the sanitizer's permission for a preload that comes after it. FailedPrecondition when
// no live simulated driver serves `root`.
absl::Status PrepareSimDriverEnv(const RootPaths& root);

// Replaces this process with `command` under the simulated driver (execvp; execv of `path`
// when given, command[0] then being only the name the process shows); returns only on failure.
absl::Status ExecUnderSimDriver(const RootPaths& root, const std::vector<std::string>& command,
                                const std::string& path = "");

}  // namespace neuron::sim
