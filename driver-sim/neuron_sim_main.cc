// neuron-sim: the simulated Neuron node. Subcommands (docs/architecture.md#command-line-contracts):
//   up   the node daemon (the simulated driver)
//   ctl  talk to a running daemon: status and fault injection
//   run  run a workload on the node through libnrt-sim (workloads/run_command.h)
//   exec run any command under the simulated driver's device node (driver/exec.h)
//   kubelet  the kubelet emulator (restart|status talk to a running one)
//   pod  admit, delete and list pods through the kubelet emulator (run ... -- CMD runs CMD in it)
//   cluster  up|down|status: several simulated nodes, each with its kubelet (cluster/supervisor.h)
//   job  run, delete and list multi-node training jobs on a simulated cluster (job/job.h)
//   apiserver  the API stand-in for ResourceSlices and ResourceClaims (apiserver/api_server.h)
//   schedule  allocate DRA claims on a node through the API server (scheduler/schedule.h)
// Exit codes: 0 success, 1 failure, 2 usage (docs/architecture.md#readiness-and-lifecycle).

#include <fmt/format.h>
#include <signal.h>

#include <CLI/CLI.hpp>
#include <charconv>
#include <chrono>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "core/base/version.h"
#include "core/driver/sysfs_names.h"
#include "core/model/catalog.h"
#include "driver-sim/apiserver/apiserver_command.h"
#include "driver-sim/cluster/cluster_command.h"
#include "driver-sim/driver/ctl.h"
#include "driver-sim/driver/daemon.h"
#include "driver-sim/driver/exec.h"
#include "driver-sim/job/job_command.h"
#include "driver-sim/kubelet/kubelet_control.h"
#include "driver-sim/scheduler/schedule_command.h"
#include "driver-sim/workloads/predict_command.h"
#include "driver-sim/workloads/run_command.h"

