#pragma once
// The plugin's own /metrics (plugin/README.md lists every series): RPC counts and latency per RPC
// and resource, registrations, kubelet restarts seen, devices by hardware health and by mask,
// non-contiguous allocations, how old the health evidence is, build info. prometheus-cpp
// underneath. Thread-safe (prometheus-cpp's metrics are; the device gauges are set whole under a
// mutex).

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "core/model/device_id.h"

namespace prometheus {
class Registry;
}

namespace neuron::plugin {

struct NodeView;

class Metrics {
 public:
  Metrics();
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // `code` is the gRPC status name ("OK", "INVALID_ARGUMENT").
  void ObserveRpc(Resource r, std::string_view rpc, std::string_view code, double seconds);
  void Registration(Resource r, bool ok);
  // `signal`: "kubelet_sock_created", "socket_deleted", "stream_ended", "periodic_check".
  void KubeletRestart(std::string_view signal);
  void NonContiguous(Resource r);
  // neuron_device_remediations_total{neuron_device,action,result} (plugin/remediation.h).
  void Remediation(int device, std::string_view action, std::string_view result);
  void ListAndWatchSent(Resource r);
  // Device gauges from a published view.
  void SetView(const NodeView& view);
  // How long ago the node's health evidence was read, and whether that is past
  // health.stale_after; absent until the first reading.
  void SetEvidenceAge(double seconds, bool stale);
  // Runs before every Serialize (gauges that are a function of the time of the scrape). Set
  // once, before scrapes begin.
  void OnScrape(std::function<void()> hook) { on_scrape_ = std::move(hook); }

  // Prometheus text exposition format 0.0.4.
  std::string Serialize() const;
  std::shared_ptr<prometheus::Registry> registry() const;

 private:
  struct Families;
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<Families> f_;
  std::function<void()> on_scrape_;
};

}  // namespace neuron::plugin
