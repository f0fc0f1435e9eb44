#pragma once
// The one place that reads the node for a consumer: discovery (through MakeDiscovery), the
// inventory and its rescans, the Sampler with its datastore and records readers, and Events
// watched the way discovery reads. The health evidence (core/node/health_evidence.h) and the
// kernel log's error counts (core/node/hw_error_counts.h) are fed from it.
//
// What each consumer takes, and keeps as its own:
//   - the device plugin (plugin/node_watcher.cc): discovery by --discovery (auto, udev or the
//     directory scan), Events in the matching mode with a 100 ms state poll, a rescan whenever an
//     event asks for one, and HealthEvidence; it keeps the health policy, the advertising and
//     its thread. It never samples.
//   - the exporter (monitor/exporter_state.cc): the directory scan with an injectable PCI address
//     resolver, a rescan every 30 s that reaches the Sampler only when the inventory changed, the
//     Sampler (hot and full), and HwErrorCounts; it keeps the sharing window, the snapshot
//     history, PodResources, the source states and the collectors.
//   - the tools (top/view_feed.cc): the directory scan with the catalog standing in for
//     root-only files, a rescan every 10 s, the Sampler; they keep process information, pods and
//     the screen state.
//
// Every path hangs off the injected root (docs/style.md#injected-root); nothing here is global.
//
// Thread-safety: Init, Watch and StartSampling belong to the owner and run before the others.
// After them, Rescan, Sample, inventory() and notes() may be called from any thread: rescans
// run one at a time, a mutex guards the last scan, and another the Sampler (held while a sample
// is read, so a rescan that changes the inventory waits for it). Watch's callback runs on the
// Events thread (core/events/events.h).

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/discovery/inventory.h"
#include "core/discovery/make_discovery.h"
#include "core/events/events.h"
#include "core/sample/datastore.h"
#include "core/sample/runtime_records.h"
#include "core/sample/sampler.h"

namespace neuron {

struct NodeSourceOptions {
  std::filesystem::path root = "/";
  DiscoveryMode discovery = DiscoveryMode::kDirectory;
  int lnc = 0;  // 0: the node's (docs/architecture.md#lnc)
  // Device index -> PCI address; empty: DEVICE_BDF_EXT on the device nodes.
  std::function<std::unique_ptr<BdfResolver>(const RootPaths&)> bdf_resolver = {};
  // The instance catalog stands in for attributes only root may read, with notes() saying which
  // (FillUnreadableFromCatalog, core/discovery/presence.h).
  bool catalog_stands_in = false;
};

struct SamplingOptions {
  int threads = 1;
  // The datastore back end for the given devices; empty: through the driver's device ABI.
  std::function<std::unique_ptr<DatastoreReader>(std::vector<int> devices)> datastore = {};
  // The runtimes' records reader; empty: libnrt from `libnrt` (LibnrtPath's rules), or none when
  // `datastore` is given (only the driver back end calls a records reader).
  std::function<std::shared_ptr<RuntimeRecordsReader>()> records = {};
  std::string libnrt = {};
  // How long StartSampling waits for the datastore reader's first probe, so that the first
  // sample already knows whether live data can be read.
  std::chrono::milliseconds first_probe_wait{3000};
};

class NodeSource {
 public:
  explicit NodeSource(NodeSourceOptions options);
  ~NodeSource();  // stops watching
  NodeSource(const NodeSource&) = delete;
  NodeSource& operator=(const NodeSource&) = delete;

  // Chooses the discovery back end. Scans nothing: the first Rescan() does.
  absl::Status Init();

  struct Scan {
    std::shared_ptr<const Inventory> inventory;  // never null
    bool changed = false;                        // differs from the previous scan (or is the first)
  };
  // Scans the node; on a change the Sampler (when started) reads the new inventory from its next
  // sample. A failed scan changes nothing.
  absl::StatusOr<Scan> Rescan();
  // The last successful scan; null before the first.
  std::shared_ptr<const Inventory> inventory() const;
  // With catalog_stands_in: what the last scan could not read and what stood in for it.
  std::vector<std::string> notes() const;

  // Creates the Sampler over the last scan's inventory (Rescan first). Returns whether the
  // datastore reader's first probe answered within first_probe_wait.
  bool StartSampling(const SamplingOptions& options);
  // One sample; StartSampling first.
  std::shared_ptr<const Snapshot> Sample(SampleKind kind);
  // The kernel log's open and close records, told to the Sampler's datastore reader
  // (DatastoreReader::SetOpensLogged, ProbeSoon); nothing before StartSampling.
  void SetOpensLogged(bool logged);
  void ProbeSoon();

  // Starts Events in the mode discovery reads (udev events for libudev, inotify for the
  // directory scan) and delivers each to `callback`. Fails as Events::Start does.
  absl::Status Watch(std::chrono::milliseconds state_poll, Events::Callback callback);
  // Stops the Events thread; no callback runs after it returns. Idempotent.
  void StopWatching();

  const RootPaths& root() const { return root_; }

 private:
  const NodeSourceOptions options_;
  const RootPaths root_;
  std::unique_ptr<Discovery> discovery_;            // set by Init, then read only
  DiscoveryMode mode_ = DiscoveryMode::kDirectory;  // the back end Init chose
  std::unique_ptr<Events> events_;                  // owner only

  std::mutex scan_mu_;     // one Rescan at a time (a Discovery scans on one thread)
  mutable std::mutex mu_;  // guards the last scan's results
  std::shared_ptr<const Inventory> inventory_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> notes_ ABSL_GUARDED_BY(mu_);

  std::mutex sample_mu_;  // held while sampling and while the Sampler takes a new inventory
  std::unique_ptr<Sampler> sampler_ ABSL_GUARDED_BY(sample_mu_);
};

}  // namespace neuron
