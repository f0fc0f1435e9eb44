// RunJob (job.h): admission, then one `neuron-sim job attach -- neuron-sim run ...` per pod
// (RunInAdmittedPod: the pod's command supervised as `pod run` supervises it), their output read
// line by line into the pods' logs and the job's step lines, until every pod has ended.

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>

#include "core/base/unique_fd.h"
#include "driver-sim/cluster/job.h"
#include "driver-sim/cluster/job_internal.h"

namespace neuron::sim {
namespace {

using job_internal::JobRecord;
using job_internal::PodRecord;
using Clock = std::chrono::steady_clock;

struct PodProc {
  const PodPlan* plan = nullptr;
  const PodRecord* record = nullptr;
  pid_t pid = -1;
  UniqueFd out;  // the read end of the pod's stdout and stderr
  std::string partial;
  std::ofstream log;
  std::optional<int> exit_code;
  std::string last_error;     // the last line a neuron-sim command wrote about a failure
  std::string runtime_error;  // the runtime's first error line (which ranks never arrived)
};

// argv and envp of the process that runs one pod: this binary's `job attach`, whose command is
// this binary's `run` with the recipe's arguments, with the launcher's variables added to ours.
struct SpawnArgs {
  std::vector<std::string> argv;
  std::vector<std::string> envp;
};
SpawnArgs AttachArgs(const std::string& self, const PodPlan& plan, const PodRecord& rec,
                     int grace_period_seconds) {
  SpawnArgs a;
  a.argv = {self,
            "job",
            "attach",
            "--kubelet-dir",
            rec.kubelet_dir.string(),
            "--namespace",
            rec.namespace_name,
            "--name",
            rec.name,
            "--grace-period",
            std::to_string(grace_period_seconds),
            "--",
            self,
            "run"};
  a.argv.insert(a.argv.end(), plan.run_args.begin(), plan.run_args.end());
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view entry(*e);
    if (!plan.env.contains(std::string{entry.substr(0, entry.find('='))})) {
      a.envp.emplace_back(entry);
    }
  }
  for (const auto& [k, v] : plan.env) a.envp.push_back(fmt::format("{}={}", k, v));
  return a;
}

// Starts the pod's process with the signal mask and dispositions a fresh process has, its
// stdout and stderr into one pipe whose read end is returned in `out`.
absl::StatusOr<pid_t> Spawn(SpawnArgs& a, UniqueFd* out) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    return absl::InternalError(fmt::format("pipe: {}", std::strerror(errno)));
  }
  UniqueFd read_end(fds[0]);
  UniqueFd write_end(fds[1]);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, write_end.get(), STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, write_end.get(), STDERR_FILENO);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  sigset_t defaults;
  sigemptyset(&defaults);
  for (int sig : {SIGPIPE, SIGTERM, SIGINT, SIGCHLD}) sigaddset(&defaults, sig);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  std::vector<char*> argv;
  for (std::string& s : a.argv) argv.push_back(s.data());
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (std::string& s : a.envp) envp.push_back(s.data());
  envp.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv[0], &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    return absl::InternalError(fmt::format("spawn {}: {}", a.argv[0], std::strerror(rc)));
  }
  *out = std::move(read_end);
  return pid;
}

std::string DescribeExit(int code) {
  if (code <= 128) return fmt::format("exit code {}", code);
  const int sig = code - 128;
  const char* name = sig == SIGKILL ? "SIGKILL" : sig == SIGTERM ? "SIGTERM" : nullptr;
  return name != nullptr ? fmt::format("exit code {} (killed by {})", code, name)
                         : fmt::format("exit code {} (killed by signal {})", code, sig);
}

class JobSupervisor {
 public:
  JobSupervisor(const JobRunRequest& request, const JobPlan& plan, const JobRecord& record,
                std::ostream& out, std::ostream& err)
      : request_(request),
        plan_(plan),
        record_(record),
        out_(out),
        err_(err),
        tally_(plan.pods.size()) {}

