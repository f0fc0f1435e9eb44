#pragma once
// The hardware evidence of every known device and EFA interface, kept from events, inventory
// scans and ECC polls (docs/architecture.md#health). Facts only: what counts as unhealthy under
// which policy is the consumer's decision (the device plugin's plugin/node_watcher.cc; the
// exporter and the tools count every class).
//
// Evidence:
//   - absence: a device or EFA removed (Event) or missing from a scan (and added back);
//   - state: the device's `reset` state, from events and scans;
//   - counters: each row of core/driver/health_counters.h (uncorrected ECC in stats/hardware/
//     and health_status/; corrected ECC, whose rise is degraded) rose above the baseline (read by
//     PollCounters, never on an RPC's path);
//   - NEURON_HW_ERR= kernel records naming the device (nd-id);
//   - driver 2.30's health_status/unhealthy_components (as read) and healthcheck_heartbeat
//     (stalled when it did not move for more than two of its periods);
//   - which of those files the device's tree should hold but could not be read (unknown);
//   - EFA: the port state;
//   - the driver: a device that vanished with the module's own directory is not absent but
//     unknown (the driver is gone, not the device).
// A device's baseline is set when it appears (start-up, replug) and when its state returns to
// READY (a reset): the ECC baselines become the current counters, old HW_ERR records are
// forgotten and the heartbeat is timed afresh, so the evidence clears once the fault is gone.
// What each piece of evidence means for health is core/node/device_health.h's.
//
// The set of known devices only grows (an unplugged device stays listed, absent), and starts
// from the instance catalog when the instance type is known, so capacity reflects the node.
//
// Thread-safety: none; one owner (the plugin's watcher thread, the exporter's background thread,
// a tool's collector) calls every method (docs/style.md#one-owner).

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/discovery/inventory.h"
#include "core/driver/health_components.h"
#include "core/driver/health_counters.h"
#include "core/events/events.h"
#include "spdlog/spdlog.h"

namespace neuron {

// A file of the device's tree that the last poll could not read, relative to the device's
// directory, and the class of evidence it is: health by that class is unknown.
struct UnreadableFile {
  std::string path;
  EvidenceClass evidence_class;
  bool operator==(const UnreadableFile&) const = default;
};

struct DeviceEvidence {
  bool present = false;
  bool driver_gone = false;  // absent because the driver's module is not loaded
  std::string bdf;
  std::optional<DeviceState> state;
  std::optional<int> numa;
  std::vector<int> links;
  DeviceAttributes attributes;  // the last scan's (core/driver/device_attributes.h)
  bool rebaseline = true;       // take the next counter reading as the baseline
  NodeGroups groups;            // the optional node groups its tree holds
  bool v2_chip = false;         // IsV2Chip: its still_on_v2 counter rows are not read
  // Per row of kHealthCounters (core/driver/health_counters.h): its baseline, and whether it
  // rose above it since.
  std::array<std::optional<uint64_t>, kHealthCounters.size()> counter_baseline;
  std::array<bool, kHealthCounters.size()> counter_rose{};
  std::vector<std::string> hw_errors;  // NEURON_HW_ERR types naming it, first seen first
  ParsedComponents reported;           // driver 2.30's unhealthy_components at the last poll
  std::optional<uint64_t> heartbeat;   // driver 2.30's healthcheck_heartbeat, last value read
  std::chrono::steady_clock::time_point heartbeat_moved{};  // when it last changed
  bool heartbeat_stalled = false;
  // Evidence files the device's tree should hold that the last poll could not read.
  std::vector<UnreadableFile> unreadable;
};

struct EfaEvidence {
  bool present = false;
  std::string bdf;
  std::string port_state;
  std::optional<int> numa;
  std::optional<int> uverbs;
};

struct HealthEvidenceOptions {
  // The period of driver 2.30's healthcheck_heartbeat. Not published: 1 s is assumed
  // (docs/driver-interface.md#driver-generations); the heartbeat is stalled when it has not
  // moved for more than two periods, so a stall is seen within three.
  std::chrono::milliseconds heartbeat_period{1000};
  // For consumers that do not watch Events (the exporter, the tools): PollCounters then also
  // looks, as Events' state poll would, whether each known device's directory is there and reads
  // its state, so that a reset between two scans is seen (its return to READY sets the new
  // baseline), an unplugged device is absent and one whose state cannot be read is unknown.
  bool poll_state = false;
  // With poll_state, while the consumer applies the kernel log's reset records (kDeviceReset,
  // SetResetsLogged): how often each state is read anyway, the safety net under a lost record.
  std::chrono::milliseconds state_recheck{10000};
};

class HealthEvidence {
 public:
  // Reads the counter files below `root`; logs each change of evidence on `log` (the consumer's
  // component logger: the lines are its own).
  HealthEvidence(RootPaths root, std::shared_ptr<spdlog::logger> log,
                 HealthEvidenceOptions options = {});

  // Applies one event; true when the inventory should be rescanned (details of a new device or
  // of one not known yet).
  bool Apply(const Event& e);
  // Whether the consumer applies the kernel log's reset records as they come (its log is open):
  // with poll_state, PollCounters then reads the states only every state_recheck.
  void SetResetsLogged(bool logged) { resets_logged_ = logged; }
  // Merges a scan: the catalog's shape, presence, state, NUMA node, links, PCI addresses.
  void ApplyScan(const Inventory& inv);
  // Reads the counter evidence of every present device at `now`: each counter row (a new
  // baseline where one is due, else whether it rose above it), and where the tree has them
  // unhealthy_components and the heartbeat; with options.poll_state, presence and state first,
  // unless a scan was applied since the last poll (it read them).
  void PollCounters(std::chrono::steady_clock::time_point now);

  const std::map<int, DeviceEvidence>& devices() const { return devices_; }
  const std::map<std::string, EfaEvidence>& efas() const { return efas_; }
  // From the last scan that knew them: 0 / "" until one did.
  int cores_per_device() const { return cores_per_device_; }
  const std::string& instance_type() const { return instance_type_; }
  const std::string& driver_version() const { return driver_version_; }

 private:
  void NewBaseline(DeviceEvidence* d) const;
  void SetState(int index, DeviceEvidence& d, std::optional<DeviceState> state) const;
  void PollPresence(std::chrono::steady_clock::time_point now);
  std::optional<DeviceState> ReadState(int index) const;
  void ApplyReset(int index, DeviceEvidence& d, ResetStep step) const;
  void ApplyCatalog(const InstanceSpec& spec);
  void PollCounterRows(int index, DeviceEvidence& d, std::vector<UnreadableFile>* unreadable);
  void PollDriverHealth(int index, DeviceEvidence& d, std::chrono::steady_clock::time_point now,
                        std::vector<UnreadableFile>* unreadable);
  void NoteUnreadable(int index, DeviceEvidence& d, std::vector<UnreadableFile> unreadable) const;

  const RootPaths root_;
  std::shared_ptr<spdlog::logger> log_;
  const HealthEvidenceOptions options_;
  std::map<int, DeviceEvidence> devices_;
  std::map<std::string, EfaEvidence> efas_;
  bool scan_since_poll_ = false;  // ApplyScan since the last PollCounters: presence is fresh
  bool resets_logged_ = false;
  std::chrono::steady_clock::time_point states_read_{};  // PollPresence's last read of every state
  int cores_per_device_ = 0;
  std::string instance_type_;
  std::string driver_version_;
};

}  // namespace neuron
