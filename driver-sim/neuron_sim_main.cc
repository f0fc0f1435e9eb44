// neuron-sim: the simulated Neuron node. Subcommands (DESIGN "Command-line contracts"):
//   up   the node daemon (the simulated driver)
//   ctl  talk to a running daemon: status and fault injection
//   run  run a workload on the node through libnrt-sim
// Exit codes: 0 success, 1 failure, 2 usage (DESIGN decision 5).

#include <fmt/format.h>
#include <signal.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "core/catalog.h"
#include "core/sysfs_names.h"
#include "driver-sim/ctl.h"
#include "driver-sim/daemon.h"
#include "driver-sim/workloads/workload.h"

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

Command AddUp(CLI::App& app) {
  struct Flags {
    std::string root = "/";
    std::string instance;
    int lnc = 0;
    std::string node_name;
    std::string instance_id;
    int reset_ms = 300;
    int power_period_ms = 0;
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
  // Accelerated clocks for tests (deviation D11), outside the contract: hidden.
  up->add_option("--reset-ms", f->reset_ms, "device reset duration")->group("");
  up->add_option("--power-period-ms", f->power_period_ms, "power rollup period; 0 = minute")
      ->group("");

  return {up, [f]() -> int {
            absl::StatusOr<const neuron::InstanceSpec*> spec = neuron::FindInstance(f->instance);
            if (!spec.ok()) return Usage("up", std::string(spec.status().message()));
            absl::StatusOr<int> lnc = neuron::ResolveLnc(**spec, f->lnc);
            if (!lnc.ok()) return Usage("up", std::string(lnc.status().message()));
            if (f->root.empty() || std::filesystem::path(f->root).lexically_normal() == "/") {
              return Usage("up",
                           "refusing to simulate a node at / (it would write /sys and /dev); give "
                           "--root DIR or NEURON_ROOT");
            }
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
                  std::string(req.status().message()), neuron::sim::CtlUsage());
              return kExitUsage;
            }
            const neuron::RootPaths paths(std::filesystem::absolute(f->root).lexically_normal());
            absl::StatusOr<neuron::sim::CtlReply> reply = neuron::sim::SendCtlRequest(
                paths, *req, std::chrono::milliseconds(std::max(f->timeout_ms, 1)));
            if (!reply.ok()) {
              std::cerr << fmt::format("neuron-sim ctl: {}\n",
                                       std::string(reply.status().message()));
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

Command AddRun(CLI::App& app) {
  struct Flags {
    std::string root = "/";
    neuron::workloads::WorkloadOptions w;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* run = app.add_subcommand(
      "run",
      "run a workload on the simulated node through libnrt-sim, on every core the process is "
      "given (NEURON_RT_VISIBLE_CORES / NEURON_RT_NUM_CORES); SIGTERM or SIGINT stops it cleanly");
  AddRootOption(run, &f->root);
  run->add_option("--workload", f->w.name,
                  fmt::format("workload: {}", fmt::join(neuron::workloads::WorkloadNames(), ", ")))
      ->required();
  run->add_option("--steps", f->w.steps, "steps to run; 0 (default) runs until SIGTERM/SIGINT");
  run->add_option("--micro-steps", f->w.micro_steps,
                  "llama2-7b: accumulation micro-steps per optimizer step (32)");
  run->add_option("--seq", f->w.seq, "sequence length (llama2-7b 4096, bert-large 128)");
  run->add_option("--tp", f->w.tp, "llama2-7b: tensor-parallel group size (8)");
  run->add_option("--nodes", f->w.nodes,
                  "llama2-7b: nodes in the data-parallel job, the others modelled (2)");
  run->add_option("--scale", f->w.scale,
                  "multiply every op's work and the training workloads' memory (1.0)");
  run->add_option("--batch", f->w.batch, "bert-large: micro-batch per core (16)");
  run->add_option("--accum", f->w.accum, "bert-large: micro-steps per optimizer step (32)");
  run->add_option("--kernels", f->w.kernels,
                  "matmul, empty: executions per core per step (10, 1000)");
  run->add_flag("--estimate", f->w.estimate,
                "load the models, print the timing model's prediction for one step, and exit");
  run->footer(neuron::workloads::WorkloadHelp());

  return {run, [f]() -> int {
            const std::filesystem::path root =
                std::filesystem::absolute(f->root).lexically_normal();
            // The runtime finds the node through NEURON_ROOT (driver-sim/README.md, libnrt-sim).
            setenv("NEURON_ROOT", root.c_str(), 1);
            return neuron::workloads::RunWorkload(f->w, stdout, stderr);
          }};
}

}  // namespace

int main(int argc, char** argv) {
  // Replies go to clients that may have gone; a write must fail with EPIPE, not kill the node.
  signal(SIGPIPE, SIG_IGN);
  CLI::App app{
      "neuron-sim: a simulated AWS Neuron node (driver, faults; see driver-sim/README.md)"};
  app.require_subcommand(1);
  const std::vector<Command> commands{AddUp(app), AddCtl(app), AddRun(app)};
  if (argc > 1 && std::string_view(argv[1]) == "ctl") {
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
