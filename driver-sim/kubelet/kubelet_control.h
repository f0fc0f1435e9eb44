#pragma once
// The command lines over the kubelet emulator (docs/architecture.md#command-line-contracts):
//   neuron-sim kubelet --root DIR --kubelet-dir DIR      RunKubelet
//   neuron-sim kubelet restart|status --kubelet-dir DIR  Kubelet{Restart,Status}Command
//   neuron-sim pod run|delete|list ...                   Pod{Run,Delete,List}Command
// The commands talk to a running emulator over KUBELET_DIR/neuron-sim-kubelet.sock (control.proto).
// Each returns the process exit code: 0 success, 1 failure
// (docs/architecture.md#readiness-and-lifecycle).

#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "driver-sim/kubelet/kubelet_emulator.h"

namespace neuron::sim {

std::string KubeletControlSocket(const std::string& kubelet_dir);

// Serves until SIGTERM or SIGINT, then removes its sockets. The caller must not have started
// threads yet: the signals are blocked process-wide and taken with sigwait.
int RunKubelet(const KubeletEmulator::Options& options);

int KubeletRestartCommand(const std::string& kubelet_dir, std::ostream& out, std::ostream& err);
int KubeletStatusCommand(const std::string& kubelet_dir, std::ostream& out, std::ostream& err);

struct PodRunArgs {
  std::string kubelet_dir;
  std::string namespace_name = "default";
  std::string name;
  std::string container = "main";
  std::map<std::string, int> requests;
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

}  // namespace neuron::sim
