#pragma once
// What every scrape reads: the node's inventory, the latest Snapshot and the one the rates are
// taken against, pod assignments and the kernel-log counts. The node itself is read through
// core's NodeSource (core/node/node_source.h: the directory scan, the Sampler) and HwErrorCounts;
// what is the exporter's own is below: sharing, history, PodResources, the source states.
//
// Sharing (docs/architecture.md#sampling-cost): Get() samples at most once per `share_window`;
// scrapes that arrive meanwhile (an HA Prometheus pair, a browser) get the same snapshot, and a
// scrape that arrives while a sample runs waits for it instead of starting another. Each sample
// reads the hot set; a full sweep runs when the last one is older than `full_sweep_interval`.
//
// History: utilization needs a snapshot about `utilization_window` old, but scrapes without
// sharing may sample every few milliseconds, and each trn2.48xlarge snapshot holds ~0.3 MB
// (datastores included). So apart from the latest, kept snapshots are at least a quarter window
// apart: at most ~6 are alive, whatever the scrape rate.
//
// A background thread (not the scrape path) rescans the inventory, tails ROOT/dev/kmsg and judges
// health: it keeps core's HealthEvidence (core/node/health_evidence.h), fed the rescans and the
// kernel log's NEURON_HW_ERR records, polls its counters every `health_poll` and publishes the
// verdicts under every class of evidence (the exporter works without the device plugin:
// docs/metrics.md#health-metrics). The PodResources cache refreshes on a thread of its own, so a
// slow or absent kubelet never slows a scrape.
//
// Counters never go backwards (docs/metrics.md#labels-and-liveness): Monotonic() keeps the last
// exported value per series and device, forgotten when the device disappears (a replugged device
// may restart).
//
// Live sources (docs/architecture.md#unknown-is-not-zero): sysfs, the datastores and the runtimes'
// records (through libnrt) are judged per snapshot, the kernel log by the background thread,
// PodResources by its cache. A ExporterView (its snapshot included) carries their states
// (neuron_exporter_source_up); each change is logged once, with the reason.
//
// Thread-safety: every public method may be called from any thread.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "core/discovery/inventory.h"
#include "core/node/device_health.h"
#include "core/node/health_evidence.h"
#include "core/node/hw_error_counts.h"
#include "core/node/node_source.h"
#include "core/sample/datastore.h"
#include "core/sample/runtime_records.h"
#include "core/sample/sampler.h"
#include "proto/pod_resources.h"

namespace neuron::monitor {

struct ExporterStateOptions {
  // What to read and how (root, LNC, PCI addresses; the sampler's threads, datastore and records
  // readers, libnrt, and how long the first sample waits for the driver's first answer). The
  // exporter reads the node by the directory scan, as it always has (libudev would find the same:
  // tests/core/discovery_agreement_test.cc), and without the catalog standing in.
  neuron::NodeSourceOptions node;
  neuron::SamplingOptions sampling{.threads = 2};
  std::filesystem::path kubelet_dir = "/var/lib/kubelet";
  std::chrono::milliseconds share_window{1000};
  std::chrono::milliseconds full_sweep_interval{10000};
  // Utilization is measured between the latest snapshot and the newest one at least this much
  // older (or the oldest kept, when none is).
  std::chrono::milliseconds utilization_window{5000};
  std::chrono::milliseconds rescan_interval{30000};
  // How often the background thread reads the health evidence (ECC, presence, the driver's
  // health files) and tails the kernel log: a fault shows within about this long, never by a
  // scrape. Device states are read when the log reports a reset (and every 10 s besides).
  std::chrono::milliseconds health_poll{1000};
  std::chrono::milliseconds pod_refresh{5000};
  bool pod_resources = true;
};

// Whether `snap` holds the live datastores (docs/architecture.md#unknown-is-not-zero). When not,
// its sysfs totals lack every running process's part and would read as idle during a job.
inline bool DatastoresRead(const Snapshot& snap) {
  return snap.datastore_source.known && snap.datastore_source.up;
}
// sysfs is up when the sample read the state of at least one device and of every device present.
SourceState SysfsState(const Snapshot& snap);

// The verdicts of every known device (the catalog's too, absent ones included) and EFA interface,
// judged under every class of evidence (core/node/device_health.h).
struct DeviceVerdict {
  DeviceHealth health;
  bool corrected_counters = false;  // the tree has {mem,sram}_ecc_corrected: degraded is known
  bool operator==(const DeviceVerdict&) const = default;
};
struct NodeHealth {
  std::map<int, DeviceVerdict> devices;
  std::map<std::string, DeviceHealth> efas;
  bool operator==(const NodeHealth&) const = default;
};

struct ExporterView {
  std::shared_ptr<const Inventory> inventory;
  std::shared_ptr<const Snapshot> current;
  std::shared_ptr<const Snapshot> base;        // may be null (only one sample so far)
  std::shared_ptr<const PodAssignments> pods;  // never null
  // device -> hw error type -> NEURON_HW_ERR records seen since start
  std::map<int, std::map<std::string, uint64_t>> hw_errors;
  // The live sources not judged by `current` (docs/architecture.md#unknown-is-not-zero; sysfs and
  // the datastores are: SysfsState, Snapshot::datastore_source). kmsg: the kernel log could be
  // opened and read; hw_errors counts nothing when not. pod_resources: the last PodResources List()
  // succeeded; unknown (known == false) before the first and without the cache.
  SourceState kmsg;
  SourceState pod_resources;
  uint64_t hw_errors_version = 0;  // changes whenever hw_errors or kmsg does
  // A new object whenever a verdict changes; never null once Init() ran.
  std::shared_ptr<const NodeHealth> health;
};

class ExporterState {
 public:
  explicit ExporterState(ExporterStateOptions options);
  ~ExporterState();
  ExporterState(const ExporterState&) = delete;
  ExporterState& operator=(const ExporterState&) = delete;

