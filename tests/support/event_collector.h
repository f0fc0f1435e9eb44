#pragma once
// Collects core Events delivered on the Events thread so a test can wait for them.
// Thread-safe: Add/callback() run on the Events thread, the waits on the test's.

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <vector>

#include "core/events/events.h"

namespace neuron::testing {

class EventCollector {
 public:
  // Generous: a cause-and-effect ceiling, not a latency target
  // (docs/architecture.md#timing-in-tests).
  static constexpr std::chrono::seconds kCeiling{5};

  void Add(const Event& e) {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(e);
    cv_.notify_all();
  }
  Events::Callback callback() {
    return [this](const Event& e) { Add(e); };
  }
  // The first event matching `pred`, waiting up to the ceiling; nullopt if none came.
  template <typename Pred>
  std::optional<Event> WaitFor(Pred pred) {
    std::unique_lock<std::mutex> lock(mu_);
    std::optional<Event> found;
    cv_.wait_for(lock, kCeiling, [&] {
      const auto it = std::find_if(events_.begin(), events_.end(), pred);
      if (it != events_.end()) found = *it;
      return found.has_value();
    });
    return found;
  }
  // Waits until `n` events match `pred`.
  template <typename Pred>
  bool WaitForCount(Pred pred, size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, kCeiling, [&] {
      return static_cast<size_t>(std::count_if(events_.begin(), events_.end(), pred)) >= n;
    });
  }
  std::vector<Event> Snapshot() {
    std::lock_guard<std::mutex> lock(mu_);
    return events_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Event> events_;
};

}  // namespace neuron::testing
