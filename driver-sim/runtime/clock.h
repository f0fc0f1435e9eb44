#pragma once
// Time for libnrt-sim: an injectable clock (docs/runtime.md#scheduling-model: wall-clock in demos,
// manual in tests) and an Interrupt that wakes a sleeping execution (device reset, nrt_close).
//
// Times are int64 nanoseconds. SteadyClock reads CLOCK_MONOTONIC (std::chrono::steady_clock on
// Linux), which is the same in every process of the machine, so ranks in different processes
// can compare the arrival times they publish. ManualClock never blocks: SleepUntil moves it
// forward at once, which is the zero-cost path benchmarks and timing tests use.
//
// Thread-safety: both clocks and Interrupt are thread-safe.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>

namespace neuron::nrt {

// Wakes sleepers early. Fire() is sticky until Reset().
class Interrupt {
 public:
  void Fire();
  void Reset();
  bool fired() const { return fired_.load(std::memory_order_acquire); }

 private:
  friend class SteadyClock;
  std::atomic<bool> fired_{false};
  std::mutex mu_;
  std::condition_variable cv_;
};

class Clock {
 public:
  virtual ~Clock() = default;
  virtual int64_t NowNs() const = 0;
  // Returns when NowNs() >= t_ns (true) or when `interrupt` fires first (false).
  virtual bool SleepUntil(int64_t t_ns, Interrupt& interrupt) = 0;
  // True when sleeping costs nothing (ManualClock): the scheduler then needs no worker hand-off.
  virtual bool instant() const { return false; }
};

class SteadyClock final : public Clock {
 public:
  int64_t NowNs() const override;
  bool SleepUntil(int64_t t_ns, Interrupt& interrupt) override;
};

// The steady clock's now, in ns: real time for deadlines and timeouts, whatever clock simulated
// time runs on.
inline int64_t SteadyNowNs() { return SteadyClock().NowNs(); }

class ManualClock final : public Clock {
 public:
  explicit ManualClock(int64_t start_ns = 0) : now_(start_ns) {}
  int64_t NowNs() const override { return now_.load(std::memory_order_acquire); }
  bool SleepUntil(int64_t t_ns, Interrupt& interrupt) override;
  bool instant() const override { return true; }
  void Advance(int64_t ns) { now_.fetch_add(ns, std::memory_order_acq_rel); }
  void Set(int64_t ns) { now_.store(ns, std::memory_order_release); }

 private:
  std::atomic<int64_t> now_;
};

}  // namespace neuron::nrt
