#include "monitor/latency.h"

#include <algorithm>

namespace neuron::monitor {

std::vector<std::pair<std::string, double>> Percentiles(const std::vector<uint64_t>& bounds_us,
                                                        const std::vector<uint64_t>& counts) {
  std::vector<std::pair<std::string, double>> out;
  if (counts.empty() || counts.size() != bounds_us.size() + 1) return out;
  uint64_t total = 0;
  for (uint64_t c : counts) total += c;
  if (total == 0) return out;
  auto lower = [&](size_t b) { return b == 0 ? 0.0 : static_cast<double>(bounds_us[b - 1]); };
  // The +Inf bucket has no upper bound: its values are reported as its lower bound.
  auto upper = [&](size_t b) {
    return b < bounds_us.size() ? static_cast<double>(bounds_us[b]) : lower(b);
  };
  for (const auto& [label, q] :
       {std::pair{"p0", 0.0}, std::pair{"p1", 0.01}, std::pair{"p25", 0.25}, std::pair{"p50", 0.5},
        std::pair{"p75", 0.75}, std::pair{"p99", 0.99}, std::pair{"p100", 1.0}}) {
    double us = 0;
    if (q == 0.0) {
      size_t b = 0;
      while (counts[b] == 0) ++b;
      us = lower(b);
    } else if (q == 1.0) {
      size_t b = counts.size() - 1;
      while (counts[b] == 0) --b;
      us = upper(b);
    } else {
      const double rank = q * static_cast<double>(total);
      double seen = 0;
      for (size_t b = 0; b < counts.size(); ++b) {
        const double n = static_cast<double>(counts[b]);
        if (n > 0 && seen + n >= rank) {
          us = lower(b) + (upper(b) - lower(b)) * std::clamp((rank - seen) / n, 0.0, 1.0);
          break;
        }
        seen += n;
      }
    }
    out.emplace_back(label, us / 1e6);
  }
  return out;
}

}  // namespace neuron::monitor
