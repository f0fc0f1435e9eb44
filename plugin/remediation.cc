#include "plugin/remediation.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>

#include "core/base/component_log.h"
#include "core/base/file_io.h"
#include "core/base/unique_fd.h"
#include "core/driver/sysfs_files.h"
#include "core/driver/sysfs_names.h"
#include "core/node/withhold.h"
#include "core/proc/procinfo.h"
#include "fmt/format.h"
#include "fmt/ranges.h"
#include "plugin/metrics.h"

extern char** environ;  // NOLINT(readability-redundant-declaration): posix_spawn's environment

namespace neuron::plugin {
namespace {

using Clock = std::chrono::steady_clock;

// The active check's exit codes (docs/OPERATIONS.md#active-check).
constexpr int kCheckPassed = 0;
constexpr int kCheckNoProgram = 6;

// Every core's reset_req_count/total, summed: +1 per core at each request
// (docs/driver-interface.md#reset-and-state).
absl::StatusOr<uint64_t> ResetRequests(const RootPaths& root, int device) {
  const std::filesystem::path dir = root.NeuronDevice(device);
  uint64_t sum = 0;
  int cores = 0;
  for (const std::string& name : ListDir(dir)) {
    if (!name.starts_with(sysfs::kCorePrefix)) continue;
    absl::StatusOr<uint64_t> n = ReadU64(dir / name / sysfs::part::kStats /
                                         sysfs::part::kOtherInfo / "reset_req_count" / "total");
    if (!n.ok()) return n.status();
    sum += *n;
    ++cores;
  }
  if (cores == 0) return absl::NotFoundError(fmt::format("no NeuronCore under {}", dir.string()));
  return sum;
}

absl::StatusOr<int64_t> ReadState(const RootPaths& root, int device) {
  return ReadI64(root.NeuronDevice(device) / sysfs::kReset);
}

absl::Status WriteReset(const RootPaths& root, int device) {
  const std::string path = (root.NeuronDevice(device) / sysfs::kReset).string();
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd || ::write(fd.get(), "1\n", 2) != 2) {
    return absl::UnavailableError(fmt::format("write {}: {}", path, std::strerror(errno)));
  }
  return absl::OkStatus();
}

struct ChildResult {
  int exit_code = -1;  // -1: killed or did not start
  std::string output;  // stdout and stderr, the last 4 KiB
};

// Runs `argv` with stdout and stderr to a pipe, killing it after `timeout`.
ChildResult RunChild(const std::vector<std::string>& argv, std::chrono::milliseconds timeout) {
  ChildResult out;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return {-1, std::strerror(errno)};
  UniqueFd read_end(fds[0]);
  UniqueFd write_end(fds[1]);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, write_end.get(), STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, write_end.get(), STDERR_FILENO);
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int err = ::posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  write_end.Reset();
  if (err != 0) return {-1, fmt::format("cannot run {}: {}", argv[0], std::strerror(err))};
  const Clock::time_point deadline = Clock::now() + timeout;
  char buf[4096];
  while (true) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    pollfd p{.fd = read_end.get(), .events = POLLIN, .revents = 0};
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) == 0) {
      ::kill(pid, SIGKILL);
      out.output += fmt::format("\n(killed after {} ms)", timeout.count());
      break;
    }
    const ssize_t n = ::read(read_end.get(), buf, sizeof buf);
    if (n <= 0) break;
    out.output.append(buf, static_cast<size_t>(n));
    if (out.output.size() > 4096) out.output.erase(0, out.output.size() - 4096);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  out.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

// The last non-empty line of the check's output: its verdict in words.
std::string LastLine(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  const size_t nl = text.rfind('\n');
  return std::string(nl == std::string_view::npos ? text : text.substr(nl + 1));
}

}  // namespace

std::vector<std::string> CheckCommand(const RemediationOptions& options, int device) {
  std::vector<std::string> argv{
      options.policy.check_command, "--health-check", "--device",
      std::to_string(device),       "--root",         options.root,
      "--withheld-by-caller",       "--state-dir",    options.policy.state_dir};
  if (!options.policy.check_programs.empty()) {
    argv.insert(argv.end(), {"--programs", options.policy.check_programs});
  }
  return argv;
}

class Remediator::Impl {
 public:
  Impl(RemediationOptions options, NodeState* state, InUseFn in_use, Metrics* metrics)
      : options_(std::move(options)),
        root_(options_.root),
        state_(*state),
        in_use_(std::move(in_use)),
        metrics_(metrics),
        log_(ComponentLogger("plugin.remediation")) {}

  ~Impl() { Stop(); }

