#include "driver-sim/runtime/scheduler.h"

namespace neuron::nrt {

struct Waiter {
  bool done = false;
  NRT_STATUS status = NRT_SUCCESS;
};

CoreScheduler::CoreScheduler(RunFn run, AsyncDoneFn async_done)
    : run_(std::move(run)), async_done_(std::move(async_done)) {}

CoreScheduler::~CoreScheduler() { Shutdown(); }

NRT_STATUS CoreScheduler::Submit(Job job, int async_max) {
  std::unique_lock<std::mutex> lock(mu_);
  if (stop_) return NRT_CLOSED;
  if (async_max > 0) {
    if (inflight_ >= async_max) return NRT_QUEUE_FULL;
    ++inflight_;
    job.async = true;
    queue_.push_back(job);
    EnsureWorker();
    work_cv_.notify_one();
    return NRT_SUCCESS;
  }
  if (!busy_ && queue_.empty()) {
    // The fast path: run here, holding the core.
    busy_ = true;
    lock.unlock();
    const NRT_STATUS status = run_(job);
    lock.lock();
    busy_ = false;
    if (!queue_.empty()) work_cv_.notify_one();
    done_cv_.notify_all();
    return status;
  }
  return Wait(job, lock);
}

NRT_STATUS CoreScheduler::RunExclusive(const std::function<NRT_STATUS()>& fn) {
  Job job;
  job.exclusive = &fn;
  std::unique_lock<std::mutex> lock(mu_);
  if (stop_) return NRT_CLOSED;
  if (!busy_ && queue_.empty()) {
    busy_ = true;
    lock.unlock();
    const NRT_STATUS status = fn();
    lock.lock();
    busy_ = false;
    if (!queue_.empty()) work_cv_.notify_one();
    done_cv_.notify_all();
    return status;
  }
  return Wait(job, lock);
}

NRT_STATUS CoreScheduler::Wait(Job& job, std::unique_lock<std::mutex>& lock) {
  Waiter waiter;
  job.waiter = &waiter;
  queue_.push_back(job);
  EnsureWorker();
  work_cv_.notify_one();
  done_cv_.wait(lock, [&] { return waiter.done; });
  return waiter.status;
}

void CoreScheduler::EnsureWorker() {
  if (!worker_.joinable() && !stop_) worker_ = std::thread([this] { WorkerLoop(); });
}

void CoreScheduler::Finish(Job& job, NRT_STATUS status, std::unique_lock<std::mutex>& lock) {
  if (job.async) {
    --inflight_;
    lock.unlock();
    async_done_(job, status);
    lock.lock();
  } else if (job.waiter != nullptr) {
    job.waiter->status = status;
    job.waiter->done = true;
  }
  done_cv_.notify_all();
}

void CoreScheduler::WorkerLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    work_cv_.wait(lock, [&] { return stop_ || (!busy_ && !queue_.empty()); });
    if (stop_) break;
    Job job = queue_.front();
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    const NRT_STATUS status = job.exclusive != nullptr ? (*job.exclusive)() : run_(job);
    lock.lock();
    busy_ = false;
    Finish(job, status, lock);
  }
}

void CoreScheduler::Drain() {
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [&] { return stop_ || (queue_.empty() && !busy_); });
}

void CoreScheduler::Shutdown() {
  std::unique_lock<std::mutex> lock(mu_);
  if (stop_ && !worker_.joinable()) return;
  closing_.store(true, std::memory_order_release);
  interrupt_.Fire();
  while (!queue_.empty()) {
    Job job = queue_.front();
    queue_.pop_front();
    Finish(job, NRT_CLOSED, lock);
  }
  done_cv_.wait(lock, [&] { return !busy_; });
  stop_ = true;
  work_cv_.notify_all();
  done_cv_.notify_all();
  lock.unlock();
  if (worker_.joinable()) worker_.join();
}

}  // namespace neuron::nrt
