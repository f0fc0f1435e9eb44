#include "tests/soak/soak_load.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spawn.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "core/model/allocator.h"
#include "driver-sim/driver/ctl.h"
#include "tests/soak/soak_checks.h"
#include "tests/support/subprocess.h"

namespace neuron::soak {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

int Uniform(std::mt19937_64& rng, int lo, int hi) {
  return std::uniform_int_distribution<int>(lo, hi)(rng);
}

template <typename T>
const T& Pick(std::mt19937_64& rng, const std::vector<T>& v) {
  return v[static_cast<size_t>(Uniform(rng, 0, static_cast<int>(v.size()) - 1))];
}

// Sleeps up to `d` in short slices, returning early when `stop` is set.
void Nap(const std::atomic<bool>& stop, std::chrono::milliseconds d) {
  const auto until = Clock::now() + d;
  while (!stop && Clock::now() < until) std::this_thread::sleep_for(std::min(d, 50ms));
}

std::string Reason(const absl::Status& s) {
  const std::string m(s.message());
  if (m.find("Insufficient") != std::string::npos) return "insufficient";
  if (m.find("no healthy devices") != std::string::npos) return "no healthy devices";
  if (m.find("UnexpectedAdmissionError") != std::string::npos) return "plugin Allocate error";
  if (m.find("CreateContainerError") != std::string::npos) return "device node missing";
  return std::string(absl::StatusCodeToString(s.code()));
}

// The value after `flag` in a ctl request's words, or "".
std::string FlagValue(const std::vector<std::string>& words, std::string_view flag) {
  for (size_t i = 0; i + 1 < words.size(); ++i) {
    if (words[i] == flag) return words[i + 1];
  }
  return "";
}

// posix_spawn of `args` in a new process group (its own PID), stdout and stderr both to `log`,
// with our environment minus NEURON_ROOT and NEURON_RT_* (as StartProcess) plus `env`. The PID,
// or the error.
absl::StatusOr<pid_t> SpawnInOwnGroup(const std::vector<std::string>& args,
                                      const std::filesystem::path& log,
                                      const std::vector<std::string>& env) {
  std::vector<std::string> envs;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view v(*e);
    if (!v.starts_with("NEURON_ROOT=") && !v.starts_with("NEURON_RT_")) envs.emplace_back(v);
  }
  envs.insert(envs.end(), env.begin(), env.end());
  auto pointers = [](std::vector<std::string>& v) {
    std::vector<char*> p;
    p.reserve(v.size() + 1);
    for (std::string& s : v) p.push_back(s.data());
    p.push_back(nullptr);
    return p;
  };
  std::vector<std::string> argv_s = args;
  std::vector<char*> argv = pointers(argv_s);
  std::vector<char*> envp = pointers(envs);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);  // a group of its own, as a container's init has
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv[0], &fa, &attr, argv.data(), envp.data());
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    return absl::InternalError(fmt::format("posix_spawn {}: {}", args[0], std::strerror(rc)));
  }
  return pid;
}

}  // namespace

Load::Load(SoakNode& node, Stats& stats, uint64_t seed, Clock::time_point start)
    : node_(node), stats_(stats), seed_(seed), start_(start) {
  // The last two devices: neighbours on the NeuronLink ring of every Trn1/Trn2 instance.
  for (int d = std::max(0, node_.devices() - 2); d < node_.devices(); ++d) {
    quiet_devices_.push_back(d);
    for (int k = 0; k < node_.cores_per_device(); ++k) {
      quiet_cores_.push_back(d * node_.cores_per_device() + k);
    }
  }
}

Load::~Load() {
  for (LivePod& p : pods_) {
    if (p.reaper.joinable()) p.reaper.join();
  }
}

double Load::Now() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

bool Load::Ctl(const std::vector<std::string>& words, const std::string& kind, bool count) {
  absl::StatusOr<sim::CtlRequest> request = sim::ParseCtlArgs(words);
  if (!request.ok()) {
    std::lock_guard<std::mutex> lock(stats_.mu);
    ++stats_.ctl_transport_errors;  // our bug, but counted where it cannot be missed
    return false;
  }
  FaultEvent event;
  event.kind = kind;
  event.sent_s = Now();
  absl::StatusOr<sim::CtlReply> reply = sim::SendCtlRequest(node_.paths(), *request, 5000ms);
  event.replied_s = Now();
  std::lock_guard<std::mutex> lock(stats_.mu);
  if (!reply.ok()) {
    ++stats_.ctl_transport_errors;
    return false;
  }
  const bool ok = reply->outcome == sim::CtlOutcome::kOk;
  if (count) ++(ok ? stats_.faults_ok : stats_.faults_refused)[kind];
  if (const std::string d = FlagValue(words, "--device"); !d.empty()) event.device = std::stoi(d);
  if (const std::string c = FlagValue(words, "--core"); !c.empty()) event.core = std::stoi(c);
  event.efa = FlagValue(words, "--efa");
  event.accepted = ok;
  stats_.events.push_back(std::move(event));
  return ok;
}

