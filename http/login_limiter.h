#pragma once
// Bounds what wrong passwords cost: a bcrypt check takes tens of milliseconds of CPU by
// design, so a client that sends wrong passwords as fast as it can would keep every worker busy
// and every core hot. The limits, none of which touches a client whose credentials are cached
// (BasicAuthenticator::CheckCached answers it without a check):
//   - checks run on `concurrent_checks` threads of their own, never on the workers, from a queue
//     of at most `queued_checks`; a request that finds it full is refused (the server's part,
//     http/http_server.cc);
//   - an address whose checks keep failing is locked out (this class): after `free_failures`
//     failures in a row, every further failure locks it for `first_lockout`, doubling up to
//     `max_lockout`; while locked its unchecked requests are refused without a check. A success
//     clears the address; so does `forget_after` without a failure;
//   - a refusal (429 with Retry-After) is sent after `refusal_delay`, the connection held at no
//     cost but its socket, so that a client refused at once cannot turn refusals into a flood.
// Addresses are kept for at most `max_addresses` (the stalest go first), so a spray of addresses
// cannot grow it without bound. Thread-safe (one mutex, held only for map updates).

#include <chrono>
#include <cstddef>
#include <mutex>
#include <string>
#include <unordered_map>

#include "absl/base/thread_annotations.h"

namespace neuron {

struct LoginLimits {
  int concurrent_checks = 2;
  size_t queued_checks = 16;
  int free_failures = 5;
  std::chrono::milliseconds first_lockout{1000};
  std::chrono::milliseconds max_lockout{60000};
  std::chrono::milliseconds forget_after{600000};
  size_t max_addresses = 4096;
  std::chrono::milliseconds refusal_delay{1000};
};

class LoginLimiter {
 public:
  using Clock = std::chrono::steady_clock;

  explicit LoginLimiter(LoginLimits limits);

  // How much longer `address` is locked out at `now`; zero when it may be checked.
  Clock::duration LockedFor(const std::string& address, Clock::time_point now);
  // Records the outcome of a check for `address`.
  void Record(const std::string& address, bool ok, Clock::time_point now);

 private:
  struct Entry {
    int failures = 0;
    Clock::time_point locked_until;
    Clock::time_point last_failure;
  };
  void Prune(Clock::time_point now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const LoginLimits limits_;
  std::mutex mu_;
  std::unordered_map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace neuron
