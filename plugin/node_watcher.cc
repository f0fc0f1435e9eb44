#include "plugin/node_watcher.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "core/base/component_log.h"
#include "core/node/health_evidence.h"
#include "core/node/node_source.h"
#include "core/node/withhold.h"
#include "fmt/format.h"

namespace neuron::plugin {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

Action StrongestAction(const DeviceHealth& h, const HealthPolicy& policy) {
  Action out = Action::kIgnore;
  for (int i = 0; i < kEvidenceClassCount; ++i) {
    const auto c = static_cast<EvidenceClass>(i);
    const bool found = h.classes.Has(c) || h.degraded_classes.Has(c);
    if (found) out = std::max(out, policy.ActionFor(c));
  }
  return out;
}

void MarkWithheld(std::string_view root, Hardware* hw) {
  const std::set<int> locked = DevicesWithLockFiles(root);
  for (HardwareDevice& d : hw->devices) {
    if (!d.present || !locked.contains(d.index)) continue;
    const absl::StatusOr<bool> withheld = IsWithheld(root, d.index);
    if (withheld.ok() && !*withheld) continue;
    d.withheld = true;
    d.healthy = false;
    d.reason = withheld.ok()
                   ? "withheld for a health check or reset"
                   : fmt::format("withheld: {}", std::string{withheld.status().message()});
  }
}

Hardware JudgeHealth(const HealthEvidence& evidence, const HealthPolicy& p) {
  Hardware hw;
  hw.cores_per_device = evidence.cores_per_device();
  hw.node.instance_type = evidence.instance_type();
  hw.node.driver_version = evidence.driver_version();
  const EvidenceClasses counted = p.Counted();
  int size = 0;
  for (const auto& [index, d] : evidence.devices()) size = std::max(size, index + 1);
  hw.links.resize(size);
  for (const auto& [index, d] : evidence.devices()) {
    HardwareDevice out;
    out.index = index;
    out.present = d.present;
    out.numa = d.numa;
    out.bdf = d.bdf;
    out.attributes = d.attributes;
    out.health = JudgeDevice(d, counted);
    // The kubelet's two states: unknown is not healthy (a device whose health cannot be told is
    // not handed out); the DRA face tells the two apart.
    out.healthy = out.health.state == HealthState::kHealthy;
    out.unknown = out.health.state == HealthState::kUnknown;
    if (!out.health.reasons.empty()) out.reason = out.health.reasons.front();
    out.action = StrongestAction(out.health, p);
    hw.links[index] = d.links;
    hw.devices.push_back(std::move(out));
  }
  for (const auto& [name, f] : evidence.efas()) {
    HardwareEfa out;
    out.name = name;
    out.present = f.present;
    out.numa = f.numa;
    out.uverbs = f.uverbs;
    out.bdf = f.bdf;
    out.health = JudgeEfa(f, counted);
    out.healthy = out.health.state == HealthState::kHealthy;
    if (!out.health.reasons.empty()) out.reason = out.health.reasons.front();
    hw.efas.push_back(std::move(out));
  }
  return hw;
}

class NodeWatcher::Impl {
 public:
  Impl(Options options, NodeState* state)
      : options_(std::move(options)),
        state_(state),
        log_(ComponentLogger("plugin.health")),
        node_(options_.node),
        evidence_(RootPaths(options_.node.root), log_,
                  HealthEvidenceOptions{.heartbeat_period = options_.health.heartbeat_period}) {}

  ~Impl() { Stop(); }

  absl::Status Start() {
    // The config refuses such a period (plugin/config.h); a Config built in code must not spin
    // this thread either.
    if (options_.health.poll_period < kMinPollPeriod) {
      return absl::InvalidArgumentError(
          fmt::format("health.poll_period {}ms is below {}ms: the health thread would spin",
                      options_.health.poll_period.count(), kMinPollPeriod.count()));
    }
    if (absl::Status s = node_.Init(); !s.ok()) return s;
    // Watching starts before the first scan, so a change between the two is not lost.
    // EFA port states are polled with the counters; device states and presence come as events.
    absl::Status watching = node_.Watch(options_.health.poll_period, [this](const Event& e) {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(e);
      cv_.notify_one();
    });
    if (!watching.ok()) return watching;
    Rescan();
    evidence_.PollCounters(Clock::now());
    Publish();
    thread_ = std::thread([this] { Run(); });
    return absl::OkStatus();
  }

  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      stopping_ = true;
      cv_.notify_one();
    }
    node_.StopWatching();
    if (thread_.joinable()) thread_.join();
  }

  std::string instance_id() const {
    std::lock_guard<std::mutex> lock(mu_);
    return instance_id_;
  }

 private:
  void Run() {
    Clock::time_point next_poll = Clock::now() + options_.health.poll_period;
    while (true) {
      std::deque<Event> batch;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait_until(lock, next_poll, [&] { return stopping_ || !queue_.empty(); });
        if (stopping_) return;
        batch.swap(queue_);
      }
      bool rescan = false;
      for (const Event& e : batch) rescan |= evidence_.Apply(e);
      if (rescan) Rescan();
      if (Clock::now() >= next_poll) {
        evidence_.PollCounters(Clock::now());
        next_poll = Clock::now() + options_.health.poll_period;
      }
      Publish();
    }
  }

  void Rescan() {
    absl::StatusOr<NodeSource::Scan> scan = node_.Rescan();
    if (!scan.ok()) {
      log_->warn("inventory scan failed: {}", std::string{scan.status().message()});
      return;
    }
    const Inventory& inv = *scan->inventory;
    for (const std::string& w : inv.warnings) log_->warn("{}", w);
    evidence_.ApplyScan(inv);
    ultraserver_ = inv.ultraserver;
    std::lock_guard<std::mutex> lock(mu_);
    if (!inv.instance_id.empty()) instance_id_ = inv.instance_id;
  }

  void Publish() {
    Hardware hw = JudgeHealth(evidence_, options_.health);
    MarkWithheld(options_.node.root.string(), &hw);
    hw.node.ultraserver = ultraserver_;
    state_->SetHardware(std::move(hw));
  }

  const Options options_;
  NodeState* const state_;
  std::shared_ptr<spdlog::logger> log_;
  NodeSource node_;
  std::thread thread_;

  HealthEvidence evidence_;  // owned by the watcher thread (and Start before it runs)
  // The last scan's UltraServer place (the DRA face's neuron-node); owned like evidence_.
  std::optional<UltraServerInfo> ultraserver_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Event> queue_;  // guarded by mu_
  bool stopping_ = false;    // guarded by mu_
  std::string instance_id_;  // guarded by mu_
};

NodeWatcher::NodeWatcher(Options options, NodeState* state)
    : impl_(std::make_unique<Impl>(std::move(options), state)) {}
NodeWatcher::~NodeWatcher() = default;
absl::Status NodeWatcher::Start() { return impl_->Start(); }
void NodeWatcher::Stop() { impl_->Stop(); }
std::string NodeWatcher::instance_id() const { return impl_->instance_id(); }

}  // namespace neuron::plugin
