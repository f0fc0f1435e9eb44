#include "plugin/kubeapi/round_loop.h"

#include <algorithm>
#include <cstdint>
#include <utility>

namespace neuron::kubeapi {

std::chrono::milliseconds Backoff(int failures, std::chrono::milliseconds initial,
                                  std::chrono::milliseconds max, double unit_random) {
  int64_t wait = initial.count();
  for (int i = 1; i < failures && wait < max.count(); ++i) wait *= 2;
  wait = std::min<int64_t>(wait, max.count());
  const auto jitter = static_cast<int64_t>(static_cast<double>(wait) * 0.5 * unit_random);
  return std::chrono::milliseconds(wait - jitter);
}

std::chrono::milliseconds Pacing::After(bool api_failed) {
  failures_ = api_failed ? failures_ + 1 : 0;
  if (failures_ == 0) return poll_;
  return Backoff(failures_, initial_, max_, std::uniform_real_distribution<double>(0.0, 1.0)(rng_));
}

void RoundLoop::Start(std::function<std::chrono::milliseconds()> round) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = false;
  }
  thread_ = std::thread([this, round = std::move(round)] {
    for (;;) {
      const std::chrono::milliseconds wait = round();
      std::unique_lock<std::mutex> lock(mu_);
      if (cv_.wait_for(lock, wait, [this] { return stop_; })) return;
    }
  });
}

bool RoundLoop::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (!thread_.joinable()) return false;
  thread_.join();
  return true;
}

}  // namespace neuron::kubeapi