namespace {

constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

// A subcommand registers its options and returns what runs it once the command line is parsed.
// Later subcommands (run, kubelet, pod) are one more such function each.
using Runner = std::function<int()>;
using Command = std::pair<CLI::App*, Runner>;

void AddRootOption(CLI::App* cmd, std::string* root) {
  cmd->add_option("--root", *root, "root of the simulated node's filesystem")
      ->envname("NEURON_ROOT");
}

int Usage(std::string_view command, const std::string& message) {
  std::cerr << fmt::format("neuron-sim {}: {}\nRun with --help for more information.\n", command,
                           message);
  return kExitUsage;
}

// The --ultraserver-* flags: only on an UltraServer instance type, and a place on it.
absl::Status UltraServerFlags(const neuron::InstanceSpec& spec, const CLI::App* up,
                              const std::string& server_id, neuron::sim::UltraServerPosition* pos) {
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
  return neuron::sim::ValidateUltraServer(spec, *pos);
}

Command AddUp(CLI::App& app) {
  struct Flags {
    std::string root = "/";
    std::string instance;
    int lnc = 0;
    std::string node_name;
    std::string instance_id;
    int reset_ms = 300;
    int power_period_ms = 0;
    neuron::sim::UltraServerPosition ultraserver;
    std::string server_id;
    std::string driver_version;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* up = app.add_subcommand(
      "up",
      "start a simulated node (the driver) and serve ctl until SIGTERM; ready when "
      "ROOT/run/neuron/sim.ready exists");
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
                 "driver generation whose sysfs tree to serve: " + neuron::sim::SimDriverChoices() +
                     " (default: the newest; future: an invented layout, driver-sim/README.md)");
  // Accelerated clocks for tests (D11, driver-sim/README.md#deviations), outside the contract:
  // hidden.
  up->add_option("--reset-ms", f->reset_ms, "device reset duration")->group("");
  up->add_option("--power-period-ms", f->power_period_ms, "power rollup period; 0 = minute")
      ->group("");

  return {up, [f, up]() -> int {
            absl::StatusOr<const neuron::InstanceSpec*> spec = neuron::FindInstance(f->instance);
            if (!spec.ok()) return Usage("up", std::string{spec.status().message()});
            absl::StatusOr<int> lnc = neuron::ResolveLnc(**spec, f->lnc);
            if (!lnc.ok()) return Usage("up", std::string{lnc.status().message()});
            if (f->root.empty() || std::filesystem::path(f->root).lexically_normal() == "/") {
              return Usage("up",
                           "refusing to simulate a node at / (it would write /sys and /dev); give "
                           "--root DIR or NEURON_ROOT");
            }
            if (absl::Status s = UltraServerFlags(**spec, up, f->server_id, &f->ultraserver);
                !s.ok()) {
              return Usage("up", std::string{s.message()});
            }
            absl::StatusOr<neuron::sim::SimDriver> driver =
                neuron::sim::ParseSimDriver(f->driver_version);
            if (!driver.ok()) return Usage("up", std::string{driver.status().message()});
            if (f->reset_ms < 0 || f->power_period_ms < 0 ||
                (f->power_period_ms > 0 && f->power_period_ms < 100)) {
              return Usage("up", "--reset-ms must be >= 0 and --power-period-ms 0 or >= 100");
            }
            neuron::sim::DaemonOptions options;
            options.root = std::filesystem::absolute(f->root).lexically_normal();
            options.spec = *spec;
            options.lnc = *lnc;
            options.node_name = f->node_name;
            options.instance_id = f->instance_id;
            options.ultraserver = f->ultraserver;
            options.driver = *std::move(driver);
            options.reset_duration = std::chrono::milliseconds(f->reset_ms);
            options.power_period = std::chrono::milliseconds(f->power_period_ms);
            return neuron::sim::RunNodeDaemon(std::move(options));
          }};
}

// `ctl printk [--level N] -- TEXT...`: CLI11 would treat the words after "--" as unexpected
// positionals, so main() takes them out before parsing and hands them over here.
std::vector<std::string>& CtlTail() {
  static std::vector<std::string> tail;
  return tail;
}
bool& CtlHasTail() {
  static bool has = false;
  return has;
}

Command AddCtl(CLI::App& app) {
  struct Flags {
    std::string root = "/";
    int timeout_ms = 5000;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* ctl = app.add_subcommand(
      "ctl",
      "control a running simulated node: status, unplug/plug, inject faults, reset, "
      "link-down, efa-down/efa-up");
  AddRootOption(ctl, &f->root);
  ctl->add_option("--timeout-ms", f->timeout_ms, "how long to wait for the daemon")->group("");
  // The command words are parsed by ParseCtlArgs, the same parser the daemon uses.
  ctl->allow_extras();
  ctl->footer(fmt::format("usage: neuron-sim ctl --root DIR COMMAND\n{}", neuron::sim::CtlUsage()));

  return {ctl, [f, ctl]() -> int {
            std::vector<std::string> words = ctl->remaining();
            if (CtlHasTail()) {
              words.emplace_back("--");
              words.insert(words.end(), CtlTail().begin(), CtlTail().end());
            }
            absl::StatusOr<neuron::sim::CtlRequest> req = neuron::sim::ParseCtlArgs(words);
            if (!req.ok()) {
              std::cerr << fmt::format(
                  "neuron-sim ctl: {}\nusage: neuron-sim ctl --root DIR COMMAND\n{}",
                  std::string{req.status().message()}, neuron::sim::CtlUsage());
              return kExitUsage;
            }
            const neuron::RootPaths paths(std::filesystem::absolute(f->root).lexically_normal());
            absl::StatusOr<neuron::sim::CtlReply> reply = neuron::sim::SendCtlRequest(
                paths, *req, std::chrono::milliseconds(std::max(f->timeout_ms, 1)));
            if (!reply.ok()) {
              std::cerr << fmt::format("neuron-sim ctl: {}\n",
                                       std::string{reply.status().message()});
              return kExitFailure;
            }
            if (reply->outcome == neuron::sim::CtlOutcome::kOk) {
              std::cout << reply->payload << std::flush;
            } else {
              std::cerr << fmt::format("neuron-sim ctl: {}\n{}", reply->message, reply->payload);
            }
            return neuron::sim::CtlExitCode(reply->outcome);
          }};
}

Command AddExec(CLI::App& app) {
  auto root = std::make_shared<std::string>("/");
  CLI::App* exec = app.add_subcommand(
      "exec",
      "run CMD with the simulated driver's device node: ROOT/dev/neuronN (and /dev/neuronN for "
      "a pod's runtime) answer open, ioctl and mmap as the Neuron driver does");
  AddRootOption(exec, root.get());
  exec->footer("usage: neuron-sim exec --root DIR -- CMD [ARGS...]");
  return {exec, [root]() -> int {
            if (!CtlHasTail() || CtlTail().empty()) return Usage("exec", "nothing to run after --");
            const neuron::RootPaths paths(std::filesystem::absolute(*root).lexically_normal());
            const absl::Status s = neuron::sim::ExecUnderSimDriver(paths, CtlTail());
            std::cerr << fmt::format("neuron-sim exec: {}\n", std::string{s.message()});
            return absl::IsNotFound(s) ? 127 : kExitFailure;
          }};
}

void AddKubeletDirOption(CLI::App* cmd, std::string* dir) {
  cmd->add_option("--kubelet-dir", *dir,
                  "the kubelet's directory (device-plugins/, pod-resources/)");
}

Command AddKubelet(CLI::App& app) {
  struct Flags {
    std::string root = "/";
    std::string kubelet_dir = "/var/lib/kubelet";
    int dial_timeout_ms = 10'000;
    int grace_period_ms = 300'000;
    bool no_preferred = false;
    uint64_t seed = 0;
    std::string cdi_dir = "/var/run/cdi";
  };
  auto f = std::make_shared<Flags>();
  CLI::App* kubelet = app.add_subcommand(
      "kubelet",
      "run the kubelet emulator (device-plugin registration, admission, PodResources) until "
      "SIGTERM/SIGINT; `restart` and `status` talk to a running one");
  AddRootOption(kubelet, &f->root);
  AddKubeletDirOption(kubelet, &f->kubelet_dir);
  kubelet->add_option("--cdi-dir", f->cdi_dir,
                      "where the container runtime reads CDI specs for claims (/var/run/cdi)");
  // Knobs for tests and comparisons, outside the contract: hidden.
  kubelet->add_option("--dial-timeout-ms", f->dial_timeout_ms, "Register's dial-back timeout")
      ->group("");
  kubelet->add_option("--grace-period-ms", f->grace_period_ms, "endpointStopGracePeriod")
      ->group("");
  kubelet
      ->add_flag("--no-preferred-allocation", f->no_preferred,
                 "never call GetPreferredAllocation (the kubelet's own choice)")
      ->group("");
  kubelet->add_option("--seed", f->seed, "seed of the kubelet's random choices")->group("");
  kubelet->require_subcommand(0, 1);
  CLI::App* restart = kubelet->add_subcommand(
      "restart", "simulate a kubelet restart: sockets deleted, checkpoint read, kubelet.sock anew");
  CLI::App* status =
      kubelet->add_subcommand("status", "resources: capacity, allocatable, in use, endpoint");
  restart->fallthrough();
  status->fallthrough();

  return {kubelet, [f, restart, status]() -> int {
            if (restart->parsed()) {
              return neuron::sim::KubeletRestartCommand(f->kubelet_dir, std::cout, std::cerr);
            }
            if (status->parsed()) {
              return neuron::sim::KubeletStatusCommand(f->kubelet_dir, std::cout, std::cerr);
            }
            if (f->dial_timeout_ms <= 0 || f->grace_period_ms < 0) {
              return Usage("kubelet", "--dial-timeout-ms must be > 0, --grace-period-ms >= 0");
            }
            neuron::sim::KubeletEmulator::Options options;
            options.kubelet_dir = std::filesystem::absolute(f->kubelet_dir).lexically_normal();
            options.root = std::filesystem::absolute(f->root).lexically_normal();
            options.dial_timeout = std::chrono::milliseconds(f->dial_timeout_ms);
            options.grace_period = std::chrono::milliseconds(f->grace_period_ms);
            options.use_preferred_allocation = !f->no_preferred;
            options.seed = f->seed;
            options.cdi_dir = f->cdi_dir;
            return neuron::sim::RunKubelet(options);
          }};
}

struct PodFlags {
  std::string kubelet_dir = "/var/lib/kubelet";
  std::string name;
  std::string namespace_name = "default";
  std::string container = "main";
  std::vector<std::string> requests;
  std::vector<std::string> claims;
  std::string claim_driver = "neuron.aws.com";
  int grace_period = 30;
};

// `pod run`: its flags checked and turned into PodRunArgs, then the command.
int PodRun(const PodFlags& f) {
  neuron::sim::PodRunArgs args;
  args.kubelet_dir = f.kubelet_dir;
  args.namespace_name = f.namespace_name;
  args.name = f.name;
  args.container = f.container;
  args.grace_period_seconds = f.grace_period;
  if (CtlHasTail()) args.command = CtlTail();
  if (CtlHasTail() && args.command.empty()) return Usage("pod run", "nothing to run after --");
  for (const std::string& r : f.requests) {
    const size_t eq = r.rfind('=');
    int count = -1;
    if (eq != std::string::npos) {
      const char* end = r.data() + r.size();
      auto [ptr, ec] = std::from_chars(r.data() + eq + 1, end, count);
      if (ec != std::errc() || ptr != end) count = -1;
    }
    if (eq == std::string::npos || eq == 0 || count < 0) {
      return Usage("pod run", fmt::format("--request {}: expected RES=N", r));
    }
    args.requests[r.substr(0, eq)] += count;
  }
  for (const std::string& c : f.claims) {
    absl::StatusOr<neuron::sim::ClaimRef> claim = neuron::sim::ParseClaimArg(c, f.claim_driver);
    if (!claim.ok()) return Usage("pod run", std::string{claim.status().message()});
    args.claims.push_back(*std::move(claim));
  }
  return neuron::sim::PodRunCommand(args, std::cout, std::cerr);
}

Command AddPod(CLI::App& app) {
  auto f = std::make_shared<PodFlags>();
  CLI::App* pod = app.add_subcommand(
      "pod", "admit (run), delete and list pods through a running kubelet emulator");
  AddKubeletDirOption(pod, &f->kubelet_dir);
  pod->require_subcommand(1);
  CLI::App* run = pod->add_subcommand(
      "run",
      "admit a pod and print its allocation; with -- CMD, run CMD with the pod's environment in "
      "a process group of its own, delete the pod when it ends or on SIGTERM/SIGINT, and exit "
      "with its code (128+signal if killed)");
  CLI::App* del = pod->add_subcommand(
      "delete",
      "delete a pod: SIGTERM to its command's process group, SIGKILL after the grace period, "
      "then its devices are freed");
  CLI::App* list = pod->add_subcommand("list", "one line per pod, container and resource");
  for (CLI::App* sub : {run, del}) {
    sub->add_option("--name", f->name, "pod name")->required();
    sub->add_option("--namespace", f->namespace_name, "pod namespace (default)");
    sub->add_option("--grace-period", f->grace_period,
                    "seconds between SIGTERM and SIGKILL when the pod is stopped (30)");
  }
  run->add_option("--request", f->requests, "RES=N, e.g. aws.amazon.com/neuroncore=2 (repeatable)");
  run->add_option("--container", f->container, "container name (main)");
  run->add_option("--claim", f->claims,
                  "NAMESPACE/NAME:UID of a ResourceClaim the pod uses, prepared by its DRA driver "
                  "before CMD starts (repeatable)");
  run->add_option("--claim-driver", f->claim_driver,
                  "the DRA driver of the claims (neuron.aws.com)");
  // `-- CMD [ARGS...]` is taken out of argv by main() before parsing, as for ctl printk.
  run->footer(
      "usage: neuron-sim pod run --kubelet-dir DIR --name NAME [--request RES=N ...] "
      "[--claim NAMESPACE/NAME:UID ... [--claim-driver DRIVER]] [-- CMD [ARGS...]]");
  for (CLI::App* sub : {run, del, list}) sub->fallthrough();

  return {pod, [f, run, del]() -> int {
            if (f->grace_period < 0) return Usage("pod", "--grace-period must be >= 0");
            if (run->parsed()) return PodRun(*f);
            if (del->parsed()) {
              return neuron::sim::PodDeleteCommand(f->kubelet_dir, f->namespace_name, f->name,
                                                   f->grace_period, std::cout, std::cerr);
            }
            return neuron::sim::PodListCommand(f->kubelet_dir, std::cout, std::cerr);
          }};
}

int Main(int argc, char** argv) {
  // Replies go to clients that may have gone; a write must fail with EPIPE, not kill the node.
  signal(SIGPIPE, SIG_IGN);
  CLI::App app{
      "neuron-sim: a simulated AWS Neuron node: its driver, devices, faults, runtime and kubelet"};
  app.require_subcommand(1);
  app.set_version_flag("--version", neuron::VersionLine("neuron-sim"),
                       "print the version, revision, build date and compiler, then exit");
  app.footer(
      "Examples:\n"
      "  neuron-sim up --instance trn1.32xlarge --root /tmp/node\n"
      "  neuron-sim exec --root /tmp/node -- neuron-ls --root /tmp/node --wide");
  const std::vector<Command> commands{AddUp(app),
                                      AddCtl(app),
                                      neuron::sim::AddRunCommand(app),
                                      AddExec(app),
                                      AddKubelet(app),
                                      AddPod(app),
                                      neuron::sim::AddPredictCommand(app),
                                      neuron::sim::AddClusterCommand(app),
                                      neuron::sim::AddJobCommand(app),
                                      neuron::sim::AddApiServerCommand(app),
                                      neuron::sim::AddScheduleCommand(app)};
  // `ctl printk -- TEXT`, `pod run -- CMD` and `exec -- CMD`: the words after "--" are not for
  // CLI11.
  const std::string_view first = argc > 1 ? argv[1] : "";
  if (first == "ctl" || first == "pod" || first == "exec") {
    for (int i = 2; i < argc; ++i) {
      if (std::string_view(argv[i]) != "--") continue;
      CtlHasTail() = true;
      CtlTail().assign(argv + i + 1, argv + argc);
      argc = i;
      break;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : kExitUsage;
  }
  for (const auto& [cmd, run] : commands) {
    if (cmd->parsed()) return run();
  }
  return kExitUsage;
}

}  // namespace

// What nothing below handled (a std::bad_alloc, a filesystem error) ends the command with one
// line and status 1 rather than std::terminate's abort.
int main(int argc, char** argv) {
  try {
    return Main(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "neuron-sim: " << e.what() << "\n";
    return 1;
  }
}
