#pragma once
// A binary's main, guarded: what nothing below handled (a std::bad_alloc, a filesystem error) ends
// it with one line, "<name>: <what>", and status 1 rather than std::terminate's abort. A
// DaemonSet restarts the agent; a tool's user reads the line.

#include <cstdio>
#include <exception>

namespace neuron {

inline int GuardedMain(const char* name, int (*main_fn)(int, char**), int argc,
                       char** argv) noexcept {
  try {
    return main_fn(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", name, e.what());
  } catch (...) {
    std::fprintf(stderr, "%s: an exception that is not a std::exception\n", name);
  }
  return 1;
}

}  // namespace neuron
