#pragma once
// One collector per metric group (docs/metrics.md#self-metrics: device, memory, core, execution,
// health, power, efa, allocation, compat). Each turns a ExporterView into metric families; none
// reads a file itself (docs/style.md#collectors-translate), except compat's `system_*`, which read
// ROOT/proc as the compat set requires. Collectors are stateless or guard their own state: scrapes
// may run concurrently.

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "core/base/version.h"
#include "monitor/exporter_state.h"
#include "monitor/families.h"

namespace neuron::monitor {

struct ExporterOptions {
  bool compat = false;
  // Compat mode's instance labels (docs/metrics.md#compat-names); region and zone come from flags
  // (docs/architecture.md#instance-identity), instance id and type from the inventory.
  bool compat_instance_labels = true;
  std::string region;
  std::string availability_zone;
  std::string instance_name;
  std::string subnet_id;
  // Collector groups left out (--no-collector.<name>, names from CollectorNames()): not
  // constructed, so they cost nothing at scrape time. Compat is `compat` above.
  std::set<std::string, std::less<>> disabled_collectors;
  // Where the metrics are served (--web.telemetry-path); ValidateTelemetryPath() says which
  // paths may be.
  std::string telemetry_path = "/metrics";
  // The exporter process's own metrics, process_* (--web.disable-exporter-metrics turns them
  // off; monitor/README.md says why the rest of the self-metrics stay).
  bool exporter_metrics = true;
  // neuron_exporter_build_info (core/base/version.h).
  std::string version = std::string(AgentVersion());
  std::string revision = std::string(AgentRevision());
  std::string compiler = std::string(AgentCompiler());
};

struct ScrapeContext {
  const ExporterView& view;
  const ExporterOptions& options;
  ExporterState& source;  // Monotonic()

  const Inventory& inventory() const { return *view.inventory; }
  const Snapshot& snap() const { return *view.current; }
  // Unknown is not zero (docs/architecture.md#unknown-is-not-zero): a series that adds the live
  // datastores to a sysfs total, or comes from them alone, is left out unless the latest snapshot
  // read them, because the sysfs part alone only moves when a process exits and reads as idle
  // during a job.
  bool live() const { return DatastoresRead(snap()); }
  // The same for a figure measured between the base snapshot and the latest: a base without the
  // datastores would count every running process's whole history into one window.
  bool live_since_base() const {
    return view.base != nullptr && DatastoresRead(*view.base) && live();
  }
  // The same for one device: one whose datastores could not be read while others' could (all
  // its process slots taken, a failed open) is unknown too.
  bool live(int device) const { return live() && !snap().datastore_source.unread.contains(device); }
  bool live_since_base(int device) const {
    return live_since_base() && live(device) &&
           !view.base->datastore_source.unread.contains(device);
  }
  // A counter value that never goes below what was exported before.
  double Mono(int device, const std::string& key, double value) const {
    return source.Monotonic(device, key, value);
  }
};

class Collector {
 public:
  virtual ~Collector() = default;
  virtual std::string_view name() const = 0;
  // Appends families. An error marks the collector failed for this scrape (success gauge 0); the
  // families appended before it are still served.
  virtual absl::Status Collect(const ScrapeContext& ctx, Families& out) = 0;
};

std::unique_ptr<Collector> MakeDeviceCollector();
std::unique_ptr<Collector> MakeMemoryCollector();
std::unique_ptr<Collector> MakeCoreCollector();
std::unique_ptr<Collector> MakeExecutionCollector();
std::unique_ptr<Collector> MakeHealthCollector();
std::unique_ptr<Collector> MakePowerCollector();
std::unique_ptr<Collector> MakeEfaCollector();
std::unique_ptr<Collector> MakeAllocationCollector();
std::unique_ptr<Collector> MakeUltraServerCollector();
std::unique_ptr<Collector> MakeCompatCollector();

// The collector groups that --collector.<name> / --no-collector.<name> turn on and off, in
// output order (all on by default; compat is --compat).
const std::vector<std::string_view>& CollectorNames();
// The explicit list, in output order: those of CollectorNames() not disabled, then compat with
// options.compat.
std::vector<std::unique_ptr<Collector>> MakeCollectors(const ExporterOptions& options);
// OK when `path` may serve the metrics: absolute, not "/" (the landing page) nor /healthz or
// /readyz, without whitespace, control characters, '?' or '#'.
absl::Status ValidateTelemetryPath(std::string_view path);

// Label helpers shared by collectors.
inline std::string Str(int v) { return std::to_string(v); }
Labels DeviceLabels(int device);
Labels CoreLabels(int device, int logical_core);
// Compat mode's instance labels, empty when turned off.
Labels InstanceLabels(const ScrapeContext& ctx);

}  // namespace neuron::monitor
