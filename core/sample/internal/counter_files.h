#pragma once
#if !defined(NEURON_ROOM_SAMPLE)
#error "core/sample/internal/ is private to core/sample: include its public headers instead"
#endif
// Fast reading of many small counter files (core-internal, used by the Sampler).
//
// Opening ~13,500 sysfs-like files costs tens of milliseconds, most of it in the kernel's path walk
// and file setup, so the Sampler keeps an O_PATH directory handle per counter directory group and
// opens short names relative to it, reads each file with one read() into a stack buffer and parses
// with std::from_chars: no stat() (sysfs sizes lie), no allocation per file. Files are still
// opened, read and closed every time, because the simulator replaces them by rename (D2,
// driver-sim/README.md#deviations) and a kept descriptor would go on reading the old file.
//
// Not thread-safe: a DirHandle belongs to one thread at a time (the Sampler splits work by
// device, so no two threads share a handle during a sweep).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/unique_fd.h"
#include "core/driver/sysfs_names.h"
#include "core/sample/snapshot.h"

namespace neuron::counter_files {

// Largest attribute the Sampler reads (pe_cntrs is formatted into 256 bytes by the driver).
inline constexpr size_t kMaxFileBytes = 512;

enum class ReadResult { kOk, kMissing, kError };

// An O_PATH|O_DIRECTORY descriptor of one directory, opened lazily by absolute path. When the
// directory was replaced or removed (unplug and replug, an EFA reset) a relative open fails with
// ENOENT or ESTALE; the handle then reopens the path once per sweep and retries.
class DirHandle {
 public:
  DirHandle() = default;
  explicit DirHandle(std::string path) : path_(std::move(path)) {}
  DirHandle(DirHandle&& other) noexcept = default;
  DirHandle& operator=(DirHandle&& other) noexcept = default;

  const std::string& path() const { return path_; }
  // True after a read found the directory itself gone (ENOENT/ENOTDIR on reopening it).
  bool gone() const { return !fd_.valid() && open_errno_ != 0 && IsAbsence(open_errno_); }

  // Reads `name` (relative, may contain '/') into buf with one read(). `sweep` is a number that
  // changes every sweep, so a missing directory is retried at most once per sweep. On kError,
  // *err holds errno (EFBIG when the file does not fit in `cap`). When the process is out of
  // descriptors for the directory handle (EMFILE), the file is opened by its full path instead,
  // slower but not lost.
  ReadResult Read(const char* name, char* buf, size_t cap, size_t* len, int* err, uint64_t sweep);

 private:
  static bool IsAbsence(int err);
  bool Reopen(uint64_t sweep);
  ReadResult ReadByPath(const char* name, char* buf, size_t cap, size_t* len, int* err);

  std::string path_;
  UniqueFd fd_;
  int open_errno_ = 0;  // errno of the last failed reopen, 0 while open
  uint64_t reopened_sweep_ = 0;
};

// Collects this sample's errors, each naming the file. The path text is only built on error.
class ErrorSink {
 public:
  void Add(const DirHandle& dir, const char* name, std::string_view what);
  void AddErrno(const DirHandle& dir, const char* name, int err);
  std::vector<std::string>& errors() { return errors_; }

 private:
  std::vector<std::string> errors_;
};

// Parsers of the formats of docs/driver-interface.md#sysfs-tree to #counter-semantics and #efa.
// Each takes the raw bytes of one file and returns nullopt when they do not match; callers report
// that as malformed.
std::optional<uint64_t> ParseCounter(std::string_view text);   // "%llu\n"
std::optional<DeviceState> ParseState(std::string_view text);  // "%d\n", 0..2
struct ParsedPower {
  std::string_view status;
  int64_t epoch = 0;
  uint32_t min_bp = 0, max_bp = 0, avg_bp = 0;  // basis points of max power
};
std::optional<ParsedPower> ParsePower(std::string_view text);
// stats/power/utilization_raw: "die,util_bips,counter\n", then one row per die.
std::optional<std::vector<PowerDieReading>> ParsePowerRaw(std::string_view text);
// "%d: %s\n" of ports/1/state and phys_state.
std::optional<std::pair<int, std::string_view>> ParseNumberedState(std::string_view text);
// "100 Gb/sec (4X EDR)\n" -> 100.
std::optional<double> ParseRateGbps(std::string_view text);

// Shows `text` quoted and shortened for an error message.
std::string Shown(std::string_view text);

}  // namespace neuron::counter_files