  void Start() {
    state_.AddListener([this](const std::shared_ptr<const NodeView>&) {
      std::lock_guard<std::mutex> lock(mu_);
      changed_ = true;
      cv_.notify_one();
    });
    thread_ = std::thread([this] { Run(); });
  }

  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      stopping_ = true;
      cv_.notify_one();
    }
    if (thread_.joinable()) thread_.join();
  }

  std::map<int, RemediationStatus> Status() const {
    std::lock_guard<std::mutex> lock(mu_);
    return status_;
  }

 private:
  struct Device {
    std::optional<WithholdLock> lock;  // held from the first try until the device passes
    int tries = 0;
    Clock::time_point next_try{};
    bool gave_up = false;
  };

  // Wakes on a change of the view and when a retry falls due, never otherwise: an idle node costs
  // this thread nothing.
  void Run() {
    std::optional<Clock::time_point> due;
    while (true) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        auto woken = [this] { return stopping_ || changed_; };
        if (due) {
          cv_.wait_until(lock, *due, woken);
        } else {
          cv_.wait(lock, woken);
        }
        if (stopping_) return;
        changed_ = false;
      }
      const std::shared_ptr<const NodeView> view = state_.view();
      NoteActions(*view);
      const std::optional<int> device = Next(*view);
      if (device) Try(*device);
      due = device ? Clock::now() : NextDue();  // after a try, look again at once
    }
  }

  // The earliest retry still to come; nullopt when none is.
  std::optional<Clock::time_point> NextDue() const {
    const Clock::time_point now = Clock::now();
    std::optional<Clock::time_point> due;
    for (const auto& [index, r] : devices_) {
      if (r.gave_up || r.next_try <= now) continue;
      due = std::min(due.value_or(r.next_try), r.next_try);
    }
    return due;
  }

  // Every change of a device's action is a log line and a count (the actions other than reset act
  // through the view itself: its health, taint and the Node condition).
  void NoteActions(const NodeView& view) {
    for (const auto& [index, d] : view.devices) {
      const Action before = std::exchange(actions_[index], d.action);
      if (d.action == before || d.action == Action::kIgnore) continue;
      log_->warn("neuron{}: {} ({})", index, ActionName(d.action), d.reason);
      if (d.action != Action::kReset) metrics_->Remediation(index, ActionName(d.action), "applied");
    }
  }

  // The device to try now: one already withheld by us comes first, then a new one.
  std::optional<int> Next(const NodeView& view) {
    const Clock::time_point now = Clock::now();
    const EvidenceClasses reset = options_.policy.WithAction(Action::kReset);
    std::optional<int> fresh;
    for (const auto& [index, d] : view.devices) {
      Device& r = devices_[index];
      if (r.gave_up || now < r.next_try || !d.present) continue;
      if (r.lock) return index;
      const bool wants = d.health.state == HealthState::kUnhealthy && !d.withheld &&
                         d.health.classes.Intersects(reset);
      if (wants && !fresh) fresh = index;
    }
    return fresh;
  }

  void Try(int index) {
    Device& r = devices_[index];
    if (std::optional<std::string> why = Refusal(index, &r)) {
      Refuse(index, r, *why);
      return;
    }
    absl::Status done = ResetAndConfirm(index, r);
    if (done.ok()) done = Check(index, r);
    if (done.ok()) {
      r.lock.reset();  // the device returns
      r.tries = 0;
      Set(index, {"returned", 0, "reset and the active check passed"}, "passed");
      log_->info("neuron{}: reset, checked and returned", index);
      return;
    }
    ++r.tries;
    if (r.tries >= options_.policy.reset_tries) {
      r.gave_up = true;
      Set(index, {std::string{kPhaseGaveUp}, r.tries, std::string{done.message()}}, "failed");
      metrics_->Remediation(index, "reset", "gave_up");
      log_->error(
          "neuron{}: reset failed {} times, the device stays withheld until the plugin "
          "restarts: {}",
          index, r.tries, std::string{done.message()});
      return;
    }
    r.next_try = Clock::now() + options_.retry_after * (1 << (r.tries - 1));
    Set(index, {"failed", r.tries, std::string{done.message()}}, "failed");
    log_->warn("neuron{}: reset try {} of {} failed: {}", index, r.tries,
               options_.policy.reset_tries, std::string{done.message()});
  }

  // Why the device may not be reset now (steps 1 to 3), taking its lock when it may.
  std::optional<std::string> Refusal(int index, Device* r) {
    if (in_use_().contains(index)) return "in a pod's allocation or prepared claim";
    if (!r->lock) {
      absl::StatusOr<WithholdLock> lock =
          WithholdLock::Take(options_.root, index, WithholdLock::Mode::kExclusive);
      if (!lock.ok()) return std::string{lock.status().message()};
      r->lock = *std::move(lock);
      if (in_use_().contains(index)) {  // committed just before the lock
        r->lock.reset();
        return "in a pod's allocation or prepared claim";
      }
    }
    return Holders(index);
  }

  // Who holds the device open once the agent's own holds had `release_wait` to go; nullopt: none.
  std::optional<std::string> Holders(int index) const {
    const absl::StatusOr<dev_t> number = NeuronDeviceNumber(root_, index);
    if (!number.ok()) return std::string{number.status().message()};
    const ProcReader proc(root_);
    const Clock::time_point deadline = Clock::now() + options_.release_wait;
    while (true) {
      const ProcReader::DeviceHolders h = proc.HoldersOf({*number});
      const auto it = h.pids.find(*number);
      if (it == h.pids.end()) return std::nullopt;
      if (Clock::now() >= deadline) {
        std::vector<std::string> who;
        for (int pid : it->second) {
          who.push_back(fmt::format("{} ({})", pid, proc.CommandLine(pid, 60).value_or("?")));
        }
        return fmt::format("held open by PID {}", fmt::join(who, ", "));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }

  void Refuse(int index, Device& r, const std::string& why) {
    r.next_try = Clock::now() + options_.retry_after;
    const RemediationStatus s{"refused", r.tries, "reset refused: " + why};
    if (Status()[index] == s) return;  // said once, until the reason changes
    Set(index, s, "refused");
    log_->warn("neuron{}: {}", index, s.message);
  }

  // Step 4: the reset written, then confirmed by its request count and the state.
  absl::Status ResetAndConfirm(int index, const Device& r) {
    Set(index, {"resetting", r.tries, "reset requested"}, "");
    const absl::StatusOr<uint64_t> before = ResetRequests(root_, index);
    if (!before.ok()) return before.status();
    if (absl::Status s = WriteReset(root_, index); !s.ok()) return s;
    const Clock::time_point deadline = Clock::now() + options_.reset_timeout;
    bool requested = false;
    while (Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      const absl::StatusOr<uint64_t> now = ResetRequests(root_, index);
      requested = requested || (now.ok() && *now > *before);
      const absl::StatusOr<int64_t> state = ReadState(root_, index);
      if (!requested || !state.ok()) continue;
      if (*state == static_cast<int64_t>(DeviceState::kReady)) return absl::OkStatus();
      if (*state == static_cast<int64_t>(DeviceState::kInvalid)) {
        return absl::InternalError("the reset failed: the device is INVALID");
      }
    }
    return absl::DeadlineExceededError(
        requested ? fmt::format("the device did not return to READY within {} ms",
                                options_.reset_timeout.count())
                  : "the driver ignored the reset (reset_req_count did not rise: is the device "
                    "open?)");
  }

  // Step 5: the active check on the device.
  absl::Status Check(int index, const Device& r) {
    Set(index, {"checking", r.tries, "active check running"}, "");
    const ChildResult c = RunChild(CheckCommand(options_, index), options_.check_timeout);
    if (c.exit_code == kCheckPassed) return absl::OkStatus();
    if (c.exit_code == kCheckNoProgram) {
      return absl::FailedPreconditionError(fmt::format(
          "no reference program: the device cannot be proved ({})", LastLine(c.output)));
    }
    return absl::InternalError(
        fmt::format("the active check failed (exit {}): {}", c.exit_code, LastLine(c.output)));
  }

  // Records a status; `result` non-empty counts a reset outcome.
  void Set(int index, RemediationStatus s, std::string_view result) {
    if (!result.empty()) metrics_->Remediation(index, "reset", result);
    std::lock_guard<std::mutex> lock(mu_);
    status_[index] = std::move(s);
  }

  const RemediationOptions options_;
  const RootPaths root_;
  NodeState& state_;
  const InUseFn in_use_;
  Metrics* const metrics_;
  std::shared_ptr<spdlog::logger> log_;
  std::thread thread_;
  std::map<int, Device> devices_;  // the remediator's thread's own
  std::map<int, Action> actions_;  // the same

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  bool changed_ = true;
  std::map<int, RemediationStatus> status_;
};

Remediator::Remediator(RemediationOptions options, NodeState* state, InUseFn in_use,
                       Metrics* metrics)
    : impl_(std::make_unique<Impl>(std::move(options), state, std::move(in_use), metrics)) {}
Remediator::~Remediator() = default;
void Remediator::Start() { impl_->Start(); }
void Remediator::Stop() { impl_->Stop(); }
std::map<int, RemediationStatus> Remediator::Status() const { return impl_->Status(); }

}  // namespace neuron::plugin
