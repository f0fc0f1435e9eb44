#pragma once
// neuron-top's collection side (docs/tools-ux.md#requirements Q5, Q6): reads the node through
// core's NodeSource (core/node/node_source.h: the directory scan with the catalog standing in for
// root-only files, the Sampler) and owns process information and the pod locator; every --delay
// it takes a hot sample, turns the last two snapshots into a TopView and publishes it. The drawing
// thread never waits on file I/O: it takes Latest() (an immutable view) and polls notify_fd() to
// learn that a new one is there.
//
// Cost control: the hot sample reads only what the screen needs (core state, ECC, memory totals
// and the live datastores). The full sweep, which alone refreshes per-category memory, runs
// only when memory totals moved since the last one (categories cannot change without a total
// changing): at most every 2 s for the summary line, at once while the memory tree shows
// per-core categories (SetDetailWanted); and at least every minute. With an agent configured,
// each sample also asks it for health (a 304 while nothing changed); only when it cannot be
// reached are the health evidence files read (top/node_health.h).
//
// Thread-safety: Latest(), notify_fd() and SetDetailWanted() may be called from any thread.
// Init() and Step() are for the owner before Start() (or instead of it, as --snapshot does).

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/status/status.h"
#include "core/base/unique_fd.h"
#include "core/discovery/inventory.h"
#include "core/node/node_source.h"
#include "core/proc/pod_identity.h"
#include "core/proc/procinfo.h"
#include "core/sample/sampler.h"
#include "top/node_health.h"
#include "top/view_model.h"

namespace neuron::top {

struct ViewFeedOptions {
  // What to read: root and LNC (the directory scan, with the catalog standing in for what only
  // root may read, as neuron-top has always read the node; neuron-ls reads it the same way).
  NodeSourceOptions node{.catalog_stands_in = true};
  // The sampler: its threads (1 or 2), libnrt for the records, and how long Init waits for the
  // driver's first answer before its first sample, so that the first two samples see the same
  // runtimes (a datastore that appears between them would count its whole past as busy time in
  // one window).
  SamplingOptions sampling;
  std::chrono::milliseconds delay{1000};
  // The second sample comes this soon after the first, so rates appear quickly at start-up.
  std::chrono::milliseconds first_delay{250};
  std::chrono::milliseconds rescan{10000};  // inventory rescan (devices unplugged or added)
  std::chrono::milliseconds full_sweep_max_age{60000};
  std::chrono::milliseconds full_sweep_min_gap{2000};
  size_t history = 300;  // samples kept for the charts
  // Where to ask for health (--agent; top/node_health.h), every sample; "": health is not shown.
  std::string agent;
  std::chrono::milliseconds agent_timeout = kAgentTimeout;
};

class ViewFeed {
 public:
  // `pods` may be null (no POD column data). `datastore` may be null: the runtimes' live data
  // is then read through the driver's device ABI (MakeDriverDatastoreReader) and their records
  // through libnrt (options.sampling.libnrt). Tests inject a datastore reader and, with it,
  // `records` (null: no records, as when no reader is configured).
  ViewFeed(ViewFeedOptions options, std::unique_ptr<PodLocator> pods,
           std::unique_ptr<DatastoreReader> datastore = nullptr,
           std::shared_ptr<RuntimeRecordsReader> records = nullptr);
  ~ViewFeed();
  ViewFeed(const ViewFeed&) = delete;
  ViewFeed& operator=(const ViewFeed&) = delete;

  // Scans the inventory and takes the first (full) sample; the first view has no rates.
  absl::Status Init();
  const Inventory& inventory() const { return *inventory_; }
  // One sample now, published and returned. Owner only, never while the thread runs.
  std::shared_ptr<const TopView> Step();

  // Samples on a thread of its own: first_delay after the last Step()/Init(), then every delay.
  void Start();
  void Stop();

  std::shared_ptr<const TopView> Latest() const;
  // An eventfd that becomes readable when a view is published; the reader drains it.
  int notify_fd() const { return notify_fd_.get(); }
  void SetDetailWanted(bool wanted) { detail_wanted_.store(wanted, std::memory_order_relaxed); }

  // Samples taken so far, by kind (benchmarks and tests check the cost policy).
  uint64_t full_samples() const { return full_samples_.load(); }
  uint64_t hot_samples() const { return hot_samples_.load(); }

 private:
  void Loop();
  // A scan with the catalog standing in for root-only files (notes_ says which).
  absl::StatusOr<NodeSource::Scan> ScanInventory();
  SampleKind ChooseKind(std::chrono::steady_clock::time_point now) const;
  ProcSample SampleProcesses(const Snapshot& snap) const;
  void RefreshDetails(const Snapshot& snap);
  // Appends the view's figures to the charts' ring buffers and gives it their contents.
  void AddHistory(TopView* view);
  void Publish(std::shared_ptr<const TopView> view);

  ViewFeedOptions options_;
  RootPaths root_;
  std::unique_ptr<PodLocator> pods_;
  ProcReader proc_;
  NodeSource node_;
  std::unique_ptr<DatastoreReader> datastore_;  // until Init hands it to the NodeSource
  std::shared_ptr<RuntimeRecordsReader> records_;
  std::unique_ptr<HealthSource> health_;  // null without options_.agent
  // The last scan (empty before Init).
  std::shared_ptr<const Inventory> inventory_ = std::make_shared<const Inventory>();
  std::vector<std::string> notes_;  // what the last scan could not read (view's status line)
  std::vector<std::string> logged_errors_;  // the last sample's errors, as logged
  std::shared_ptr<const Snapshot> prev_;
  ProcSample prev_proc_;
  std::map<int, ProcessDetails> details_;
  std::deque<std::optional<double>> util_history_;
  std::deque<std::optional<double>> mem_history_;
  std::chrono::steady_clock::time_point last_rescan_;
  std::chrono::steady_clock::time_point last_full_;
  uint64_t memory_signature_at_full_ = 0;
  uint64_t memory_signature_ = 0;
  std::atomic<bool> detail_wanted_{false};
  std::atomic<uint64_t> full_samples_{0};
  std::atomic<uint64_t> hot_samples_{0};

  UniqueFd notify_fd_;
  mutable std::mutex mu_;
  std::shared_ptr<const TopView> latest_;  // guarded by mu_
  bool stop_ = false;                      // guarded by mu_
  std::condition_variable cv_;
  std::thread thread_;
};

}  // namespace neuron::top
