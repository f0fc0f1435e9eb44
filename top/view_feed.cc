#include "top/view_feed.h"

#include <fmt/format.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/base/component_log.h"
#include "core/sample/process_usage.h"
#include "top/format.h"

namespace neuron::top {
namespace {

spdlog::logger& ViewFeedLog() {
  static std::shared_ptr<spdlog::logger> log = ComponentLogger("top.feed");
  return *log;
}

// Every part of a pod's identity comes from the workload's cgroup or the kubelet: made safe for
// the terminal once, here, before any view holds it.
void SanitizePod(PodIdentity* pod) {
  pod->uid = TerminalSafe(pod->uid);
  for (std::optional<std::string>* field :
       {&pod->name, &pod->namespace_name, &pod->container, &pod->container_id, &pod->qos}) {
    if (*field) **field = TerminalSafe(**field);
  }
}

// Changes whenever any memory total the hot sample reads changes.
uint64_t MemorySignature(const Snapshot& s) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](std::optional<uint64_t> v) {
    h ^= v.value_or(~0ull);
    h *= 1099511628211ull;
  };
  for (const DeviceSample& d : s.devices) {
    mix(static_cast<uint64_t>(d.index));
    for (const MemCounter& m : d.host_mem) mix(m.total);
    for (const CoreSample& c : d.cores) {
      mix(c.device_mem.total);
      mix(c.host_mem.total);
    }
  }
  return h;
}

template <typename T>
std::vector<T> ToVector(const std::deque<T>& d) {
  return {d.begin(), d.end()};
}

}  // namespace

ViewFeed::ViewFeed(ViewFeedOptions options, std::unique_ptr<PodLocator> pods,
                   std::unique_ptr<DatastoreReader> datastore,
                   std::shared_ptr<RuntimeRecordsReader> records)
    : options_(std::move(options)),
      root_(options_.node.root),
      pods_(std::move(pods)),
      proc_(root_),
      node_(options_.node),
      datastore_(std::move(datastore)),
      records_(std::move(records)),
      notify_fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
  if (!options_.agent.empty()) {
    health_ = std::make_unique<HealthSource>(HealthSourceOptions{
        .root = options_.node.root, .agent = options_.agent, .timeout = options_.agent_timeout});
  }
}

ViewFeed::~ViewFeed() { Stop(); }

absl::StatusOr<NodeSource::Scan> ViewFeed::ScanInventory() {
  absl::StatusOr<NodeSource::Scan> scan = node_.Rescan();
  if (!scan.ok()) return scan.status();
  std::vector<std::string> notes = node_.notes();
  if (notes != notes_) {
    for (const std::string& n : notes) ViewFeedLog().warn("{}", n);
    notes_ = std::move(notes);
  }
  return scan;
}

absl::Status ViewFeed::Init() {
  if (absl::Status s = node_.Init(); !s.ok()) return s;
  absl::StatusOr<NodeSource::Scan> scan = ScanInventory();
  if (!scan.ok()) return scan.status();
  inventory_ = scan->inventory;
  for (const std::string& w : inventory_->warnings) ViewFeedLog().warn("{}", w);
  SamplingOptions so = options_.sampling;
  so.threads = std::clamp(so.threads, 1, 2);
  if (datastore_ != nullptr) {  // injected (tests): with its records reader, or none
    auto reader = std::make_shared<std::unique_ptr<DatastoreReader>>(std::move(datastore_));
    so.datastore = [reader](const std::vector<int>&) { return std::move(*reader); };
    so.records = [records = records_] { return records; };
  }
  if (!node_.StartSampling(so)) {
    ViewFeedLog().warn("no answer from the Neuron driver within {} ms; sampling anyway",
                       options_.sampling.first_probe_wait.count());
  }
  last_rescan_ = std::chrono::steady_clock::now();
  Step();
  return absl::OkStatus();
}

SampleKind ViewFeed::ChooseKind(std::chrono::steady_clock::time_point now) const {
  if (prev_ == nullptr) return SampleKind::kFull;
  const auto age = now - last_full_;
  if (age >= options_.full_sweep_max_age) return SampleKind::kFull;
  // Categories cannot change unless a total the hot sample reads changed too.
  if (memory_signature_ != memory_signature_at_full_ &&
      (age >= options_.full_sweep_min_gap || detail_wanted_.load(std::memory_order_relaxed))) {
    return SampleKind::kFull;
  }
  return SampleKind::kHot;
}

ProcSample ViewFeed::SampleProcesses(const Snapshot& snap) const {
  ProcSample p;
  absl::StatusOr<SystemCpuTimes> sys = proc_.SystemCpu();
  if (sys.ok()) {
    p.system = *sys;
  } else {
    ViewFeedLog().debug("{}", std::string{sys.status().message()});
  }
  for (const int pid : RuntimePids(snap)) {
    absl::StatusOr<ProcessStat> st = proc_.Stat(pid);
    if (st.ok()) p.processes.emplace(pid, *st);
  }
  p.at = std::chrono::steady_clock::now();
  return p;
}

