#pragma once
// The thread behind each of neuron-dra-api's writers (the slice publisher, the Node condition, the
// leader lease): rounds until stopped, each followed by the wait it asks for; and the pacing of a
// writer to the API server: its poll period after a round that succeeded, an exponential back-off
// with jitter after rounds that failed against the API server.
//
// Thread-safety: Start and Stop from one thread; the round runs on the loop's own.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <random>
#include <thread>

namespace neuron::kubeapi {

// The wait before attempt `failures` (1 = after the first failure): initial * 2^(failures-1),
// capped at `max`, then a uniformly random part of up to half of it taken off (jitter, so that
// the nodes of a cluster do not come back in step). `unit_random` is in [0, 1).
std::chrono::milliseconds Backoff(int failures, std::chrono::milliseconds initial,
                                  std::chrono::milliseconds max, double unit_random);

class Pacing {
 public:
  Pacing(std::chrono::milliseconds poll, std::chrono::milliseconds backoff_initial,
         std::chrono::milliseconds backoff_max)
      : poll_(poll), initial_(backoff_initial), max_(backoff_max) {}
  // The wait after a round: `api_failed` counts one more failure in a row, else ends the run.
  std::chrono::milliseconds After(bool api_failed);

 private:
  const std::chrono::milliseconds poll_, initial_, max_;
  int failures_ = 0;
  std::mt19937_64 rng_{std::random_device{}()};
};

class RoundLoop {
 public:
  RoundLoop() = default;
  ~RoundLoop() { Stop(); }
  RoundLoop(const RoundLoop&) = delete;
  RoundLoop& operator=(const RoundLoop&) = delete;

  // Runs `round` on a new thread until Stop; each round returns the wait before the next.
  void Start(std::function<std::chrono::milliseconds()> round);
  // Wakes the wait and joins the thread (a round under way finishes first). Idempotent; false
  // when no thread ran.
  bool Stop();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace neuron::kubeapi
