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

}  // namespace

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
  return std::any_of(std::begin(kUseCounters), std::end(kUseCounters),
                     [&](int counter) { return rec.Core(slot, counter) != 0; });
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
  CoreActivity out;
  const DatastoreRecord* prev = FindRecord(&before, now.device, now.pid);
  const double micros =
      std::chrono::duration<double, std::micro>(after.steady - before.steady).count();
  if (prev == nullptr || micros <= 0 || slot < 0 || slot >= nds::kMaxCores) return out;
  if (const auto busy_us =
          Rise(prev->Core(slot, nds::kTimeInUse), now.Core(slot, nds::kTimeInUse))) {
    out.utilization = std::clamp(static_cast<double>(*busy_us) / micros, 0.0, 1.0);
  }
  if (const auto macs = Rise(prev->Core(slot, nds::kMacCount), now.Core(slot, nds::kMacCount))) {
    out.flops_per_s = 2.0 * static_cast<double>(*macs) / (micros / 1e6);
  }
  return out;
}

}  // namespace neuron
