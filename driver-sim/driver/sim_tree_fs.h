#pragma once
// Filesystem helpers of the tree writer (driver-sim internal). Thread-safe (no shared state).
// WriteFileAtomic and AppendKmsgRecord, the public ones, are declared in sim_tree.h.

#include <sys/types.h>

#include <filesystem>
#include <string_view>

#include "absl/status/status.h"

// Returns a non-OK absl::Status from the enclosing function (the tree's writers chain many).
#define SIM_RETURN_IF_ERROR(expr)                      \
  do {                                                 \
    if (absl::Status _s = (expr); !_s.ok()) return _s; \
  } while (0)

namespace neuron::sim {

// File modes of the tree: every metric file (owner write clears,
// docs/driver-interface.md#total-present-peak), the kernel's read-only attributes (dev, vendor,
// ...), and root-only writable ones (reset).
inline constexpr mode_t kMetric = 0644;
inline constexpr mode_t kReadOnly = 0444;
inline constexpr mode_t kRootWrite = 0600;

// mkdir -p with mode 0755 on every directory it creates, whatever the umask.
absl::Status MakeDirs(const std::filesystem::path& dir);
// Creates (or replaces) `link` as a symlink to the relative `target`, making parent directories.
absl::Status MakeSymlink(std::string_view target, const std::filesystem::path& link);
// Writes a file in place (open, write, close) with its final mode. Only for files inside a
// hidden directory that is being built and will be renamed into place whole: no reader can
// see them yet, so the temporary-and-rename of WriteFileAtomic would only cost syscalls.
absl::Status WriteNewFile(const std::filesystem::path& path, std::string_view content, mode_t mode);
// rm -rf; a missing path is fine.
absl::Status RemovePath(const std::filesystem::path& path);
// Renames `from` to `to`, replacing a directory already at `to`.
absl::Status RenamePath(const std::filesystem::path& from, const std::filesystem::path& to);

}  // namespace neuron::sim
