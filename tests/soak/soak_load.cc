#include "tests/soak/soak_load.h"

#include <sys/wait.h>

#include <thread>

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

}  // namespace

bool Load::Ctl(const std::vector<std::string>& words, const std::string& kind) {
  absl::StatusOr<sim::CtlRequest> request = sim::ParseCtlArgs(words);
  if (!request.ok()) {
    std::lock_guard<std::mutex> lock(stats_.mu);
    ++stats_.ctl_transport_errors;  // our bug, but counted where it cannot be missed
    return false;
  }
  absl::StatusOr<sim::CtlReply> reply = sim::SendCtlRequest(node_.paths(), *request, 5000ms);
  std::lock_guard<std::mutex> lock(stats_.mu);
  if (!reply.ok()) {
    ++stats_.ctl_transport_errors;
    return false;
  }
  const bool ok = reply->outcome == sim::CtlOutcome::kOk;
  ++(ok ? stats_.faults_ok : stats_.faults_refused)[kind];
  return ok;
}

void Load::RunFaults(const std::atomic<bool>& stop, std::chrono::milliseconds period) {
  std::mt19937_64 rng(seed_ * 31 + 1);
  const int devices = node_.devices();
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
    std::vector<int> present;
    for (int d = 0; d < devices; ++d) {
      if (!unplugged.contains(d)) present.push_back(d);
    }
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
    if (pods_.size() < 10) AdmitOne(rng);
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

  LivePod live{spec.name, Clock::now() + std::chrono::milliseconds(Uniform(rng, 1000, 6000))};
  int running = 0;
  for (const LivePod& p : pods_) running += p.workload > 0 ? 1 : 0;
  if (resource != kEfa && running < 3 && Uniform(rng, 0, 9) < 3) {
    std::vector<std::string> env = {"NEURON_RT_EXEC_TIMEOUT=2"};
    for (const auto& [k, v] : pod->containers.front().envs) env.push_back(k + "=" + v);
    live.workload = neuron::testing::StartProcess(
        {NEURON_SIM_BIN, "run", "--root", node_.root().string(), "--workload", "matmul", "--steps",
         std::to_string(Uniform(rng, 20, 120))},
        "", node_.logs() / "workload.err", env);
    std::lock_guard<std::mutex> lock(stats_.mu);
    ++stats_.workloads_started;
  }
  pods_.push_back(live);
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
    bool done = false;
    if (p.workload > 0) {
      int status = 0;
      if (waitpid(p.workload, &status, WNOHANG) == p.workload) {
        const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        std::lock_guard<std::mutex> lock(stats_.mu);
        ++stats_.workload_exits[code];
        done = true;
      }
    } else {
      done = now >= p.until;
    }
    if (done) {
      DeletePod(p.name);
      pods_.erase(pods_.begin() + static_cast<ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
}

void Load::DeletePod(const std::string& name) {
  const absl::Status s = node_.kubelet().DeletePod("default", name);
  std::lock_guard<std::mutex> lock(stats_.mu);
  ++(s.ok() ? stats_.deleted : stats_.delete_errors);
}

void Load::RunRestarts(const std::atomic<bool>& stop) {
  std::mt19937_64 rng(seed_ * 31 + 3);
  while (!stop) {
    Nap(stop, std::chrono::milliseconds(Uniform(rng, 20'000, 30'000)));
    if (stop) break;
    const auto t0 = Clock::now();
    if (!node_.kubelet().Restart().ok()) continue;
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
  for (const LivePod& p : pods_) {
    if (p.workload > 0) {
      const std::optional<int> code = neuron::testing::Stop(p.workload, 30s);
      std::lock_guard<std::mutex> lock(stats_.mu);
      ++stats_.workload_exits[code.value_or(-1)];
    } else if (kept < keep) {
      ++kept;
      stay.push_back(p);  // deleted when the load resumes (its time is up)
      continue;
    }
    DeletePod(p.name);
  }
  pods_ = std::move(stay);
}

}  // namespace neuron::soak
