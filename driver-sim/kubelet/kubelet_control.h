#pragma once
// The command lines over the kubelet emulator (docs/architecture.md#command-line-contracts):
//   neuron-sim kubelet --root DIR --kubelet-dir DIR      RunKubelet
//   neuron-sim kubelet restart|status --kubelet-dir DIR  Kubelet{Restart,Status}Command
//   neuron-sim pod run|delete|list ...                   Pod{Run,Delete,List}Command
// The commands talk to a running emulator over KUBELET_DIR/neuron-sim-kubelet.sock (control.proto).
// Each returns the process exit code: 0 success, 1 failure
// (docs/architecture.md#readiness-and-lifecycle).

#include <map>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "driver-sim/kubelet/kubelet_emulator.h"

namespace neuron::sim {

std::string KubeletControlSocket(const std::string& kubelet_dir);

// Serves until SIGTERM or SIGINT, then removes its sockets. The caller must not have started
// threads yet: the signals are blocked process-wide and taken with sigwait.
int RunKubelet(const KubeletEmulator::Options& options);

int KubeletRestartCommand(const std::string& kubelet_dir, std::ostream& out, std::ostream& err);
int KubeletStatusCommand(const std::string& kubelet_dir, std::ostream& out, std::ostream& err);
// The emulator's resources as `kubelet status` lists them (name, endpoint, connected, capacity,
// allocatable, in_use); the RPC's error (Unavailable when no emulator answers on kubelet_dir).
absl::StatusOr<std::vector<ResourceState>> KubeletResources(const std::string& kubelet_dir);

struct PodRunArgs {
  std::string kubelet_dir;
  std::string namespace_name = "default";
  std::string name;
  std::string container = "main";
  std::map<std::string, int> requests;
  // ResourceClaims the pod uses (`--claim NAMESPACE/NAME:UID`, `--claim-driver`): prepared by
  // their driver before CMD starts, their CDI devices applied to its environment and devices.
  std::vector<ClaimRef> claims;
  // `--extended-resource-claim`: the scheduler's claim for the requests of `extended_resources`
  // (extended resources backed by DRA, KEP-5004), prepared like `claims`.
  std::optional<ClaimRef> extended_resource_claim = std::nullopt;
  std::set<std::string> extended_resources = {};
  std::vector<std::string> command;  // empty: admit and leave the pod running
  int grace_period_seconds = 30;     // for stopping the command (PodDeleteCommand)
};

// Admits the pod and prints its allocation (`RES id...` lines, then `KEY=VALUE` env lines;
// on stdout without a command, on stderr with one so that the command's stdout stays its own).
// With a command: runs it under the simulated driver (`neuron-sim exec --root NEURON_ROOT --
// CMD...`, this binary, docs/architecture.md#device-abi) with the pod's envs added to ours, in a
// process group of its own that it hands to the emulator. When CMD ends, or on SIGTERM/SIGINT,
// it deletes the pod (the emulator stops the group, see PodDeleteCommand) and returns CMD's exit
// code, as a container's: 128 + signal if killed (143 after SIGTERM, 137 after SIGKILL).
int PodRunCommand(const PodRunArgs& args, std::ostream& out, std::ostream& err);
// Deletes the pod as the kubelet does: SIGTERM to the process group of its command, SIGKILL
// after `grace_period_seconds`, its devices freed once no process of the group is left; returns
// then.
int PodDeleteCommand(const std::string& kubelet_dir, const std::string& namespace_name,
                     const std::string& name, int grace_period_seconds, std::ostream& out,
                     std::ostream& err);
int PodListCommand(const std::string& kubelet_dir, std::ostream& out, std::ostream& err);
// Prints the pod's status as JSON in the Kubernetes API's shape ({"apiVersion": "v1", "kind":
// "Pod", "metadata", "status": {"containerStatuses": [{"name", "allocatedResourcesStatus"}]}}),
// built when asked, as the kubelet builds it on a pod sync; 1 when there is no such pod.
int PodStatusCommand(const std::string& kubelet_dir, const std::string& namespace_name,
                     const std::string& name, std::ostream& out, std::ostream& err);
// `--claim NAMESPACE/NAME:UID` of `pod run`, whose results are of `drivers`: InvalidArgument
// naming the expected form.
absl::StatusOr<ClaimRef> ParseClaimArg(std::string_view arg,
                                       const std::vector<std::string>& drivers);

// ---- The pieces of `pod run`, for commands that run pods of their own (`neuron-sim job`) ----

// One container's allocation: resource -> IDs, and the envs (NEURON_ROOT among them).
struct PodAllocation {
  std::map<std::string, std::vector<std::string>> ids;
  std::map<std::string, std::string> envs;
};
// Admits the pod `args` describes (one container, args.requests) without running anything.
// The error carries the kubelet's own message: FailedPrecondition for "Insufficient ..." and the
// device plugin's refusals, AlreadyExists for a name in use, Unavailable when no emulator
// answers on args.kubelet_dir.
absl::StatusOr<PodAllocation> AdmitPod(const PodRunArgs& args);
// The allocation of container args.container of an admitted pod; NotFound when there is none.
absl::StatusOr<PodAllocation> FindPod(const PodRunArgs& args);
// Deletes the pod as PodDeleteCommand does; a pod already gone is success.
absl::Status DeletePod(const std::string& kubelet_dir, const std::string& namespace_name,
                       const std::string& name, int grace_period_seconds);
// `pod run`'s command part for a pod admitted earlier (AdmitPod): runs args.command with the
// pod's envs added to ours, supervised and stopped exactly as PodRunCommand's is, deletes the
// pod when it ends or on SIGTERM/SIGINT, and returns its exit code (1 when the pod is unknown).
// Blocks SIGTERM, SIGINT, SIGCHLD and SIGUSR1 for good and makes this process a child subreaper:
// call it from a process of its own (`neuron-sim job attach`) that has no threads yet.
int RunInAdmittedPod(const PodRunArgs& args, std::ostream& err);

}  // namespace neuron::sim
