#pragma once
#if !defined(NEURON_ROOM_SAMPLE)
#error "core/sample/internal/ is private to core/sample: include its public headers instead"
#endif
// Readers of one Neuron device's and one EFA device's counter files into a Snapshot's parts
// (core-internal, used by the Sampler). Names and formats: docs/driver-interface.md#sysfs-tree,
// #counter-semantics, #efa.
//
// Not thread-safe: each reader owns its directory handles; the Sampler gives a reader to one
// thread per sweep.

#include <string>
#include <vector>

#include "core/driver/driver_generations.h"
#include "core/driver/sysfs_names.h"
#include "core/sample/internal/counter_files.h"
#include "core/sample/snapshot.h"

namespace neuron::sysfs_reader {

struct ReadContext {
  uint64_t sweep = 0;  // changes every sample (see DirHandle::Read)
  counter_files::ErrorSink* errors = nullptr;
};

class DeviceReader {
 public:
  // `groups`: the optional node groups the device's tree holds (NeuronDevice::sysfs_groups).
  DeviceReader(const RootPaths& root, int index, int physical_cores, NodeGroups groups);

  int index() const { return index_; }
  int physical_cores() const { return static_cast<int>(cores_.size()); }
  NodeGroups groups() const { return groups_; }

  // A fresh DeviceSample of this device's shape with every field absent.
  DeviceSample Empty() const;

  // Each returns false when the device's directory is gone (unplugged); the sample is then
  // meaningless. `d` must have this device's shape (Empty() or a copy of an earlier sample).
  // The hot set: state, the counters of the lists' Sweep::kHot rows (core/driver/counters.h),
  // host memory category totals, per-core device_mem and host_mem totals.
  bool ReadHot(DeviceSample* d, ReadContext& ctx);
  // Every file, those of the device's optional node groups included.
  bool ReadFull(DeviceSample* d, ReadContext& ctx);
  // status/*/total and other_info/*/total of every core: the counters the driver changes when
  // a process releases its datastore entry (docs/driver-interface.md#live-vs-exit), and
  // reset_req_count/reset_fail_count.
  void ReadExitCounters(DeviceSample* d, ReadContext& ctx);

 private:
  struct CoreDirs {
    counter_files::DirHandle status;         // neuron_core<i>/stats/status
    counter_files::DirHandle memory;         // neuron_core<i>/stats/memory_usage
    counter_files::DirHandle other_info;     // neuron_core<i>/stats/other_info
    counter_files::DirHandle tensor_engine;  // neuron_core<i>/stats/tensor_engine
  };

  // The files of the device's optional node groups whose rows are of `sweep`.
  void ReadGroups(DeviceSample* d, Sweep sweep, ReadContext& ctx);

  int index_;
  NodeGroups groups_;
  counter_files::DirHandle dev_;    // neuronN
  counter_files::DirHandle stats_;  // neuronN/stats
  std::vector<CoreDirs> cores_;
};

class EfaReader {
 public:
  EfaReader(const RootPaths& root, std::string name);
  const std::string& name() const { return name_; }
  // False when the EFA device is gone (efa-down, a VF reset).
  bool Read(EfaSample* e, ReadContext& ctx);

 private:
  std::string name_;
  counter_files::DirHandle ibdev_;  // class/infiniband/<name> (a symlink on real sysfs)
  counter_files::DirHandle port_;   // class/infiniband/<name>/ports/1
};

// Number of counter files ReadFull reads for a device with `physical_cores` cores whose tree holds
// `groups`, and for one EFA (for benchmarks and sanity checks).
int FullFileCount(int physical_cores, NodeGroups groups = {});
int EfaFileCount();

}  // namespace neuron::sysfs_reader