std::vector<int> Load::Targets(const std::set<int>& unplugged) const {
  std::vector<int> out;
  for (int d = 0; d < node_.devices(); ++d) {
    const bool quiet =
        std::find(quiet_devices_.begin(), quiet_devices_.end(), d) != quiet_devices_.end();
    if (!unplugged.contains(d) && !quiet) out.push_back(d);
  }
  return out;
}

void Load::RunFaults(const std::atomic<bool>& stop, std::chrono::milliseconds period) {
  std::mt19937_64 rng(seed_ * 31 + 1);
  std::set<int> dirty;  // devices we made unhealthy by ECC or a failed reset: reset them first
  auto next = Clock::now();
  while (!stop) {
    next += period;
    std::set<int> unplugged;
    std::set<std::string> down;
    {
      std::lock_guard<std::mutex> lock(stats_.mu);
      unplugged = stats_.unplugged;
      down = stats_.efa_down;
    }
    const std::vector<int> present = Targets(unplugged);
    std::vector<std::string> up;
    for (const std::string& e : node_.efa_names()) {
      if (!down.contains(e)) up.push_back(e);
    }
    // Weights keep recovery ahead of damage, so health flaps both ways and never piles up.
    const int roll = Uniform(rng, 0, 99);
    const std::string dev = std::to_string(Pick(rng, present));
    if (roll < 5 && unplugged.size() < 3) {
      if (Ctl({"unplug", "--device", dev}, "unplug")) {
        std::lock_guard<std::mutex> lock(stats_.mu);
        stats_.unplugged.insert(std::stoi(dev));
      }
    } else if (roll < 13 && !unplugged.empty()) {
      const int d = Pick(rng, std::vector<int>(unplugged.begin(), unplugged.end()));
      if (Ctl({"plug", "--device", std::to_string(d)}, "plug")) {
        std::lock_guard<std::mutex> lock(stats_.mu);
        stats_.unplugged.erase(d);
        dirty.erase(d);
      }
    } else if (roll < 43) {
      static const std::vector<std::string> kKinds = {"hbm-ue", "sram-ue", "nan", "dma-abort",
                                                      "hang"};
      const std::string& kind = Pick(rng, kKinds);
      std::vector<std::string> words = {"inject", kind, "--device", dev};
      if (Uniform(rng, 0, 1) == 0) {
        words.push_back("--core");
        words.push_back(std::to_string(Uniform(rng, 0, node_.cores_per_device() - 1)));
      }
      if (Ctl(words, "inject " + kind) && (kind == "hbm-ue" || kind == "sram-ue")) {
        dirty.insert(std::stoi(dev));
      }
    } else if (roll < 70) {
      std::string target = dev;
      std::vector<int> candidates;
      for (int d : dirty) {
        if (!unplugged.contains(d)) candidates.push_back(d);
      }
      if (!candidates.empty() && Uniform(rng, 0, 9) < 7) {
        target = std::to_string(Pick(rng, candidates));
      }
      if (Ctl({"reset", "--device", target}, "reset")) dirty.erase(std::stoi(target));
    } else if (roll < 74) {
      if (Ctl({"reset", "--device", dev, "--fail"}, "reset --fail")) dirty.insert(std::stoi(dev));
    } else if (roll < 80 && down.size() < 3 && !up.empty()) {
      const std::string& e = Pick(rng, up);
      if (Ctl({"efa-down", "--efa", e}, "efa-down")) {
        std::lock_guard<std::mutex> lock(stats_.mu);
        stats_.efa_down.insert(e);
      }
    } else if (roll < 88 && !down.empty()) {
      const std::string e = Pick(rng, std::vector<std::string>(down.begin(), down.end()));
      if (Ctl({"efa-up", "--efa", e}, "efa-up")) {
        std::lock_guard<std::mutex> lock(stats_.mu);
        stats_.efa_down.erase(e);
      }
    } else {
      // Half of the remaining rolls: a second reset, so READY comes back fast.
      if (Ctl({"reset", "--device", dev}, "reset")) dirty.erase(std::stoi(dev));
    }
    std::this_thread::sleep_until(next);
    if (Clock::now() > next + 10 * period) next = Clock::now();  // do not burst after a stall
  }
}