  // Scans the inventory and takes the first (full) sample. Fails when ROOT cannot be scanned.
  absl::Status Init();
  // Starts the background thread and the PodResources cache.
  void Start();
  // OK once Init() and Start() have run (the inventory is read and the first sample taken);
  // before, Unavailable saying which step is still missing. Get() may be called only once this
  // is OK: /metrics answers 503 until then, and /readyz says why.
  absl::Status Ready() const;

  ExporterView Get();
  // The last exported value of a counter series on `device` (-1: not a device's), raised to
  // `value` if larger: counters never go down between scrapes.
  double Monotonic(int device, const std::string& key, double value);

  // Snapshots kept for utilization (tests: bounded whatever the scrape rate).
  size_t history_size() const;

  // Self-metrics.
  uint64_t read_errors() const { return read_errors_.load(); }
  uint64_t samples() const { return samples_.load(); }
  const PodResourcesCache* pod_cache() const { return pod_cache_.get(); }
  std::optional<std::chrono::system_clock::time_point> pod_last_success() const;
  const ExporterStateOptions& options() const { return options_; }

 private:
  void Loop();
  void PushSnapshot(std::shared_ptr<const Snapshot> snap);
  void AfterSample(const Snapshot& snap);
  void TailKmsg();
  // Applies a scan: the inventory (when changed) and the health evidence.
  void ApplyScan(const neuron::NodeSource::Scan& scan);
  // Judges every device and EFA and publishes the verdicts when one changed.
  void PublishHealth();
  void SetKmsgState(const absl::Status& status);
  void NotePodResources();
  // Logs the driver's version and generation once, and each device's missing sysfs nodes when
  // they change (docs/driver-interface.md#detection): named once, not on every scrape.
  void NoteLayout(const Inventory& inv);
  // Logs `name`'s state when it differs from the last one logged. Called with mu_ held.
  void NoteSource(std::string_view name, const SourceState& state);

  ExporterStateOptions options_;
  neuron::NodeSource node_;  // core's: discovery, inventory, the Sampler
  std::unique_ptr<PodResourcesCache> pod_cache_;

  mutable std::mutex sample_mu_;                         // guards the history; held while sampling
  std::deque<std::shared_ptr<const Snapshot>> history_;  // oldest first
  std::chrono::steady_clock::time_point last_full_;

  mutable std::mutex mu_;  // guards the fields below
  std::shared_ptr<const Inventory> inventory_;
  std::map<int, std::map<std::string, uint64_t>> hw_errors_;
  uint64_t hw_errors_version_ = 0;
  std::map<int, std::map<std::string, double>> monotonic_;
  std::set<std::string> logged_errors_;
  uint64_t pod_refreshes_seen_ = 0;
  std::optional<std::chrono::system_clock::time_point> pod_last_success_;
  SourceState kmsg_state_;
  SourceState pod_state_;
  std::map<std::string, bool, std::less<>> noted_sources_;  // source -> up, as last logged
  std::optional<DriverInfo> noted_driver_;                  // as last logged
  std::map<int, std::vector<std::string>> noted_missing_;   // device -> missing nodes logged
  std::shared_ptr<const NodeHealth> health_;

  std::atomic<uint64_t> read_errors_{0};
  std::atomic<uint64_t> samples_{0};
  // 0 nothing yet, 1 inventory read, 2 first sample taken (Init done), 3 started (ready).
  std::atomic<int> stage_{0};
  std::atomic<bool> stop_{false};
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  std::thread thread_;
  HwErrorCounts kmsg_;            // the background thread's (and Start's before it runs)
  bool opens_logged_ = false;     // the background thread's: what the Sampler was last told
  uint64_t open_close_seen_ = 0;  // the background thread's: kmsg_'s open/close records acted on
  HealthEvidence evidence_;       // the background thread's (and Init's before it runs)
};

}  // namespace neuron::monitor
