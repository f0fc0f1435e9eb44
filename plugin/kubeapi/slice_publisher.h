#pragma once
// Publishes the node's ResourceSlices for our DRA drivers (neuron.aws.com, efa.neuron.aws.com):
// reads the pools the privileged plugin computes (`GET /dra/resourceslice` on its HTTP Unix
// socket: {"generation", "nodeName", "slices": [spec, ...]}, docs/kubelet-api.md#resourceslices;
// each spec names its driver) and makes the API server hold exactly those pools, one per driver,
// writing only what differs, as Kubernetes' own ResourceSlice controller does
// (k8s.io/dynamic-resource-allocation resourceslice/resourceslicecontroller.go):
//   - each round lists what the server holds for the node and each driver (field selectors
//     spec.nodeName and spec.driver): desired against actual by slice name, a slice written only
//     when its spec or owner differs, so a resync of an unchanged pool writes nothing; a driver
//     the document has no slice of (--dra.efa=false, a node without EFA) keeps none;
//   - a taint's timeAdded is the server's: it defaults a missing one to the time of the write
//     (SetDefaults_DeviceTaint), so the time it holds for the same device, key, value and effect
//     is copied into what we send, and a taint keeps its time (NoExecute tolerations with
//     tolerationSeconds count from it);
//   - pool.generation is the highest the server holds, kept when at most one existing slice
//     changes and none is new (one write is atomic for a consumer), else one more, so that a
//     consumer ignores a pool caught half-written;
//   - a driver's slices[0] as `<node>-<driver>`, slices[k] as `<node>-<driver>-<k>`, each owned
//     by the Node (metadata.ownerReferences), so that they go when the node object goes; the
//     slices holding sharedCounters written first, then the devices; each created when missing,
//     updated with the resourceVersion listed (a 409 ends the round: the next one lists again);
//   - no other slice of the driver for this node (deleted after the pool is written,
//     with the UID and resourceVersion listed as preconditions, so that a slice somebody wrote
//     meanwhile is not deleted unseen), so no slice ever claims a removed device;
//   - where the API server drops the partitionable-device fields (feature gate
//     DRAPartitionableDevices off: a server clears a disabled gate's fields on write, silently),
//     a device that consumes counters would be offered as if it shared nothing, and a NeuronCore
//     and its device could both be allocated. So what the server returns is checked: a counter
//     slice that comes back without sharedCounters makes the pool published without its counter
//     slices and without every device that consumes counters, except the whole Neuron devices
//     (resourceType neuron_device), published without consumesCounters as with
//     --dra.partitionable=false; logged once, as an error naming the gate; tried again at every
//     resync (the gate may be turned on). A device that comes back without its consumesCounters
//     (an API server of another mind mid-upgrade) is left out for the life of the process;
//   - while the API server cannot be reached: exponential back-off with jitter up to a cap,
//     logged once when it goes and once when it comes back; each attempt reads the plugin
//     again, so the newest content is what gets published.
// After each round that read a document and published it, the cluster's DeviceClass
// neuron.aws.com is checked against the NeuronCores it publishes (class_check.h; none while the
// API server drops counters): at every resync and when the document's set of device kinds
// changes, never on the 304s between.
// The plugin's 503 (no hardware scan yet) publishes nothing and deletes nothing; nor does a
// document whose slices do not all carry its generation as pool.generation (DataLoss). Between
// re-checks the plugin is asked with the generation last published (`?unless=N`) and answers 304
// while it is current, so polling every 250 ms costs next to nothing and a health change reaches
// the API within about that.
//
// Thread-safety: SyncOnce from one thread at a time (the loop's, or a test's); Start/Stop from one
// thread; published_generation, writes and class_check's verdict() and gets() from any.

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"
#include "plugin/dra/device_kinds.h"
#include "plugin/kubeapi/class_check.h"
#include "plugin/kubeapi/client.h"
#include "plugin/kubeapi/round_loop.h"

namespace spdlog {
class logger;
}

namespace neuron::kubeapi {

using plugin::dra::kDriverName;
using plugin::dra::kDriverNames;

struct PublisherOptions {
  std::string plugin_address = "unix:/run/neuron-node-agent/plugin.sock";
  std::string node_name;
  std::chrono::milliseconds poll{250};             // how often the plugin is asked
  std::chrono::milliseconds plugin_timeout{2000};  // each ask
  std::chrono::milliseconds backoff_initial{500};  // first wait after an API failure
  std::chrono::milliseconds backoff_max{30000};    // the cap
  std::chrono::milliseconds resync{60000};         // re-check an unchanged pool this often
};

// The name of slice `index` of the node's pool of `driver`: `<node>-<driver>` for 0,
// `<node>-<driver>-<index>` after it.
std::string SliceName(const std::string& node_name, size_t index = 0,
                      std::string_view driver = kDriverName);

// One slice to write: its name and spec.
struct PlannedSlice {
  std::string name;
  nlohmann::json spec;
};

// The slices to write for the plugin's `slices` of one pool (of `driver`), counter slices first.
// `without_counters`: no counter slices, no device that consumes counters except whole Neuron
// devices (resourceType neuron_device, each stripped of consumesCounters and kept only while no
// other kept device consumes one of its counters). Devices named in `refused` are left out; a slice
// other than slices[0] left without devices is dropped; pool.resourceSliceCount is the plan's size.
std::vector<PlannedSlice> PlanPool(const std::string& node_name,
                                   const std::vector<nlohmann::json>& slices, bool without_counters,
                                   const std::set<std::string>& refused,
                                   std::string_view driver = kDriverName);

class SlicePublisher {
 public:
  SlicePublisher(const Client& client, PublisherOptions options);
  ~SlicePublisher();  // Stop()
  SlicePublisher(const SlicePublisher&) = delete;
  SlicePublisher& operator=(const SlicePublisher&) = delete;

