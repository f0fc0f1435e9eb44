#pragma once
// A rolling update of the DRA plugin as the DaemonSet makes it with maxSurge 1, maxUnavailable 0
// (docs/kubelet-api.md#dra-upgrades), for tests/driver-sim/kubelet_dra_rolling_update_test.cc and
// bench/dra_bench.cc: the old instance (POD_UID old) serves; the new one (POD_UID new) starts
// beside it and registers; the kubelet follows the newest registration; the old one stops. All
// the while a pod with claim default/pair is admitted and deleted in a loop through the kubelet
// emulator, and the longest gap between two successful admissions (NodePrepareResources on
// whichever instance the kubelet follows) is what a user would see as the update's prepare gap.
// GoogleTest-free.

#include <sys/types.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>

#include "driver-sim/kubelet/kubelet_emulator.h"
#include "tests/support/subprocess.h"

namespace neuron::testing {

struct RollingUpdateResult {
  std::chrono::milliseconds longest_gap{0};  // between successful prepares (admissions)
  int admissions = 0;
  int failures = 0;
  std::string first_failure;
  bool updated = false;  // the new instance registered and the old one stopped cleanly
};

// `start(pod_uid)` starts one plugin instance and returns its PID.
inline RollingUpdateResult RollDraPlugin(sim::KubeletEmulator& kubelet,
                                         const std::function<pid_t(const std::string&)>& start) {
  using Clock = std::chrono::steady_clock;
  using namespace std::chrono_literals;
  RollingUpdateResult r;
  const auto instances = [&] {
    const auto plugins = kubelet.DraPlugins();
    const auto it = plugins.find("neuron.aws.com");
    return it == plugins.end() ? size_t{0} : it->second.size();
  };
  const pid_t old_pod = start("old-0000");
  if (!WaitUntil([&] { return instances() == 1; }, 30s)) return r;
  std::atomic<bool> done{false};
  std::thread pods([&] {
    sim::PodSpec pod;
    pod.containers.push_back(sim::ContainerSpec{});
    pod.claims = {sim::ClaimRef{"default", "pair", "uid-pair", {"neuron.aws.com"}}};
    Clock::time_point last = Clock::now();
    for (int i = 0; !done; ++i) {
      pod.name = "roll-" + std::to_string(i);
      const absl::StatusOr<sim::AdmittedPod> admitted = kubelet.AdmitPod(pod);
      if (admitted.ok()) {
        const Clock::time_point now = Clock::now();
        r.longest_gap = std::max(r.longest_gap,
                                 std::chrono::duration_cast<std::chrono::milliseconds>(now - last));
        last = now;
        ++r.admissions;
        (void)kubelet.DeletePod("default", pod.name, 1s);
      } else if (r.failures++ == 0) {
        r.first_failure = std::string(admitted.status().message());
      }
    }
  });
  std::this_thread::sleep_for(1s);
  const pid_t new_pod = start("new-0000");
  const bool registered = WaitUntil([&] { return instances() == 2; }, 30s);
  std::this_thread::sleep_for(500ms);
  const std::optional<int> old_exit = Stop(old_pod, 30s);
  std::this_thread::sleep_for(1s);
  done = true;
  pods.join();
  r.updated = registered && old_exit == 0;
  Stop(new_pod, 30s);
  return r;
}

}  // namespace neuron::testing
