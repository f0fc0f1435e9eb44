#include "http/login_limiter.h"

#include <algorithm>

namespace neuron {

LoginLimiter::LoginLimiter(LoginLimits limits) : limits_(limits) {}

LoginLimiter::Clock::duration LoginLimiter::LockedFor(const std::string& address,
                                                      Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = entries_.find(address);
  if (it == entries_.end() || it->second.locked_until <= now) return Clock::duration::zero();
  return it->second.locked_until - now;
}

void LoginLimiter::Record(const std::string& address, bool ok, Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  if (ok) {
    entries_.erase(address);
    return;
  }
  if (entries_.size() >= limits_.max_addresses && entries_.count(address) == 0) Prune(now);
  Entry& e = entries_[address];
  if (now - e.last_failure > limits_.forget_after) e.failures = 0;
  e.last_failure = now;
  const int over = ++e.failures - limits_.free_failures;
  if (over <= 0) return;
  // first_lockout * 2^(over-1), capped; the shift is bounded so it cannot overflow.
  const auto lockout = std::min<Clock::duration>(
      limits_.max_lockout, limits_.first_lockout * (int64_t{1} << std::min(over - 1, 20)));
  e.locked_until = now + lockout;
}

void LoginLimiter::Prune(Clock::time_point now) {
  std::erase_if(entries_, [&](const auto& kv) {
    return now - kv.second.last_failure > limits_.forget_after && kv.second.locked_until <= now;
  });
  if (entries_.size() < limits_.max_addresses) return;
  auto stalest = std::min_element(
      entries_.begin(), entries_.end(),
      [](const auto& a, const auto& b) { return a.second.last_failure < b.second.last_failure; });
  entries_.erase(stalest);
}

}  // namespace neuron
