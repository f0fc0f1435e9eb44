// The active check's children (top/health_check_internal.h): starting this binary in its child
// mode for each program, bounding each by the timeout, and the child mode itself.
#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/base/file_io.h"
#include "core/sample/libnrt_exec.h"
#include "top/health_check.h"
#include "top/health_check_internal.h"

namespace neuron::top {
namespace check {
namespace {

using Clock = std::chrono::steady_clock;

struct Running {
  size_t job = 0;
  pid_t pid = -1;
  int fd = -1;  // the read end of the child's stdout and stderr
  std::string output;
  Clock::time_point deadline;
  bool done = false;
  bool timed_out = false;
};

// The parent's environment with the child's core (and world) in place of any inherited ones, and
// libnrt's own execution timeout (NEURON_RT_EXEC_TIMEOUT, whole seconds) 2 s inside the check's,
// so that a collective stuck on a downed link ends in libnrt's own error, which says more than
// a killed child does.
std::vector<std::string> ChildEnvironment(const ChildJob& job, std::chrono::milliseconds timeout) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view v(*e);
    if (v.starts_with("NEURON_RT_VISIBLE_CORES=") || v.starts_with("NEURON_RT_NUM_CORES=") ||
        v.starts_with("NEURON_RT_ROOT_COMM_ID=") || v.starts_with("NEURON_RT_EXEC_TIMEOUT=")) {
      continue;
    }
    env.emplace_back(v);
  }
  env.push_back(fmt::format("NEURON_RT_VISIBLE_CORES={}", job.core));
  if (!job.comm_id.empty()) env.push_back("NEURON_RT_ROOT_COMM_ID=" + job.comm_id);
  const int64_t seconds = std::chrono::duration_cast<std::chrono::seconds>(timeout).count() - 2;
  env.push_back(fmt::format("NEURON_RT_EXEC_TIMEOUT={}", std::max<int64_t>(1, seconds)));
  return env;
}

absl::StatusOr<Running> StartChild(const SpawnContext& ctx, const ChildJob& job, size_t index) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return absl::InternalError("pipe failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
  const std::vector<std::string> args{ctx.self_exe, std::string{kChildModeFlag}, ctx.programs,
                                      job.program,  std::to_string(job.rank),    ctx.libnrt};
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const std::vector<std::string> env = ChildEnvironment(job, ctx.timeout);
  std::vector<char*> envp;
  envp.reserve(env.size() + 1);
  for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  pid_t pid = -1;
  const int err =
      posix_spawn(&pid, ctx.self_exe.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  if (err != 0) {
    ::close(fds[0]);
    return absl::InternalError(
        fmt::format("cannot start {}: {}", ctx.self_exe, std::strerror(err)));
  }
  return Running{
      .job = index, .pid = pid, .fd = fds[0], .output = {}, .deadline = Clock::now() + ctx.timeout};
}

// The child's verdict from its last {"result": ...} line; the line before it says why when the
// child died without one (libnrt's last error).
ChildOutcome ParseChildOutput(const Running& r) {
  ChildOutcome o;
  if (r.timed_out) {
    o.failure = "timeout";
    o.detail = "no answer within the timeout (a hang); the child was killed";
    return o;
  }
  std::string last_other;
  size_t pos = 0;
  while (pos < r.output.size()) {
    size_t end = r.output.find('\n', pos);
    if (end == std::string::npos) end = r.output.size();
    const std::string line = r.output.substr(pos, end - pos);
    pos = end + 1;
    if (!line.starts_with("{\"result\"")) {
      if (!line.empty()) last_other = line;
      continue;
    }
    const auto doc = nlohmann::json::parse(line, nullptr, false);
    if (doc.is_discarded() || !doc["result"].is_object()) continue;
    const auto& res = doc["result"];
    o.passed = res.value("passed", false);
    o.failure = res.value("failure", "");
    o.detail = res.value("detail", "");
    o.execute_us = res.value("execute_us", int64_t{0});
    if (!o.passed && !last_other.empty()) o.detail += " (" + last_other + ")";
    return o;
  }
  o.failure = "error";
  o.detail = "the child gave no result" + (last_other.empty() ? "" : ": " + last_other);
  return o;
}

// Reads what the running children wrote until each has closed its pipe or passed its deadline.
void DrainChildren(std::vector<Running>* running) {
  while (true) {
    std::vector<pollfd> fds;
    std::vector<Running*> who;
    Clock::time_point next = Clock::time_point::max();
    for (Running& r : *running) {
      if (r.done) continue;
      fds.push_back({r.fd, POLLIN, 0});
      who.push_back(&r);
      next = std::min(next, r.deadline);
    }
    if (fds.empty()) return;
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next - Clock::now());
    ::poll(fds.data(), fds.size(), static_cast<int>(std::max<int64_t>(0, wait.count())));
    for (size_t i = 0; i < fds.size(); ++i) {
      Running& r = *who[i];
      if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
        char buf[4096];
        const ssize_t n = ::read(r.fd, buf, sizeof(buf));
        if (n > 0 && r.output.size() < (1 << 20)) r.output.append(buf, static_cast<size_t>(n));
        if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) r.done = true;
      }
      if (!r.done && Clock::now() >= r.deadline) {
        ::kill(r.pid, SIGKILL);
        r.timed_out = true;
        r.done = true;
      }
    }
  }
}

}  // namespace

