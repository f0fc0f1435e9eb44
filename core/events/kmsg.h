#pragma once
// The kernel log as /dev/kmsg presents it, and the NEURON_HW_ERR records the Neuron runtime
// prints into it (docs/driver-interface.md#hardware-errors; D9, driver-sim/README.md#deviations).
//
// A /dev/kmsg record is "<prio>,<seq>,<usec>,<flags>[,<more>];<text>\n", optionally followed by
// continuation lines that start with a space and carry "KEY=value" dictionary entries
// (" SUBSYSTEM=pci\n"). The real device returns exactly one record per read(); the simulator
// appends the same records to a regular file, ROOT/dev/kmsg. KmsgReader handles both.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace neuron {

struct KmsgRecord {
  int facility = 0;   // prio >> 3 (0 = kernel)
  int level = 0;      // prio & 7 (3 = KERN_ERR)
  uint64_t seq = 0;   // kernel sequence number
  uint64_t usec = 0;  // microseconds since boot
  std::string flags;  // "-", or "c" for a continued fragment
  std::string text;   // the message, escaped as the kernel prints it ("\x0a" for a newline)
  std::vector<std::pair<std::string, std::string>> dict;  // continuation lines, in order

  bool operator==(const KmsgRecord&) const = default;
};

// Parses one record: a header line plus any continuation lines (a trailing newline is optional).
// Errors name what was wrong and quote the start of the record.
absl::StatusOr<KmsgRecord> ParseKmsgRecord(std::string_view data);

// "NEURON_HW_ERR=SRAM_UNCORRECTABLE_ERROR instance-id=i-... hostname=ip-... nd-id=0 nc-id=0
//  serial-num=19fcda00f5ff6eb9 action=TERMINATE_INSTANCE", found anywhere in a message.
struct HwErrorRecord {
  std::string type;  // "SRAM_UNCORRECTABLE_ERROR"
  std::optional<int> nd_id;
  std::optional<int> nc_id;
  std::string instance_id;
  std::string hostname;
  std::string serial_number;
  std::string action;  // "TERMINATE_INSTANCE"
  std::string text;    // the whole message text, as logged

  bool operator==(const HwErrorRecord&) const = default;
};

inline constexpr std::string_view kHwErrToken = "NEURON_HW_ERR=";

// Finds the token anywhere in `text` and parses the key=value fields that follow it; unknown keys
// are ignored, a non-numeric nd-id/nc-id is left absent. nullopt when there is no token or the
// type after it is empty.
std::optional<HwErrorRecord> ParseHwError(std::string_view text);

// The driver's reset thread's records of a device reset (docs/driver-interface.md#reset-and-state):
// "neuron:nr_reset_thread_fn: nd3: initiating device reset request 4294967295", then
// "... nd3: reset request 4294967295 completed" or "... failed". Only probe and sysfs resets
// (request 4294967295) move the device's `reset` state; runtime core resets (TPB, other request
// ids) do not, and are not returned. The driver writes the state before it logs, so a reader
// reacting to a record reads the state the record announces.
enum class ResetStep { kInitiated, kCompleted, kFailed };
struct ResetRecord {
  int device = -1;
  ResetStep step = ResetStep::kInitiated;
  bool operator==(const ResetRecord&) const = default;
};
inline constexpr uint32_t kDeviceResetRequest = 0xffffffffu;
std::optional<ResetRecord> ParseResetRecord(std::string_view text);

// The driver's records of a process's first normal open of a device and of its last close
// (docs/driver-interface.md#open-close-log): "neuron:npid_attach: neuron:npid_attach: pid=7,
// slot=0", "neuron:npid_detach: ...". They name no device: a reader learns only that some process
// began or ceased to hold one.
bool IsOpenCloseRecord(std::string_view text);

// Tails a kernel log. Starts at the end: records already in the log are history, not evidence
// (docs/architecture.md#health). Not thread-safe: one owner (the Events thread).
//
// - Character device (the real /dev/kmsg), or any other non-regular file such as a FIFO or a
//   socket: read() returns one record (the reader also splits a buffer holding several). EPIPE
//   (records overwritten before we read them) and EINVAL (record larger than the buffer) are
//   logged and skipped; reading continues with the next record.
// - Regular file (the simulator's ROOT/dev/kmsg): only complete lines are consumed; a partial
//   last line waits for the next call. A file replaced by rename is reopened at the same offset;
//   a file that shrank is read from its start (everything in it is newer than our position).
class KmsgReader {
 public:
  using RecordFn = std::function<void(const KmsgRecord&)>;
  using MalformedFn = std::function<void(std::string_view raw, const absl::Status& why)>;

  ~KmsgReader();
  KmsgReader(const KmsgReader&) = delete;
  KmsgReader& operator=(const KmsgReader&) = delete;

  enum class StartAt { kEnd, kBeginning };
  // Opens `path` read-only and non-blocking. kEnd (the default) skips what the log holds now;
  // kBeginning suits a regular file that appeared after we started watching, whose every
  // record is new. Character devices always start at the end.
  static absl::StatusOr<std::unique_ptr<KmsgReader>> Open(const std::filesystem::path& path,
                                                          StartAt start = StartAt::kEnd);
  // Takes ownership of an open fd (tests: a socketpair or pipe end); `display` names it in logs.
  // A regular file is positioned at its end; a stream is read from wherever it is.
  static absl::StatusOr<std::unique_ptr<KmsgReader>> Adopt(int fd, std::string display);

  // The fd to poll for POLLIN, or -1 for a regular file (watch it with inotify or a timer).
  int pollable_fd() const;
  bool is_regular_file() const { return regular_; }
  const std::string& display() const { return display_; }

  // Delivers every record available now. Malformed records go to `on_malformed` (may be empty)
  // and reading continues. Returns an error only when the log itself cannot be read.
  absl::Status ReadAvailable(const RecordFn& on_record, const MalformedFn& on_malformed);

 private:
  KmsgReader(int fd, std::string display, std::filesystem::path path, bool regular);
  absl::Status ReadStream(const RecordFn& on_record, const MalformedFn& on_malformed);
  absl::Status ReadFile(const RecordFn& on_record, const MalformedFn& on_malformed);
  absl::Status ReopenIfReplaced();

  int fd_;
  std::string display_;
  std::filesystem::path path_;  // empty for adopted fds
  bool regular_;
  uint64_t offset_ = 0;         // regular file: bytes consumed
  uint64_t inode_ = 0;          // regular file: the inode offset_ refers to
  bool skipping_line_ = false;  // regular file: inside an oversized line being discarded
  std::string buffer_;
};

// Splits `data` (complete lines) into records: a line that starts with a space continues the
// record before it. Exposed for tests; a leading orphan continuation line becomes its own
// (malformed) chunk.
std::vector<std::string_view> SplitKmsgRecords(std::string_view data);

}  // namespace neuron
