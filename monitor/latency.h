#pragma once
// Percentiles from a latency histogram, for the compat set and the JSON stream, whose consumers
// expect p0..p100 (docs/metrics.md#compat-rules). Approximate: linear interpolation inside a
// bucket; p0 and p100 are the bounds of the first and last non-empty buckets. Thread-safe (pure).

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace neuron::monitor {

// `bounds_us`: finite upper bounds (ascending); `counts`: non-cumulative, one more than bounds
// (the last is +Inf). Returns {"p0", s}, {"p1", s}, ... {"p100", s} in seconds, or nothing when
// the counts are all zero.
std::vector<std::pair<std::string, double>> Percentiles(const std::vector<uint64_t>& bounds_us,
                                                        const std::vector<uint64_t>& counts);

}  // namespace neuron::monitor
