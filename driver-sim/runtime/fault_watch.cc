#include "driver-sim/runtime/fault_watch.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <chrono>

#include "core/base/file_io.h"
#include "driver-sim/driver/ctl.h"
#include "driver-sim/runtime/log.h"

namespace neuron::nrt {
namespace {

constexpr std::chrono::milliseconds kDaemonTimeout{2000};

bool ExecutionFault(sim::FaultKind k) { return k != sim::FaultKind::kLinkDown; }

}  // namespace

FaultWatch::FaultWatch(RootPaths root, std::vector<int> devices, int node_devices,
                       Listener listener)
    : root_(std::move(root)),
      devices_(std::move(devices)),
      listener_(std::move(listener)),
      ready_(new std::atomic<bool>[static_cast<size_t>(node_devices)]),
      has_fault_(new std::atomic<bool>[static_cast<size_t>(node_devices)]),
      seen_(static_cast<size_t>(node_devices)) {
  for (int d = 0; d < node_devices; ++d) {
    ready_[static_cast<size_t>(d)].store(false);
    has_fault_[static_cast<size_t>(d)].store(false);
  }
}

FaultWatch::~FaultWatch() { Stop(); }

void FaultWatch::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (thread_.joinable()) return;
  stop_ = false;
  thread_ = std::thread([this] { Run(); });
}

void FaultWatch::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  Flush();  // what was queued last (nrt_close's records) still reaches the daemon
}

void FaultWatch::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    lock.unlock();
    Poll();
    Flush();
    lock.lock();
    cv_.wait_for(lock, std::chrono::milliseconds(poll_ms_.load()),
                 [this] { return stop_ || !requests_.empty(); });
  }
}

void FaultWatch::RefreshNow() { Poll(); }

void FaultWatch::Poll() {
  std::lock_guard<std::mutex> lock(poll_mu_);
  PollFaults();
  for (int d : devices_) PollDevice(d);
  PollEfas();
}

void FaultWatch::WatchEfas(std::vector<std::pair<int, std::string>> efas) {
  efas_ = std::move(efas);
  for (const auto& [index, name] : efas_) {
    efa_slots_ = std::max(efa_slots_, static_cast<size_t>(index) + 1);
  }
  efa_down_.reset(new std::atomic<bool>[efa_slots_]);
  for (size_t i = 0; i < efa_slots_; ++i) efa_down_[i].store(false);
}

bool FaultWatch::EfaUp(int efa) const {
  return efa < 0 || static_cast<size_t>(efa) >= efa_slots_ ||
         !efa_down_[static_cast<size_t>(efa)].load(std::memory_order_acquire);
}

// An EFA is up when its port says ACTIVE ("4: ACTIVE", docs/driver-interface.md#efa); a removed
// interface (efa-down, a VF reset) has no port at all.
void FaultWatch::PollEfas() {
  for (const auto& [index, name] : efas_) {
    absl::StatusOr<std::string> state =
        ReadText(root_.InfinibandClassDir() / name / "ports" / "1" / "state");
    const bool up = state.ok() && state->rfind("4", 0) == 0;
    efa_down_[static_cast<size_t>(index)].store(!up, std::memory_order_release);
  }
}

void FaultWatch::PollFaults() {
  const std::filesystem::path path = sim::FaultsPath(root_);
  struct stat st {};
  FileId id;
  if (::stat(path.c_str(), &st) == 0) {
    id = {static_cast<uint64_t>(st.st_ino), static_cast<uint64_t>(st.st_size),
          int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec, true};
  }
  if (faults_file_ && *faults_file_ == id) return;
  std::vector<sim::PendingFault> faults;
  if (id.exists) {
    absl::StatusOr<std::vector<sim::PendingFault>> read = sim::ReadFaults(root_);
    if (read.ok()) {
      faults = std::move(*read);
    } else if (!absl::IsNotFound(read.status())) {
      Log()->warn("nrt_fault_watch {}", std::string{read.status().message()});
      return;  // keep the last good list; retry on the next change
    }
  }
  faults_file_ = id;
  std::lock_guard<std::mutex> lock(mu_);
  faults_ = std::move(faults);
  RecomputeFlags();
}

