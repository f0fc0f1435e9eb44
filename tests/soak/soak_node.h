#pragma once
// The soak's node: a simulated node (tests/support/sim_node.h: `neuron-sim up`, trn1.32xlarge),
// the kubelet emulator in-process, the real neuron-device-plugin and neuron-exporter, and a real
// Prometheus scraping both, all on real sockets under one temporary directory. Start() brings
// everything up and waits until the plugin registered every resource with its full count; Stop()
// sends SIGTERM to each and keeps the exit codes. Liveness is polled by one thread (Poll); the
// rest is thread-safe to call from any thread (the emulator is, the pids do not change after
// Start, and the simulated node is reached only under the lock of the Child records).

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/driver/sysfs_names.h"
#include "core/model/topology.h"
#include "driver-sim/kubelet/kubelet_emulator.h"
#include "tests/support/sim_node.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace neuron::soak {

namespace fs = std::filesystem;

inline const std::string kNeuron = "aws.amazon.com/neuron";
inline const std::string kCore = "aws.amazon.com/neuroncore";
inline const std::string kEfa = "vpc.amazonaws.com/efa";

using neuron::testing::ProcessUsage;
using neuron::testing::QuietUsage;
using neuron::testing::ReadUsage;

// One child process the soak started.
struct Child {
  std::string name;
  pid_t pid = -1;
  std::optional<int> exit_code;  // set when it ended (crash during the run, or Stop)
  bool stopped_by_us = false;
};

class SoakNode {
 public:
  struct Options {
    std::string instance = "trn1.32xlarge";
    fs::path logs;  // where the children's stdout/stderr go; empty: inside the temp dir
    uint64_t seed = 1;
    int scrape_interval_s = 1;
  };

  explicit SoakNode(Options options);
  ~SoakNode();

  absl::Status Start();
  // SIGTERM to Prometheus, exporter, plugin, then the emulator goes, then the sim daemon.
  void Stop();

  // Checks whether any child ended; returns the names of those that ended since the last call.
  std::vector<std::string> Poll();
  std::vector<Child> children() const;

  sim::KubeletEmulator& kubelet() { return *kubelet_; }
  const RootPaths& paths() const { return paths_; }
  const fs::path& root() const { return root_; }
  const fs::path& logs() const { return logs_; }
  // The copy of neuron-sim this soak runs (taken at Start).
  const fs::path& sim_bin() const { return sim_bin_; }
  pid_t plugin_pid() const { return plugin_.pid; }
  pid_t exporter_pid() const { return exporter_.pid; }
  pid_t sim_pid() const { return sim_.pid; }
  int plugin_port() const { return plugin_port_; }
  int exporter_port() const { return exporter_port_; }
  int prometheus_port() const { return prom_port_; }

  int devices() const { return devices_; }
  int cores_per_device() const { return cores_per_device_; }
  int cores() const { return devices_ * cores_per_device_; }
  const std::vector<std::string>& efa_names() const { return efa_names_; }
  const Topology& topology() const { return topology_; }

  // True when every resource is connected with its full capacity (registration complete).
  bool Registered() const;

  // Prometheus instant query with exactly one sample: its value; nullopt otherwise.
  std::optional<double> PromScalar(const std::string& promql) const;

  std::string Tail(const std::string& file, size_t bytes = 3000) const;

 private:
  absl::Status CopyBinaries();
  absl::Status StartPlugin();
  absl::Status StartExporter();
  absl::Status StartPrometheus();
  void StopChild(Child& c, std::chrono::seconds ceiling);

  Options options_;
  neuron::testing::TempDir dir_{"soak"};
  fs::path root_, kubelet_dir_, logs_;
  fs::path sim_bin_, plugin_bin_, exporter_bin_;
  RootPaths paths_{""};
  std::unique_ptr<neuron::testing::SimNode> sim_node_;  // sim_ is its daemon
  std::unique_ptr<sim::KubeletEmulator> kubelet_;
  mutable std::mutex mu_;  // guards the Child records
  Child sim_, plugin_, exporter_, prom_;
  int plugin_port_ = 0, exporter_port_ = 0, prom_port_ = 0;
  int devices_ = 0, cores_per_device_ = 0;
  std::vector<std::string> efa_names_;
  Topology topology_;
};

}  // namespace neuron::soak
