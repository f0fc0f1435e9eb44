#include "plugin/node_watcher.h"

#include <algorithm>
#include <array>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "core/base/component_log.h"
#include "core/base/file_io.h"
#include "core/discovery/inventory.h"
#include "core/discovery/make_discovery.h"
#include "core/driver/health_evidence.h"
#include "core/events/events.h"
#include "core/model/catalog.h"
#include "fmt/format.h"

namespace neuron::plugin {
namespace {

using Clock = std::chrono::steady_clock;

// The files whose rise is health evidence, named one by one in core/driver/health_evidence.h
// (docs/architecture.md#health).
using EvidenceFile = HealthEvidenceFile;
constexpr size_t kEvidenceCount = kHealthEvidence.size();
const std::array<EvidenceFile, kEvidenceCount>& EvidenceFiles() { return kHealthEvidence; }

struct DeviceEvidence {
  bool present = false;
  std::string bdf;
  std::optional<DeviceState> state;
  std::optional<int> numa;
  std::vector<int> links;
  bool rebaseline = true;  // take the next ECC reading as the baseline
  NodeGroups groups;       // the optional node groups its tree holds
  std::array<std::optional<uint64_t>, kEvidenceCount> ecc_baseline;  // EvidenceFiles() order
  bool ecc_rose = false;
  bool hw_error = false;
};

struct EfaEvidence {
  bool present = false;
  std::string bdf;
  std::string port_state;
  std::optional<int> numa;
  std::optional<int> uverbs;
};

}  // namespace

class NodeWatcher::Impl {
 public:
  Impl(Options options, NodeState* state)
      : options_(std::move(options)),
        state_(state),
        paths_(options_.root),
        log_(ComponentLogger("plugin.health")) {}

  ~Impl() { Stop(); }

  absl::Status Start() {
    // The config refuses such a period (plugin/config.h); a Config built in code must not spin
    // this thread either.
    if (options_.health.poll_period < kMinPollPeriod) {
      return absl::InvalidArgumentError(
          fmt::format("health.poll_period {}ms is below {}ms: the health thread would spin",
                      options_.health.poll_period.count(), kMinPollPeriod.count()));
    }
    // Events watch the way discovery reads: udev events for libudev, inotify for the directory.
    const bool udev = ResolveDiscoveryMode(paths_, options_.discovery) == DiscoveryMode::kUdev;
    absl::StatusOr<std::unique_ptr<Discovery>> d =
        MakeDiscovery(paths_, options_.discovery, DiscoveryOptions{.lnc = options_.lnc});
    if (!d.ok()) return d.status();
    discovery_ = *std::move(d);
    EventsOptions eopts;
    eopts.mode = udev ? WatchMode::kUdev : WatchMode::kDirectory;
    eopts.state_poll = std::chrono::milliseconds(100);
    events_ = std::make_unique<Events>(paths_, eopts);
    events_->Subscribe([this](const Event& e) {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(e);
      cv_.notify_one();
    });
    if (absl::Status s = events_->Start(); !s.ok()) return s;
    Rescan();
    PollEcc();
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
    if (events_) events_->Stop();
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
      for (const Event& e : batch) rescan |= Apply(e);
      if (rescan) Rescan();
      if (Clock::now() >= next_poll) {
        PollEcc();
        next_poll = Clock::now() + options_.health.poll_period;
      }
      Publish();
    }
  }

