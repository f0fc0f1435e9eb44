#include "tests/e2e/agent_node.h"

#include <algorithm>
#include <charconv>
#include <fstream>

#include "core/model/catalog.h"
#include "tests/support/process.h"
#include "tests/support/sim_testing.h"

namespace neuron::e2e {

using neuron::testing::ReadFile;
using neuron::testing::Spawn;
using neuron::testing::Stop;
using neuron::testing::WaitUntil;

AgentNode::AgentNode(Options options) : options_(std::move(options)) {
  root_ = dir_.path() / "root";
  kubelet_dir_ = dir_.path() / "kubelet";
  logs_ = dir_.path() / "logs";
  fs::create_directories(root_);
  fs::create_directories(logs_);

  const InstanceSpec* spec = *FindInstance(options_.instance);
  int lnc = 0;
  for (size_t i = 0; i + 1 < options_.sim_args.size(); ++i) {
    if (options_.sim_args[i] == "--lnc") lnc = std::stoi(options_.sim_args[i + 1]);
  }
  devices_ = spec->devices;
  cores_ = spec->devices * LogicalCoresPerDevice(*spec, *ResolveLnc(*spec, lnc));
  efas_ = spec->efa_count;
  for (const EfaPlacement& e : spec->efas) efa_names_.push_back(e.name);

  sim_ = std::make_unique<neuron::testing::SimNode>(
      neuron::testing::SimNodeOptions{.sim_bin = NEURON_SIM_BIN,
                                      .root = root_,
                                      .logs = logs_,
                                      .on_stop = neuron::testing::ExpectCleanExit});
  EXPECT_TRUE(sim_->Up(options_.instance, options_.sim_args)) << sim_->Log();
  absl::StatusOr<std::unique_ptr<sim::KubeletEmulator>> kubelet =
      sim::KubeletEmulator::Start({.kubelet_dir = kubelet_dir_.string(),
                                   .root = root_.string(),
                                   .rpc_deadline = std::chrono::milliseconds(30s)});
  if (!kubelet.ok()) {
    ADD_FAILURE() << "kubelet emulator: " << kubelet.status();
    return;
  }
  kubelet_ = *std::move(kubelet);
  if (options_.start_plugin) StartPlugin(options_.plugin_args);
}

AgentNode::~AgentNode() {
  StopPlugin();
  kubelet_.reset();
  sim_.reset();
}

void AgentNode::StartPlugin(const std::vector<std::string>& extra_args) {
  if (plugin_pid_ > 0 || kubelet_ == nullptr) return;
  std::vector<std::string> argv{NEURON_PLUGIN_BIN,     "--root",   root_.string(), "--kubelet-dir",
                                kubelet_dir_.string(), "--listen", "127.0.0.1:0"};
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  // Tests admit and delete pods within milliseconds, faster than any real pod lives: the
  // plugin polls PodResources often and lets an allocation it never saw there go after 2 s
  // (defaults 1 s and 30 s), so releases show up within the tests' ceilings.
  const fs::path config = dir_.path() / "plugin.yaml";
  neuron::testing::WriteFile(config, "podresources_period: 200ms\nallocation_grace: 2s\n");
  // A small ASan quarantine: freed memory held back by the sanitizer is not a leak of ours.
  // Under the simulated driver, as on a real node: PCI addresses (so NUMA) come from its ioctl.
  plugin_pid_ = Spawn(
      sim_->UnderDriver(argv), logs_ / "plugin.out", logs_ / "plugin.err",
      {"ASAN_OPTIONS=quarantine_size_mb=4:detect_leaks=1", "NEURON_DP_CONFIG=" + config.string()});
  const bool up = WaitForResource(
      kNeuron, [&](const sim::ResourceState& r) { return r.capacity == devices_; }, 60s);
  ASSERT_TRUE(up) << "the plugin did not register " << kNeuron << ":\n" << PluginLog();
  ASSERT_TRUE(WaitForResource(
      kCore, [&](const sim::ResourceState& r) { return r.capacity == cores_; }, 60s))
      << PluginLog();
  if (efas_ > 0) {
    ASSERT_TRUE(WaitForResource(
        kEfa, [&](const sim::ResourceState& r) { return r.capacity == efas_; }, 60s))
        << PluginLog();
  }
}

void AgentNode::StopPlugin() {
  if (plugin_pid_ <= 0) return;
  const std::optional<int> code = Stop(plugin_pid_, 30s);
  EXPECT_EQ(code, 0) << "neuron-device-plugin did not stop cleanly:\n" << PluginLog();
  plugin_pid_ = -1;
}

std::string AgentNode::PluginLog() const { return ReadFile(logs_ / "plugin.err"); }

int AgentNode::PluginHttpPort() const {
  return ListeningPort(ReadFile(logs_ / "plugin.out") + ReadFile(logs_ / "plugin.err"));
}

void AgentNode::Ctl(const std::vector<std::string>& args) {
  const neuron::testing::RunResult r = sim_->Ctl(args);
  ASSERT_EQ(r.code, 0) << r.err;
}

bool AgentNode::WaitForResource(const std::string& resource,
                                const std::function<bool(const sim::ResourceState&)>& pred,
                                std::chrono::milliseconds ceiling) {
  return WaitUntil(
      [&] {
        std::optional<sim::ResourceState> r = kubelet_->Resource(resource);
        return r.has_value() && pred(*r);
      },
      ceiling);
}

std::optional<bool> AgentNode::Healthy(const std::string& resource, const std::string& id) {
  std::optional<sim::ResourceState> r = kubelet_->Resource(resource);
  if (!r) return std::nullopt;
  auto it = r->devices.find(id);
  if (it == r->devices.end()) return std::nullopt;
  return it->second;
}

std::vector<int> Ids(const sim::AdmittedPod& pod, const std::string& resource) {
  std::vector<int> out;
  for (const sim::ContainerAllocation& c : pod.containers) {
    auto it = c.ids.find(resource);
    if (it == c.ids.end()) continue;
    for (const std::string& id : it->second) out.push_back(std::stoi(id));
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace neuron::e2e
