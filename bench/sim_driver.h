#pragma once
// Benchmarks whose own process opens simulated devices (libnrt-sim in process, an in-process
// collector) run under the simulated driver's interposer, as `neuron-sim exec` starts a program
// (driver-sim/driver/exec.h). The interposer must be loaded when the process starts, so such a
// benchmark re-executes itself with it once, before it has a driver to check for; the programs
// it starts inherit LD_PRELOAD and so run under the interposer too.

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "driver-sim/driver/exec.h"

namespace neuron::bench {

// Call first thing in main: returns 0 when the interposer is loaded; otherwise re-executes the
// program with it and returns 1 only if that failed.
inline int EnsureSimDriver(char** argv) {
  if (sim::SimDriverLoaded()) return 0;
  const char* current = std::getenv("LD_PRELOAD");
  const std::string library = sim::SimDriverLibrary();
  const std::string preload = sim::PreloadWith(current != nullptr ? current : "", library);
  if (current != nullptr && preload == current) {
    std::fprintf(stderr, "the simulated driver's interposer %s is preloaded but did not load\n",
                 library.c_str());
    return 1;
  }
  ::setenv("LD_PRELOAD", preload.c_str(), 1);
  ::execv("/proc/self/exe", argv);
  std::perror("execv /proc/self/exe");
  return 1;
}

}  // namespace neuron::bench
