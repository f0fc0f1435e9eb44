#pragma once
// What a runtime process does with the NeuronCores, derived once from its datastore counters
// (docs/style.md#derive-once): neuron-top, the exporter's JSON stream and its compat series all
// ask these functions, so they cannot disagree about which cores a process holds or how busy it
// kept them. Pure functions over immutable Snapshots; thread-safe.
//
// Counter sets and slots: a record's per-core counter sets are indexed by *physical* core within
// the device, as the driver folds them (set i into sysfs neuron_core<i>) and libnrt names the index
// (`pnc_index`; docs/driver-interface.md#datastore). Every function here takes a *logical* core
// slot and reads the sets of its physical cores (PhysicalCoresOf); core/model/core_ids.h turns a
// slot into a global core id.

#include <chrono>
#include <optional>
#include <vector>

#include "core/sample/datastore.h"
#include "core/sample/snapshot.h"

namespace neuron {

// Counter `index` summed over the sets of physical cores `r` (raw; no busy-time rule).
uint64_t SumCounterSets(const DatastoreRecord& rec, PhysicalRange r, int index);
// Whether `index` is a per-physical-core time (TIME_IN_USE, CC_TIME): each physical core of a
// logical core counts the logical core's whole busy time, so the logical figure is the mean over
// its sets, not the sum.
bool IsPhysicalCoreTime(int index);
// Counter `index` of logical core `slot` at LNC `lnc` (docs/metrics.md#labels-and-liveness): busy
// time (IsPhysicalCoreTime) is the mean over the slot's physical sets; counts, bytes and latency
// sums are their sum.
uint64_t LogicalCoreCounter(const DatastoreRecord& rec, int slot, int index, int lnc);

// The datastore of `pid` on `device` in `snap`; null when there is none or `snap` is null.
const DatastoreRecord* FindRecord(const Snapshot* snap, int device, int pid);
// Every datastore of `pid` in `snap` (one per device it uses), ascending device.
std::vector<const DatastoreRecord*> RecordsOf(const Snapshot& snap, int pid);

// Whether the process of `rec` holds logical core `slot` of the record's device. Cores are
// reserved exclusively when the runtime starts, before anything runs on them
// (docs/runtime.md#reservation-and-indices), so a core is held when either
//   - the driver says so: GET_ALL_APPS_INFO's lock map has a bit for one of the slot's physical
//     cores (`lnc` of them; the driver checks physical cores 0-3 only,
//     docs/driver-interface.md#abi-listing-pids), or
//   - the datastore's counters show the process used it: busy time, a model load or device
//     memory on it (counters that stay 0 on a core the process never touched; the model records
//     are not needed, docs/driver-interface.md#process-records).
// The first alone misses cores 4 and up and every process read without the process list; the
// second alone misses a reserved core that has not run yet.
bool HoldsCore(const DatastoreRecord& rec, int slot, int lnc);
// The slots below `cores_per_device` that HoldsCore, ascending.
std::vector<int> CoreSlotsHeld(const DatastoreRecord& rec, int cores_per_device, int lnc);
// The global core ids (core/model/core_ids.h) `pid` holds over all its datastores in `snap`,
// ascending; `snap.lnc` is the LNC.
std::vector<int> CoresHeldBy(const Snapshot& snap, int pid, int cores_per_device);

// What a process did on one logical core between two snapshots.
struct CoreActivity {
  // Busy fraction: ΔTIME_IN_USE (µs) / elapsed time, clamped to [0, 1] (a busy total lands
  // when an execution ends, so one window can hold more than its own length).
  std::optional<double> utilization;
  // 2 × ΔMAC_COUNT per second (docs/driver-interface.md#core-counter-indices).
  std::optional<double> flops_per_s;
};
// Activity of `now` (a record of `after`) on logical core `slot` (at `after.lnc`) since `before`,
// which must be older. Each figure is absent when `before` holds no record of the same (device,
// pid), time did not advance, `slot` is out of range, or its counter went down (a torn read:
// unknown, not a restart from zero).
CoreActivity ActivityBetween(const Snapshot& before, const Snapshot& after,
                             const DatastoreRecord& now, int slot);
// The same for one physical core `physical` of the device (its own counter set): neuron-monitor's
// per-physical-core `v3d` figures.
CoreActivity PhysicalActivityBetween(const Snapshot& before, const Snapshot& after,
                                     const DatastoreRecord& now, int physical);

}  // namespace neuron
