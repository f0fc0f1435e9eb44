#pragma once
// The simulated driver's filesystem: renders a node model as ROOT/sys, ROOT/dev and
// ROOT/run/neuron/node.json exactly as docs/driver-interface.md describes the real driver's tree,
// laid out like kernel sysfs (class and bus symlinks, uevent files, relative links) so that
// ROOT is also a valid umockdev testbed. driver-sim/README.md lists every file and deviation.
//
// Every file is written whole to a temporary name and renamed into place
// (docs/architecture.md#daemon-is-the-driver), so readers never see half a value. Counter updates
// read the current file first, so a user's write (which clears that field,
// docs/driver-interface.md#total-present-peak) is honoured by the next update.
//
// Not thread-safe: the node daemon (neuron-sim up) is its one owner, as the kernel is the one
// writer of sysfs on a real node.

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/driver/health_components.h"
#include "core/driver/health_counters.h"
#include "core/driver/sysfs_names.h"
#include "core/model/catalog.h"
#include "driver-sim/driver/sim_tree_driver.h"
#include "driver-sim/driver/ultraserver.h"

namespace neuron::sim {

// The "neuron" char major of a SimTree made without a NeuronMajorLease (tests of the tree alone).
inline constexpr int kSimNeuronMajor = 239;

struct NodeConfig {
  const InstanceSpec* spec = nullptr;
  int lnc = 1;                           // already resolved against the spec
  std::string instance_id;               // "i-0a1b2c3d4e5f60718"; made up from the root when empty
  std::string node_name;                 // Kubernetes node name; "sim-<instance type>" when empty
  UltraServerPosition ultraserver = {};  // used on UltraServer instance types only
  // The driver played: its generation's tree and module version (driver-sim/README.md).
  SimDriver driver = NewestSimDriver();
  // The "neuron" char region's major (the class devices' `dev`, hence every stat of /dev/neuronN
  // under the interposer). A node daemon takes one no other simulated node on this machine holds
  // (NeuronMajorLease), as the kernel's dynamic allocation would: they all share this machine's
  // /proc, where the agent finds a device's holders by that number.
  int neuron_major = kSimNeuronMajor;
};

// How a counter file triple {total, present, peak} changes
// (docs/driver-interface.md#total-present-peak).
enum class CounterOp { kInc, kDec, kSet };

class SimTree {
 public:
  SimTree(RootPaths root, NodeConfig config);

  const RootPaths& paths() const { return root_; }
  const NodeConfig& config() const { return config_; }

  // Writes the whole tree in its post-probe state (docs/driver-interface.md#post-load-values) and
  // node.json. Fails if ROOT/sys already holds a neuron tree.
  absl::Status Create();
  // Removes everything Create() and later calls wrote (ROOT itself stays).
  absl::Status Destroy();

  // Hot-unplug: the class device, its class and dev/char links, the PCI device and
  // ROOT/dev/neuronN vanish. Plug: they return in post-probe state with the same index.
  absl::Status RemoveDevice(int device);
  absl::Status AddDevice(int device);
  bool DevicePresent(int device) const;

  // Device state as the `reset` file prints it.
  absl::Status SetDeviceState(int device, DeviceState state);
  absl::StatusOr<DeviceState> GetDeviceState(int device) const;

  // <counter> += n, `counter` the file name of a row of kHealthCounters
  // (core/driver/health_counters.h; InvalidArgument otherwise) whose group this driver writes on
  // this chip (FailedPrecondition otherwise), and the health_status/ files derived from the same
  // registers where the driver has them. `ctl raise` and `ctl inject` raise counters through it.
  absl::Status AddHardwareErrors(int device, std::string_view counter, uint64_t n);
  // A health counter row's file on `device`, where this driver keeps stats/hardware/.
  std::filesystem::path CounterFile(int device, const HealthCounter& counter) const;
  // The device's stats/hardware/ directory (elsewhere in the future layout).
  std::filesystem::path HardwareDir(int device) const;

  // Driver 2.30's health_status/{unhealthy_components, healthcheck_heartbeat} (Trn2, Trn3): whether
  // this node's devices have them, where, and their writes in the formats the simulator assumes
  // (driver-sim/README.md#driver-versions): the components as their comma list then "\n", the
  // heartbeat "%llu\n". FailedPrecondition on a node without them or an unplugged device.
  bool HasHealthComponents() const;
  std::filesystem::path HealthFile(int device, std::string_view name) const;
  absl::Status WriteUnhealthyComponents(int device, const HealthComponents& components);
  absl::Status WriteHeartbeat(int device, uint64_t beats);

  // Applies a counter operation to the triple in `dir` (absolute path of a directory holding
  // total/present[/peak]), as the driver's metric functions do. Missing files count as 0.
  absl::Status ApplyCounter(const std::filesystem::path& dir, CounterOp op, uint64_t value);
  // Convenience locations of counter directories.
  std::filesystem::path CoreDir(int device, int physical_core) const;
  std::filesystem::path OtherInfoDir(int device, int physical_core, std::string_view name) const;
  std::filesystem::path StatusDir(int device, int physical_core, std::string_view name) const;
  std::filesystem::path DeviceMemDir(int device, int physical_core, std::string_view cat) const;
  std::filesystem::path HostMemDir(int device, std::string_view cat) const;