  // Applies one event; true when the inventory should be rescanned (details of a new device).
  bool Apply(const Event& e) {
    switch (e.kind) {
      case EventKind::kDeviceAdded: {
        DeviceEvidence& d = devices_[e.device];
        d.present = true;
        d.state = e.state;
        NewBaseline(&d);
        log_->info("device {} appeared (state {})", e.device,
                   e.state ? DeviceStateName(*e.state) : "unknown");
        return true;
      }
      case EventKind::kDeviceRemoved:
        if (!devices_.count(e.device)) return false;
        devices_[e.device].present = false;
        log_->warn("device {} vanished", e.device);
        return false;
      case EventKind::kDeviceStateChanged: {
        if (!devices_.count(e.device)) return true;
        DeviceEvidence& d = devices_[e.device];
        const bool recovered = e.state == DeviceState::kReady && d.state != DeviceState::kReady;
        d.state = e.state;
        if (recovered) NewBaseline(&d);
        log_->info("device {} state {}", e.device, e.state ? DeviceStateName(*e.state) : "?");
        return false;
      }
      case EventKind::kHardwareError:
        if (devices_.count(e.device)) {
          devices_[e.device].hw_error = true;
          log_->warn("device {}: {}", e.device, e.hw_error ? e.hw_error->text : "NEURON_HW_ERR");
        } else {
          log_->warn("NEURON_HW_ERR record without nd-id: not attributed to a device");
        }
        return false;
      case EventKind::kEfaAdded: {
        EfaEvidence& f = efas_[e.efa];
        f.present = true;
        f.port_state = e.port_state;
        return true;  // uverbs number and NUMA node come from the inventory
      }
      case EventKind::kEfaRemoved:
        efas_[e.efa].present = false;
        log_->warn("EFA {} vanished", e.efa);
        return false;
      case EventKind::kEfaPortStateChanged:
        efas_[e.efa].port_state = e.port_state;
        log_->info("EFA {} port {}", e.efa, e.port_state);
        return false;
    }
    return false;
  }

  static void NewBaseline(DeviceEvidence* d) {
    d->rebaseline = true;
    d->ecc_rose = false;
    d->hw_error = false;
  }

  void Rescan() {
    absl::StatusOr<Inventory> inv = discovery_->Scan();
    if (!inv.ok()) {
      log_->warn("inventory scan failed: {}", std::string{inv.status().message()});
      return;
    }
    for (const std::string& w : inv->warnings) log_->warn("{}", w);
    const InstanceSpec* spec = inv->Spec();
    if (spec != nullptr) {  // the node's shape: absent devices are known too
      for (int d = 0; d < spec->devices; ++d) {
        DeviceEvidence& e = devices_[d];
        if (!e.numa && d < static_cast<int>(spec->placement.size())) {
          e.numa = spec->placement[d].numa_node;
        }
        if (e.links.empty()) e.links = ConnectedDevices(*spec, d);
        if (e.bdf.empty() && d < static_cast<int>(spec->placement.size())) {
          e.bdf = spec->placement[d].bdf;
        }
      }
      for (const EfaPlacement& p : spec->efas) {
        EfaEvidence& f = efas_[p.name];
        if (!f.numa) f.numa = p.numa_node;
        if (f.bdf.empty()) f.bdf = p.bdf;
      }
    }
    std::set<int> present;
    for (const NeuronDevice& nd : inv->devices) {
      DeviceEvidence& e = devices_[nd.index];
      present.insert(nd.index);
      const bool recovered = nd.state == DeviceState::kReady && e.state != DeviceState::kReady;
      if (!e.present || recovered) NewBaseline(&e);
      e.present = true;
      e.state = nd.state;
      e.groups = nd.sysfs_groups;
      if (nd.numa_node) e.numa = nd.numa_node;
      if (!nd.bdf.empty()) e.bdf = nd.bdf;
      if (!nd.connected.empty() && spec == nullptr) e.links = nd.connected;
    }
    for (auto& [index, e] : devices_) {
      if (!present.count(index)) e.present = false;
    }
    std::set<std::string> efa_present;
    for (const EfaInterface& ei : inv->efas) {
      EfaEvidence& f = efas_[ei.name];
      efa_present.insert(ei.name);
      f.present = true;
      f.port_state = ei.port_state;
      if (ei.numa_node) f.numa = ei.numa_node;
      if (ei.uverbs) f.uverbs = ei.uverbs;
      if (!ei.bdf.empty()) f.bdf = ei.bdf;
    }
    for (auto& [name, f] : efas_) {
      if (!efa_present.count(name)) f.present = false;
    }
    const int cpd = inv->LogicalCoresPerDevice();
    if (cpd > 0) cores_per_device_ = cpd;
    if (!inv->instance_type.empty()) instance_type_ = inv->instance_type;
    if (inv->driver.version) driver_version_ = *inv->driver.version;
    std::lock_guard<std::mutex> lock(mu_);
    if (!inv->instance_id.empty()) instance_id_ = inv->instance_id;
  }

