#include "driver-sim/runtime/memory.h"

#include <fmt/format.h>

#include <algorithm>

namespace neuron::nrt {
namespace {

std::string Human(uint64_t bytes) {
  if (bytes >= (1ull << 30)) return fmt::format("{:.2f} GiB", double(bytes) / (1ull << 30));
  if (bytes >= (1ull << 20)) return fmt::format("{:.1f} MiB", double(bytes) / (1ull << 20));
  return fmt::format("{} B", bytes);
}

}  // namespace

const char* MemCategoryName(MemCategory c) {
  switch (c) {
    case MemCategory::kCode:
      return "code";
    case MemCategory::kTensors:
      return "tensors";
    case MemCategory::kConstants:
      return "constants";
    case MemCategory::kScratchpad:
      return "scratchpad";
    case MemCategory::kMisc:
      return "misc";
  }
  return "?";
}

MemoryLedger::MemoryLedger(int cores, uint64_t core_limit, Listener device_listener, int devices,
                           Listener host_listener)
    : limit_(core_limit),
      device_(static_cast<size_t>(cores), std::array<uint64_t, kMemCategories>{}),
      host_(static_cast<size_t>(devices), std::array<uint64_t, kMemCategories>{}),
      device_listener_(std::move(device_listener)),
      host_listener_(std::move(host_listener)) {}

std::string MemoryLedger::Table(int core, MemCategory cat, uint64_t bytes,
                                std::string_view what) const {
  const auto& use = device_[static_cast<size_t>(core)];
  uint64_t total = 0;
  for (uint64_t v : use) total += v;
  std::string t = fmt::format(
      "{}: not enough device memory on NeuronCore {} for {} bytes ({}) of {}; in use:\n", what,
      core, bytes, Human(bytes), MemCategoryName(cat));
  t += fmt::format("  {:<12} {:>16}\n", "category", "bytes");
  for (int c = 0; c < kMemCategories; ++c) {
    t += fmt::format("  {:<12} {:>16} {:>12}\n", MemCategoryName(static_cast<MemCategory>(c)),
                     use[static_cast<size_t>(c)], Human(use[static_cast<size_t>(c)]));
  }
  t += fmt::format("  {:<12} {:>16} {:>12}\n", "total", total, Human(total));
  t += fmt::format("  {:<12} {:>16} {:>12}", "limit", limit_, Human(limit_));
  return t;
}

absl::Status MemoryLedger::ChargeDevice(int core, MemCategory cat, uint64_t bytes,
                                        std::string_view what) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& use = device_[static_cast<size_t>(core)];
  uint64_t total = 0;
  for (uint64_t v : use) total += v;
  if (bytes > limit_ || total > limit_ - bytes) {
    return absl::ResourceExhaustedError(Table(core, cat, bytes, what));
  }
  use[static_cast<size_t>(cat)] += bytes;
  device_listener_(core, cat, use[static_cast<size_t>(cat)]);
  return absl::OkStatus();
}

void MemoryLedger::ReleaseDevice(int core, MemCategory cat, uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t& v = device_[static_cast<size_t>(core)][static_cast<size_t>(cat)];
  v -= std::min(v, bytes);
  device_listener_(core, cat, v);
}

absl::Status MemoryLedger::SetDevice(int core, MemCategory cat, uint64_t bytes,
                                     std::string_view what) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& use = device_[static_cast<size_t>(core)];
  uint64_t others = 0;
  for (int c = 0; c < kMemCategories; ++c) {
    if (c != static_cast<int>(cat)) others += use[static_cast<size_t>(c)];
  }
  if (bytes > use[static_cast<size_t>(cat)] && (bytes > limit_ || others > limit_ - bytes)) {
    return absl::ResourceExhaustedError(
        Table(core, cat, bytes - use[static_cast<size_t>(cat)], what));
  }
  use[static_cast<size_t>(cat)] = bytes;
  device_listener_(core, cat, bytes);
  return absl::OkStatus();
}

void MemoryLedger::ChargeHost(int device, MemCategory cat, uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t& v = host_[static_cast<size_t>(device)][static_cast<size_t>(cat)];
  v += bytes;
  host_listener_(device, cat, v);
}

void MemoryLedger::ReleaseHost(int device, MemCategory cat, uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t& v = host_[static_cast<size_t>(device)][static_cast<size_t>(cat)];
  v -= std::min(v, bytes);
  host_listener_(device, cat, v);
}

uint64_t MemoryLedger::DeviceUsed(int core) const {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t total = 0;
  for (uint64_t v : device_[static_cast<size_t>(core)]) total += v;
  return total;
}

uint64_t MemoryLedger::DeviceUsed(int core, MemCategory cat) const {
  std::lock_guard<std::mutex> lock(mu_);
  return device_[static_cast<size_t>(core)][static_cast<size_t>(cat)];
}

void MemoryLedger::ClearAndDetach() {
  std::lock_guard<std::mutex> lock(mu_);
  if (detached_) return;
  for (size_t i = 0; i < device_.size(); ++i) {
    for (int c = 0; c < kMemCategories; ++c) {
      device_[i][static_cast<size_t>(c)] = 0;
      device_listener_(static_cast<int>(i), static_cast<MemCategory>(c), 0);
    }
  }
  for (size_t i = 0; i < host_.size(); ++i) {
    for (int c = 0; c < kMemCategories; ++c) {
      host_[i][static_cast<size_t>(c)] = 0;
      host_listener_(static_cast<int>(i), static_cast<MemCategory>(c), 0);
    }
  }
  detached_ = true;
  device_listener_ = [](int, MemCategory, uint64_t) {};
  host_listener_ = [](int, MemCategory, uint64_t) {};
}

}  // namespace neuron::nrt
