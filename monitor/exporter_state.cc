#include "monitor/exporter_state.h"

#include <fmt/ranges.h>

#include <algorithm>

#include "core/base/component_log.h"

namespace neuron::monitor {
namespace {

std::shared_ptr<spdlog::logger> Log() { return ComponentLogger("exporter"); }

SourceState StateOf(const absl::Status& status) {
  return {.known = true, .up = status.ok(), .reason = std::string{status.message()}};
}

}  // namespace

SourceState SysfsState(const Snapshot& snap) {
  if (snap.devices.empty()) return {true, false, "no Neuron device could be read in sysfs"};
  for (const DeviceSample& d : snap.devices) {
    if (!d.state) {
      return {true, false, "neuron" + std::to_string(d.index) + ": device state unreadable"};
    }
  }
  return {true, true, ""};
}

ExporterState::ExporterState(ExporterStateOptions options)
    : options_(std::move(options)),
      node_(options_.node),
      kmsg_(RootPaths(options_.node.root).Kmsg()),
      evidence_(RootPaths(options_.node.root), ComponentLogger("exporter.health"),
                HealthEvidenceOptions{.heartbeat_period = std::chrono::milliseconds(1000),
                                      .poll_state = true}) {}

ExporterState::~ExporterState() {
  {
    std::lock_guard<std::mutex> lock(stop_mu_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  pod_cache_.reset();
}

absl::Status ExporterState::Init() {
  if (absl::Status s = node_.Init(); !s.ok()) return s;
  absl::StatusOr<neuron::NodeSource::Scan> scan = node_.Rescan();
  if (!scan.ok()) return scan.status();
  for (const std::string& w : scan->inventory->warnings) Log()->warn("inventory: {}", w);
  NoteLayout(*scan->inventory);
  // The first verdicts before the first scrape: the evidence's baselines are taken here.
  evidence_.ApplyScan(*scan->inventory);
  evidence_.PollCounters(std::chrono::steady_clock::now());
  PublishHealth();
  node_.StartSampling(options_.sampling);
  {
    std::lock_guard<std::mutex> lock(mu_);
    inventory_ = scan->inventory;
  }
  stage_ = 1;
  std::lock_guard<std::mutex> lock(sample_mu_);
  std::shared_ptr<const Snapshot> snap = node_.Sample(SampleKind::kFull);
  last_full_ = snap->steady;
  history_.push_back(snap);
  AfterSample(*snap);
  stage_ = 2;
  return absl::OkStatus();
}

absl::Status ExporterState::Ready() const {
  switch (stage_.load()) {
    case 0:
      return absl::UnavailableError("the device inventory has not been read yet");
    case 1:
      return absl::UnavailableError("the first sample has not been taken yet");
    case 2:
      return absl::UnavailableError("starting");
    default:
      return absl::OkStatus();
  }
}

void ExporterState::Start() {
  if (options_.pod_resources) {
    PodResourcesCache::Options po;
    po.socket_path = (options_.kubelet_dir / "pod-resources" / "kubelet.sock").string();
    po.period = options_.pod_refresh;
    Log()->info("pod attribution from {} every {} ms", po.socket_path, po.period.count());
    pod_cache_ = std::make_unique<PodResourcesCache>(std::move(po));
  }
  // Kernel-log counts are "since start": records already in the log are history.
  SetKmsgState(kmsg_.Open(KmsgReader::StartAt::kEnd));
  thread_ = std::thread([this] { Loop(); });
  if (stage_.load() == 2) stage_ = 3;
}

std::optional<std::chrono::system_clock::time_point> ExporterState::pod_last_success() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pod_last_success_;
}

void ExporterState::Loop() {
  auto last_rescan = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> stop_lock(stop_mu_);
  while (!stop_cv_.wait_for(stop_lock, options_.health_poll, [&] { return stop_.load(); })) {
    stop_lock.unlock();
    TailKmsg();
    NotePodResources();
    const auto now = std::chrono::steady_clock::now();
    if (now - last_rescan >= options_.rescan_interval) {
      last_rescan = now;
      // A changed inventory reaches the Sampler inside Rescan, before the scrapes see it.
      absl::StatusOr<neuron::NodeSource::Scan> scan = node_.Rescan();
      if (scan.ok()) {
        ApplyScan(*scan);
      } else {
        Log()->warn("rescan: {}", scan.status().ToString());
      }
    }
    evidence_.PollCounters(now);
    PublishHealth();
    stop_lock.lock();
  }
}

void ExporterState::ApplyScan(const neuron::NodeSource::Scan& scan) {
  const Inventory& inv = *scan.inventory;
  evidence_.ApplyScan(inv);
  if (!scan.changed) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    inventory_ = scan.inventory;
  }
  Log()->info("inventory changed: {} devices, {} EFA", inv.devices.size(), inv.efas.size());
  NoteLayout(inv);
}

void ExporterState::PublishHealth() {
  auto next = std::make_shared<NodeHealth>();
  for (const auto& [index, d] : evidence_.devices()) {
    next->devices[index] = {.health = JudgeDevice(d, EvidenceClasses::All()),
                            .corrected_counters = d.groups.Has(NodeGroup::kEccCorrected)};
  }
  for (const auto& [name, f] : evidence_.efas()) {
    next->efas[name] = JudgeEfa(f, EvidenceClasses::All());
  }
  std::lock_guard<std::mutex> lock(mu_);
  // An unchanged verdict keeps its object, so the scrapes' rendering cache stays valid.
  if (health_ != nullptr && *health_ == *next) return;
  health_ = std::move(next);
}

void ExporterState::NoteLayout(const Inventory& inv) {
  std::lock_guard<std::mutex> lock(mu_);
  if (noted_driver_ != inv.driver) {
    noted_driver_ = inv.driver;
    const DriverInfo& d = inv.driver;
    if (d.generation != nullptr) {
      Log()->info("driver {}: sysfs generation {}", *d.version, d.generation->name);
    } else {
      Log()->warn(
          "driver {}: unknown sysfs layout; reading what the tree holds, checked against "
          "generation {}",
          d.version.value_or("without sys/module/neuron/version"), d.Expected().name);
    }
  }
  std::map<int, std::vector<std::string>> now;
  for (const NeuronDevice& dev : inv.devices) {
    if (dev.missing_nodes.empty()) continue;
    now[dev.index] = dev.missing_nodes;
    const auto it = noted_missing_.find(dev.index);
    if (it != noted_missing_.end() && it->second == dev.missing_nodes) continue;
    Log()->warn("neuron{}: {} sysfs nodes missing, left out (not read as 0): {}", dev.index,
                dev.missing_nodes.size(), fmt::join(dev.missing_nodes, ", "));
  }
  noted_missing_ = std::move(now);
}

void ExporterState::NotePodResources() {
  if (pod_cache_ == nullptr) return;
  const uint64_t ok = pod_cache_->refreshes();
  const uint64_t failed = pod_cache_->failures();
  const absl::Status last = pod_cache_->LastStatus();
  std::lock_guard<std::mutex> lock(mu_);
  if (ok != pod_refreshes_seen_) {
    pod_refreshes_seen_ = ok;
    pod_last_success_ = std::chrono::system_clock::now();
  }
  if (ok + failed == 0) return;  // LastStatus() says Unavailable before the first refresh too
  pod_state_ = StateOf(last);
  NoteSource("podresources", pod_state_);
}

void ExporterState::SetKmsgState(const absl::Status& status) {
  std::lock_guard<std::mutex> lock(mu_);
  if (kmsg_state_.known && kmsg_state_.up == status.ok()) return;
  kmsg_state_ = StateOf(status);
  ++hw_errors_version_;  // the rendered kernel-log counts appear or go with it
  NoteSource("kmsg", kmsg_state_);
}

// Only flips are logged: a source that stays down may give a new reason on every try (a gRPC
// error names its attempt), which would log once a second.
void ExporterState::NoteSource(std::string_view name, const SourceState& state) {
  if (!state.known) return;
  const auto [it, first] = noted_sources_.try_emplace(std::string(name), state.up);
  if (!first && it->second == state.up) return;
  it->second = state.up;
  if (state.up) {
    Log()->info("source {} is up", name);
  } else {
    Log()->warn("source {} is down: {}", name, state.reason);
  }
}

void ExporterState::TailKmsg() {
  if (!kmsg_.is_open()) {
    // The log may appear later (a simulator started after us): every record in it is new.
    const absl::Status opened = kmsg_.Open(KmsgReader::StartAt::kBeginning);
    SetKmsgState(opened);
    if (!opened.ok()) return;
  }
  HwErrorTally seen;
  std::vector<Event> evidence;
  const absl::Status read = kmsg_.Read(&seen, &evidence);
  SetKmsgState(read);
  // While the log is read, its reset records tell the evidence when to read a device's state,
  // and its open and close records the datastore probe when to look for runtimes.
  evidence_.SetResetsLogged(read.ok());
  if (read.ok() != opens_logged_) {
    opens_logged_ = read.ok();
    node_.SetOpensLogged(opens_logged_);
  }
  if (kmsg_.open_close_records() != open_close_seen_) {
    open_close_seen_ = kmsg_.open_close_records();
    node_.ProbeSoon();
  }
  for (const Event& e : evidence) evidence_.Apply(e);
  if (seen.empty()) return;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [dev, types] : seen) {
    for (const auto& [type, n] : types) hw_errors_[dev][type] += n;
  }
  ++hw_errors_version_;
}