  // One round. OK when the API server holds the plugin's current slice (and no other of ours);
  // FailedPrecondition while the plugin has not scanned (503); Unavailable when the plugin
  // cannot be asked; otherwise the API's error (Unavailable, DeadlineExceeded while it is
  // unreachable).
  absl::Status SyncOnce();

  // A thread running SyncOnce every `poll`, or after the back-off while the API fails.
  void Start();
  void Stop();

  // The plugin's generation last published (nullopt before the first success).
  std::optional<uint64_t> published_generation() const;

  // The API writes made so far (the library's controller counts the same for its tests).
  struct Writes {
    uint64_t creates = 0;
    uint64_t updates = 0;
    uint64_t deletes = 0;
    uint64_t total() const { return creates + updates + deletes; }
  };
  Writes writes() const;

  // Whether the cluster's DeviceClass neuron.aws.com selects NeuronCores (class_check.h).
  const ClassCheck& class_check() const { return class_check_; }

 private:
  // One driver's pool: what was last published and what the API server was found to refuse.
  struct Pool {
    std::string_view driver;
    std::vector<nlohmann::json> last_slices = {};
    bool counters_refused = false;               // the API server drops sharedCounters
    std::set<std::string> probes = {};           // this round's counter slices it emptied
    std::set<std::string> refused_devices = {};  // devices it returned without consumesCounters
    bool none_refused = false;  // it refuses taint effect None (before Kubernetes 1.35)
  };

  // What the pool's writing found the API server to do with the partitionable-device fields.
  struct Written {
    bool counters_dropped = false;   // a counter slice came back without sharedCounters
    std::set<std::string> stripped;  // devices that came back without consumesCounters
    bool counters_kept = false;      // a counter slice came back with its sharedCounters
  };

  // The node's slices of the driver as the server holds them, by name.
  using Stored = std::map<std::string, nlohmann::json>;

  // The plugin's pool; nullopt when it answered 304 to `unless` (nothing changed since).
  absl::StatusOr<std::optional<std::vector<nlohmann::json>>> ReadPlugin(
      uint64_t* generation, std::optional<uint64_t> unless) const;
  absl::StatusOr<Stored> ListStored(std::string_view driver) const;
  // metadata.ownerReferences: the Node (its UID read once).
  absl::StatusOr<nlohmann::json> Owners();
  // Creates (`current` null) or updates one slice; the object the API server holds afterwards.
  absl::StatusOr<nlohmann::json> Write(const PlannedSlice& slice, const nlohmann::json& owners,
                                       const nlohmann::json* current);
  // Writes what differs of the plan, in order, into `stored`; stops after a counter slice whose
  // counters were dropped.
  absl::StatusOr<Written> WritePlan(Pool& pool, std::vector<PlannedSlice> plan, Stored& stored);
  // Writes the pool, narrowing it while the API server drops fields; the names written.
  absl::StatusOr<std::set<std::string>> PublishPool(Pool& pool,
                                                    const std::vector<nlohmann::json>& slices,
                                                    bool probe, Stored& stored);
  // Logs what `w` changes in what the server accepts, and remembers it.
  void Learn(Pool& pool, const Written& w);
  // Deletes the node's other slices of the driver; logs each, except the counter slices written
  // this round only to see whether the server keeps sharedCounters (the pool's probes).
  absl::Status DeleteOthers(const Pool& pool, const std::set<std::string>& keep,
                            const Stored& stored);
  // One driver's round: `slices` are the document's slices of that driver.
  absl::Status SyncPool(Pool& pool, std::vector<nlohmann::json> slices, bool due);
  absl::Status Sync();  // SyncOnce without its guard against JSON exceptions
  // Logs a change of state (and an API error whose message changed), nothing else.
  void Report(const absl::Status& s);

  const Client& client_;
  const PublisherOptions options_;
  const std::shared_ptr<spdlog::logger> log_;

  // SyncOnce's own (one caller at a time).
  std::vector<Pool> pools_;  // one per driver of kDriverNames
  std::chrono::steady_clock::time_point last_verified_;
  std::string node_uid_;
  bool plugin_failed_ = false;  // the last SyncOnce failed reading the plugin
  enum class State { kOk, kPlugin, kApiDown, kApi };
  State state_ = State::kOk;
  std::string last_message_;
  ClassCheck class_check_;

  mutable std::mutex mu_;
  std::optional<uint64_t> published_generation_;
  Writes writes_;
  Pacing pacing_{options_.poll, options_.backoff_initial, options_.backoff_max};
  RoundLoop loop_;  // last: stopped before the rest goes
};

}  // namespace neuron::kubeapi
