#pragma once
// Publishes the node's ResourceSlice for the DRA driver neuron.aws.com: reads the slice the
// privileged plugin computes (`GET /dra/resourceslice` on its HTTP Unix socket, the contract in
// docs/kubelet-api.md#resourceslices) and makes the API server hold exactly that:
//   - one slice `<node>-neuron.aws.com`, owned by the Node (metadata.ownerReferences), so that
//     it goes when the node object goes; created when missing, updated with its
//     resourceVersion when the spec changed, a 409 retried after re-reading;
//   - no other slice of driver neuron.aws.com for this node (listed by the field selectors
//     spec.nodeName and spec.driver and deleted), so no slice ever claims a removed device;
//   - while the API server cannot be reached: exponential back-off with jitter up to a cap,
//     logged once when it goes and once when it comes back; each attempt reads the plugin
//     again, so the newest content is what gets published.
// The plugin's 503 (no hardware scan yet) publishes nothing and deletes nothing.
//
// Thread-safety: SyncOnce from one thread at a time (Run's, or a test's); Start/Stop from one
// thread.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"
#include "plugin/kubeapi/client.h"

namespace spdlog {
class logger;
}

namespace neuron::kubeapi {

inline constexpr char kDriverName[] = "neuron.aws.com";

struct PublisherOptions {
  std::string plugin_address = "unix:/run/neuron-node-agent/plugin.sock";
  std::string node_name;
  std::chrono::milliseconds poll{2000};            // how often the plugin is asked
  std::chrono::milliseconds plugin_timeout{2000};  // each ask
  std::chrono::milliseconds backoff_initial{500};  // first wait after an API failure
  std::chrono::milliseconds backoff_max{30000};    // the cap
  std::chrono::milliseconds resync{60000};         // re-check an unchanged slice this often
};

// The slice's name: `<node>-neuron.aws.com`.
std::string SliceName(const std::string& node_name);

// The wait before attempt `failures` (1 = after the first failure): initial * 2^(failures-1),
// capped at `max`, then a uniformly random part of up to half of it taken off (jitter, so that
// the nodes of a cluster do not come back in step). `unit_random` is in [0, 1).
std::chrono::milliseconds Backoff(int failures, std::chrono::milliseconds initial,
                                  std::chrono::milliseconds max, double unit_random);

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

 private:
  absl::StatusOr<nlohmann::json> ReadPlugin(uint64_t* generation) const;
  absl::Status Publish(const nlohmann::json& spec);
  absl::Status DeleteOthers();
  absl::Status Sync();  // SyncOnce without its guard against JSON exceptions
  void Run();
  // Logs a change of state (and an API error whose message changed), nothing else.
  void Report(const absl::Status& s);

  const Client& client_;
  const PublisherOptions options_;
  const std::string name_;
  const std::shared_ptr<spdlog::logger> log_;

  // SyncOnce's own (one caller at a time).
  nlohmann::json last_spec_;
  std::chrono::steady_clock::time_point last_verified_;
  std::string node_uid_;
  int api_failures_ = 0;
  bool plugin_failed_ = false;  // the last SyncOnce failed reading the plugin
  enum class State { kOk, kPlugin, kApiDown, kApi };
  State state_ = State::kOk;
  std::string last_message_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::optional<uint64_t> published_generation_;
  std::thread thread_;
};

}  // namespace neuron::kubeapi
