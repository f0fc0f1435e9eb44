// Stopping a pod's processes as the kubelet has the container runtime stop a container
// (kuberuntime killContainer): SIGTERM, the grace period, SIGKILL.
#include <fmt/format.h>
#include <signal.h>

#include <cerrno>
#include <chrono>
#include <thread>

#include "driver-sim/kubelet/emulator_impl.h"

namespace neuron::sim {

namespace {

// How long the group may outlive SIGKILL: only a parent that does not reap its dead child keeps
// it (a zombie is still a member of its group), which is a fault worth reporting, not waiting out.
constexpr std::chrono::seconds kAfterKill{10};

// The emulator is not the group's parent (`neuron-sim pod run` is), so it cannot wait for it; the
// group is gone when kill(-pgid, 0) finds no member.
bool GroupGone(int pgid) { return kill(-pgid, 0) < 0 && errno == ESRCH; }

bool WaitGroupGone(int pgid, std::chrono::milliseconds ceiling) {
  const auto deadline = std::chrono::steady_clock::now() + ceiling;
  while (!GroupGone(pgid)) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

}  // namespace

absl::Status StopProcessGroup(int pgid, std::chrono::milliseconds grace_period,
                              spdlog::logger& log) {
  if (GroupGone(pgid)) return absl::OkStatus();
  kill(-pgid, SIGTERM);
  if (WaitGroupGone(pgid, grace_period)) return absl::OkStatus();
  log.info("process group {} outlived its {} ms grace period: SIGKILL", pgid, grace_period.count());
  kill(-pgid, SIGKILL);
  if (WaitGroupGone(pgid, kAfterKill)) return absl::OkStatus();
  return absl::DeadlineExceededError(
      fmt::format("process group {} still has members {} s after SIGKILL (unreaped by its parent?)",
                  pgid, kAfterKill.count()));
}

}  // namespace neuron::sim