  absl::Status Start(int signal_fd);
  int Run();

 private:
  void OnReadable(PodProc& p);
  void OnLine(size_t index, std::string_view line);
  void OnSignal();
  void Reap();
  void StopAll(const std::string& why);
  static int DrainSeconds();
  bool Done() const;
  int WaitMs(bool has_deadline, Clock::time_point deadline) const;

  const JobRunRequest& request_;
  const JobPlan& plan_;
  const JobRecord& record_;
  std::ostream& out_;
  std::ostream& err_;
  StepTally tally_;
  std::vector<PodProc> pods_;
  int signal_fd_ = -1;
  bool stopping_ = false;
  bool failed_ = false;
  // After the first failed pod: the others get until drain_until_ to end by themselves.
  bool draining_ = false;
  Clock::time_point drain_until_;
  int stopped_by_ = 0;
};

absl::Status JobSupervisor::Start(int signal_fd) {
  signal_fd_ = signal_fd;
  std::error_code ec;
  const std::string self = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  if (ec) return absl::InternalError(fmt::format("readlink /proc/self/exe: {}", ec.message()));
  pods_.resize(plan_.pods.size());
  for (size_t i = 0; i < pods_.size(); ++i) {
    PodProc& p = pods_[i];
    p.plan = &plan_.pods[i];
    p.record = &record_.pods[i];
    const std::filesystem::path log =
        job_internal::JobDir(request_.cluster_dir, plan_.name) / (p.record->name + ".log");
    p.log.open(log, std::ios::trunc);
    SpawnArgs args = AttachArgs(self, *p.plan, *p.record, request_.grace_period_seconds);
    absl::StatusOr<pid_t> pid = Spawn(args, &p.out);
    if (!pid.ok()) {
      // This pod and the ones after it never start; the ones before are stopped.
      for (size_t j = i; j < pods_.size(); ++j) pods_[j].exit_code = 127;
      failed_ = true;
      StopAll(fmt::format("pod {} could not start: {}", p.record->name,
                          std::string{pid.status().message()}));
      return pid.status();
    }
    p.pid = *pid;
    out_ << fmt::format("started {}/{} on {}: ranks {}-{} of {}, log {}\n",
                        p.record->namespace_name, p.record->name, p.record->node,
                        p.plan->first_rank, p.plan->first_rank + p.plan->ranks - 1, plan_.world,
                        log.string());
  }
  out_.flush();
  return absl::OkStatus();
}

void JobSupervisor::OnReadable(PodProc& p) {
  char buf[4096];
  const ssize_t n = read(p.out.get(), buf, sizeof(buf));
  if (n < 0 && errno == EINTR) return;
  if (n <= 0) {
    if (!p.partial.empty()) OnLine(static_cast<size_t>(&p - pods_.data()), p.partial);
    p.partial.clear();
    p.out.Reset();
    return;
  }
  p.partial.append(buf, static_cast<size_t>(n));
  for (size_t nl; (nl = p.partial.find('\n')) != std::string::npos;) {
    const std::string line = p.partial.substr(0, nl);
    p.partial.erase(0, nl + 1);
    OnLine(static_cast<size_t>(&p - pods_.data()), line);
  }
}

void JobSupervisor::OnLine(size_t index, std::string_view line) {
  PodProc& p = pods_[index];
  p.log << line << '\n';
  p.log.flush();
  if (line.starts_with("neuron-sim ")) p.last_error = std::string(line);
  if (const size_t at = line.find("ERROR NRT:");
      at != std::string_view::npos && p.runtime_error.empty()) {
    p.runtime_error = std::string(line.substr(at + 6));
  }
  if (std::optional<StepFigures> f = ParseStepLine(line)) {
    if (std::optional<std::string> job_line = tally_.Add(index, *f, request_.options.steps)) {
      out_ << *job_line << '\n';
      out_.flush();
    }
  }
}

