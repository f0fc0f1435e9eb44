#include "driver-sim/cluster/cluster_command.h"

#include <fmt/format.h>

#include <iostream>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "core/driver/sysfs_names.h"
#include "core/model/catalog.h"
#include "driver-sim/cluster/cluster.h"
#include "driver-sim/cluster/supervisor.h"
#include "driver-sim/driver/ctl.h"
#include "driver-sim/kubelet/kubelet_control.h"

namespace neuron::sim {
namespace {

constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

struct Flags {
  std::string dir;
  int nodes = 0;
  std::string instance;
  std::string name_prefix = "node";
  std::string device_plugin;
  int plugin_port = 0;
  int lnc = 0;
  int ready_timeout_s = 300;
  int timeout_s = 120;
};

int Usage(const std::string& message) {
  std::cerr << fmt::format("neuron-sim cluster: {}\nRun with --help for more information.\n",
                           message);
  return kExitUsage;
}

fs::path AbsoluteDir(const std::string& dir) { return fs::absolute(dir).lexically_normal(); }

int Up(const Flags& f) {
  absl::StatusOr<const InstanceSpec*> spec = FindInstance(f.instance);
  if (!spec.ok()) return Usage(std::string{spec.status().message()});
  if (f.ready_timeout_s <= 0) return Usage("--ready-timeout-s must be > 0");
  ClusterOptions options;
  options.dir = AbsoluteDir(f.dir);
  options.nodes = f.nodes;
  options.instance = f.instance;
  options.name_prefix = f.name_prefix;
  if (f.plugin_port < 0 || f.plugin_port > 65535) return Usage("--plugin-port must be 0 to 65535");
  if (!f.device_plugin.empty()) options.device_plugin = fs::absolute(f.device_plugin);
  options.plugin_port = f.plugin_port;
  if (f.lnc != 0) options.up_args = {"--lnc", std::to_string(f.lnc)};
  options.ready_ceiling = std::chrono::seconds(f.ready_timeout_s);
  return RunClusterSupervisor(options);
}

// What `status` learns about one node.
struct NodeHealth {
  bool driver = false;
  bool kubelet = false;
  std::vector<std::string> resources;  // "RES=capacity", as the kubelet advertises them
};

NodeHealth CheckNode(const ClusterNode& node) {
  NodeHealth h;
  absl::StatusOr<CtlRequest> request = ParseCtlArgs({"status"});
  if (request.ok()) {
    absl::StatusOr<CtlReply> reply =
        SendCtlRequest(RootPaths(node.root), *request, std::chrono::seconds(5));
    h.driver = reply.ok() && reply->outcome == CtlOutcome::kOk;
  }
  std::error_code ec;
  if (!fs::exists(KubeletControlSocket(node.kubelet_dir.string()), ec)) return h;
  const absl::StatusOr<std::vector<ResourceState>> resources =
      KubeletResources(node.kubelet_dir.string());
  if (!resources.ok()) return h;
  h.kubelet = true;
  for (const ResourceState& r : *resources) {
    h.resources.push_back(fmt::format("{}={}", r.name, r.capacity));
  }
  return h;
}

int Status(const Flags& f) {
  const fs::path dir = AbsoluteDir(f.dir);
  absl::StatusOr<ClusterSpec> spec = ReadClusterSpec(dir);
  if (!spec.ok()) {
    std::cerr << fmt::format("neuron-sim cluster status: {}\n",
                             std::string{spec.status().message()});
    return kExitFailure;
  }
  const std::optional<int> supervisor = LiveSupervisor(dir);
  std::error_code ec;
  const bool ready = fs::exists(ClusterFiles(dir).Ready(), ec);
  std::cout << fmt::format("supervisor {}{}\n",
                           supervisor ? fmt::format("pid {}", *supervisor) : "down",
                           supervisor && !ready ? " (not ready)" : "");
  bool healthy = supervisor && ready;
  for (const ClusterNode& node : spec->nodes) {
    const NodeHealth h = CheckNode(node);
    healthy = healthy && h.driver && h.kubelet;
    std::cout << fmt::format("{} {} {} driver={} kubelet={} {}\n", node.name, node.address,
                             node.instance_id.empty() ? "-" : node.instance_id,
                             h.driver ? "ready" : "down", h.kubelet ? "ready" : "down",
                             h.resources.empty() ? std::string("resources=none")
                                                 : fmt::format("{}", fmt::join(h.resources, " ")));
  }
  return healthy ? 0 : kExitFailure;
}

void AddDirOption(CLI::App* cmd, std::string* dir) {
  cmd->add_option("--dir", *dir, "the cluster's directory (cluster.json, nodes/)")
      ->required()
      ->envname("NEURON_CLUSTER_DIR");
}

}  // namespace

std::pair<CLI::App*, std::function<int()>> AddClusterCommand(CLI::App& app) {
  auto f = std::make_shared<Flags>();
  CLI::App* cluster = app.add_subcommand(
      "cluster",
      "a simulated cluster of N nodes on this machine, each with its own root, driver and "
      "kubelet emulator; `up` is ready when DIR/cluster.ready exists");
  cluster->require_subcommand(1);
  cluster->footer(
      "Examples:\n"
      "  neuron-sim cluster up --nodes 2 --instance trn1.32xlarge --dir /tmp/c\n"
      "  neuron-sim cluster status --dir /tmp/c\n"
      "  neuron-sim cluster down --dir /tmp/c");
  CLI::App* up = cluster->add_subcommand(
      "up", "start the nodes and supervise them until SIGTERM/SIGINT, then stop them");
  CLI::App* down = cluster->add_subcommand(
      "down", "stop the cluster of DIR and wait until nothing of it runs (no cluster: a note)");
  CLI::App* status = cluster->add_subcommand(
      "status",
      "one line per node: address, instance id, driver, kubelet, advertised resources; "
      "exit 0 when every node is healthy");
  for (CLI::App* sub : {up, down, status}) AddDirOption(sub, &f->dir);
  up->add_option("--nodes", f->nodes, "number of nodes, 1 to 254")->required();
  up->add_option("--instance", f->instance, "instance type of every node, e.g. trn1.32xlarge")
      ->required();
  up->add_option("--name-prefix", f->name_prefix, "nodes are PREFIX-1 .. PREFIX-N (node)");
  up->add_option("--device-plugin", f->device_plugin,
                 "also run this device plugin binary on every node (--listen ADDRESS:PORT)");
  up->add_option("--plugin-port", f->plugin_port,
                 "the device plugins' HTTP port; 0 (default): any free one, see "
                 "nodes/NAME/logs/plugin.out");
  up->add_option("--lnc", f->lnc, "logical NeuronCore config for every node (see `up --help`)");
  up->add_option("--ready-timeout-s", f->ready_timeout_s, "ceiling for the nodes to be ready")
      ->group("");
  down->add_option("--timeout-s", f->timeout_s, "how long to wait before SIGKILL (120)")->group("");
  return {cluster, [f, up, down]() -> int {
            if (f->dir.empty()) return Usage("--dir must not be empty");
            if (up->parsed()) return Up(*f);
            if (down->parsed()) {
              if (f->timeout_s <= 0) return Usage("--timeout-s must be > 0");
              return StopCluster(AbsoluteDir(f->dir), std::chrono::seconds(f->timeout_s), std::cout,
                                 std::cerr);
            }
            return Status(*f);
          }};
}

}  // namespace neuron::sim
