#include "core/sample/snapshot.h"

#include <algorithm>

#include "core/sample/process_usage.h"

namespace neuron {
namespace {

// a + b, absent when either is.
std::optional<uint64_t> Add(std::optional<uint64_t> a, std::optional<uint64_t> b) {
  if (!a || !b) return std::nullopt;
  return *a + *b;
}

// Sum over the physical cores of a logical core of one field; absent when any is absent.
template <typename F>
std::optional<uint64_t> SumGroup(const DeviceSample& d, PhysicalRange r, F field) {
  uint64_t sum = 0;
  for (int p = r.first; p < r.first + r.count; ++p) {
    if (p >= static_cast<int>(d.cores.size())) return std::nullopt;
    const std::optional<uint64_t> v = field(d.cores[p]);
    if (!v) return std::nullopt;
    sum += *v;
  }
  return sum;
}

// Core counter `index` summed over the counter sets of physical cores `r` of every live datastore
// of `device`. The sets are indexed by physical core, as sysfs neuron_core<i> is, so the sum over
// a group plus the group's sysfs totals stays the same when a process exits and the driver folds
// set i into neuron_core<i>.
uint64_t SumDatastores(const Snapshot& s, int device, PhysicalRange r, int index) {
  uint64_t sum = 0;
  for (const DatastoreRecord& p : s.processes) {
    if (p.device == device) sum += SumCounterSets(p, r, index);
  }
  return sum;
}

int LogicalCount(const Snapshot& s, const DeviceSample& d) {
  const int lnc = std::max(1, s.lnc);
  return std::min(static_cast<int>(d.cores.size()), nds::kMaxCores) / lnc;
}

// A logical core's busy time is the mean of its physical cores' (sysfs and live sets alike;
// docs/metrics.md#labels-and-liveness), so rate() stays in [0, 1].
std::optional<uint64_t> BusyMicros(const Snapshot& s, const DeviceSample& d, int k) {
  const PhysicalRange r = PhysicalCoresOf(k, s.lnc);
  const std::optional<uint64_t> sysfs =
      SumGroup(d, r, [](const CoreSample& c) { return c.other_info.nc_time_in_use.total; });
  if (!sysfs) return std::nullopt;
  return (*sysfs + SumDatastores(s, d.index, r, nds::kTimeInUse)) / static_cast<uint64_t>(r.count);
}

}  // namespace

const DeviceSample* Snapshot::FindDevice(int index) const {
  for (const DeviceSample& d : devices) {
    if (d.index == index) return &d;
  }
  return nullptr;
}

const EfaSample* Snapshot::FindEfa(std::string_view name) const {
  for (const EfaSample& e : efas) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

PhysicalRange PhysicalCoresOf(int logical_core, int lnc) {
  const int l = std::max(1, lnc);
  return {logical_core * l, l};
}

std::vector<LogicalCoreTotals> LogicalCores(const Snapshot& snap, const DeviceSample& device) {
  std::vector<LogicalCoreTotals> out;
  const int n = LogicalCount(snap, device);
  out.reserve(n);
  for (int k = 0; k < n; ++k) {
    const PhysicalRange r = PhysicalCoresOf(k, snap.lnc);
    LogicalCoreTotals t;
    t.logical_index = k;
    t.busy_us = BusyMicros(snap, device, k);
    auto other = [&](CounterPair OtherInfoCounters::*which) {
      return SumGroup(device, r,
                      [which](const CoreSample& c) { return (c.other_info.*which).total; });
    };
    auto live = [&](int index) { return SumDatastores(snap, device.index, r, index); };
    using O = OtherInfoCounters;
    t.flops = Add(other(&O::flop_count), 2 * live(nds::kMacCount));
    t.inferences = Add(other(&O::inference_count), live(nds::kInferenceCount));
    t.model_loads = Add(other(&O::model_load_count), live(nds::kModelLoadCount));
    t.reset_requests = other(&O::reset_req_count);
    for (size_t i = 0; i < kStatusCounters.size(); ++i) {
      const std::optional<uint64_t> sysfs =
          SumGroup(device, r, [i](const CoreSample& c) { return c.status[i].total; });
      t.status[i] = Add(sysfs, live(kStatusCounters[i].nds_index));
    }
    t.device_mem.total =
        SumGroup(device, r, [](const CoreSample& c) { return c.device_mem.total; });
    t.device_mem.peak = SumGroup(device, r, [](const CoreSample& c) { return c.device_mem.peak; });
    out.push_back(t);
  }
  return out;
}

std::optional<double> Utilization(const Snapshot& before, const Snapshot& after, int device,
                                  int logical_core) {
  const DeviceSample* a = before.FindDevice(device);
  const DeviceSample* b = after.FindDevice(device);
  if (a == nullptr || b == nullptr || logical_core < 0 || logical_core >= nds::kMaxCores) {
    return std::nullopt;
  }
  const std::optional<uint64_t> busy_a = BusyMicros(before, *a, logical_core);
  const std::optional<uint64_t> busy_b = BusyMicros(after, *b, logical_core);
  const auto dt = std::chrono::duration<double, std::micro>(after.steady - before.steady).count();
  if (!busy_a || !busy_b || dt <= 0 || *busy_b < *busy_a) return std::nullopt;
  return std::clamp(static_cast<double>(*busy_b - *busy_a) / dt, 0.0, 1.0);
}

}  // namespace neuron
