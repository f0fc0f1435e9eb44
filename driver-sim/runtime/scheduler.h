#pragma once
// One FIFO and one worker per logical core (docs/runtime.md#queues): a core runs one execution at a
// time, without preemption. A synchronous execution on an idle core with an empty queue runs on
// the caller's thread (no hand-off, no system call); otherwise it queues and waits. Async
// executions (NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS > 0) queue, at most that many queued
// or running per core, and complete through a callback on the worker thread, which starts on
// first use.
//
// Thread-safety: thread-safe. Shutdown must not race with Submit.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "driver-sim/runtime/clock.h"
#include "driver-sim/runtime/objects.h"
#include "nrt/nrt_status.h"

namespace neuron::nrt {

struct Job {
  nrt_model* model = nullptr;
  const TensorSet* inputs = nullptr;
  TensorSet* outputs = nullptr;
  int repeat = 1;
  int64_t submit_ns = 0;
  uint64_t job_id = 0;
  bool async = false;
  const std::function<NRT_STATUS()>* exclusive = nullptr;  // run this instead of the model
  struct Waiter* waiter = nullptr;
};

class CoreScheduler {
 public:
  using RunFn = std::function<NRT_STATUS(Job&)>;
  // (job, status) after an async job completes or is dropped.
  using AsyncDoneFn = std::function<void(const Job&, NRT_STATUS)>;

  CoreScheduler(RunFn run, AsyncDoneFn async_done);
  ~CoreScheduler();

  // Sync: the execution's status. Async (async_max > 0): NRT_SUCCESS once queued,
  // NRT_QUEUE_FULL when async_max jobs are queued or running.
  NRT_STATUS Submit(Job job, int async_max);
  // Runs `fn` holding the core, in FIFO order with executions (barrier, all-gather).
  NRT_STATUS RunExclusive(const std::function<NRT_STATUS()>& fn);
  // Blocks until nothing is queued or running.
  void Drain();
  // Drops queued jobs (async: callback with NRT_CLOSED; sync waiters get NRT_CLOSED), interrupts
  // the running one, waits for it and stops the worker.
  void Shutdown();

  Interrupt& interrupt() { return interrupt_; }
  bool closing() const { return closing_.load(std::memory_order_acquire); }
  uint64_t NextJobId() { return job_seq_.fetch_add(1, std::memory_order_relaxed) + 1; }

  // State of the core, touched only by whoever runs its current job.
  int64_t free_at_ns = 0;
  std::atomic<bool> faulted{false};
  int64_t last_hang_record_ns = INT64_MIN / 2;

 private:
  NRT_STATUS Wait(Job& job, std::unique_lock<std::mutex>& lock);
  void EnsureWorker();  // under mu_
  void WorkerLoop();
  void Finish(Job& job, NRT_STATUS status, std::unique_lock<std::mutex>& lock);

  RunFn run_;
  AsyncDoneFn async_done_;
  Interrupt interrupt_;
  std::atomic<bool> closing_{false};
  std::atomic<uint64_t> job_seq_{0};

  std::mutex mu_;
  std::condition_variable work_cv_;  // worker: a job is runnable
  std::condition_variable done_cv_;  // waiters and Drain: something finished
  std::deque<Job> queue_;
  bool busy_ = false;
  int inflight_ = 0;  // async jobs queued or running
  bool stop_ = false;
  std::thread worker_;
};

}  // namespace neuron::nrt
