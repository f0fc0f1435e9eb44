// `neuron-sim up`: the flags checked against the catalog, then the node daemon (daemon.h).

#include "driver-sim/driver/up_command.h"

#include <fmt/format.h>

#include <charconv>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>

#include "core/base/duration.h"
#include "core/model/catalog.h"
#include "driver-sim/driver/daemon.h"

namespace neuron::sim {
namespace {

// One write per device per beat: shorter periods would only load the machine.
constexpr std::chrono::milliseconds kMinHeartbeatPeriod{100};

struct UpFlags {
  std::string root = "/";
  std::string instance;
  int lnc = 0;
  std::string node_name;
  std::string instance_id;
  int reset_ms = 300;
  int power_period_ms = 0;
  UltraServerPosition ultraserver;
  std::string server_id;
  std::string driver_version;
  std::string heartbeat_period = "1s";
};

// The --ultraserver-* flags: only on an UltraServer instance type, and a place on it.
absl::Status UltraServerFlags(const InstanceSpec& spec, const CLI::App* up,
                              const std::string& server_id, UltraServerPosition* pos) {
  const bool given = up->count("--ultraserver-nodes") + up->count("--ultraserver-node-id") +
                         up->count("--ultraserver-server-id") >
                     0;
  if (spec.ultraserver_instances == 0) {
    if (!given) return absl::OkStatus();
    return absl::InvalidArgumentError(fmt::format(
        "--ultraserver-* apply to UltraServer instance types (trn2u.48xlarge), not {}", spec.name));
  }
  if (!server_id.empty()) {
    const auto [end, ec] =
        std::from_chars(server_id.data(), server_id.data() + server_id.size(), pos->server_id, 16);
    if (server_id.size() != 16 || ec != std::errc() || end != server_id.data() + server_id.size()) {
      return absl::InvalidArgumentError(
          fmt::format("--ultraserver-server-id {}: expected 16 hex digits", server_id));
    }
  }
  return ValidateUltraServer(spec, *pos);
}

void AddUpOptions(CLI::App* up, UpFlags* f) {
  AddRootOption(up, &f->root);
  up->add_option("--instance", f->instance, "instance type, e.g. trn1.32xlarge")->required();
  up->add_option("--lnc", f->lnc, "logical NeuronCore config, 1 or 2 (trn2 only; default 2)");
  up->add_option("--node-name", f->node_name, "Kubernetes node name (default sim-<type>)");
  up->add_option("--instance-id", f->instance_id, "EC2 instance id (default: made up per root)");
  up->add_option("--ultraserver-nodes", f->ultraserver.nodes,
                 "UltraServer types: instances the driver's election found, 4, 2 or 1 (default 4)");
  up->add_option("--ultraserver-node-id", f->ultraserver.node_id,
                 "UltraServer types: this instance's node id, 0 .. nodes-1 (default 0)");
  up->add_option("--ultraserver-server-id", f->server_id,
                 "UltraServer types: the UltraServer's serial, 16 hex digits (default "
                 "0123456789abcdef)");
  up->add_option("--driver-version", f->driver_version,
                 "driver generation whose sysfs tree to serve: " + SimDriverChoices() +
                     " (default: " + NewestSimDriver().name +
                     ", the newest with public source; 2.30 from its release notes, formats "
                     "assumed; future: an invented layout; driver-sim/README.md)");
  up->add_option("--heartbeat-period", f->heartbeat_period,
                 "how often driver 2.30's healthcheck_heartbeat advances, e.g. 1s or 250ms "
                 "(default 1s: assumed, the release notes give no period)");
  // Accelerated clocks for tests (D11, driver-sim/README.md#deviations), outside the contract:
  // hidden.
  up->add_option("--reset-ms", f->reset_ms, "device reset duration")->group("");
  up->add_option("--power-period-ms", f->power_period_ms, "power rollup period; 0 = minute")
      ->group("");
}

// The daemon's options from the flags, or the exit code of a usage error.
int RunUp(UpFlags& f, const CLI::App* up) {
  absl::StatusOr<const InstanceSpec*> spec = FindInstance(f.instance);
  if (!spec.ok()) return UsageError("up", std::string{spec.status().message()});
  absl::StatusOr<int> lnc = ResolveLnc(**spec, f.lnc);
  if (!lnc.ok()) return UsageError("up", std::string{lnc.status().message()});
  if (f.root.empty() || std::filesystem::path(f.root).lexically_normal() == "/") {
    return UsageError("up",
                      "refusing to simulate a node at / (it would write /sys and /dev); give "
                      "--root DIR or NEURON_ROOT");
  }
  if (absl::Status s = UltraServerFlags(**spec, up, f.server_id, &f.ultraserver); !s.ok()) {
    return UsageError("up", std::string{s.message()});
  }
  absl::StatusOr<SimDriver> driver = ParseSimDriver(f.driver_version);
  if (!driver.ok()) return UsageError("up", std::string{driver.status().message()});
  if (f.reset_ms < 0 || f.power_period_ms < 0 ||
      (f.power_period_ms > 0 && f.power_period_ms < 100)) {
    return UsageError("up", "--reset-ms must be >= 0 and --power-period-ms 0 or >= 100");
  }
  absl::StatusOr<std::chrono::milliseconds> heartbeat = ParseDurationIn(
      f.heartbeat_period, kMinHeartbeatPeriod, std::chrono::hours(1), "100ms to 1h");
  if (!heartbeat.ok()) {
    return UsageError("up", "--heartbeat-period: " + std::string{heartbeat.status().message()});
  }
  DaemonOptions options;
  options.root = std::filesystem::absolute(f.root).lexically_normal();
  options.spec = *spec;
  options.lnc = *lnc;
  options.node_name = f.node_name;
  options.instance_id = f.instance_id;
  options.ultraserver = f.ultraserver;
  options.driver = *std::move(driver);
  options.reset_duration = std::chrono::milliseconds(f.reset_ms);
  options.power_period = std::chrono::milliseconds(f.power_period_ms);
  options.heartbeat_period = *heartbeat;
  return RunNodeDaemon(std::move(options));
}

}  // namespace

Command AddUpCommand(CLI::App& app) {
  auto f = std::make_shared<UpFlags>();
  CLI::App* up = app.add_subcommand(
      "up",
      "start a simulated node (the driver) and serve ctl until SIGTERM; ready when "
      "ROOT/run/neuron/sim.ready exists");
  AddUpOptions(up, f.get());
  return {up, [f, up] { return RunUp(*f, up); }};
}

}  // namespace neuron::sim
