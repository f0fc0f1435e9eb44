#pragma once
// The Sampler reads the driver's counter files (docs/driver-interface.md#sysfs-tree, #efa) and the
// live per-process datastores (docs/driver-interface.md#datastore) under a root and returns each
// sample as an immutable Snapshot (core/sample/snapshot.h).
//
// Two sweeps (docs/architecture.md#sampling-cost). A trn2.48xlarge has ~13,500 counter files and
// opening them all costs tens of milliseconds, so:
//  - Sample(SampleKind::kFull) reads every counter file;
//  - Sample(SampleKind::kHot) reads the hot set (device state, ECC counters, memory totals:
//    per-core device_mem/total and host_mem/total, device host_mem category totals) and the
//    live datastores, and carries everything else forward from the previous snapshot.
//    Status and other_info counters are not in the hot set because the driver changes them only
//    when a process releases its datastore entry, folding that process's counters into sysfs
//    before it removes the entry (docs/driver-interface.md#live-vs-exit; the simulator writes sysfs
//    before removing the file, docs/architecture.md#daemon-is-the-driver). So while a device keeps
//    its datastore entries, those sysfs totals cannot have moved, and the live part is in the
//    datastores the hot sample reads; when one of a device's entries goes away, the hot sample
//    re-reads that device's status and other_info totals. It also re-reads them when the device's
//    state changed, because resets bump reset_req_count/reset_fail_count live. Everything else
//    (present/peak values, category memory, power, pe_cntrs, EFA) is refreshed by the next full
//    sweep.
//  - The first sample, and any device or EFA the previous snapshot did not have (a rescan, a
//    replug), are read in full whatever the kind.
//
// Consistency of "sysfs total + live datastore": the datastores are read while sysfs is read,
// then listed again at the end. Exit counters of a device that lost an entry since the last
// sample, or whose entry went away during this one (dropped from the snapshot), are read after
// that listing, so they include the fold. A process is counted once, in sysfs or in its
// datastore, except when a full sweep reads a device while the driver is between folding and
// removing the entry; the next sample corrects that (consumers keep counters monotonic,
// docs/metrics.md#labels-and-liveness).
//
// Cost: files are opened relative to O_PATH directory descriptors kept per device and per
// counter group of each core (about 4 per physical core: ~580 on a trn2.48xlarge), read with one
// read() each and parsed without allocating. A directory that was replaced (replug) is looked up
// again; when descriptors run out, files are opened by full path instead.
//
// Thread-safety: a Sampler has one owner and is not thread-safe (it may use one helper thread of
// its own during a sample). The snapshots it returns are immutable and may be shared across
// threads freely.

#include <functional>
#include <memory>
#include <set>
#include <vector>

#include "core/discovery/inventory.h"
#include "core/driver/sysfs_names.h"
#include "core/sample/datastore.h"
#include "core/sample/runtime_records.h"
#include "core/sample/snapshot.h"

namespace neuron {

struct SamplerOptions {
  // Threads reading sysfs during a sample, the caller's included (1 or 2). Work is split by
  // device, so each directory handle stays on one thread.
  int threads = 2;
  // Below this many counter files a sample reads on the calling thread alone: handing work to
  // the helper thread costs more than it saves on small samples.
  int min_files_for_threads = 200;
  // Datastore back end; null = through the driver's device ABI (MakeDriverDatastoreReader).
  std::unique_ptr<DatastoreReader> datastore;
  // The runtimes' records (core/sample/runtime_records.h); null: none. The driver back end the
  // Sampler makes is given it; a back end passed in must have been given the same one.
  std::shared_ptr<RuntimeRecordsReader> records = nullptr;
};

class Sampler {
 public:
  // Of the inventory it uses device indices and physical core counts, LNC and EFA names.
  Sampler(RootPaths root, Inventory inventory, SamplerOptions options = {});
  ~Sampler();
  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;

  // After a rescan (device or EFA added or removed). The next sample reads new devices in full.
  void SetInventory(Inventory inventory);

  std::shared_ptr<const Snapshot> Sample(SampleKind kind);
  // Its datastore reader's (DatastoreReader::SetOpensLogged, ProbeSoon).
  void SetOpensLogged(bool logged) { datastore_->SetOpensLogged(logged); }
  void ProbeSoon() { datastore_->ProbeSoon(); }
  // The latest snapshot, or null before the first Sample().
  std::shared_ptr<const Snapshot> last() const { return last_; }

 private:
  class Worker;
  struct Unit;

  void BuildReaders();
  // Reads `units` (on two threads when worthwhile); `caller_first` runs on the calling thread
  // meanwhile, weighing about `caller_first_files` file reads.
  void RunUnits(std::vector<Unit>& units, const std::function<void()>& caller_first,
                int caller_first_files);
  // The steps of Sample(). PlanUnits: the devices and EFAs to read; the EFAs a hot sample
  // carries forward go straight into `snap`.
  std::vector<Unit> PlanUnits(SampleKind kind, Snapshot* snap);
  // Drops from `ds` the entries that went away while the sample ran and returns the devices
  // whose exit counters must be read after the datastores (see the comment at the top).
  std::set<int> DevicesToReread(DatastoreScan* ds);
  // Moves the units' results and errors and the datastore records into `snap`, in inventory
  // order, reading the exit counters of `reread` devices first.
  void Assemble(std::vector<Unit>& units, const std::set<int>& reread, DatastoreScan ds,
                Snapshot* snap);

  RootPaths root_;
  Inventory inventory_;
  SamplerOptions options_;
  std::unique_ptr<DatastoreReader> datastore_;
  struct Readers;
  std::unique_ptr<Readers> readers_;
  std::unique_ptr<Worker> worker_;
  uint64_t generation_ = 0;
  std::shared_ptr<const Snapshot> last_;
};

}  // namespace neuron