  // stats/power/utilization as "<status>,<epoch>,<min>,<max>,<avg>" with percentages in
  // basis points (1234 -> "12.34"); from driver 2.29 also stats/power/utilization_raw, every
  // die at the average (unavailable while the status is not VALID).
  absl::Status WritePower(int device, std::string_view status, int64_t epoch, uint32_t min_bp,
                          uint32_t max_bp, uint32_t avg_bp);

  // EFA down/up, like a VF reset: the IB device, its uverbs node and /dev/infiniband/uverbsN
  // vanish and return (port counters restart at 0).
  absl::Status RemoveEfa(std::string_view name);
  absl::Status AddEfa(std::string_view name);
  bool EfaPresent(std::string_view name) const;
  // ports/1/hw_counters/<counter> += n.
  absl::Status AddEfaCounter(std::string_view name, std::string_view counter, uint64_t n);

  // Appends one record to ROOT/dev/kmsg: "<prio>,<seq>,<usec>,-;<text>\n", seq increasing.
  absl::Status AppendKmsg(int priority, std::string_view text);

 private:
  RootPaths root_;
  NodeConfig config_;
  std::set<int> absent_devices_;
  std::set<std::string, std::less<>> absent_efas_;
  uint64_t kmsg_seq_ = 0;  // next seq at least; the file's own last record also counts
  std::map<int, uint32_t> power_samples_;  // device -> utilization_raw's counter (one per rollup)

  absl::Status CheckDevice(int device) const;
  absl::Status WriteHealthFile(int device, std::string_view name, std::string_view content);
  absl::StatusOr<size_t> EfaIndex(std::string_view name) const;
  absl::Status WriteNeuronDevice(int device);
  absl::Status WriteNeuronPci(int device);
  absl::Status WriteEfaPci(size_t efa);
  absl::Status WriteEfaIb(size_t efa);
  absl::Status WriteDmi();
  absl::Status WriteClassAttributes();
  absl::Status WriteModule();
  absl::Status WriteNodeJson();
};

// Writes `content` to `path` atomically (temporary file in the same directory, then rename),
// creating parent directories as needed.
absl::Status WriteFileAtomic(const std::filesystem::path& path, std::string_view content);
// Same, with the file's final mode set before the rename (readers never see another mode).
// Directories created on the way get 0755 whatever the umask.
absl::Status WriteFileAtomic(const std::filesystem::path& path, std::string_view content,
                             mode_t mode);

// Char majors of the simulated tree: the neuron region's is dynamic on hardware (never
// hard-code it when reading; docs/driver-interface.md#device-nodes), so a node daemon leases one
// (below); uverbs' is 231 with minors from 192 (docs/driver-interface.md#efa).
inline constexpr int kUverbsMajor = 231;
inline constexpr int kUverbsMinorBase = 192;

// A dynamic char major (234-254, 384-511, as the kernel hands them out) that no other simulated
// node on this machine holds while the lease lives: an flock on a file per major under
// /tmp/neuron-sim-majors/, taken from a start that depends on `root`, released with the lease
// (or the process). ResourceExhausted when every one is taken.
class NeuronMajorLease {
 public:
  static absl::StatusOr<NeuronMajorLease> Take(const std::filesystem::path& root);
  NeuronMajorLease(NeuronMajorLease&& other) noexcept
      : major_(other.major_), fd_(std::exchange(other.fd_, -1)) {}
  NeuronMajorLease& operator=(NeuronMajorLease&&) = delete;
  NeuronMajorLease(const NeuronMajorLease&) = delete;
  NeuronMajorLease& operator=(const NeuronMajorLease&) = delete;
  ~NeuronMajorLease();
  int major() const { return major_; }

 private:
  NeuronMajorLease(int major, int fd) : major_(major), fd_(fd) {}
  int major_;
  int fd_;
};

// PCI device id of the simulated EFA functions (one of 0xefa0-0xefa4,
// docs/driver-interface.md#efa).
inline constexpr uint16_t kSimEfaPciDevice = 0xefa1;
// Host NCDEV memory the probe allocates on core 0 (16 datastore slots of 262144 bytes,
// docs/driver-interface.md#post-load-values).
inline constexpr uint64_t kProbeHostDriverMemory = 4194304;

// Appends one kernel-log record "<prio>,<seq>,<usec>,-;<text>\n" to the kmsg file at `kmsg`
// with a single O_APPEND write under flock, so several writers (the daemon, runtime processes)
// can share it. seq continues the last record in the file (0 for an empty or new file); usec is
// CLOCK_MONOTONIC. Bytes below 0x20, above 0x7e and '\\' are escaped "\xNN" as the kernel does.
// seq is at least `min_seq` (a writer that remembers its last seq stays increasing even if the
// file was truncated). Returns the seq written. Thread-safe and process-safe.
absl::StatusOr<uint64_t> AppendKmsgRecord(const std::filesystem::path& kmsg, int priority,
                                          std::string_view text, uint64_t min_seq = 0);

// "0000:10:1c.0" -> its directory under ROOT/sys/devices ("pci0000:10/0000:10:1c.0").
std::filesystem::path PciDeviceSysPath(const RootPaths& root, std::string_view bdf);

}  // namespace neuron::sim
