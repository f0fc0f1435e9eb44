#pragma once
// The soak's load: random faults through the simulator's ctl socket, pods admitted and deleted
// through the kubelet emulator (some running a real `neuron-sim run` workload with the pod's
// environment), and kubelet restarts. Each driver runs on its own thread until `stop` is set and
// records what it did in Stats; the allocation invariants are checked after every admission.
//
// Two devices are quiet: the fault injector never touches them, and a lane of pods pinned to
// their cores (ContainerSpec::pinned) keeps up to two workloads running there, every one of which
// must exit 0. A workload runs in a process group of its own that the kubelet emulator owns
// (SetPodProcessGroup): deleting its pod stops it (SIGTERM, grace, SIGKILL); the soak only reaps
// it, on a thread per workload, and never signals it.

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tests/soak/soak_node.h"
#include "tests/soak/soak_record.h"

namespace neuron::soak {

struct Stats {
  std::mutex mu;
  // faults
  std::map<std::string, int> faults_ok;       // kind -> accepted by the daemon
  std::map<std::string, int> faults_refused;  // kind -> refused (e.g. a reset in progress)
  int ctl_transport_errors = 0;               // the daemon did not answer
  std::vector<FaultEvent> events;             // every request answered, in the order sent
  std::set<int> unplugged;                    // devices we unplugged and did not plug yet
  std::set<std::string> efa_down;
  // pods
  int admitted = 0, rejected = 0, deleted = 0, delete_errors = 0;
  std::map<std::string, int> rejected_by_reason;
  int workloads_started = 0;
  std::map<int, int> workload_exits;  // exit code -> count
  std::vector<WorkloadRecord> workloads;
  std::vector<std::string> workload_errors;  // spawn or SetPodProcessGroup failures
  int quiet_rejected = 0;                    // quiet pods the kubelet could not place
  int not_started_noncontiguous = 0;         // workloads not started: their cores are not one range
  int kubelet_stops = 0;  // pods deleted while their workload ran: the kubelet stopped it
  std::vector<std::string> kubelet_stop_errors;  // DeletePod failed, or the workload outlived it
  // invariants checked at every admission
  int double_booked = 0;
  std::vector<std::string> double_booked_examples;
  int contiguous_possible = 0;     // admissions where a contiguous connected set was free
  int contiguous_missed = 0;       // ... and the pod did not get one, views unchanged meanwhile
  int contiguous_missed_racy = 0;  // ... with the kubelet's view changing during admission
  std::vector<std::string> contiguous_examples;
  // kubelet restarts
  int kubelet_restarts = 0;
  std::vector<std::string> restart_failures;  // Restart() calls that failed
  int reregister_late = 0;                    // not registered again within the ceiling
  double reregister_max_s = 0, reregister_sum_s = 0;
};

class Load {
 public:
  // `start` is the soak's time zero for every recorded time.
  Load(SoakNode& node, Stats& stats, uint64_t seed, std::chrono::steady_clock::time_point start);
  // Joins the reapers; call Drain first (while the kubelet is up) so that none is left waiting.
  ~Load();

  // The quiet devices and their global cores.
  const std::vector<int>& quiet_devices() const { return quiet_devices_; }
  const std::vector<int>& quiet_cores() const { return quiet_cores_; }
  double Now() const;  // seconds since `start`

  // One ctl request, recorded in Stats::events under `kind` with its target, and counted in
  // faults_ok/faults_refused when `count` (not the quiet points' clean-up); true when accepted.
  bool Ctl(const std::vector<std::string>& words, const std::string& kind, bool count = true);

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
    std::optional<size_t> workload;               // index in Stats::workloads
    std::thread reaper;                           // waits for the workload's exit
  };

  void AdmitOne(std::mt19937_64& rng);
  void AdmitQuiet(std::mt19937_64& rng);
  // Starts `neuron-sim run` in the pod's environment, in a process group the kubelet owns.
  void StartWorkload(LivePod& live, const sim::AdmittedPod& pod, bool quiet, int steps);
  // The reaper thread's body: waits for the workload and records its end and exit status.
  void Reap(size_t index, pid_t pid);
  bool WorkloadEnded(const LivePod& p);
  // The devices the fault injector may target: present and not quiet.
  std::vector<int> Targets(const std::set<int>& unplugged) const;
  // Deletes the pod through the kubelet, which stops a workload still running, then joins its
  // reaper.
  void EndPod(LivePod& p);
  void CheckAdmission(const sim::AdmittedPod& pod, const std::string& resource, int n,
                      const std::vector<int>& free_before, uint64_t updates_before);
  void ReapAndExpire();

  SoakNode& node_;
  Stats& stats_;
  uint64_t seed_;  // each driver seeds its own generator from it (one thread each)
  std::chrono::steady_clock::time_point start_;
  std::vector<int> quiet_devices_, quiet_cores_;
  std::vector<LivePod> pods_;  // the pod thread's
  int next_pod_ = 0;
};

}  // namespace neuron::soak
