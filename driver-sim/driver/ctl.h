#pragma once
// The `neuron-sim ctl` protocol (driver-sim/README.md, "ctl protocol"): one request line per
// connection over ROOT/run/neuron/ctl.sock, answered by one reply, then the daemon closes.
//
// The request line is the command's words as typed after `neuron-sim ctl --root DIR`, so the
// client and the daemon parse it with the same function (ParseCtlArgs) and a person can talk to
// the daemon with `socat - UNIX-CONNECT:ROOT/run/neuron/ctl.sock`.
//
// Thread-safety: free functions are thread-safe; a CtlConnection belongs to one thread.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/base/unique_fd.h"
#include "core/driver/health_components.h"
#include "core/driver/sysfs_names.h"
#include "driver-sim/driver/faults.h"

namespace neuron::sim {

// What a ctl verb takes: a fault kind word after the verb (inject) or an action word (one of
// CtlVerb::actions), options, and printk's text after "--". kRequired ones are a usage error when
// missing; kNo ones when given.
enum class CtlArg : uint8_t { kNo, kOptional, kRequired };
struct CtlArgs {
  CtlArg fault = CtlArg::kNo;
  CtlArg action = CtlArg::kNo;      // a word after the verb: heartbeat stall|resume
  CtlArg components = CtlArg::kNo;  // after the action `set`, a comma list: component set LIST
  CtlArg device = CtlArg::kNo;      // --device N (A for link-down)
  CtlArg core = CtlArg::kNo;        // --core C
  CtlArg peer = CtlArg::kNo;        // --peer B
  CtlArg fail = CtlArg::kNo;        // --fail
  CtlArg efa = CtlArg::kNo;         // --efa NAME
  CtlArg id = CtlArg::kNo;          // --id ID
  CtlArg level = CtlArg::kNo;       // --level N
  CtlArg count = CtlArg::kNo;       // --count K
  CtlArg text = CtlArg::kNo;        // -- TEXT...
};

// One `neuron-sim ctl` verb as the client and the daemon both parse it.
struct CtlVerb {
  std::string_view name;
  CtlArgs args;
  std::string_view usage;  // its line in CtlUsage(): "unplug --device N"
  std::string_view help;   // what it does, for `neuron-sim ctl --help`
  bool logged = true;      // the daemon logs it (status is polled by scripts and changes nothing)
  std::string_view actions = {};  // the words its action takes, "stall|resume"
};

// Corrected ECC errors (`inject hbm-ce|sram-ce`): the driver only counts them (driver 2.30's
// stats/hardware/{mem,sram}_ecc_corrected); no execution fails, so they are no runtime fault and
// never in faults.json.
enum class CorrectedEcc : uint8_t { kHbm, kSram };
// "hbm-ce", "sram-ce": the word `inject` takes.
std::string_view CorrectedEccName(CorrectedEcc kind);
// The sysfs counter it raises: "mem_ecc_corrected", "sram_ecc_corrected".
std::string_view CorrectedEccCounter(CorrectedEcc kind);

// Every verb, in CtlUsage()'s order. The table is in daemon_commands.cc, each row beside the
// daemon's handler, so a new verb is one row there (docs/architecture.md#command-line-contracts
// and driver-sim/README.md#ctl-protocol describe it; command_contract_test holds the first to it).
const std::vector<CtlVerb>& CtlVerbs();
// The verb named `name`, or nullptr.
const CtlVerb* FindCtlVerb(std::string_view name);

// printk (the driver's NEURON_IOCTL_PRINTK, docs/driver-interface.md#hardware-errors): KERN_ERR
// unless told, at most 511 bytes of text (the ioctl's 512-byte buffer with its NUL; longer is
// refused, as the driver refuses it with EFAULT).
inline constexpr int kPrintkDefaultLevel = 3;
inline constexpr size_t kPrintkMaxText = 511;
// OK for text printk takes: 1 to kPrintkMaxText bytes, no newline, carriage return or NUL (which
// the one-line protocol cannot carry); InvalidArgument saying which rule it breaks otherwise.
absl::Status CheckPrintkText(std::string_view text);

struct CtlRequest {
  std::string command = "status";         // a CtlVerb's name
  std::optional<FaultKind> fault;         // inject: never kLinkDown
  std::optional<CorrectedEcc> corrected;  // inject hbm-ce|sram-ce (then no fault)
  std::string action;                     // heartbeat stall|resume, component set|clear
  HealthComponents components;            // component set: never empty
  std::optional<int> device;              // unplug, plug, inject, reset, link-down, ...
  std::optional<int> core;                // inject (optional)
  std::optional<int> peer;                // link-down
  bool fail = false;                      // reset --fail
  std::string efa;                        // efa-down, efa-up
  std::optional<uint64_t> fault_id;       // clear-fault
  int level = kPrintkDefaultLevel;        // printk: syslog priority 0-7
  std::optional<uint64_t> count;          // inject's ECC kinds: how many errors (1 if not given)
  std::string text;                       // printk: the message, verbatim