void JobSupervisor::Reap() {
  for (PodProc& p : pods_) {
    int status = 0;
    if (p.exit_code || p.pid < 0 || waitpid(p.pid, &status, WNOHANG) != p.pid) continue;
    p.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (*p.exit_code == 0) {
      out_ << fmt::format("pod {}/{} on {} exited 0\n", p.record->namespace_name, p.record->name,
                          p.record->node);
      continue;
    }
    err_ << fmt::format("job {}: pod {}/{} on {} (ranks {}-{}) failed: {}{}{}\n", plan_.name,
                        p.record->namespace_name, p.record->name, p.record->node,
                        p.plan->first_rank, p.plan->first_rank + p.plan->ranks - 1,
                        DescribeExit(*p.exit_code), p.last_error.empty() ? "" : ": ", p.last_error);
    if (stopping_ || draining_) continue;
    failed_ = true;
    // The other pods see the failure themselves when their collectives miss the pod's ranks
    // (the runtime's status and message say which ranks), within one execution timeout: they
    // get that long, and then they are deleted.
    const int window = DrainSeconds();
    draining_ = true;
    drain_until_ = Clock::now() + std::chrono::seconds(window);
    err_ << fmt::format(
        "job {}: pod {} failed; the other pods get {} s (NEURON_RT_EXEC_TIMEOUT and 10 s) to "
        "end, then every pod is deleted\n",
        plan_.name, p.record->name, window);
    err_.flush();
  }
}

void JobSupervisor::StopAll(const std::string& why) {
  if (stopping_) return;
  stopping_ = true;
  err_ << fmt::format("job {}: {}; deleting every pod\n", plan_.name, why);
  err_.flush();
  // The attach process deletes its pod on SIGTERM: the kubelet stops the pod's processes.
  for (PodProc& p : pods_) {
    if (p.pid > 0 && !p.exit_code) kill(p.pid, SIGTERM);
  }
}

void JobSupervisor::OnSignal() {
  signalfd_siginfo info{};
  while (read(signal_fd_, &info, sizeof(info)) == sizeof(info)) {
    if (info.ssi_signo == SIGCHLD) continue;
    if (stopped_by_ == 0) stopped_by_ = static_cast<int>(info.ssi_signo);
    StopAll(fmt::format("stopped by {}", info.ssi_signo == SIGINT ? "SIGINT" : "SIGTERM"));
  }
  Reap();
}

int JobSupervisor::DrainSeconds() {
  // libnrt-sim's default execution timeout (docs/runtime.md#environment).
  double timeout = 30;
  if (const char* v = std::getenv("NEURON_RT_EXEC_TIMEOUT"); v != nullptr) {
    char* end = nullptr;
    const double t = std::strtod(v, &end);
    if (end != v && *end == '\0' && t > 0 && t < 86400) timeout = t;
  }
  return static_cast<int>(std::ceil(timeout)) + 10;
}

bool JobSupervisor::Done() const {
  for (const PodProc& p : pods_) {
    if (!p.exit_code || p.out.valid()) return false;
  }
  return true;
}

// Until the next decision: the job's timeout or the end of the failure's window; -1: none.
int JobSupervisor::WaitMs(bool has_deadline, Clock::time_point deadline) const {
  if (stopping_) return -1;
  std::optional<Clock::duration> wait;
  if (has_deadline) wait = deadline - Clock::now();
  if (draining_) {
    wait = std::min(wait.value_or(Clock::duration::max()), drain_until_ - Clock::now());
  }
  if (!wait) return -1;
  return static_cast<int>(
      std::max<int64_t>(0, std::chrono::ceil<std::chrono::milliseconds>(*wait).count()));
}

