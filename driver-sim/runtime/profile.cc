#include "driver-sim/runtime/profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

namespace neuron::nrt {

void Profiler::Start(uint32_t model_id) {
  std::lock_guard<std::mutex> lock(mu_);
  spans_.clear();
  all_.store(model_id == 0);
  model_.store(model_id);
  active_.store(true);
}

void Profiler::Record(std::vector<Span> spans) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!active_.load()) return;
  for (Span& s : spans) spans_.push_back(std::move(s));
}

absl::Status Profiler::Stop(const std::string& path) {
  std::vector<Span> spans;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!active_.load()) return absl::InvalidArgumentError("profiling was not started");
    active_.store(false);
    spans.swap(spans_);
  }
  std::ofstream out(path, std::ios::trunc);
  if (!out) return absl::InvalidArgumentError(fmt::format("cannot write {}", path));
  out << ToJson(spans);
  out.close();
  if (!out) return absl::InternalError(fmt::format("writing {} failed", path));
  return absl::OkStatus();
}

std::string Profiler::ToJson(const std::vector<Span>& spans) {
  using json = nlohmann::json;
  int64_t t0 = 0;
  if (!spans.empty()) {
    t0 = std::min_element(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
           return a.start_ns < b.start_ns;
         })->start_ns;
  }
  json events = json::array();
  std::set<std::pair<int, int>> named;  // (vnc, global core) with metadata written
  for (const Span& s : spans) {
    if (named.insert({s.vnc, s.global_core}).second) {
      events.push_back(
          {{"name", "process_name"},
           {"ph", "M"},
           {"pid", s.vnc},
           {"args", {{"name", fmt::format("NeuronCore {} (nc{})", s.vnc, s.global_core)}}}});
      for (int e = 0; e < kEngineCount; ++e) {
        events.push_back({{"name", "thread_name"},
                          {"ph", "M"},
                          {"pid", s.vnc},
                          {"tid", e},
                          {"args", {{"name", EngineName(static_cast<Engine>(e))}}}});
      }
    }
    events.push_back({{"name", s.name},
                      {"cat", EngineName(s.engine)},
                      {"ph", "X"},
                      {"pid", s.vnc},
                      {"tid", static_cast<int>(s.engine)},
                      {"ts", static_cast<double>(s.start_ns - t0) / 1000.0},
                      {"dur", static_cast<double>(s.dur_ns) / 1000.0},
                      {"args", {{"model_id", s.model_id}}}});
  }
  json doc = {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
  return doc.dump(1);
}

}  // namespace neuron::nrt
