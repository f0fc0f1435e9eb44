#include "tests/support/sim_node.h"

#include <sys/wait.h>

#include <system_error>

#include "driver-sim/driver/sim_paths.h"

namespace neuron::testing {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

SimNode::SimNode(SimNodeOptions options) : options_(std::move(options)) {
  std::error_code ec;
  fs::create_directories(options_.root, ec);
  fs::create_directories(options_.logs, ec);
  if (options_.empty_proc) fs::create_directories(options_.root / "proc", ec);
}

SimNode::~SimNode() { Stop(); }

bool SimNode::Up(std::string_view instance, const std::vector<std::string>& extra) {
  if (pid_ > 0) {
    error_ = "Up() called twice";
    return false;
  }
  std::vector<std::string> argv{options_.sim_bin,      "up",     "--instance",
                                std::string(instance), "--root", options_.root.string()};
  argv.insert(argv.end(), extra.begin(), extra.end());
  const fs::path out = options_.logs / (options_.log_name + ".out");
  const fs::path err = options_.logs / (options_.log_name + ".err");
  pid_ = StartProcess(argv, out, err, {}, &error_);
  if (pid_ <= 0) return false;
  // A daemon that cannot start (a control socket path over 107 bytes, a bad argument) exits at
  // once: waiting out the ceiling then would only delay the failure.
  const fs::path ready = sim::SimReadyPath(paths());
  WaitUntil([&] { return fs::exists(ready) || Poll().has_value(); }, options_.ready_ceiling);
  if (const std::optional<int> code = Poll()) {
    error_ = "neuron-sim up exited with code " + std::to_string(*code) + " before sim.ready";
  } else if (!fs::exists(ready)) {
    error_ = "no " + ready.string() + " within " + std::to_string(options_.ready_ceiling.count()) +
             " ms";
  } else {
    ready_ = true;
  }
  return ready_;
}

std::optional<int> SimNode::Poll() {
  if (exit_code_ || pid_ <= 0 || stopped_) return exit_code_;
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) == pid_) {
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  return exit_code_;
}

fs::path SimNode::Device(int device) const { return paths().NeuronDevice(device); }

fs::path SimNode::Core(int device, int core) const {
  return Device(device) / ("neuron_core" + std::to_string(core));
}

std::string SimNode::Log() const {
  const std::string log = ReadFile(options_.logs / (options_.log_name + ".err"));
  return error_.empty() ? log : error_ + "\n" + log;
}

std::vector<std::string> SimNode::UnderDriver(const std::vector<std::string>& args) const {
  std::vector<std::string> argv{options_.sim_bin, "exec", "--root", options_.root.string(), "--"};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

pid_t SimNode::StartUnderDriver(const std::vector<std::string>& args, const std::string& name) {
  const pid_t pid = StartProcess(UnderDriver(args), options_.logs / (name + ".out"),
                                 options_.logs / (name + ".err"));
  if (pid > 0) started_.push_back(pid);
  return pid;
}

pid_t SimNode::StartWorkload(const std::string& cores, const std::string& workload) {
  const fs::path out = options_.logs / ("run." + std::to_string(workloads_++) + ".out");
  const pid_t pid = StartProcess({options_.sim_bin, "run", "--root", options_.root.string(),
                                  "--workload", workload, "--steps", "0"},
                                 out, out.string() + ".err", {"NEURON_RT_VISIBLE_CORES=" + cores});
  if (pid <= 0) return -1;
  const auto stepped = [&] { return ReadFile(out).find("step 1 ") != std::string::npos; };
  std::optional<int> ended;  // a workload that fails exits: no point waiting for its step
  WaitUntil([&] { return stepped() || (ended = WaitExit(pid, 0ms)).has_value(); },
            options_.ready_ceiling);
  if (ended) return -1;
  started_.push_back(pid);
  return stepped() ? pid : -1;
}

RunResult SimNode::Ctl(const std::vector<std::string>& args,
                       std::chrono::milliseconds ceiling) const {
  std::vector<std::string> argv{options_.sim_bin, "ctl", "--root", options_.root.string()};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(options_.logs, std::move(argv), {}, ceiling);
}

std::optional<int> SimNode::Stop() {
  if (stopped_) return exit_code_;
  for (auto it = started_.rbegin(); it != started_.rend(); ++it) {
    ::neuron::testing::Stop(*it, 60s);
  }
  started_.clear();
  const bool started = pid_ > 0;
  if (started && !Poll()) exit_code_ = ::neuron::testing::Stop(pid_, 90s);
  stopped_ = true;
  if (started && options_.on_stop) options_.on_stop(exit_code_, Log());
  return exit_code_;
}

}  // namespace neuron::testing
