// `neuron-sim kubelet` and `neuron-sim pod`: their flags checked, then kubelet_control.h.

#include "driver-sim/kubelet/kubelet_command.h"

#include <fmt/format.h>

#include <charconv>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "driver-sim/kubelet/kubelet_control.h"

namespace neuron::sim {
namespace {

void AddKubeletDirOption(CLI::App* cmd, std::string* dir) {
  cmd->add_option("--kubelet-dir", *dir,
                  "the kubelet's directory (device-plugins/, pod-resources/)");
}

struct KubeletFlags {
  std::string root = "/";
  std::string kubelet_dir = "/var/lib/kubelet";
  int dial_timeout_ms = 10'000;
  int grace_period_ms = 300'000;
  bool no_preferred = false;
  uint64_t seed = 0;
  std::string cdi_dir = "/var/run/cdi";
  int dra_health_timeout_ms = 30'000;
};

void AddKubeletOptions(CLI::App* kubelet, KubeletFlags* f) {
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
  kubelet
      ->add_option("--dra-health-timeout-ms", f->dra_health_timeout_ms,
                   "DefaultHealthTimeout: a DRA device's health without news turns Unknown")
      ->group("");
}

int RunKubeletEmulator(const KubeletFlags& f) {
  if (f.dial_timeout_ms <= 0 || f.grace_period_ms < 0 || f.dra_health_timeout_ms <= 0) {
    return UsageError("kubelet",
                      "--dial-timeout-ms and --dra-health-timeout-ms must be > 0, "
                      "--grace-period-ms >= 0");
  }
  KubeletEmulator::Options options;
  options.kubelet_dir = std::filesystem::absolute(f.kubelet_dir).lexically_normal();
  options.root = std::filesystem::absolute(f.root).lexically_normal();
  options.dial_timeout = std::chrono::milliseconds(f.dial_timeout_ms);
  options.grace_period = std::chrono::milliseconds(f.grace_period_ms);
  options.use_preferred_allocation = !f.no_preferred;
  options.seed = f.seed;
  options.cdi_dir = f.cdi_dir;
  options.dra_health_timeout = std::chrono::milliseconds(f.dra_health_timeout_ms);
  return RunKubelet(options);
}

struct PodFlags {
  std::string kubelet_dir = "/var/lib/kubelet";
  std::string name;
  std::string namespace_name = "default";
  std::string container = "main";
  std::vector<std::string> requests;
  std::vector<std::string> claims;
  std::vector<std::string> claim_drivers;
  std::string extended_resource_claim;
  std::vector<std::string> extended_resources;
  int grace_period = 30;
};

// `pod run`: its flags checked and turned into PodRunArgs, then the command.
int PodRun(const PodFlags& f, const CommandTail& tail) {
  PodRunArgs args;
  args.kubelet_dir = f.kubelet_dir;
  args.namespace_name = f.namespace_name;
  args.name = f.name;
  args.container = f.container;
  args.grace_period_seconds = f.grace_period;
  if (tail.present()) args.command = tail.words();
  if (tail.present() && args.command.empty()) {
    return UsageError("pod run", "nothing to run after --");
  }
  for (const std::string& r : f.requests) {
    const size_t eq = r.rfind('=');
    int count = -1;
    if (eq != std::string::npos) {
      const char* end = r.data() + r.size();
      auto [ptr, ec] = std::from_chars(r.data() + eq + 1, end, count);
      if (ec != std::errc() || ptr != end) count = -1;
    }
    if (eq == std::string::npos || eq == 0 || count < 0) {
      return UsageError("pod run", fmt::format("--request {}: expected RES=N", r));
    }
    args.requests[r.substr(0, eq)] += count;
  }
  const std::vector<std::string> drivers =
      f.claim_drivers.empty() ? std::vector<std::string>{"neuron.aws.com"} : f.claim_drivers;
  for (const std::string& c : f.claims) {
    absl::StatusOr<ClaimRef> claim = ParseClaimArg(c, drivers);
    if (!claim.ok()) return UsageError("pod run", std::string{claim.status().message()});
    args.claims.push_back(*std::move(claim));
  }
  if (!f.extended_resource_claim.empty()) {
    absl::StatusOr<ClaimRef> claim = ParseClaimArg(f.extended_resource_claim, drivers);
    if (!claim.ok()) return UsageError("pod run", std::string{claim.status().message()});
    args.extended_resource_claim = *std::move(claim);
    // Without --extended-resource, every request is the claim's (the scheduler made one only
    // for requests no device plugin of the node serves).
    for (const auto& [resource, count] : args.requests) args.extended_resources.insert(resource);
    if (!f.extended_resources.empty()) {
      args.extended_resources = {f.extended_resources.begin(), f.extended_resources.end()};
    }
  }
  return PodRunCommand(args, std::cout, std::cerr);
}

void AddPodRunOptions(CLI::App* run, PodFlags* f) {
  run->add_option("--request", f->requests, "RES=N, e.g. aws.amazon.com/neuroncore=2 (repeatable)");
  run->add_option("--container", f->container, "container name (main)");
  run->add_option("--claim", f->claims,
                  "NAMESPACE/NAME:UID of a ResourceClaim the pod uses, prepared by its DRA driver "
                  "before CMD starts (repeatable)");
  run->add_option("--claim-driver", f->claim_drivers,
                  "a DRA driver of the claims' allocation results, which prepares its devices "
                  "(repeatable: neuron.aws.com and efa.neuron.aws.com for a claim of both; "
                  "default neuron.aws.com)");
  run->add_option("--extended-resource-claim", f->extended_resource_claim,
                  "NAMESPACE/NAME:UID of the claim `neuron-sim schedule --pod` made for the "
                  "extended resources a DeviceClass maps (KEP-5004): those --requests come from "
                  "it, not from a device plugin");
  run->add_option("--extended-resource", f->extended_resources,
                  "a resource the extended resource claim serves (repeatable; default: every "
                  "--request)");
  // `-- CMD [ARGS...]` is taken out of argv before parsing (CommandTail), as for ctl printk.
  run->footer(
      "usage: neuron-sim pod run --kubelet-dir DIR --name NAME [--request RES=N ...] "
      "[--claim NAMESPACE/NAME:UID ... [--claim-driver DRIVER ...]] [-- CMD [ARGS...]]");
}

}  // namespace

Command AddKubeletCommand(CLI::App& app) {
  auto f = std::make_shared<KubeletFlags>();
  CLI::App* kubelet = app.add_subcommand(
      "kubelet",
      "run the kubelet emulator (device-plugin registration, admission, PodResources) until "
      "SIGTERM/SIGINT; `restart` and `status` talk to a running one");
  AddKubeletOptions(kubelet, f.get());
  kubelet->require_subcommand(0, 1);
  CLI::App* restart = kubelet->add_subcommand(
      "restart", "simulate a kubelet restart: sockets deleted, checkpoint read, kubelet.sock anew");
  CLI::App* status =
      kubelet->add_subcommand("status", "resources: capacity, allocatable, in use, endpoint");
  restart->fallthrough();
  status->fallthrough();
  return {kubelet, [f, restart, status]() -> int {
            if (restart->parsed()) {
              return KubeletRestartCommand(f->kubelet_dir, std::cout, std::cerr);
            }
            if (status->parsed()) {
              return KubeletStatusCommand(f->kubelet_dir, std::cout, std::cerr);
            }
            return RunKubeletEmulator(*f);
          }};
}

Command AddPodCommand(CLI::App& app, CommandTail& tail) {
  auto f = std::make_shared<PodFlags>();
  CLI::App* pod = app.add_subcommand(
      "pod",
      "admit (run), delete, list pods and show their status through a running kubelet emulator");
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
  CLI::App* status = pod->add_subcommand(
      "status",
      "the pod's status as JSON in the Kubernetes API's shape: per container the health of its "
      "claims' devices (allocatedResourcesStatus)");
  for (CLI::App* sub : {run, del, status}) {
    sub->add_option("--name", f->name, "pod name")->required();
    sub->add_option("--namespace", f->namespace_name, "pod namespace (default)");
  }
  for (CLI::App* sub : {run, del}) {
    sub->add_option("--grace-period", f->grace_period,
                    "seconds between SIGTERM and SIGKILL when the pod is stopped (30)");
  }
  AddPodRunOptions(run, f.get());
  for (CLI::App* sub : {run, del, list, status}) sub->fallthrough();
  tail.Accept("pod");
  return {pod, [f, run, del, status, &tail]() -> int {
            if (f->grace_period < 0) return UsageError("pod", "--grace-period must be >= 0");
            if (run->parsed()) return PodRun(*f, tail);
            if (del->parsed()) {
              return PodDeleteCommand(f->kubelet_dir, f->namespace_name, f->name, f->grace_period,
                                      std::cout, std::cerr);
            }
            if (status->parsed()) {
              return PodStatusCommand(f->kubelet_dir, f->namespace_name, f->name, std::cout,
                                      std::cerr);
            }
            return PodListCommand(f->kubelet_dir, std::cout, std::cerr);
          }};
}

}  // namespace neuron::sim