void FaultWatch::RecomputeFlags() {
  std::vector<bool> flag(seen_.size(), false);
  bool link_down = false;
  for (const sim::PendingFault& f : faults_) {
    if (f.kind == sim::FaultKind::kLinkDown) link_down = true;
    if (!ExecutionFault(f.kind) || f.device < 0 || static_cast<size_t>(f.device) >= flag.size()) {
      continue;
    }
    if (acted_.count({f.id, f.time_ms}) == 0) flag[static_cast<size_t>(f.device)] = true;
  }
  for (size_t d = 0; d < flag.size(); ++d) has_fault_[d].store(flag[d], std::memory_order_release);
  any_link_down_.store(link_down, std::memory_order_release);
}

void FaultWatch::PollDevice(int device) {
  const std::filesystem::path dir = root_.NeuronDevice(device);
  absl::StatusOr<uint64_t> state = ReadU64(dir / "reset");
  // 1 = READY (docs/driver-interface.md#reset-and-state)
  const bool ready = state.ok() && *state == 1;
  std::optional<uint64_t> resets;
  if (absl::StatusOr<uint64_t> r =
          ReadU64(dir / "neuron_core0/stats/other_info/reset_req_count/total");
      r.ok()) {
    resets = *r;
  }
  DeviceSeen& seen = seen_[static_cast<size_t>(device)];
  // A completed reset: the device came back to READY, or a reset was requested and finished
  // between two polls (reset_req_count moved while READY both times).
  const bool reset_completed =
      seen.known && ready &&
      (!seen.ready || (resets && seen.reset_count && *resets != *seen.reset_count));
  const bool changed = !seen.known || ready != seen.ready || reset_completed;
  seen.known = true;
  seen.ready = ready;
  if (resets) seen.reset_count = resets;
  ready_[static_cast<size_t>(device)].store(ready, std::memory_order_release);
  if (changed && listener_) listener_(device, ready, reset_completed);
}

std::optional<sim::PendingFault> FaultWatch::TakeFault(int device, int device_core) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const sim::PendingFault& f : faults_) {
    if (!ExecutionFault(f.kind) || f.device != device) continue;
    if (f.core && *f.core != device_core) continue;
    if (!acted_.insert({f.id, f.time_ms}).second) continue;
    RecomputeFlags();
    requests_.push_back(Request{false, 0, {}, f.id});
    cv_.notify_all();
    return f;
  }
  return std::nullopt;
}

std::vector<std::pair<int, int>> FaultWatch::DownLinks() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::pair<int, int>> out;
  for (const sim::PendingFault& f : faults_) {
    if (f.kind != sim::FaultKind::kLinkDown || !f.peer) continue;
    out.emplace_back(std::min(f.device, *f.peer), std::max(f.device, *f.peer));
  }
  return out;
}

void FaultWatch::Printk(int level, std::string text) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    requests_.push_back(Request{true, level, std::move(text), 0});
  }
  cv_.notify_all();
}

void FaultWatch::Flush() {
  while (true) {
    Request r;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (requests_.empty()) return;
      r = std::move(requests_.front());
      requests_.pop_front();
    }
    const absl::Status s = r.printk ? sim::SendPrintk(root_, r.level, r.text, kDaemonTimeout)
                                    : sim::SendClearFault(root_, r.fault_id, kDaemonTimeout);
    if (!s.ok()) {
      Log()->debug("nrt_fault_watch {} not delivered: {}",
                   r.printk ? "printk" : fmt::format("clear-fault {}", r.fault_id),
                   std::string{s.message()});
    }
  }
}

}  // namespace neuron::nrt
