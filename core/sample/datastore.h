#pragma once
// Reader of the per-process datastores (NDS, docs/driver-interface.md#datastore): one record per
// (device, runtime process) with its device counters and per-core counters, the bytes the
// driver's neuron_driver_shared.h lays out, and what the driver's process list says of it. The
// runtime's own records in the datastore (process information, loaded models) are not decoded
// here: their format is the runtime's and unpublished, and they are read through libnrt's API
// (core/sample/runtime_records.h) while this reader holds the device open.
//
// One back end reads them as a monitor must on a real node and on the simulator alike: through the
// driver's device ABI (GET_ALL_APPS_INFO lists the processes of /dev/neuronN, ACQUIRE_NEURON_DS
// with a PID gives the offset to mmap read-only; core/driver/driver_abi.h, datastore_driver.cc).
// Tests may put their own DatastoreReader in its place. Every back end hands the bytes to
// ParseDatastore, so the byte layout is decoded in one place.
//
// The runtime writes counters without locking, so a read returns whatever is there: each u64 is
// copied with memcpy (a torn value is possible and accepted, as with the real driver).

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/driver/datastore_layout.h"
#include "core/driver/sysfs_names.h"

namespace neuron {

struct DatastoreKey {
  int device = -1;
  int pid = -1;
  // clang-tidy 14 reads the defaulted comparison's implicit "== 0" as a null pointer constant.
  auto operator<=>(const DatastoreKey&) const = default;  // NOLINT(modernize-use-nullptr)
};

// {u8 major; u8 minor; u32 build}, as in libnrt's version records and the driver's version word.
struct NdsVersion {
  uint8_t major = 0;
  uint8_t minor = 0;
  uint32_t build = 0;
  bool operator==(const NdsVersion&) const = default;
};
// The driver's packed version word (build bits 0-31, minor 32-39, major 40-47), the format of
// device counter RUNTIME_VERSION in the simulator (driver-sim/README.md; unverified for a real
// runtime, docs/driver-interface.md#device-counter-indices).
NdsVersion UnpackVersionWord(uint64_t word);

using CoreCounterSet = std::array<uint64_t, nds::kCoreCounterCount>;

// What GET_ALL_APPS_INFO said of the process.
struct DriverProcessInfo {
  uint8_t nc_lock_map = 0;      // physical cores 0-3 whose lock the process holds
  uint64_t host_mem_bytes = 0;  // allocated through the driver
  uint64_t device_mem_bytes = 0;
};

// One datastore as read at one moment. Plain value.
struct DatastoreRecord {
  int device = -1;
  int pid = -1;
  std::string source;  // where it was read from (the file's path), for messages
  int32_t format_version = 0;
  std::array<uint64_t, nds::kDeviceCounterCount> device_counters{};
  // Indexed by physical core within the device (sets 0-15; libnrt's pnc_index, the driver's
  // neuron_core<i>); core/sample/process_usage.h reads them per logical core.
  std::array<CoreCounterSet, nds::kMaxCores> core_counters{};
  std::optional<DriverProcessInfo> driver;  // from the process list, when read through it

  DatastoreKey key() const { return {device, pid}; }
  uint64_t Core(int slot, int index) const { return core_counters[slot][index]; }
};

// Decodes one datastore's header and counters; no other byte is read. Errors (wrong size, bad
// magic) name `source`. Thread-safe.
absl::StatusOr<DatastoreRecord> ParseDatastore(std::span<const std::byte> bytes, int device,
                                               int pid, std::string_view source);

struct DatastoreScan {
  std::vector<DatastoreRecord> records;  // ascending (device, pid)
  std::vector<std::string> errors;       // each names the datastore (file) it concerns
};

// Whether a live source can be read (docs/architecture.md#unknown-is-not-zero). `known` is false
// until it was tried.
struct SourceState {
  bool known = false;
  bool up = false;          // some device's live data could be read
  std::string reason = {};  // why not, in the user's words ("no device node /dev/neuron0")
  // Devices whose live data could not be read while others' could, with the reason: their
  // live figures are unknown, not idle.
  std::map<int, std::string> unread = {};
};

// One back end. List and ReadAll have one caller (the Sampler); SetDevices and State may be
// called from any thread. The records it returns are values.
class DatastoreReader {
 public:
  virtual ~DatastoreReader() = default;
  // The live entries, cheaply (no counter reads): ascending (device, pid).
  virtual std::vector<DatastoreKey> List() = 0;
  // Lists and reads every live entry. An entry that cannot be read is skipped with an error;
  // the others are still read.
  virtual DatastoreScan ReadAll() = 0;
  virtual std::string_view name() const = 0;
  // The devices to watch (the inventory's indices).
  virtual void SetDevices(std::vector<int> devices) = 0;
  virtual SourceState State() const = 0;
  // Waits until every device was probed once (State().known), at most `timeout`: a one-shot
  // reader (neuron-ls) needs the answer before it reads. False on timeout (a device in reset).
  virtual bool AwaitFirstProbe(std::chrono::milliseconds timeout) = 0;
  // While `logged`, the kernel log's open and close records (IsOpenCloseRecord) reach ProbeSoon,
  // so a back end that looks for runtimes on a clock may look less often. Any thread.
  virtual void SetOpensLogged(bool /*logged*/) {}
  // Some process opened or closed a device: look for runtimes now. Any thread.
  virtual void ProbeSoon() {}
};

class RuntimeRecordsReader;  // core/sample/runtime_records.h

struct DriverDatastoreOptions {
  std::vector<int> devices;  // device indices to watch
  // How often devices are probed for runtime processes (off the sample path).
  std::chrono::milliseconds probe_period{1000};
  // The period instead while the open and close records are logged (SetOpensLogged), nothing is
  // held and every device's holders can be seen: a new runtime's open is a record, which probes
  // at once, so the clock is only the safety net under a lost one.
  std::chrono::milliseconds quiet_probe_period{30000};
  // SetOpensLogged's value from the start.
  bool opens_logged = false;
  // Reads the runtimes' records on the devices this reader holds open, at each ReadAll (null:
  // none are read). Told before the reader lets a device go, so that its own opens of the device
  // are closed first: it never takes a process slot or a driver log line of its own.
  std::shared_ptr<RuntimeRecordsReader> records = nullptr;
};

// Through the driver's device ABI on ROOT/dev/neuronN (datastore_driver.cc says how it spares the
// driver's 16 process slots and sysfs reset). Starts a probe thread.
std::unique_ptr<DatastoreReader> MakeDriverDatastoreReader(const RootPaths& root,
                                                           DriverDatastoreOptions options);

}  // namespace neuron