std::vector<ChildOutcome> RunChildren(const SpawnContext& ctx, const std::vector<ChildJob>& jobs,
                                      size_t parallel) {
  std::vector<ChildOutcome> out(jobs.size());
  size_t next = 0;
  while (next < jobs.size()) {
    // A batch ends at `parallel` children but never splits a group (an exchange's ranks).
    size_t end = std::min(jobs.size(), next + std::max<size_t>(parallel, 1));
    while (end < jobs.size() && !jobs[end].comm_id.empty() &&
           jobs[end].comm_id == jobs[end - 1].comm_id) {
      ++end;
    }
    std::vector<Running> running;
    for (size_t i = next; i < end; ++i) {
      absl::StatusOr<Running> r = StartChild(ctx, jobs[i], i);
      if (!r.ok()) {
        out[i] = {.failure = "error", .detail = std::string{r.status().message()}};
        continue;
      }
      running.push_back(*std::move(r));
    }
    DrainChildren(&running);
    for (Running& r : running) {
      ::close(r.fd);
      int status = 0;
      while (::waitpid(r.pid, &status, 0) < 0 && errno == EINTR) {
      }
      out[r.job] = ParseChildOutput(r);
    }
    next = end;
  }
  return out;
}

absl::StatusOr<std::string> LocalCommId() {
  const int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return absl::InternalError("socket failed");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  const bool ok = ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
                  ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  ::close(s);
  if (!ok) return absl::InternalError("no free port on 127.0.0.1");
  return fmt::format("127.0.0.1:{}", ntohs(a.sin_port));
}

}  // namespace check

namespace {

// The first byte where `got` differs from `want`, described; "" when they are equal.
std::string CompareOutput(const std::string& tensor, const std::string& got,
                          const std::string& want) {
  if (got == want) return "";
  if (got.size() != want.size()) {
    return fmt::format("output \"{}\" has {} bytes, expected {}", tensor, got.size(), want.size());
  }
  const auto at = std::mismatch(got.begin(), got.end(), want.begin()).first - got.begin();
  return fmt::format("output \"{}\" differs at byte {}: 0x{:02x}, expected 0x{:02x}", tensor, at,
                     static_cast<uint8_t>(got[at]), static_cast<uint8_t>(want[at]));
}

// Always 0: the child reports what happened and exits normally.
int ReportResult(bool passed, std::string_view failure, std::string_view detail, int64_t us) {
  const nlohmann::json doc = {
      {"result",
       {{"passed", passed}, {"failure", failure}, {"detail", detail}, {"execute_us", us}}}};
  std::printf("%s\n", doc.dump().c_str());
  std::fflush(stdout);
  return 0;
}

}  // namespace

int HealthCheckChildMain(const std::vector<std::string>& args) {
  if (args.size() != 4) return 2;
  const auto rank = static_cast<uint32_t>(std::strtoul(args[2].c_str(), nullptr, 10));
  absl::StatusOr<check::Manifest> manifest = check::LoadManifest(args[0]);
  const check::RefProgram* p = manifest.ok() ? manifest->Find(args[1]) : nullptr;
  if (p == nullptr || rank >= p->inputs.size()) {
    return ReportResult(false, "error",
                        manifest.ok() ? std::string{"no such program or rank"}
                                      : std::string{manifest.status().message()},
                        0);
  }
  NeffRun run{.libnrt = args[3], .neff = p->neff};
  run.rank = rank;
  run.world = static_cast<uint32_t>(p->inputs.size());
  // An exchange's ranks start as two processes: the first execution waits for the later one,
  // so the time compared with the baseline is the second's.
  run.executions = run.world > 1 ? 2 : 1;
  std::vector<std::string> expected;
  for (const auto& [name, file] : p->inputs[rank]) {
    absl::StatusOr<std::string> b = ReadWholeFile(file);
    if (!b.ok()) return ReportResult(false, "error", std::string{b.status().message()}, 0);
    run.inputs.emplace_back(name, *std::move(b));
  }
  for (const auto& [name, file] : p->expected) {
    absl::StatusOr<std::string> b = ReadWholeFile(file);
    if (!b.ok()) return ReportResult(false, "error", std::string{b.status().message()}, 0);
    run.outputs.emplace_back(name, b->size());
    expected.push_back(*std::move(b));
  }
  absl::StatusOr<NeffResult> r = RunNeffOnce(run);
  if (!r.ok()) return ReportResult(false, "error", std::string{r.status().message()}, 0);
  const int64_t us = r->execute_ns / 1000;
  if (r->status != 0) {
    return ReportResult(false, "error",
                        fmt::format("nrt_execute returned {} ({})", r->status_text, r->status), us);
  }
  // Every execution's outputs: a corruption of the untimed first one counts too.
  for (const auto& outputs : r->executions) {
    for (size_t i = 0; i < expected.size(); ++i) {
      const std::string diff = CompareOutput(outputs[i].first, outputs[i].second, expected[i]);
      if (!diff.empty()) return ReportResult(false, "mismatch", diff, us);
    }
  }
  return ReportResult(true, "", "", us);
}

}  // namespace neuron::top
