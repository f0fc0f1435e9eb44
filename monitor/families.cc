#include "monitor/families.h"

namespace neuron::monitor {

void FamilyBuilder::Add(Labels labels, double value) {
  prometheus::ClientMetric m;
  m.label = std::move(labels);
  switch (family_.type) {
    case prometheus::MetricType::Counter:
      m.counter.value = value;
      break;
    case prometheus::MetricType::Gauge:
      m.gauge.value = value;
      break;
    default:
      m.untyped.value = value;
      break;
  }
  family_.metric.push_back(std::move(m));
}

void FamilyBuilder::AddHistogram(Labels labels,
                                 const std::vector<std::pair<double, uint64_t>>& buckets,
                                 uint64_t count, double sum) {
  prometheus::ClientMetric m;
  m.label = std::move(labels);
  for (const auto& [bound, cumulative] : buckets) {
    m.histogram.bucket.push_back({cumulative, bound});
  }
  m.histogram.sample_count = count;
  m.histogram.sample_sum = sum;
  family_.metric.push_back(std::move(m));
}

}  // namespace neuron::monitor