void Load::RunPods(const std::atomic<bool>& stop) {
  std::mt19937_64 rng(seed_ * 31 + 2);
  while (!stop) {
    ReapAndExpire();
    int quiet_running = 0;
    for (const LivePod& p : pods_) {
      std::lock_guard<std::mutex> lock(stats_.mu);
      if (p.workload && stats_.workloads[*p.workload].quiet) ++quiet_running;
    }
    if (quiet_running < 2) AdmitQuiet(rng);
    if (pods_.size() < 12) AdmitOne(rng);
    Nap(stop, std::chrono::milliseconds(Uniform(rng, 50, 250)));
  }
}

void Load::AdmitOne(std::mt19937_64& rng) {
  sim::KubeletEmulator& kubelet = node_.kubelet();
  sim::PodSpec spec;
  spec.name = "p" + std::to_string(next_pod_++);
  sim::ContainerSpec c;
  const int kind = Uniform(rng, 0, 99);
  std::string resource;
  int n = 0;
  if (kind < 45) {
    resource = kCore;
    n = Pick(rng, std::vector<int>{1, 1, 1, 2, 2, 3, 4, 4, 6, 8});
  } else if (kind < 85) {
    resource = kNeuron;
    n = Pick(rng, std::vector<int>{1, 1, 2, 2, 3, 4, 4, 6, 8, 16});
  } else {
    resource = kEfa;
    n = Uniform(rng, 1, 4);
  }
  c.requests[resource] = n;
  if (resource != kEfa && Uniform(rng, 0, 3) == 0) c.requests[kEfa] = Uniform(rng, 1, 2);
  spec.containers.push_back(c);

  const std::optional<sim::ResourceState> before = kubelet.Resource(resource);
  const std::vector<sim::AdmittedPod> pods_before = kubelet.Pods();
  const std::vector<int> free =
      before ? FreeIds(*before, pods_before, resource) : std::vector<int>{};
  const uint64_t version = (before ? before->updates : 0) + kubelet.restarts() * (1ull << 40);

  absl::StatusOr<sim::AdmittedPod> pod = kubelet.AdmitPod(spec);
  if (!pod.ok()) {
    std::lock_guard<std::mutex> lock(stats_.mu);
    ++stats_.rejected;
    ++stats_.rejected_by_reason[Reason(pod.status())];
    return;
  }
  {
    std::lock_guard<std::mutex> lock(stats_.mu);
    ++stats_.admitted;
  }
  const std::vector<std::string> doubled = DoubleBooked(kubelet.Pods(), node_.cores_per_device());
  if (!doubled.empty()) {
    std::lock_guard<std::mutex> lock(stats_.mu);
    ++stats_.double_booked;
    if (stats_.double_booked_examples.size() < 5) {
      stats_.double_booked_examples.push_back("after " + spec.name + ": " + doubled.front());
    }
  }
  if (resource != kEfa) CheckAdmission(*pod, resource, n, free, version);

  LivePod live{
      spec.name, Clock::now() + std::chrono::milliseconds(Uniform(rng, 1000, 6000)), {}, {}};
  int running = 0;
  for (const LivePod& p : pods_) running += p.workload ? 1 : 0;
  if (resource != kEfa && running < 5 && Uniform(rng, 0, 9) < 3) {
    StartWorkload(live, *pod, false, Uniform(rng, 20, 120));
    // Half of them are deleted at a time of their own, whether or not they finished; the others
    // when their workload ends.
    if (live.workload && Uniform(rng, 0, 1) == 0) {
      live.until = Clock::now() + std::chrono::milliseconds(Uniform(rng, 2000, 15000));
    } else if (live.workload) {
      live.until = Clock::time_point::max();
    }
  }
  pods_.push_back(std::move(live));
}

