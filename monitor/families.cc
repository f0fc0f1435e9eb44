#include "monitor/families.h"

#include <fmt/format.h>
#include <prometheus/text_serializer.h>

#include <cmath>
#include <iterator>

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

namespace {

void AppendValue(double v, std::string& out) {
  if (std::isnan(v)) {
    out += "Nan";
  } else if (std::isinf(v)) {
    out += v < 0 ? "-Inf" : "+Inf";
  } else {
    // %.16g, as prometheus-cpp's stream (precision max_digits10 - 1) writes it.
    char buf[40];
    const int n = std::snprintf(buf, sizeof buf, "%.16g", v);
    out.append(buf, static_cast<size_t>(n));
  }
}

void AppendValue(uint64_t v, std::string& out) { fmt::format_to(std::back_inserter(out), "{}", v); }

void AppendEscaped(const std::string& s, bool quote, std::string& out) {
  for (const char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (quote && c == '"') {
      out += "\\\"";
    } else {
      out.push_back(c);
    }
  }
}

// name{labels[,extra_name="extra_value"]}
void AppendSeries(const std::string& name, std::string_view suffix,
                  const std::vector<prometheus::ClientMetric::Label>& labels,
                  std::string_view extra_name, const std::string* extra_value, std::string& out) {
  out += name;
  out += suffix;
  if (labels.empty() && extra_value == nullptr) {
    out.push_back(' ');
    return;
  }
  out.push_back('{');
  bool first = true;
  for (const auto& l : labels) {
    if (!first) out.push_back(',');
    first = false;
    out += l.name;
    out += "=\"";
    AppendEscaped(l.value, true, out);
    out.push_back('"');
  }
  if (extra_value != nullptr) {
    if (!first) out.push_back(',');
    out += extra_name;
    out += "=\"";
    out += *extra_value;
    out.push_back('"');
  }
  out += "} ";
}

void AppendTimestamp(const prometheus::ClientMetric& m, std::string& out) {
  if (m.timestamp_ms != 0) fmt::format_to(std::back_inserter(out), " {}", m.timestamp_ms);
  out.push_back('\n');
}

std::string_view TypeName(prometheus::MetricType t) {
  switch (t) {
    case prometheus::MetricType::Counter:
      return "counter";
    case prometheus::MetricType::Gauge:
      return "gauge";
    case prometheus::MetricType::Histogram:
      return "histogram";
    case prometheus::MetricType::Summary:
      return "summary";
    default:
      return "untyped";
  }
}

}  // namespace

void AppendText(const Families& families, std::string& out) {
  for (const prometheus::MetricFamily& f : families) {
    if (f.metric.empty()) continue;
    if (f.type == prometheus::MetricType::Summary) {
      out += prometheus::TextSerializer().Serialize({f});
      continue;
    }
    if (!f.help.empty()) {
      out += "# HELP ";
      out += f.name;
      out.push_back(' ');
      AppendEscaped(f.help, false, out);
      out.push_back('\n');
    }
    out += "# TYPE ";
    out += f.name;
    out.push_back(' ');
    out += TypeName(f.type);
    out.push_back('\n');
    for (const prometheus::ClientMetric& m : f.metric) {
      switch (f.type) {
        case prometheus::MetricType::Counter:
          AppendSeries(f.name, "", m.label, "", nullptr, out);
          AppendValue(m.counter.value, out);
          AppendTimestamp(m, out);
          break;
        case prometheus::MetricType::Gauge:
          AppendSeries(f.name, "", m.label, "", nullptr, out);
          AppendValue(m.gauge.value, out);
          AppendTimestamp(m, out);
          break;
        case prometheus::MetricType::Histogram: {
          AppendSeries(f.name, "_count", m.label, "", nullptr, out);
          AppendValue(m.histogram.sample_count, out);
          AppendTimestamp(m, out);
          AppendSeries(f.name, "_sum", m.label, "", nullptr, out);
          AppendValue(m.histogram.sample_sum, out);
          AppendTimestamp(m, out);
          std::string le;
          for (const auto& b : m.histogram.bucket) {
            le.clear();
            AppendValue(b.upper_bound, le);
            AppendSeries(f.name, "_bucket", m.label, "le", &le, out);
            AppendValue(b.cumulative_count, out);
            AppendTimestamp(m, out);
          }
          if (m.histogram.bucket.empty() || !std::isinf(m.histogram.bucket.back().upper_bound)) {
            le = "+Inf";
            AppendSeries(f.name, "_bucket", m.label, "le", &le, out);
            AppendValue(m.histogram.sample_count, out);
            AppendTimestamp(m, out);
          }
          break;
        }
        default:
          AppendSeries(f.name, "", m.label, "", nullptr, out);
          AppendValue(m.untyped.value, out);
          AppendTimestamp(m, out);
          break;
      }
    }
  }
}

}  // namespace neuron::monitor
