#include "plugin/metrics.h"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include "core/base/version.h"
#include "plugin/node_state.h"

namespace neuron::plugin {

struct Metrics::Families {
  prometheus::Family<prometheus::Counter>* rpcs;
  prometheus::Family<prometheus::Histogram>* rpc_seconds;
  prometheus::Family<prometheus::Counter>* registrations;
  prometheus::Family<prometheus::Counter>* restarts;
  prometheus::Family<prometheus::Counter>* remediations;
  prometheus::Family<prometheus::Counter>* noncontiguous;
  prometheus::Family<prometheus::Counter>* law_sent;
  prometheus::Family<prometheus::Gauge>* devices;
  prometheus::Family<prometheus::Gauge>* masked;
  prometheus::Family<prometheus::Gauge>* advertised;
  prometheus::Family<prometheus::Gauge>* evidence_age;
  prometheus::Family<prometheus::Gauge>* evidence_stale;
  std::mutex gauge_mu;
};

namespace {

// 10 µs .. 1 s: Allocate and GetPreferredAllocation should sit in the lowest buckets.
const prometheus::Histogram::BucketBoundaries& LatencyBuckets() {
  static const prometheus::Histogram::BucketBoundaries b{
      0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.01, 0.1, 1};
  return b;
}

std::string Name(Resource r) { return std::string(ResourceName(r)); }

}  // namespace

Metrics::Metrics()
    : registry_(std::make_shared<prometheus::Registry>()), f_(std::make_unique<Families>()) {
  auto& reg = *registry_;
  f_->rpcs = &prometheus::BuildCounter()
                  .Name("neuron_plugin_rpcs_total")
                  .Help("Device-plugin RPCs served, by resource, RPC and gRPC status code.")
                  .Register(reg);
  f_->rpc_seconds = &prometheus::BuildHistogram()
                         .Name("neuron_plugin_rpc_duration_seconds")
                         .Help("Time to answer a device-plugin RPC, by resource and RPC.")
                         .Register(reg);
  f_->registrations = &prometheus::BuildCounter()
                           .Name("neuron_plugin_registrations_total")
                           .Help("Register calls to the kubelet, by resource and result.")
                           .Register(reg);
  f_->remediations =
      &prometheus::BuildCounter()
           .Name("neuron_device_remediations_total")
           .Help(
               "Actions the health policy took on a Neuron device "
               "(docs/OPERATIONS.md#remediation), "
               "by action and result: applied (taint, evict, node), refused, passed, failed, "
               "gave_up (reset).")
           .Register(reg);
  f_->restarts = &prometheus::BuildCounter()
                      .Name("neuron_plugin_kubelet_restarts_total")
                      .Help("Kubelet restarts seen, by the signal that showed it first.")
                      .Register(reg);
  f_->noncontiguous = &prometheus::BuildCounter()
                           .Name("neuron_plugin_noncontiguous_allocations_total")
                           .Help("Allocate requests with a non-contiguous set (policy warn).")
                           .Register(reg);
  f_->law_sent = &prometheus::BuildCounter()
                      .Name("neuron_plugin_list_and_watch_updates_total")
                      .Help("ListAndWatch device lists sent to the kubelet, by resource.")
                      .Register(reg);
  f_->devices = &prometheus::BuildGauge()
                     .Name("neuron_plugin_devices")
                     .Help(
                         "Devices known per resource by hardware health "
                         "(docs/architecture.md#health).")
                     .Register(reg);
  f_->masked = &prometheus::BuildGauge()
                    .Name("neuron_plugin_devices_masked")
                    .Help(
                        "Devices reported Unhealthy because an overlapping resource holds "
                        "them (double-booking mask), per resource.")
                    .Register(reg);
  f_->advertised = &prometheus::BuildGauge()
                        .Name("neuron_plugin_devices_advertised")
                        .Help("Devices in the last ListAndWatch list, by reported health.")
                        .Register(reg);
  f_->evidence_age = &prometheus::BuildGauge()
                          .Name("neuron_plugin_health_evidence_age_seconds")
                          .Help(
                              "Seconds since the node's health evidence was last read (absent "
                              "before the first reading).")
                          .Register(reg);
  f_->evidence_stale = &prometheus::BuildGauge()
                            .Name("neuron_plugin_health_evidence_stale")
                            .Help(
                                "1 while the health evidence is older than health.stale_after: "
                                "the DRA face stops sending it and the kubelet reads the devices "
                                "as Unknown.")
                            .Register(reg);
  // The build every series came from (core/base/version.h), as neuron_exporter_build_info.
  prometheus::BuildGauge()
      .Name("neuron_plugin_build_info")
      .Help("Device plugin version, source revision and compiler; always 1.")
      .Register(reg)
      .Add({{"version", std::string(AgentVersion())},
            {"revision", std::string(AgentRevision())},
            {"compiler", std::string(AgentCompiler())}})
      .Set(1);
  for (Resource r :
       {Resource::kNeuron, Resource::kNeuronCore, Resource::kEfa, Resource::kNeuronDevice}) {
    f_->registrations->Add({{"resource", Name(r)}, {"result", "ok"}});
    f_->noncontiguous->Add({{"resource", Name(r)}});
  }
}

Metrics::~Metrics() = default;

void Metrics::ObserveRpc(Resource r, std::string_view rpc, std::string_view code, double seconds) {
  f_->rpcs->Add({{"resource", Name(r)}, {"rpc", std::string(rpc)}, {"code", std::string(code)}})
      .Increment();
  f_->rpc_seconds->Add({{"resource", Name(r)}, {"rpc", std::string(rpc)}}, LatencyBuckets())
      .Observe(seconds);
}

void Metrics::Registration(Resource r, bool ok) {
  f_->registrations->Add({{"resource", Name(r)}, {"result", ok ? "ok" : "error"}}).Increment();
}

void Metrics::KubeletRestart(std::string_view signal) {
  f_->restarts->Add({{"signal", std::string(signal)}}).Increment();
}

void Metrics::Remediation(int device, std::string_view action, std::string_view result) {
  f_->remediations
      ->Add({{"neuron_device", std::to_string(device)},
             {"action", std::string(action)},
             {"result", std::string(result)}})
      .Increment();
}

void Metrics::NonContiguous(Resource r) {
  f_->noncontiguous->Add({{"resource", Name(r)}}).Increment();
}

void Metrics::ListAndWatchSent(Resource r) {
  f_->law_sent->Add({{"resource", Name(r)}}).Increment();
}

void Metrics::SetView(const NodeView& view) {
  std::lock_guard<std::mutex> lock(f_->gauge_mu);
  for (const auto& [r, rv] : view.resources) {
    double hw_ok = 0, hw_bad = 0, masked = 0, adv_ok = 0, adv_bad = 0;
    for (const ResourceDevice& d : rv.devices) {
      (d.hw_healthy ? hw_ok : hw_bad) += 1;
      masked += d.masked ? 1 : 0;
      (d.healthy ? adv_ok : adv_bad) += 1;
    }
    f_->devices->Add({{"resource", Name(r)}, {"hardware", "healthy"}}).Set(hw_ok);
    f_->devices->Add({{"resource", Name(r)}, {"hardware", "unhealthy"}}).Set(hw_bad);
    f_->masked->Add({{"resource", Name(r)}}).Set(masked);
    f_->advertised->Add({{"resource", Name(r)}, {"health", "Healthy"}}).Set(adv_ok);
    f_->advertised->Add({{"resource", Name(r)}, {"health", "Unhealthy"}}).Set(adv_bad);
  }
}

void Metrics::SetEvidenceAge(double seconds, bool stale) {
  f_->evidence_age->Add({}).Set(seconds);
  f_->evidence_stale->Add({}).Set(stale ? 1 : 0);
}

std::string Metrics::Serialize() const {
  if (on_scrape_) on_scrape_();
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

std::shared_ptr<prometheus::Registry> Metrics::registry() const { return registry_; }

}  // namespace neuron::plugin