// Bookkeeping for a new snapshot: error counting, forgetting vanished devices, source states.
// Called with sample_mu_ held.
void ExporterState::AfterSample(const Snapshot& snap) {
  samples_.fetch_add(1);
  if (!snap.errors.empty()) {
    read_errors_.fetch_add(snap.errors.size());
    std::lock_guard<std::mutex> lock(mu_);
    for (const std::string& e : snap.errors) {
      // Each distinct message once: a malformed file would otherwise log on every scrape.
      if (logged_errors_.size() < 1000 && logged_errors_.insert(e).second) {
        Log()->warn("read error: {}", e);
      }
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::erase_if(monotonic_, [&](const auto& kv) {
      return kv.first >= 0 && snap.FindDevice(kv.first) == nullptr;
    });
    NoteSource("sysfs", SysfsState(snap));
    NoteSource("datastore", snap.datastore_source);
    NoteSource("runtime_records", snap.runtime_records.state);
  }
}

ExporterView ExporterState::Get() {
  ExporterView view;
  {
    std::lock_guard<std::mutex> lock(sample_mu_);
    const auto now = std::chrono::steady_clock::now();
    std::shared_ptr<const Snapshot> latest = history_.empty() ? nullptr : history_.back();
    if (latest == nullptr || now - latest->steady >= options_.share_window) {
      const bool full = now - last_full_ >= options_.full_sweep_interval;
      std::shared_ptr<const Snapshot> snap =
          node_.Sample(full ? SampleKind::kFull : SampleKind::kHot);
      if (full) last_full_ = snap->steady;
      AfterSample(*snap);
      PushSnapshot(std::move(snap));
    }
    // Keep the newest snapshot that is at least a window older than the latest as the base.
    const auto newest = history_.back()->steady;
    while (history_.size() > 2 && newest - history_[1]->steady >= options_.utilization_window) {
      history_.pop_front();
    }
    view.current = history_.back();
    view.base = history_.size() > 1 ? history_.front() : nullptr;
  }
  std::lock_guard<std::mutex> lock(mu_);
  view.inventory = inventory_;
  view.hw_errors = hw_errors_;
  view.hw_errors_version = hw_errors_version_;
  view.kmsg = kmsg_state_;
  view.pod_resources = pod_state_;
  view.health = health_;
  if (pod_cache_ != nullptr) view.pods = pod_cache_->Latest();
  // One shared empty set: the rendering cache compares the pointer.
  static const auto* const kNoPods =
      new std::shared_ptr<const PodAssignments>(std::make_shared<const PodAssignments>());
  if (view.pods == nullptr) view.pods = *kNoPods;
  return view;
}

size_t ExporterState::history_size() const {
  std::lock_guard<std::mutex> lock(sample_mu_);
  return history_.size();
}

// Called with sample_mu_ held.
void ExporterState::PushSnapshot(std::shared_ptr<const Snapshot> snap) {
  history_.push_back(std::move(snap));
  // The snapshot that was the latest stays only if it is far enough from the one before it.
  const auto spacing = options_.utilization_window / 4;
  const size_t n = history_.size();
  if (n >= 3 && history_[n - 2]->steady - history_[n - 3]->steady < spacing) {
    history_.erase(history_.end() - 2);
  }
}

double ExporterState::Monotonic(int device, const std::string& key, double value) {
  std::lock_guard<std::mutex> lock(mu_);
  double& last = monotonic_[device][key];
  last = std::max(last, value);
  return last;
}

}  // namespace neuron::monitor