void Load::AdmitQuiet(std::mt19937_64& rng) {
  sim::PodSpec spec;
  spec.name = "q" + std::to_string(next_pod_++);
  sim::ContainerSpec c;
  c.requests[kCore] = Uniform(rng, 1, 2);
  for (int core : quiet_cores_) c.pinned[kCore].insert(std::to_string(core));
  spec.containers.push_back(c);
  absl::StatusOr<sim::AdmittedPod> pod = node_.kubelet().AdmitPod(spec);
  if (!pod.ok()) {
    std::lock_guard<std::mutex> lock(stats_.mu);
    ++stats_.quiet_rejected;  // other pods hold the quiet cores: not an error
    return;
  }
  const std::vector<std::string> doubled =
      DoubleBooked(node_.kubelet().Pods(), node_.cores_per_device());
  {
    std::lock_guard<std::mutex> lock(stats_.mu);
    ++stats_.admitted;
    if (!doubled.empty()) {
      ++stats_.double_booked;
      if (stats_.double_booked_examples.size() < 5) {
        stats_.double_booked_examples.push_back("after " + spec.name + ": " + doubled.front());
      }
    }
  }
  // A third are deleted at a time of their own, most while their workload runs: the kubelet's
  // SIGTERM must end them with exit 0 too. The others go when their workload ends.
  const bool timed = Uniform(rng, 0, 2) == 0;
  LivePod live{spec.name,
               timed ? Clock::now() + std::chrono::milliseconds(Uniform(rng, 1000, 6000))
                     : Clock::time_point::max(),
               {},
               {}};
  StartWorkload(live, *pod, true, Uniform(rng, 10, 60));
  if (!live.workload) live.until = Clock::now();  // it could not start: the pod goes now
  pods_.push_back(std::move(live));
}

void Load::StartWorkload(LivePod& live, const sim::AdmittedPod& pod, bool quiet, int steps) {
  WorkloadRecord w;
  w.pod = pod.name;
  w.quiet = quiet;
  const int cpd = node_.cores_per_device();
  std::set<int> cores, devices;
  for (int d : PodIds(pod, kNeuron)) {
    devices.insert(d);
    for (int k = 0; k < cpd; ++k) cores.insert(d * cpd + k);
  }
  for (int core : PodIds(pod, kCore)) {
    cores.insert(core);
    devices.insert(core / cpd);
  }
  w.cores.assign(cores.begin(), cores.end());
  w.devices.assign(devices.begin(), devices.end());
  if (!Allocator::IsContiguous(w.cores)) {
    // The kubelet completes an allocation with any free IDs when no contiguous set is left, and
    // the runtime refuses such a NEURON_RT_VISIBLE_CORES at nrt_init (NRT_INVALID,
    // docs/runtime.md#environment): no workload could run there, so none is started.
    std::lock_guard<std::mutex> lock(stats_.mu);
    ++stats_.not_started_noncontiguous;
    return;
  }
  {
    std::lock_guard<std::mutex> lock(stats_.mu);
    w.n = static_cast<int>(stats_.workloads.size());
  }
  const std::filesystem::path dir = node_.logs() / "workloads";
  std::filesystem::create_directories(dir);
  const std::filesystem::path log = dir / fmt::format("{}-{}.log", w.n, pod.name);
  w.log = log.string();
  std::vector<std::string> env = {"NEURON_RT_EXEC_TIMEOUT=2"};
  for (const auto& [k, v] : pod.containers.front().envs) env.push_back(fmt::format("{}={}", k, v));
  w.start_s = Now();
  absl::StatusOr<pid_t> pid =
      SpawnInOwnGroup({node_.sim_bin().string(), "run", "--root", node_.root().string(),
                       "--workload", "matmul", "--steps", std::to_string(steps)},
                      log, env);
  std::lock_guard<std::mutex> lock(stats_.mu);
  if (!pid.ok()) {
    stats_.workload_errors.push_back(fmt::format("{}: {}", pod.name, pid.status().ToString()));
    return;
  }
  // The kubelet owns the group from here: deleting the pod stops it.
  if (absl::Status s = node_.kubelet().SetPodProcessGroup("default", pod.name, *pid); !s.ok()) {
    stats_.workload_errors.push_back(
        fmt::format("{}: SetPodProcessGroup: {}", pod.name, s.ToString()));
  }
  const size_t index = stats_.workloads.size();
  stats_.workloads.push_back(std::move(w));
  ++stats_.workloads_started;
  live.workload = index;
  live.reaper = std::thread([this, index, pid = *pid] { Reap(index, pid); });
}

void Load::Reap(size_t index, pid_t pid) {
  int status = 0;
  pid_t r = -1;
  do {
    r = waitpid(pid, &status, 0);
  } while (r < 0 && errno == EINTR);
  const int code = r != pid ? -1 : WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::lock_guard<std::mutex> lock(stats_.mu);
  WorkloadRecord& rec = stats_.workloads[index];
  rec.end_s = Now();
  rec.exit_code = code;
  ++stats_.workload_exits[code];
}

