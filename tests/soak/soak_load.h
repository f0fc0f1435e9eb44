#pragma once
// The soak's load: random faults through the simulator's ctl socket, pods admitted and deleted
// through the kubelet emulator (some running a real `neuron-sim run` workload with the pod's
// environment), and kubelet restarts. Each driver runs on its own thread until `stop` is set and
// records what it did in Stats; the allocation invariants are checked after every admission.

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "tests/soak/soak_node.h"

namespace neuron::soak {

struct Stats {
  std::mutex mu;
  // faults
  std::map<std::string, int> faults_ok;       // kind -> accepted by the daemon
  std::map<std::string, int> faults_refused;  // kind -> refused (e.g. a reset in progress)
  int ctl_transport_errors = 0;               // the daemon did not answer
  std::set<int> unplugged;                    // devices we unplugged and did not plug yet
  std::set<std::string> efa_down;
  // pods
  int admitted = 0, rejected = 0, deleted = 0, delete_errors = 0;
  std::map<std::string, int> rejected_by_reason;
  int workloads_started = 0;
  std::map<int, int> workload_exits;  // exit code -> count
  // invariants checked at every admission
  int double_booked = 0;
  std::vector<std::string> double_booked_examples;
  int contiguous_possible = 0;     // admissions where a contiguous connected set was free
  int contiguous_missed = 0;       // ... and the pod did not get one, views unchanged meanwhile
  int contiguous_missed_racy = 0;  // ... with the kubelet's view changing during admission
  std::vector<std::string> contiguous_examples;
  // kubelet restarts
  int kubelet_restarts = 0;
  int reregister_late = 0;  // not registered again within the ceiling
  double reregister_max_s = 0, reregister_sum_s = 0;
};

class Load {
 public:
  Load(SoakNode& node, Stats& stats, uint64_t seed) : node_(node), stats_(stats), seed_(seed) {}

  // One random fault every `period` until `stop`.
  void RunFaults(const std::atomic<bool>& stop, std::chrono::milliseconds period);
  // Admissions, deletions and workload processes until `stop`.
  void RunPods(const std::atomic<bool>& stop);
  // A kubelet restart every 20-30 s until `stop`.
  void RunRestarts(const std::atomic<bool>& stop);

  // While the drivers are stopped: SIGTERM to running workloads, their pods deleted; then pods
  // beyond `keep` deleted too (the rest stay for the mask part of the health check, and go when
  // the drivers run again).
  void Drain(size_t keep);

 private:
  struct LivePod {
    std::string name;
    std::chrono::steady_clock::time_point until;  // delete after (no workload)
    pid_t workload = -1;
  };

  bool Ctl(const std::vector<std::string>& words, const std::string& kind);
  void AdmitOne(std::mt19937_64& rng);
  void CheckAdmission(const sim::AdmittedPod& pod, const std::string& resource, int n,
                      const std::vector<int>& free_before, uint64_t updates_before);
  void ReapAndExpire();
  void DeletePod(const std::string& name);

  SoakNode& node_;
  Stats& stats_;
  uint64_t seed_;              // each driver seeds its own generator from it (one thread each)
  std::vector<LivePod> pods_;  // the pod thread's
  int next_pod_ = 0;
};

}  // namespace neuron::soak
