#include "tests/support/sim_cluster.h"

#include <sys/wait.h>

#include <system_error>

namespace neuron::testing {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

bool RunsWithin(pid_t pid, const fs::path& dir) { return sim::IsClusterProcess(pid, dir); }

std::vector<fs::path> SocketsUnder(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_socket(ec)) out.push_back(it->path());
  }
  return out;
}

SimCluster::SimCluster(SimClusterOptions options) : options_(std::move(options)) {
  if (options_.dir.empty()) {
    // "nc.XXXXXX" under /dev/shm leaves the deepest socket path at about 95 bytes.
    temp_ = std::make_unique<TempDir>("nc");
    dir_ = temp_->path();
  } else {
    dir_ = fs::absolute(options_.dir).lexically_normal();
  }
}

SimCluster::~SimCluster() {
  const std::string problem = Down();
  if (!problem.empty() && options_.on_problem) options_.on_problem(problem);
}

bool SimCluster::Up() {
  if (pid_ > 0) {
    error_ = "Up() called twice";
    return false;
  }
  std::vector<std::string> argv{
      options_.sim_bin, "cluster",         "up",    "--nodes",    std::to_string(options_.nodes),
      "--instance",     options_.instance, "--dir", dir_.string()};
  argv.insert(argv.end(), options_.extra.begin(), options_.extra.end());
  std::error_code ec;
  fs::create_directories(dir_, ec);
  pid_ = StartProcess(argv, dir_ / "cluster-up.out", dir_ / "cluster-up.err", {}, &error_);
  if (pid_ <= 0) return false;
  const fs::path ready = sim::ClusterFiles(dir_).Ready();
  WaitUntil([&] { return fs::exists(ready) || Poll().has_value(); }, options_.ready_ceiling);
  if (const std::optional<int> code = Poll()) {
    error_ =
        "neuron-sim cluster up exited with code " + std::to_string(*code) + " before cluster.ready";
    return false;
  }
  if (!fs::exists(ready)) {
    error_ = "no " + ready.string() + " within " + std::to_string(options_.ready_ceiling.count()) +
             " ms";
    return false;
  }
  absl::StatusOr<sim::ClusterSpec> spec = sim::ReadClusterSpec(dir_);
  if (!spec.ok()) {
    error_ = std::string{spec.status().message()};
    return false;
  }
  spec_ = *std::move(spec);
  children_ = sim::ReadClusterChildren(dir_);
  ready_ = true;
  return true;
}

std::optional<int> SimCluster::Poll() {
  if (exit_code_ || pid_ <= 0) return exit_code_;
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) == pid_) {
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  return exit_code_;
}

std::string SimCluster::Log() const {
  const std::string log = ReadFile(dir_ / "cluster-up.err");
  return error_.empty() ? log : error_ + "\n" + log;
}

RunResult SimCluster::Sim(const std::vector<std::string>& args,
                          std::chrono::milliseconds ceiling) const {
  std::vector<std::string> argv{options_.sim_bin};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(dir_, std::move(argv), {}, ceiling);
}

RunResult SimCluster::Ctl(size_t i, const std::vector<std::string>& args,
                          std::chrono::milliseconds ceiling) const {
  std::vector<std::string> argv{"ctl", "--root", node(i).root.string()};
  argv.insert(argv.end(), args.begin(), args.end());
  return Sim(argv, ceiling);
}

std::string SimCluster::Down() {
  if (down_) return *down_;
  if (pid_ <= 0) return *(down_ = std::string());
  std::string problems;
  // A supervisor that exited before (a test killed it) has had its exit code looked at.
  const bool was_running = !Poll().has_value();
  // An Up() that failed after the cluster was ready (its cluster.json unreadable) never read the
  // children: read them now, or the "still runs" check below would look at nothing.
  if (children_.empty()) children_ = sim::ReadClusterChildren(dir_);
  const RunResult down = Sim({"cluster", "down", "--dir", dir_.string()}, 300s);
  if (down.code != 0) {
    problems += "cluster down exited with code " + std::to_string(down.code) + ": " + down.err;
  }
  // `down` returns once the supervisor has exited; it is our child, so we reap it.
  const std::optional<int> code = Poll() ? exit_code_ : (exit_code_ = WaitExit(pid_, 10s));
  if (was_running && code != 0) {
    problems += "the supervisor's exit code is " +
                (code ? std::to_string(*code) : std::string("unknown (still running)")) + "\n";
    if (!code) ::neuron::testing::Stop(pid_, 10s);
  }
  for (const sim::ClusterChild& c : children_) {
    if (RunsWithin(c.pid, dir_)) {
      problems += c.node + " " + c.role + " (pid " + std::to_string(c.pid) + ") still runs\n";
    }
  }
  for (const fs::path& s : SocketsUnder(dir_)) problems += "socket left: " + s.string() + "\n";
  down_ = problems.empty() ? problems : problems + Log();
  return *down_;
}

}  // namespace neuron::testing
