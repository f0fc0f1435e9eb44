#pragma once
// Small builders for prometheus-cpp metric families, so collectors read as a list of names,
// labels and values (docs/style.md#collectors-translate: collectors translate). Not thread-safe;
// one per scrape.

#include <prometheus/client_metric.h>
#include <prometheus/metric_family.h>

#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace neuron::monitor {

using Labels = std::vector<prometheus::ClientMetric::Label>;
using Families = std::vector<prometheus::MetricFamily>;

// One family being filled. Families with no samples are dropped by Finish(): a metric whose
// every source is absent does not appear at all (docs/style.md#partial-data).
class FamilyBuilder {
 public:
  FamilyBuilder(std::string name, std::string help, prometheus::MetricType type)
      : family_{std::move(name), std::move(help), type, {}} {}

  // Gauges, counters (by type): one sample.
  void Add(Labels labels, double value);
  // Histogram: cumulative counts per finite bound (ascending); +Inf = count.
  void AddHistogram(Labels labels, const std::vector<std::pair<double, uint64_t>>& buckets,
                    uint64_t count, double sum);
  bool empty() const { return family_.metric.empty(); }
  void Finish(Families& out) {
    if (!family_.metric.empty()) out.push_back(std::move(family_));
  }

 private:
  prometheus::MetricFamily family_;
};

inline FamilyBuilder Gauge(std::string name, std::string help) {
  return FamilyBuilder(std::move(name), std::move(help), prometheus::MetricType::Gauge);
}
inline FamilyBuilder Counter(std::string name, std::string help) {
  return FamilyBuilder(std::move(name), std::move(help), prometheus::MetricType::Counter);
}
inline FamilyBuilder Histogram(std::string name, std::string help) {
  return FamilyBuilder(std::move(name), std::move(help), prometheus::MetricType::Histogram);
}

// Appends the text exposition format (version 0.0.4) of `families` to `out`, as
// prometheus::TextSerializer writes it (same number format: 16 significant digits, "Nan",
// "+Inf"; histograms as _count, _sum, then cumulative buckets ending in le="+Inf"), without its
// per-value std::ostream cost: a trn2.48xlarge's ~2,500 series serialise in well under a
// millisecond. HELP text is escaped as the format requires (prometheus-cpp 1.0 does not).
// Summary families, which no collector makes, go through prometheus::TextSerializer.
void AppendText(const Families& families, std::string& out);

// {"neuron_device", "3"}
inline prometheus::ClientMetric::Label L(std::string name, std::string value) {
  return {std::move(name), std::move(value)};
}

}  // namespace neuron::monitor
