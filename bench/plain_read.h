#pragma once
// The baseline the sysfs readers are measured against (docs/build.md#file-read-cost): open, read
// and close every file by its absolute path, as the simplest reader would. bench/core_bench
// times it beside the Sampler, bench/top_bench beside neuron-ls. Header-only; no state.

#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <string>
#include <vector>

#include "core/base/unique_fd.h"

namespace neuron::bench {

// Reads the first 512 bytes of every file (a counter's text is shorter); returns the bytes read,
// for the caller to keep the loop from being optimized away.
inline size_t OpenReadCloseEach(const std::vector<std::string>& files) {
  char buf[512];
  size_t bytes = 0;
  for (const std::string& f : files) {
    const UniqueFd fd(::open(f.c_str(), O_RDONLY | O_CLOEXEC));  // closed each turn
    if (!fd) continue;
    const ssize_t n = ::read(fd.get(), buf, sizeof(buf));
    if (n > 0) bytes += static_cast<size_t>(n);
  }
  return bytes;
}

}  // namespace neuron::bench