int JobSupervisor::Run() {
  // A plain time point and a flag: GCC 12 takes an optional one for maybe-uninitialized.
  const bool has_deadline = request_.timeout_seconds > 0;
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(request_.timeout_seconds);
  bool timed_out = false;
  while (!Done()) {
    std::vector<pollfd> fds{{signal_fd_, POLLIN, 0}};
    std::vector<PodProc*> owners{nullptr};
    for (PodProc& p : pods_) {
      if (!p.out.valid()) continue;
      fds.push_back({p.out.get(), POLLIN, 0});
      owners.push_back(&p);
    }
    const int wait_ms = WaitMs(has_deadline, deadline);
    if (poll(fds.data(), fds.size(), wait_ms) == 0 && !stopping_) {
      if (has_deadline && Clock::now() >= deadline) {
        timed_out = true;
        StopAll(fmt::format("--timeout {} s passed", request_.timeout_seconds));
      } else if (draining_ && Clock::now() >= drain_until_) {
        StopAll("the other pods did not end by themselves");
      }
    }
    for (size_t i = 0; i < fds.size(); ++i) {
      if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      if (owners[i] == nullptr) {
        OnSignal();
      } else {
        OnReadable(*owners[i]);
      }
    }
  }
  if (stopped_by_ != 0) return 128 + stopped_by_;
  if (failed_ || timed_out) return 1;
  out_ << fmt::format("job {}: all {} pods exited 0\n", plan_.name, pods_.size());
  return 0;
}

}  // namespace

int RunJob(const JobRunRequest& request, std::ostream& out, std::ostream& err) {
  // Before any gRPC thread exists: the signals are taken through a signalfd only.
  sigset_t signals;
  sigemptyset(&signals);
  for (int sig : {SIGTERM, SIGINT, SIGCHLD}) sigaddset(&signals, sig);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  const UniqueFd signal_fd(signalfd(-1, &signals, SFD_CLOEXEC | SFD_NONBLOCK));
  auto fail = [&err](int code, auto message) {
    err << fmt::format("neuron-sim job run: {}\n", std::string{message});
    return code;
  };
  if (!signal_fd.valid()) return fail(1, fmt::format("signalfd: {}", std::strerror(errno)));
  absl::StatusOr<ClusterSpec> cluster = ReadClusterSpec(request.cluster_dir);
  if (!cluster.ok()) return fail(1, cluster.status().message());
  std::vector<NodeSlot> slots;
  for (const ClusterNode& n : cluster->nodes) slots.push_back({n.name, n.address, n.instance});
  if (slots.empty()) return fail(1, "the cluster has no nodes");
  absl::StatusOr<int> port = job_internal::PickPort(slots.front().address);
  if (!port.ok()) return fail(1, port.status().message());
  absl::StatusOr<JobPlan> plan = PlanJob(request.recipe, request.options, slots, *port);
  if (!plan.ok()) return fail(2, plan.status().message());
  const JobRecord record = job_internal::RecordOf(*plan, *cluster);
  if (absl::Status s = job_internal::WriteJobRecord(request.cluster_dir, record); !s.ok()) {
    return fail(1, s.message());
  }
  out << fmt::format("job {}: {} on {} node{}, {} ranks, rendezvous {}\n", plan->name, plan->recipe,
                     plan->nodes, plan->nodes == 1 ? "" : "s", plan->world, plan->comm_id);
  if (absl::Status s = job_internal::AdmitAll(record, *plan, out); !s.ok()) {
    // Nothing of the job runs: it leaves no record for `job list` or `job delete`.
    std::error_code ec;
    std::filesystem::remove(job_internal::JobDir(request.cluster_dir, plan->name) / "job.json", ec);
    return fail(1, s.message());
  }
  JobSupervisor supervisor(request, *plan, record, out, err);
  absl::Status started = supervisor.Start(signal_fd.get());
  const int code = supervisor.Run();
  // Pods whose attach process died without deleting them (it deletes them on every way out it
  // controls) are deleted here.
  if (absl::Status s = job_internal::DeleteAll(record, request.grace_period_seconds); !s.ok()) {
    err << fmt::format("neuron-sim job run: {}\n", std::string{s.message()});
  }
  return started.ok() ? code : 1;
}

}  // namespace neuron::sim