  bool operator==(const CtlRequest&) const = default;
};

// The verbs' grammar, "commands:" then one usage line per verb, for usage messages and --help.
std::string_view CtlUsage();

// Parses the words after `ctl` ({"inject", "hbm-ue", "--device", "3"}); options take their value
// as the next word or after '=' and may come in any order. InvalidArgument on a usage error, with
// a message naming the offending word.
absl::StatusOr<CtlRequest> ParseCtlArgs(const std::vector<std::string>& words);
// The canonical request line (no newline): words joined by single spaces.
std::string FormatCtlRequest(const CtlRequest& request);
// Splits a request line on whitespace and parses it. For printk, everything after the first
// " -- " is the text, verbatim (runs of spaces and tabs included).
absl::StatusOr<CtlRequest> ParseCtlLine(std::string_view line);

// A reply's first line is "ok", "error: <message>" or "usage: <message>"; the payload lines after
// it are what `ctl` prints (stdout for ok, stderr otherwise).
enum class CtlOutcome { kOk, kError, kUsage };
struct CtlReply {
  CtlOutcome outcome = CtlOutcome::kOk;
  std::string message;  // one line; empty for ok
  std::string payload;  // zero or more lines, each ending in '\n'

  bool operator==(const CtlReply&) const = default;
};
std::string FormatCtlReply(const CtlReply& reply);
absl::StatusOr<CtlReply> ParseCtlReply(std::string_view text);
// 0, 1 or 2: the exit code of `neuron-sim ctl` for the outcome
// (docs/architecture.md#readiness-and-lifecycle).
int CtlExitCode(CtlOutcome outcome);

// AF_UNIX paths are limited to sizeof(sun_path) - 1 = 107 bytes: InvalidArgument naming the root,
// the socket path's length and the longest usable --root when ROOT/run/neuron/ctl.sock is longer.
absl::Status CheckCtlSocketPath(const RootPaths& paths);

// Client: connects to ROOT/run/neuron/ctl.sock, sends the request and reads the reply, all within
// `timeout`. FailedPrecondition when no daemon runs on the root (socket missing or stale), with
// a message saying how to start one; DeadlineExceeded when the daemon does not answer in time.
absl::StatusOr<CtlReply> SendCtlRequest(const RootPaths& paths, const CtlRequest& request,
                                        std::chrono::milliseconds timeout);

// `ctl printk`: appends `text` to ROOT/dev/kmsg at syslog priority `level` through the daemon, as a
// runtime's NEURON_IOCTL_PRINTK does on hardware. InvalidArgument for text the one-line protocol
// cannot carry (newline, carriage return, NUL), longer than kPrintkMaxText, or a level outside
// 0-7; FailedPrecondition without a daemon; otherwise the daemon's answer. Other control
// characters are allowed: the kmsg writer escapes them ("\xNN") as the kernel does.
absl::Status SendPrintk(const RootPaths& paths, int level, std::string_view text,
                        std::chrono::milliseconds timeout = std::chrono::milliseconds(5000));

// `ctl clear-fault --id ID`, for a runtime that treats a fault as one-shot
// (driver-sim/README.md#faults-json). NotFound when the daemon has no such pending fault (already
// cleared, e.g. by a reset); FailedPrecondition without a daemon.
absl::Status SendClearFault(const RootPaths& paths, uint64_t id,
                            std::chrono::milliseconds timeout = std::chrono::milliseconds(5000));

// Server: creates the listening socket at `path` (mode 0600, non-blocking, close-on-exec),
// replacing a stale socket file.
absl::StatusOr<UniqueFd> ListenCtlSocket(const std::filesystem::path& path);

// One accepted client connection: collects the request line, then writes the reply without
// blocking the daemon's loop.
class CtlConnection {
 public:
  static constexpr size_t kMaxRequestBytes = 4096;

  explicit CtlConnection(UniqueFd fd);
  CtlConnection(const CtlConnection&) = delete;
  CtlConnection& operator=(const CtlConnection&) = delete;

  int fd() const { return fd_.get(); }
  std::chrono::steady_clock::time_point accepted_at() const { return accepted_at_; }

  enum class ReadResult { kNeedMore, kLine, kClosed, kTooLong };
  // Reads what the socket has; kLine fills `line` (without the newline). A peer that closes
  // after sending a line without a newline also yields kLine.
  ReadResult Read(std::string* line);

  void QueueReply(std::string text) { out_ = std::move(text); }
  bool replying() const { return replying_; }
  void set_replying() { replying_ = true; }
  // Writes queued bytes; true when everything is written (the caller then closes).
  bool Flush();

 private:
  UniqueFd fd_;
  std::chrono::steady_clock::time_point accepted_at_;
  std::string in_;
  std::string out_;
  size_t out_pos_ = 0;
  bool replying_ = false;
};

}  // namespace neuron::sim
