#include "core/sample/process_usage.h"

#include <algorithm>
#include <set>

#include "core/driver/driver_abi.h"
#include "core/model/core_ids.h"

namespace neuron {
namespace {

// Core counters that stay 0 on a core slot the process never used.
constexpr int kUseCounters[] = {nds::kTimeInUse,
                                nds::kModelLoadCount,
                                nds::kMemUsageCodeDevice,
                                nds::kMemUsageTensorsDevice,
                                nds::kMemUsageConstantsDevice,
                                nds::kMemUsageScratchpadDevice,
                                nds::kMemUsageMiscDevice};

bool DriverLocks(const DatastoreRecord& rec, int slot, int lnc) {
  if (!rec.driver) return false;
  const PhysicalRange r = PhysicalCoresOf(slot, lnc);
  for (int p = r.first; p < r.first + r.count && p < NEURON_ABI_APPS_CORES; ++p) {
    if ((rec.driver->nc_lock_map & (1u << p)) != 0) return true;
  }
  return false;
}

// now - before, absent when the counter went down.
std::optional<uint64_t> Rise(uint64_t before, uint64_t now) {
  if (now < before) return std::nullopt;
  return now - before;
}

// Activity over the counter sets `r` (one logical core's, or one physical core's).
CoreActivity ActivityOver(const Snapshot& before, const Snapshot& after, const DatastoreRecord& now,
                          PhysicalRange r) {
  CoreActivity out;
  const DatastoreRecord* prev = FindRecord(&before, now.device, now.pid);
  const double micros =
      std::chrono::duration<double, std::micro>(after.steady - before.steady).count();
  if (prev == nullptr || micros <= 0 || r.first < 0 || r.first + r.count > nds::kMaxCores) {
    return out;
  }
  // Busy time: the mean over the sets (IsPhysicalCoreTime).
  const auto busy = [&](const DatastoreRecord& rec) {
    return SumCounterSets(rec, r, nds::kTimeInUse) / static_cast<uint64_t>(r.count);
  };
  if (const auto busy_us = Rise(busy(*prev), busy(now))) {
    out.utilization = std::clamp(static_cast<double>(*busy_us) / micros, 0.0, 1.0);
  }
  if (const auto macs =
          Rise(SumCounterSets(*prev, r, nds::kMacCount), SumCounterSets(now, r, nds::kMacCount))) {
    out.flops_per_s = 2.0 * static_cast<double>(*macs) / (micros / 1e6);
  }
  return out;
}

}  // namespace

uint64_t SumCounterSets(const DatastoreRecord& rec, PhysicalRange r, int index) {
  uint64_t sum = 0;
  for (int p = std::max(r.first, 0); p < r.first + r.count && p < nds::kMaxCores; ++p) {
    sum += rec.Core(p, index);
  }
  return sum;
}

bool IsPhysicalCoreTime(int index) { return index == nds::kTimeInUse || index == nds::kCcTime; }

uint64_t LogicalCoreCounter(const DatastoreRecord& rec, int slot, int index, int lnc) {
  const PhysicalRange r = PhysicalCoresOf(slot, lnc);
  const uint64_t sum = SumCounterSets(rec, r, index);
  return IsPhysicalCoreTime(index) ? sum / static_cast<uint64_t>(r.count) : sum;
}

const DatastoreRecord* FindRecord(const Snapshot* snap, int device, int pid) {
  if (snap == nullptr) return nullptr;
  for (const DatastoreRecord& r : snap->processes) {
    if (r.device == device && r.pid == pid) return &r;
  }
  return nullptr;
}

std::vector<const DatastoreRecord*> RecordsOf(const Snapshot& snap, int pid) {
  std::vector<const DatastoreRecord*> out;
  for (const DatastoreRecord& r : snap.processes) {
    if (r.pid == pid) out.push_back(&r);
  }
  return out;
}

bool HoldsCore(const DatastoreRecord& rec, int slot, int lnc) {
  if (slot < 0 || slot >= nds::kMaxCores) return false;
  if (DriverLocks(rec, slot, lnc)) return true;
  return std::any_of(std::begin(kUseCounters), std::end(kUseCounters), [&](int counter) {
    return SumCounterSets(rec, PhysicalCoresOf(slot, lnc), counter) != 0;
  });
}

std::vector<int> CoreSlotsHeld(const DatastoreRecord& rec, int cores_per_device, int lnc) {
  std::vector<int> slots;
  const int n = std::min(cores_per_device, nds::kMaxCores);
  for (int k = 0; k < n; ++k) {
    if (HoldsCore(rec, k, lnc)) slots.push_back(k);
  }
  return slots;
}

std::vector<int> CoresHeldBy(const Snapshot& snap, int pid, int cores_per_device) {
  std::set<int> ids;
  for (const DatastoreRecord* r : RecordsOf(snap, pid)) {
    for (const int k : CoreSlotsHeld(*r, cores_per_device, snap.lnc)) {
      ids.insert(GlobalCoreId(r->device, k, cores_per_device));
    }
  }
  return {ids.begin(), ids.end()};
}

CoreActivity ActivityBetween(const Snapshot& before, const Snapshot& after,
                             const DatastoreRecord& now, int slot) {
  if (slot < 0) return {};
  return ActivityOver(before, after, now, PhysicalCoresOf(slot, after.lnc));
}

CoreActivity PhysicalActivityBetween(const Snapshot& before, const Snapshot& after,
                                     const DatastoreRecord& now, int physical) {
  return ActivityOver(before, after, now, PhysicalRange{physical, 1});
}

}  // namespace neuron
