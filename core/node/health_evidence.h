#pragma once
// The hardware evidence of every known device and EFA interface, kept from events, inventory
// scans and ECC polls (docs/architecture.md#health). Facts only: what counts as unhealthy under
// which policy is the consumer's decision (the device plugin's plugin/node_watcher.cc).
//
// Evidence:
//   - absence: a device or EFA removed (Event) or missing from a scan (and added back);
//   - state: the device's `reset` state, from events and scans;
//   - ECC: stats/hardware/*_uncorrected, or where the driver has them the uncorrected counts of
//     stats/hardware/health_status/, rose above the baseline (the list is spelled out in
//     health_evidence.cc; read by PollEcc, never on an RPC's path);
//   - NEURON_HW_ERR= kernel records naming the device (nd-id);
//   - EFA: the port state.
// A device's baseline is set when it appears (start-up, replug) and when its state returns to
// READY (a reset): the ECC baseline becomes the current counters and old HW_ERR records are
// forgotten, so the evidence clears once the fault is gone.
//
// The set of known devices only grows (an unplugged device stays listed, absent), and starts
// from the instance catalog when the instance type is known, so capacity reflects the node.
//
// Thread-safety: none; one owner (the plugin's watcher thread) calls every method
// (docs/style.md#one-owner).

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/discovery/inventory.h"
#include "core/driver/health_counters.h"
#include "core/events/events.h"
#include "spdlog/spdlog.h"

namespace neuron {

// How many files PollEcc reads per device at most (core/driver/health_counters.h lists them).
inline constexpr size_t kEccEvidenceCount = kHealthEvidence.size();

struct DeviceEvidence {
  bool present = false;
  std::string bdf;
  std::optional<DeviceState> state;
  std::optional<int> numa;
  std::vector<int> links;
  bool rebaseline = true;  // take the next ECC reading as the baseline
  NodeGroups groups;       // the optional node groups its tree holds
  std::array<std::optional<uint64_t>, kEccEvidenceCount> ecc_baseline;  // the list's order
  bool ecc_rose = false;
  bool hw_error = false;
};

struct EfaEvidence {
  bool present = false;
  std::string bdf;
  std::string port_state;
  std::optional<int> numa;
  std::optional<int> uverbs;
};

class HealthEvidence {
 public:
  // Reads ECC counters below `root`; logs each change of evidence on `log` (the consumer's
  // component logger: the lines are its own).
  HealthEvidence(RootPaths root, std::shared_ptr<spdlog::logger> log);

  // Applies one event; true when the inventory should be rescanned (details of a new device or
  // of one not known yet).
  bool Apply(const Event& e);
  // Merges a scan: the catalog's shape, presence, state, NUMA node, links, PCI addresses.
  void ApplyScan(const Inventory& inv);
  // Reads the ECC evidence of every present device: a new baseline where one is due, else
  // whether a counter rose above it.
  void PollEcc();

  const std::map<int, DeviceEvidence>& devices() const { return devices_; }
  const std::map<std::string, EfaEvidence>& efas() const { return efas_; }
  // From the last scan that knew them: 0 / "" until one did.
  int cores_per_device() const { return cores_per_device_; }
  const std::string& instance_type() const { return instance_type_; }
  const std::string& driver_version() const { return driver_version_; }

 private:
  static void NewBaseline(DeviceEvidence* d);
  void ApplyCatalog(const InstanceSpec& spec);

  const RootPaths root_;
  std::shared_ptr<spdlog::logger> log_;
  std::map<int, DeviceEvidence> devices_;
  std::map<std::string, EfaEvidence> efas_;
  int cores_per_device_ = 0;
  std::string instance_type_;
  std::string driver_version_;
};

}  // namespace neuron
