#pragma once
// Pending runtime-visible faults: ROOT/run/neuron/faults.json (docs/architecture.md#faults).
//
// `neuron-sim ctl inject ...` and `ctl link-down` record here what the simulated runtime must do
// to a process's next execution on the device (fail it with the mapped status, write the
// NEURON_HW_ERR= kmsg record, time it out, ...). The daemon is the file's only writer; runtime
// processes read it. driver-sim/README.md ("faults.json") documents the format field by field.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/driver/sysfs_names.h"

namespace neuron::sim {

// kSdc (silent data corruption) comes last so that the values of the older kinds stay put: the
// execution succeeds and one bit of its first output differs (driver-sim/README.md).
enum class FaultKind { kHbmUe, kSramUe, kNan, kDmaAbort, kHang, kLinkDown, kSdc };

// The name used on the command line and in faults.json: "hbm-ue", "sram-ue", "nan", "dma-abort",
// "hang", "link-down".
std::string_view FaultKindName(FaultKind kind);
std::optional<FaultKind> ParseFaultKind(std::string_view name);
// The kinds `ctl inject` takes (all but link-down), in the order usage lists them.
const std::vector<FaultKind>& InjectKinds();

struct PendingFault {
  uint64_t id = 0;  // unique for the daemon's life, increasing from 1
  FaultKind kind = FaultKind::kNan;
  int device = 0;
  // Device-local NeuronCore as the runtime numbers them (logical at LNC=2); nullopt = whichever
  // core of the device executes next.
  std::optional<int> core;
  std::optional<int> peer;  // link-down only: the other end of the NeuronLink
  int64_t time_ms = 0;      // wall clock at injection, milliseconds since the epoch

  bool operator==(const PendingFault&) const = default;
};

std::filesystem::path FaultsPath(const RootPaths& paths);

std::string FaultsToJson(const std::vector<PendingFault>& faults);
// `source` names the file in errors; a malformed document is DataLoss naming it.
absl::StatusOr<std::vector<PendingFault>> ParseFaults(std::string_view json,
                                                      std::string_view source);
// NotFound when the file is absent (no daemon runs on the root).
absl::StatusOr<std::vector<PendingFault>> ReadFaults(const RootPaths& paths);

// "#3 hbm-ue on device 2 core 1" / "#4 link-down between devices 0 and 1".
std::string DescribeFault(const PendingFault& fault);

// The daemon's copy of the pending faults, written to faults.json whole and atomically after
// every change. Not thread-safe: owned by the daemon's one thread.
class FaultBook {
 public:
  explicit FaultBook(RootPaths paths) : paths_(std::move(paths)) {}

  // Adds a fault stamped with the current wall-clock time; the caller then calls Write().
  PendingFault Add(FaultKind kind, int device, std::optional<int> core, std::optional<int> peer);
  // False when no pending fault has this id.
  bool Remove(uint64_t id);
  // Removes the device's own faults (not link-down, which belongs to a link); returns how many.
  // Called when the device is reset to READY or unplugged: new hardware state, nothing pending.
  int ClearDevice(int device);

  const std::vector<PendingFault>& faults() const { return faults_; }

  absl::Status Write() const;
  absl::Status RemoveFile() const;

 private:
  RootPaths paths_;
  std::vector<PendingFault> faults_;
  uint64_t next_id_ = 1;
};

}  // namespace neuron::sim
