#include "driver-sim/runtime/clock.h"

#include <chrono>

namespace neuron::nrt {

void Interrupt::Fire() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    fired_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
}

void Interrupt::Reset() {
  std::lock_guard<std::mutex> lock(mu_);
  fired_.store(false, std::memory_order_release);
}

int64_t SteadyClock::NowNs() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

bool SteadyClock::SleepUntil(int64_t t_ns, Interrupt& interrupt) {
  if (interrupt.fired()) return false;
  if (NowNs() >= t_ns) return true;
  const std::chrono::steady_clock::time_point deadline{std::chrono::nanoseconds(t_ns)};
  std::unique_lock<std::mutex> lock(interrupt.mu_);
  interrupt.cv_.wait_until(lock, deadline,
                           [&] { return interrupt.fired_.load(std::memory_order_acquire); });
  return !interrupt.fired_.load(std::memory_order_acquire);
}

bool ManualClock::SleepUntil(int64_t t_ns, Interrupt& interrupt) {
  if (interrupt.fired()) return false;
  int64_t cur = now_.load(std::memory_order_acquire);
  while (cur < t_ns && !now_.compare_exchange_weak(cur, t_ns, std::memory_order_acq_rel)) {
  }
  return true;
}

}  // namespace neuron::nrt
