#pragma once
// neuron-ls: what it shows (LsReport, built from core's Inventory, the live datastores and
// process information) and how (the table, --wide, --show-all-procs, --topology, --json-output
// and --output-format json formats of docs/tools-ux.md#neuron-ls). Building reads only through
// core; rendering is pure. Plain values; thread-safe to read.

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/discovery/inventory.h"
#include "core/proc/procinfo.h"
#include "core/sample/datastore.h"
#include "core/sample/runtime_records.h"
#include "top/link_shape.h"
#include "top/node_health.h"

namespace neuron::top {

struct LsProcess {
  int pid = 0;
  std::string command;          // whole command line; "NA" when it cannot be read
  std::string runtime_version;  // "2.0.0"; "NA" for processes without a datastore (-a)
};

struct LsDevice {
  int index = 0;
  int cores = 0;              // logical NeuronCores
  std::vector<int> core_ids;  // global logical core ids (NEURON_RT_VISIBLE_CORES numbering)
  std::optional<uint64_t> memory_bytes;
  std::vector<int> connected;  // display order (link_shape.h)
  std::string bdf;             // full form; "" when unknown
  std::string cpu_affinity;    // local_cpulist; "" when unknown
  std::optional<int> numa_node;
  DeviceAttributes attributes;       // --output-format json's (core/driver/device_attributes.h)
  std::vector<LsProcess> processes;  // datastore processes by PID, then -a extras by PID
  // False when nothing could tell which processes use the device (live data unavailable and
  // no --show-all-procs scan): JSON says null rather than an empty list.
  bool processes_known = true;
  // Its verdict, when the report has health and the verdicts name the device.
  std::optional<HealthRow> health;
};

struct LsReport {
  std::string instance_type;
  std::string instance_id;
  int lnc = 1;
  bool lnc_applies = false;  // trn2: print logical-neuroncore-config
  // sys/module/neuron/version; "" when absent (docs/driver-interface.md#detection).
  std::string driver_version;
  // DriverLayoutProblem(): an unknown sysfs layout or missing nodes; "" when none.
  std::string driver_problem;
  std::vector<LsDevice> devices;
  Inventory inventory;  // for the drawing
  LinkLayout link;
  // Why the runtimes' live data (docs/architecture.md#unknown-is-not-zero) could not be read;
  // absent when it was.
  std::optional<std::string> live_data_unavailable;
  // What the process scan could not see, one line each (for stderr).
  std::vector<std::string> notes;
  // The verdicts shown (the default table's HEALTH column, JSON's `health`); known is false
  // for the formats that do not show them.
  NodeHealthView health;
};

struct LsSources {
  const Inventory* inventory = nullptr;
  const std::vector<DatastoreRecord>* datastores = nullptr;  // null: no process columns wanted
  // The runtimes' records through libnrt (runtime versions); null or unknown for a process: NA.
  const RuntimeRecordsScan* runtime_records = nullptr;
  // Set when the datastores could not be read (the reader's SourceState reason): `datastores`
  // is then empty because nothing could be seen, and process cells say NA, not "idle".
  std::optional<std::string> live_data_unavailable;
  const ProcReader* proc = nullptr;  // command lines; null: "NA"
  // With --show-all-procs: also processes holding a device node without a datastore, found in
  // /proc by the device's number (ProcReader::HoldersOf), whatever path they opened it by.
  // Works whether or not live data could be read.
  bool all_processes = false;
  // Left out of the -a scan: neuron-ls itself (as the /proc it reads numbers it), whose
  // datastore reader holds a device exactly while a runtime is on it
  // (core/sample/datastore_driver.cc), which would only repeat that row.
  int self_pid = 0;
  // Each device's number, in inventory order (DeviceNumbers); one that could not be read is
  // said in a note and its holders are not looked for.
  std::vector<absl::StatusOr<dev_t>> device_numbers;
  // The agent's verdicts or this read's (top/node_health.h); null: no health shown.
  const NodeHealthView* health = nullptr;
};

LsReport BuildLsReport(const LsSources& sources);

// LsSources::device_numbers for an inventory under `root`, from the driver's class devices.
std::vector<absl::StatusOr<dev_t>> DeviceNumbers(const Inventory& inventory, const RootPaths& root);

enum class LsFormat { kDefault, kWide, kAllProcs, kWideAllProcs, kTopology };

// The header lines and the table (and the drawing for kTopology), '\n'-terminated. The default
// table ends with HEALTH when the report has health.
std::string RenderLsText(const LsReport& report, LsFormat format);
// The --json-output array (docs/tools-ux.md#ls-json), pretty-printed with 4 spaces,
// '\n'-terminated.
std::string RenderLsJson(const LsReport& report);
// The --output-format json object: the node's facts, then that array as `neuron_devices`
// (docs/tools-ux.md#ls-json-object); the same layout.
std::string RenderLsJsonObject(const LsReport& report);

}  // namespace neuron::top
