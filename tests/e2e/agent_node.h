#pragma once
// One simulated Kubernetes node for end-to-end tests: a simulated node (tests/support/sim_node.h:
// `neuron-sim up`, the driver), the kubelet emulator in-process, and the real
// neuron-device-plugin binary between them, all on real sockets in a temporary directory.
// Thread-compatible (one test owns it).

#include <gtest/gtest.h>
#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "driver-sim/kubelet/kubelet_emulator.h"
#include "tests/support/process.h"
#include "tests/support/sim_node.h"
#include "tests/support/temp_dir.h"

namespace neuron::e2e {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using neuron::testing::ListeningPort;
using neuron::testing::ProcessUsage;
using neuron::testing::ReadUsage;

class AgentNode {
 public:
  struct Options {
    std::string instance = "trn1.32xlarge";
    std::vector<std::string> sim_args = {};     // extra `neuron-sim up` arguments (--lnc 1)
    std::vector<std::string> plugin_args = {};  // extra neuron-device-plugin arguments
    bool start_plugin = true;
  };
  explicit AgentNode(Options options);
  ~AgentNode();

  // Starts the plugin (if not yet) and waits until every resource it should serve has
  // registered with its full count. Fails the test on timeout.
  void StartPlugin(const std::vector<std::string>& extra_args = {});
  void StopPlugin();  // SIGTERM; expects exit 0

  sim::KubeletEmulator& kubelet() { return *kubelet_; }
  // The simulated node under the plugin: its daemon, and programs run under its driver
  // (sim().UnderDriver(argv)): the agent reads live per-process data only through that device
  // ABI (docs/architecture.md#device-abi), so an exporter that must see a workload starts so.
  neuron::testing::SimNode& sim() { return *sim_; }
  const neuron::testing::SimNode& sim() const { return *sim_; }
  pid_t plugin_pid() const { return plugin_pid_; }
  const fs::path& root() const { return root_; }
  const fs::path& kubelet_dir() const { return kubelet_dir_; }
  std::string PluginLog() const;
  // The port of the plugin's /healthz, /readyz and /metrics ("listening on port N"); 0 if unknown.
  int PluginHttpPort() const;

  // `neuron-sim ctl --root ROOT args...`; fails the test unless it exits 0.
  void Ctl(const std::vector<std::string>& args);

  // Polls the emulator's view of `resource` until `pred` holds (generous ceiling).
  bool WaitForResource(const std::string& resource,
                       const std::function<bool(const sim::ResourceState&)>& pred,
                       std::chrono::milliseconds ceiling = 30s);
  // Health of one ID as the kubelet last heard it; nullopt when not listed.
  std::optional<bool> Healthy(const std::string& resource, const std::string& id);

  // Expected counts from the catalog for this node.
  int devices() const { return devices_; }
  int cores() const { return cores_; }
  int efas() const { return efas_; }
  std::vector<std::string> efa_names() const { return efa_names_; }

 private:
  Options options_;
  neuron::testing::TempDir dir_{"e2e"};
  fs::path root_, kubelet_dir_, logs_;
  std::unique_ptr<neuron::testing::SimNode> sim_;
  std::unique_ptr<sim::KubeletEmulator> kubelet_;
  pid_t plugin_pid_ = -1;
  int devices_ = 0, cores_ = 0, efas_ = 0;
  std::vector<std::string> efa_names_;
};

// Resource names (docs/architecture.md#device-ids).
inline const std::string kNeuron = "aws.amazon.com/neuron";
inline const std::string kCore = "aws.amazon.com/neuroncore";
inline const std::string kEfa = "vpc.amazonaws.com/efa";

// Integer IDs of a container's allocation of `resource`, sorted.
std::vector<int> Ids(const sim::AdmittedPod& pod, const std::string& resource);

}  // namespace neuron::e2e