bool Load::WorkloadEnded(const LivePod& p) {
  std::lock_guard<std::mutex> lock(stats_.mu);
  return p.workload && stats_.workloads[*p.workload].exit_code.has_value();
}

void Load::EndPod(LivePod& p) {
  bool running = false;
  if (p.workload) {
    std::lock_guard<std::mutex> lock(stats_.mu);
    WorkloadRecord& rec = stats_.workloads[*p.workload];
    running = !rec.exit_code;
    rec.stopped_by_kubelet = running;
  }
  const absl::Status s = node_.kubelet().DeletePod("default", p.name);
  if (p.reaper.joinable()) {
    // Returns once the group is gone, which needs the reaper's waitpid: the reaper cannot block.
    p.reaper.join();
  }
  std::lock_guard<std::mutex> lock(stats_.mu);
  ++(s.ok() ? stats_.deleted : stats_.delete_errors);
  if (!running) return;
  ++stats_.kubelet_stops;
  if (!s.ok()) stats_.kubelet_stop_errors.push_back(fmt::format("{}: {}", p.name, s.ToString()));
}

void Load::CheckAdmission(const sim::AdmittedPod& pod, const std::string& resource, int n,
                          const std::vector<int>& free_before, uint64_t version_before) {
  const bool cores = resource == kCore;
  const int cpd = node_.cores_per_device();
  if (!ContiguousConnectedExists(node_.topology(), cpd, free_before, n, cores)) return;
  const std::vector<int> got = PodIds(pod, resource);
  const bool good = ContiguousConnected(node_.topology(), cpd, got, cores);
  const std::optional<sim::ResourceState> after = node_.kubelet().Resource(resource);
  const uint64_t version = (after ? after->updates : 0) + node_.kubelet().restarts() * (1ull << 40);
  std::lock_guard<std::mutex> lock(stats_.mu);
  ++stats_.contiguous_possible;
  if (good) return;
  if (version != version_before) {
    ++stats_.contiguous_missed_racy;
    return;
  }
  ++stats_.contiguous_missed;
  if (stats_.contiguous_examples.size() < 5) {
    std::string line = pod.name + " " + resource + "=" + std::to_string(n) + " got";
    for (int id : got) line += " " + std::to_string(id);
    line += "; free";
    for (int id : free_before) line += " " + std::to_string(id);
    stats_.contiguous_examples.push_back(line);
  }
}

void Load::ReapAndExpire() {
  const auto now = Clock::now();
  for (size_t i = 0; i < pods_.size();) {
    LivePod& p = pods_[i];
    // A workload pod goes when its workload ends or, if it was given one, at its time (the
    // kubelet then stops the workload).
    if ((p.workload && WorkloadEnded(p)) || now >= p.until) {
      EndPod(p);
      pods_.erase(pods_.begin() + static_cast<ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
}

void Load::RunRestarts(const std::atomic<bool>& stop) {
  std::mt19937_64 rng(seed_ * 31 + 3);
  while (!stop) {
    Nap(stop, std::chrono::milliseconds(Uniform(rng, 20'000, 30'000)));
    if (stop) break;
    const auto t0 = Clock::now();
    if (absl::Status s = node_.kubelet().Restart(); !s.ok()) {
      std::lock_guard<std::mutex> lock(stats_.mu);
      stats_.restart_failures.push_back(fmt::format("{:.1f}s: {}", Now(), s.ToString()));
      continue;
    }
    const bool back = neuron::testing::WaitUntil([&] { return node_.Registered(); }, 20s);
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    std::lock_guard<std::mutex> lock(stats_.mu);
    ++stats_.kubelet_restarts;
    if (!back) ++stats_.reregister_late;
    stats_.reregister_max_s = std::max(stats_.reregister_max_s, s);
    stats_.reregister_sum_s += s;
  }
}

void Load::Drain(size_t keep) {
  size_t kept = 0;
  std::vector<LivePod> stay;
  for (LivePod& p : pods_) {
    if (!p.workload && kept < keep) {
      ++kept;
      stay.push_back(std::move(p));  // deleted when the load resumes (its time is up)
      continue;
    }
    EndPod(p);  // the kubelet stops a running workload
  }
  pods_ = std::move(stay);
}

}  // namespace neuron::soak