  void PollEcc() {
    if (!options_.health.ecc) return;
    for (auto& [index, d] : devices_) {
      if (!d.present) continue;
      std::array<std::optional<uint64_t>, kEvidenceCount> now;
      for (size_t i = 0; i < kEvidenceCount; ++i) {
        const EvidenceFile& f = EvidenceFiles()[i];
        if (f.group && !d.groups.Has(*f.group)) continue;
        absl::StatusOr<uint64_t> v = ReadU64(paths_.NeuronDevice(index) / f.dir / f.name);
        if (v.ok()) now[i] = *v;
      }
      if (d.rebaseline) {
        d.ecc_baseline = now;
        d.rebaseline = false;
        continue;
      }
      for (size_t i = 0; i < now.size(); ++i) {
        if (!now[i]) continue;
        if (d.ecc_baseline[i] && *now[i] > *d.ecc_baseline[i]) {
          if (!d.ecc_rose) {
            log_->warn("device {}: {}/{} rose {} -> {}", index, EvidenceFiles()[i].dir,
                       EvidenceFiles()[i].name, *d.ecc_baseline[i], *now[i]);
          }
          d.ecc_rose = true;
        } else if (!d.ecc_baseline[i] || *now[i] < *d.ecc_baseline[i]) {
          d.ecc_baseline[i] = now[i];  // a counter that appeared or restarted
        }
      }
    }
  }

  void Publish() {
    const HealthPolicy& p = options_.health;
    Hardware hw;
    hw.cores_per_device = cores_per_device_;
    hw.instance_type = instance_type_;
    hw.driver_version = driver_version_;
    int size = 0;
    for (const auto& [index, d] : devices_) size = std::max(size, index + 1);
    hw.links.resize(size);
    for (const auto& [index, d] : devices_) {
      HardwareDevice out;
      out.index = index;
      out.present = d.present;
      out.numa = d.numa;
      out.bdf = d.bdf;
      out.unknown = d.present && !d.state;
      hw.links[index] = d.links;
      if (p.absence && !d.present) {
        out.reason = "absent";
      } else if (p.state && d.present && d.state != DeviceState::kReady) {
        out.reason = fmt::format("state {}", d.state ? DeviceStateName(*d.state) : "unknown");
      } else if (p.ecc && d.ecc_rose) {
        out.reason = "uncorrected ECC errors";
      } else if (p.hw_errors && d.hw_error) {
        out.reason = "NEURON_HW_ERR record";
      }
      out.healthy = out.reason.empty();
      hw.devices.push_back(std::move(out));
    }
    for (const auto& [name, f] : efas_) {
      HardwareEfa out;
      out.name = name;
      out.present = f.present;
      out.numa = f.numa;
      out.uverbs = f.uverbs;
      out.bdf = f.bdf;
      if (p.absence && !f.present) {
        out.reason = "absent";
      } else if (p.efa_port && f.present && f.port_state != "ACTIVE") {
        out.reason = fmt::format("port {}", f.port_state.empty() ? "unknown" : f.port_state);
      }
      out.healthy = out.reason.empty();
      hw.efas.push_back(std::move(out));
    }
    state_->SetHardware(std::move(hw));
  }

  const Options options_;
  NodeState* const state_;
  const RootPaths paths_;
  std::shared_ptr<spdlog::logger> log_;
  std::unique_ptr<Discovery> discovery_;
  std::unique_ptr<Events> events_;
  std::thread thread_;

  // Owned by the watcher thread (and Start before it runs).
  std::map<int, DeviceEvidence> devices_;
  std::map<std::string, EfaEvidence> efas_;
  int cores_per_device_ = 0;
  std::string instance_type_;   // from the last scan that knew it
  std::string driver_version_;  // likewise

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
