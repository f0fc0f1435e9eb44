#pragma once
// The exporter: a prometheus::Collectable that, at every scrape, takes the ExporterState's current
// view (shared between scrapes that arrive close together, docs/architecture.md#sampling-cost),
// runs every collector in order and adds the self-metrics (per-collector duration and success,
// neuron_up, build info, pod-resources health, read errors, and the process's own process_*
// unless options.exporter_metrics is off). Collector groups the options disable are never
// constructed. Rendering to text is RenderMetrics().
//
// Rendering cache: the collectors' part of a scrape depends only on the ExporterView (snapshot,
// base, inventory, pod assignments, kernel-log counts) and on this exporter's options (compat),
// so RenderMetrics() keeps the text of the last view it rendered and serves every scrape of
// that same view from it; only the self-metrics (a few lines) are built per scrape. Scrapes
// sharing one sample (docs/architecture.md#sampling-cost) thus serialise ~2,500 series once, not
// once each. The collector durations exported are those of the rendering that served the scrape.
//
// Thread-safety: Collect() and RenderMetrics() may run concurrently from several HTTP workers.

#include <prometheus/collectable.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "http/http_server.h"
#include "monitor/collector.h"
#include "monitor/exporter_state.h"

namespace neuron::monitor {

class Exporter : public prometheus::Collectable {
 public:
  Exporter(ExporterState& source, ExporterOptions options);
  ~Exporter() override;

  // Every family of one scrape, uncached. Requires source.Ready().
  std::vector<prometheus::MetricFamily> Collect() const override;
  // The text exposition format (version 0.0.4) of one scrape, the collectors' part from the
  // cache when the view is the one last rendered. Requires source.Ready().
  std::string RenderMetrics() const;
  // Handlers for an HttpServer: options.telemetry_path (/metrics by default), /healthz,
  // /readyz and / (a landing page naming the build and linking the other three). The metrics
  // and /readyz answer 503 with the reason until the source is ready.
  std::map<std::string, HttpHandler> Handlers() const;
  // Views rendered so far (tests: scrapes of one view render once).
  uint64_t renders() const;

 private:
  struct CollectorResult {
    std::string name;
    double seconds = 0;
    bool ok = false;
  };
  struct Rendered;

  std::vector<CollectorResult> CollectNode(const ExporterView& view, Families& out) const;
  void SelfMetrics(const ExporterView& view, const std::vector<CollectorResult>& results,
                   Families& out) const;

  ExporterState& source_;
  ExporterOptions options_;
  std::vector<std::unique_ptr<Collector>> collectors_;
  mutable std::mutex render_mu_;  // held while rendering: scrapes of one view render once
  mutable std::shared_ptr<const Rendered> rendered_;
  mutable uint64_t renders_ = 0;
};

}  // namespace neuron::monitor
