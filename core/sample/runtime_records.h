#pragma once
// The runtimes' own records in their datastores, read through libnrt's public datastore API
// (docs/driver-interface.md#process-records): each runtime process's identity (framework, tags,
// versions) and its loaded model nodes with their memory. Their placement in the datastore is the
// runtime's and unpublished, so the agent never decodes those bytes: it loads libnrt at run time
// (dlopen, LibnrtPath) and calls nds_open(device, pid, ...) with the process's PID, which opens
// that datastore read-only, then nds_read_process_info(_ext) and nds_read_all_model_nodes.
//
// Records are read only on devices the datastore reader (core/sample/datastore.h) holds open for
// their runtimes: it calls ReadHeld at each sample while it holds the device, so libnrt's own
// open of the device (ndl_open_device) is this process's second open there and takes neither a
// process slot nor a driver log line, and Release before it lets the device go.
//
// Unknown is not empty (docs/architecture.md#unknown-is-not-zero): when the library cannot be
// loaded, or a process's records cannot be read (libnrt refuses their format), the state says so
// with the reason and those processes have no RuntimeRecords at all, never empty ones.

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/sample/datastore.h"

namespace neuron {

// nds_process_info_t and nds_process_info_ext_t.
struct RuntimeProcessInfo {
  int8_t framework_type = 0;
  std::string tag;       // char[32]
  std::string long_tag;  // char[256]: NEURON_PROCESS_TAG
  NdsVersion framework_version;
  NdsVersion fal_version;
  NdsVersion runtime_version;
};

// nds_model_node_info_t with its nds_model_node_mem_usage_info_t.
struct RuntimeModel {
  uint32_t model_id = 0;
  uint32_t model_node_id = 0;
  std::string name = {};
  std::array<uint8_t, 16> uuid{};
  uint8_t nc_index = 0;  // the NeuronCore within the device, as the runtime numbers it
  uint8_t sg_index = 0;
  struct Memory {
    uint64_t total_size = 0;
    uint32_t chunk_count = 0;
  };
  // [location][slot]. Location 0 = device (HBM), 1 = host: the SDK does not publish the order
  // (unverified; libnrt-sim's, driver-sim/README.md). Slots 0 CODE, 1 TENSORS, 2 CONSTANTS,
  // 3 SCRATCHPAD, 4 MISC, 5-11 unused.
  static constexpr int kLocationDevice = 0;
  static constexpr int kLocationHost = 1;
  std::array<std::array<Memory, 12>, 2> memory{};
};

// One runtime process's records on one device.
struct RuntimeRecords {
  int device = -1;
  int pid = -1;
  RuntimeProcessInfo process = {};
  std::vector<RuntimeModel> models = {};
  DatastoreKey key() const { return {device, pid}; }
};

struct RuntimeRecordsScan {
  std::vector<RuntimeRecords> records;  // ascending (device, pid); only those that were read
  // known: a records reader is configured. up: libnrt is loaded and every process visited had
  // readable records. reason: why not; unread: device -> what could not be read there.
  SourceState state;
  const RuntimeRecords* Find(DatastoreKey key) const;
};

// A process's runtime_tag (docs/metrics.md#compat-rules): NEURON_PROCESS_TAG, else the short
// tag, else the PID as text (also when its records are unknown).
std::string RuntimeTag(const RuntimeRecords* records, int pid);

// Thread-safety: ReadHeld and Release come from the datastore reader's threads, Latest from any
// thread; implementations lock.
class RuntimeRecordsReader {
 public:
  virtual ~RuntimeRecordsReader() = default;
  // While this process holds `device` open: reads the records of `pids`, the processes whose
  // datastores were just read there, replacing what was read of the device before.
  virtual void ReadHeld(int device, std::span<const int> pids) = 0;
  // Before this process's hold on `device` ends: closes what was opened on it and forgets its
  // records.
  virtual void Release(int device) = 0;
  // The records last read, and whether they could be read.
  virtual RuntimeRecordsScan Latest() const = 0;
};

// Which library to load: `flag` (--libnrt) when set, else $NEURON_LIBNRT when set, else
// "libnrt.so.1", found on the library path as dlopen finds it.
std::string LibnrtPath(std::string_view flag);

// Loads libnrt from `path` now; when it cannot be loaded, or lacks a function the agent calls,
// the reader's state says so (logged once) and it reads nothing.
std::shared_ptr<RuntimeRecordsReader> MakeLibnrtRecordsReader(const std::string& path);

}  // namespace neuron