void ViewFeed::RefreshDetails(const Snapshot& snap) {
  const std::vector<int> pids = RuntimePids(snap);
  std::erase_if(details_, [&pids](const auto& kv) {
    return !std::binary_search(pids.begin(), pids.end(), kv.first);
  });
  const int cpd = inventory_->LogicalCoresPerDevice();
  for (const int pid : pids) {
    auto [it, inserted] = details_.try_emplace(pid);
    ProcessDetails& d = it->second;
    if (inserted) {
      absl::StatusOr<std::string> cmd = proc_.CommandLine(pid, 1024);
      if (cmd.ok()) d.command = TerminalSafe(*cmd);
    }
    if (d.pod_known || pods_ == nullptr) continue;
    ProcessRef ref;
    ref.pid = pid;
    for (const DatastoreRecord* r : RecordsOf(snap, pid)) ref.devices.push_back(r->device);
    ref.core_ids = CoresHeldBy(snap, pid, cpd);
    absl::StatusOr<std::optional<PodIdentity>> pod = pods_->Locate(ref);
    if (pod.ok()) {
      d.pod = *pod;
      d.pod_known = true;
      if (d.pod) SanitizePod(&*d.pod);
    } else {
      ViewFeedLog().debug("pod of pid {}: {}", pid, std::string{pod.status().message()});
    }
  }
}

std::shared_ptr<const TopView> ViewFeed::Step() {
  const auto now = std::chrono::steady_clock::now();
  if (now - last_rescan_ >= options_.rescan) {
    last_rescan_ = now;
    absl::StatusOr<NodeSource::Scan> scan = ScanInventory();
    if (!scan.ok()) {
      ViewFeedLog().warn("rescan: {}", std::string{scan.status().message()});
    } else if (scan->changed) {  // the Sampler has it already
      ViewFeedLog().info("inventory changed: {} devices", scan->inventory->devices.size());
      inventory_ = scan->inventory;
    }
  }
  const SampleKind kind = ChooseKind(now);
  std::shared_ptr<const Snapshot> snap = node_.Sample(kind);
  if (kind == SampleKind::kFull) {
    ++full_samples_;
    last_full_ = now;
  } else {
    ++hot_samples_;
  }
  memory_signature_ = MemorySignature(*snap);
  if (kind == SampleKind::kFull) memory_signature_at_full_ = memory_signature_;
  // The same unreadable file fails every sample (reset is root-only): log what changed.
  if (snap->errors != logged_errors_) {
    for (const std::string& e : snap->errors) ViewFeedLog().warn("{}", e);
    logged_errors_ = snap->errors;
  }

  ProcSample proc = SampleProcesses(*snap);
  RefreshDetails(*snap);
  ViewInputs in;
  in.inventory = inventory_.get();
  in.before = prev_.get();
  in.after = snap.get();
  in.proc_before = prev_ != nullptr ? &prev_proc_ : nullptr;
  in.proc_after = &proc;
  in.details = &details_;
  in.notes = &notes_;
  in.ticks_per_second = ProcReader::TicksPerSecond();
  auto view = std::make_shared<TopView>(BuildView(in));
  AddHistory(view.get());
  // The same evidence each sample, so that what rises or stalls while neuron-top runs is seen.
  if (health_ != nullptr) view->health = health_->Read(inventory_);
  prev_ = std::move(snap);
  prev_proc_ = std::move(proc);
  Publish(view);
  return view;
}

void ViewFeed::AddHistory(TopView* view) {
  const AppView& all = view->apps.front();
  std::optional<double> mem_ratio;
  if (all.device.total && view->device_memory_capacity && *view->device_memory_capacity > 0) {
    mem_ratio =
        static_cast<double>(*all.device.total) / static_cast<double>(*view->device_memory_capacity);
  }
  if (prev_ != nullptr) {  // the first sample has no rates to chart
    util_history_.push_back(all.average_utilization);
    mem_history_.push_back(mem_ratio);
  }
  while (util_history_.size() > options_.history) util_history_.pop_front();
  while (mem_history_.size() > options_.history) mem_history_.pop_front();
  view->history.utilization = ToVector(util_history_);
  view->history.device_memory = ToVector(mem_history_);
  view->history.capacity = options_.history;
}

void ViewFeed::Publish(std::shared_ptr<const TopView> view) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    latest_ = std::move(view);
  }
  const uint64_t one = 1;
  if (notify_fd_.valid() && ::write(notify_fd_.get(), &one, sizeof(one)) < 0 && errno != EAGAIN) {
    ViewFeedLog().warn("notify: {}", std::strerror(errno));
  }
}

std::shared_ptr<const TopView> ViewFeed::Latest() const {
  std::lock_guard<std::mutex> lock(mu_);
  return latest_;
}

void ViewFeed::Start() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = false;
  }
  thread_ = std::thread([this] { Loop(); });
}

void ViewFeed::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void ViewFeed::Loop() {
  auto next = std::chrono::steady_clock::now() + options_.first_delay;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (cv_.wait_until(lock, next, [this] { return stop_; })) return;
    }
    Step();
    // A fixed cadence from the previous deadline, unless sampling fell behind.
    next = std::max(next + options_.delay, std::chrono::steady_clock::now() + options_.delay / 4);
  }
}

}  // namespace neuron::top
