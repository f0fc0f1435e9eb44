#pragma once
// The statistics every scenario benchmark reports (bench/run.sh): medians and percentiles of one
// run, because these machines are shared and noisy. Header-only; no state.

#include <algorithm>
#include <chrono>
#include <vector>

namespace neuron::bench {

// Nearest-rank percentile, p in [0, 1]; 0 for no samples.
inline double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

// The middle sample, or the mean of the middle two.
inline double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

template <typename Duration>
double Ms(Duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

}  // namespace neuron::bench
