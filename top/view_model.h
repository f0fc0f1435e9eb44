#pragma once
// neuron-top's view model: everything one screen (or one --snapshot document) shows, computed
// from two consecutive core Snapshots, the Inventory and process information. Built by the
// feed thread and published as std::shared_ptr<const TopView>: immutable, so the drawing
// thread reads it without locks (docs/style.md#one-owner).
//
// Absent data is std::nullopt throughout, shown as N/A on screen and null in JSON
// (docs/tools-ux.md#nvtop "Missing data"). Ratios are fractions (0..1), rates per second, sizes in
// bytes.

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/discovery/inventory.h"
#include "core/proc/pod_identity.h"
#include "core/proc/procinfo.h"
#include "core/sample/snapshot.h"
#include "top/node_health.h"

namespace neuron::top {

// The device memory categories neuron-top shows (docs/tools-ux.md#top-data), in its order.
enum DeviceCategory : int { kTensors, kConstants, kModelCode, kRuntimeMemory, kScratchpad };
inline constexpr int kDeviceCategoryCount = 5;
inline constexpr std::array<std::string_view, kDeviceCategoryCount> kDeviceCategoryLabels{
    "Tensors", "Constants", "Model Code", "Runtime Memory", "Model Scratchpad"};
// The same categories' sysfs names (JSON keys).
inline constexpr std::array<std::string_view, kDeviceCategoryCount> kDeviceCategoryKeys{
    "tensors", "constants", "model_code", "runtime_memory", "model_shared_scratchpad"};

using CategoryBytes = std::array<std::optional<uint64_t>, kDeviceCategoryCount>;

struct CpuUsage {
  std::optional<double> user;    // fraction of all vCPUs
  std::optional<double> system;  // fraction of all vCPUs
};

struct HostMemory {
  std::optional<uint64_t> total;
  std::optional<uint64_t> tensors;
  std::optional<uint64_t> constants;
  std::optional<uint64_t> dma_buffers;
  std::optional<uint64_t> app_memory;
};

struct DeviceMemory {
  std::optional<uint64_t> total;
  CategoryBytes categories{};
};

struct CoreCell {
  int core_id = 0;  // global logical core id
  std::optional<double> utilization;
  std::optional<double> flops_per_s;
};

struct DeviceRow {
  int index = 0;
  std::optional<DeviceState> state;
  std::optional<uint64_t> ecc_errors;  // sum of the stats/hardware counters
  std::vector<CoreCell> cores;         // logical cores of the device
};

struct ModelMemory {
  uint32_t model_id = 0;
  std::string name;
  int pid = 0;
  std::optional<uint64_t> device_bytes;
  std::optional<uint64_t> host_bytes;
  CategoryBytes categories{};
};

struct CoreMemory {
  int local_index = 0;  // logical core within the device (NC n)
  std::optional<uint64_t> device_bytes;
  std::optional<uint64_t> host_bytes;
  CategoryBytes categories{};
  std::vector<ModelMemory> models;
};

struct DeviceMemoryNode {
  int index = 0;
  std::optional<uint64_t> device_bytes;
  std::optional<uint64_t> host_bytes;
  std::vector<CoreMemory> cores;
};

// One tab: "all" (every process, from sysfs plus the live datastores) or one process (from its
// datastores only).
struct AppView {
  std::string label;       // "all", NEURON_PROCESS_TAG or the PID
  std::optional<int> pid;  // absent for "all"
  std::vector<DeviceRow> grid;
  std::optional<double> average_utilization;  // over all cores ("all") or the process's cores
  std::optional<double> total_flops_per_s;
  CpuUsage runtime_cpu;
  HostMemory host;
  DeviceMemory device;
  std::vector<DeviceMemoryNode> memory_tree;
};

struct ProcessRow {
  int pid = 0;
  std::string tag;      // NEURON_PROCESS_TAG, else the PID
  std::string command;  // "" when it cannot be read
  std::optional<PodIdentity> pod;
  bool pod_known = false;  // false: the pod could not be determined (N/A); true + no pod: "-"
  std::vector<int> devices;
  std::vector<int> core_ids;
  std::optional<uint64_t> device_bytes;
  std::optional<uint64_t> host_bytes;
  std::optional<double> cpu;          // fraction of one vCPU (top's CPU%)
  std::optional<double> utilization;  // mean over its cores
  std::string runtime_version;
};

// Ring buffers of the view feed, oldest first, one entry per sample.
struct History {
  std::vector<std::optional<double>> utilization;    // "all" average
  std::vector<std::optional<double>> device_memory;  // used / capacity
  size_t capacity = 0;
};

struct TopView {
  uint64_t generation = 0;
  std::chrono::system_clock::time_point wall;
  double interval_s = 0;  // between the two snapshots; 0 for the first
  std::string instance_type;
  std::string instance_id;
  int lnc = 1;
  std::string nc_version;  // "v2", "v3", "v3d" (docs/tools-ux.md#top-layout item 2)
  int cores_per_device = 0;
  // BF16 peak of one logical core (docs/hardware.md#roofline x LNC): the full bar in FLOPS mode.
  std::optional<double> peak_flops_per_core;
  // Whether the runtimes' live data could be read (docs/architecture.md#unknown-is-not-zero). When
  // not, utilization, FLOPS and processes are unknown (N/A), not zero, and runtime_attached is
  // absent.
  SourceState datastore_source;
  // Whether the runtimes' records (models, tags, versions) could be read through libnrt; when
  // not, `notes` says why and those figures are absent, not empty.
  SourceState runtime_records;
  std::optional<bool> runtime_attached;  // some process holds a datastore entry
  // What could not be read and what stands in for it (root-only sysfs files), one line each.
  std::vector<std::string> notes;
  CpuUsage system_cpu;
  std::optional<uint64_t> device_memory_capacity;  // HBM of all present devices
  std::vector<AppView> apps;                       // [0] is "all"
  std::vector<ProcessRow> processes;               // ascending PID
  History history;
  std::vector<std::string> errors;  // this sample's problems, each naming its file
  // Device and EFA health (top/node_health.h), which the view feed adds; known is false when
  // it does not ask (no agent configured).
  NodeHealthView health;
};

// What BuildView reads. `before` may be null (first sample: rates absent).
struct ProcSample {
  std::optional<SystemCpuTimes> system;
  std::map<int, ProcessStat> processes;  // runtime PIDs that could be read
  std::chrono::steady_clock::time_point at;
};

struct ProcessDetails {
  std::string command;
  std::optional<PodIdentity> pod;
  bool pod_known = false;
};

struct ViewInputs {
  const Inventory* inventory = nullptr;
  const Snapshot* before = nullptr;
  const Snapshot* after = nullptr;
  const ProcSample* proc_before = nullptr;
  const ProcSample* proc_after = nullptr;
  const std::map<int, ProcessDetails>* details = nullptr;
  const std::vector<std::string>* notes = nullptr;  // null: none
  int64_t ticks_per_second = 100;
};

// Everything but `history`, which the view feed's ring buffers fill.
TopView BuildView(const ViewInputs& in);

// Why live data is missing, in the user's words ("/dev/neuron0: permission denied ..."); "" when
// it could be read.
std::string LiveDataProblem(const SourceState& source);

// Runtime PIDs of a snapshot, ascending.
std::vector<int> RuntimePids(const Snapshot& snap);

// The --snapshot document: one JSON object, numbers in base units, null for absent.
std::string ViewToJson(const TopView& view);

}  // namespace neuron::top
