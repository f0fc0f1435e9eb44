#pragma once
// The exporter: a prometheus::Collectable that, at every scrape, takes the NodeSource's current
// view (shared between scrapes that arrive close together, decision 10), runs every collector
// in order and adds the self-metrics (per-collector duration and success, neuron_up, build info,
// pod-resources health, read errors, process_*). Rendering to text is RenderMetrics().
//
// Thread-safety: Collect() may run concurrently from several HTTP workers.

#include <prometheus/collectable.h>

#include <memory>
#include <string>
#include <vector>

#include "core/http_server.h"
#include "monitor/collector.h"
#include "monitor/node_source.h"

namespace neuron::monitor {

class Exporter : public prometheus::Collectable {
 public:
  Exporter(NodeSource& source, ExporterOptions options);
  ~Exporter() override;

  std::vector<prometheus::MetricFamily> Collect() const override;
  // The text exposition format (version 0.0.4) of one Collect().
  std::string RenderMetrics() const;
  // /metrics, / (landing page), /healthz handlers for an HttpServer.
  std::map<std::string, HttpHandler> Handlers() const;

 private:
  NodeSource& source_;
  ExporterOptions options_;
  std::vector<std::unique_ptr<Collector>> collectors_;
};

}  // namespace neuron::monitor
