// `make demo-dra` without a terminal (docs/OPERATIONS.md#dra): every step of the DRA story runs
// through the real binaries (the simulated driver, the API stand-in, the kubelet emulator,
// neuron-device-plugin --api=dra, neuron-dra-api, neuron-sim schedule, neuron-exporter) and ends:
// a published slice, a claim for 4 connected devices and 2 EFAs allocated on one connected group,
// prepared into a CDI spec the pod's process sees, attributed in /metrics, 2 NeuronCores in one
// run for an inference pod on none of the training claim's devices (shared counters), that pod's
// device and core tainted and Unhealthy in its status after a fault and clear after a reset, the
// claims unprepared when the pods end.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <set>
#include <string>

#include "tests/support/process.h"
#include "tests/support/temp_dir.h"

namespace neuron::e2e {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

TEST(DemoDraTest, TheDraStoryRunsToItsEnd) {
  neuron::testing::TempDir dir;
  const fs::path build = fs::path(NEURON_SIM_BIN).parent_path().parent_path();
  const pid_t pid = neuron::testing::Spawn(
      {"bash", std::string(NEURON_SOURCE_DIR) + "/scripts/demo-dra.sh", build.string()},
      dir.path() / "out", dir.path() / "err", {"DEMO_NONINTERACTIVE=1", "TMPDIR=" + dir.str()});
  const std::optional<int> code = neuron::testing::WaitExit(pid, 200s);
  const std::string out = neuron::testing::ReadFile(dir.path() / "out");
  const std::string err = neuron::testing::ReadFile(dir.path() / "err");
  if (!code) neuron::testing::Stop(pid, 30s);
  ASSERT_EQ(code, 0) << out << err;

  EXPECT_NE(out.find("node-a-neuron.aws.com: driver neuron.aws.com, pool node-a"),
            std::string::npos)
      << out;
  // The 4 devices come from one connected group of 4 (aligned blocks on trn1.32xlarge).
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      out, m,
      std::regex(
          R"(training/llama-4-connected on node-a: neuron-(\d+) neuron-(\d+) neuron-(\d+) neuron-(\d+) efa-\S+ efa-\S+)")))
      << out;
  std::set<int> groups;
  std::set<int> training;
  for (int i = 1; i <= 4; ++i) {
    groups.insert(std::stoi(m[i]) / 4);
    training.insert(std::stoi(m[i]));
  }
  EXPECT_EQ(groups.size(), 1u) << m[0];
  // The inference pod's two cores: one aligned run, on a device the training claim does not hold
  // (trn1.32xlarge: 2 cores per device).
  std::smatch cores;
  ASSERT_TRUE(std::regex_search(
      out, cores, std::regex(R"(in the inference pod: NEURON_RT_VISIBLE_CORES=(\d+)-(\d+))")))
      << out;
  const int first_core = std::stoi(cores[1]);
  EXPECT_EQ(std::stoi(cores[2]), first_core + 1) << cores[0];
  EXPECT_EQ(first_core % 2, 0) << cores[0];
  EXPECT_EQ(training.count(first_core / 2), 0u) << cores[0] << " vs " << m[0];
  EXPECT_NE(out.find("in the pod: NEURON_RT_VISIBLE_CORES="), std::string::npos) << out;
  EXPECT_NE(out.find("\"kind\": \"aws.amazon.com/neuron\""), std::string::npos) << out;
  EXPECT_TRUE(std::regex_search(
      out,
      std::regex(
          R"(neuron_dra_device_allocation_info\{driver="neuron.aws.com",pool="node-a",device="neuron-\d+",namespace="training",pod="llama2-7b-worker-0",container="main",claim="llama-4-connected"\} 1)")))
      << out;
  EXPECT_TRUE(std::regex_search(
      out, std::regex(R"(neuron-\d+ taints after the fault: \[\{.*neuron.aws.com/unhealthy)")))
      << out;
  EXPECT_TRUE(std::regex_search(
      out, std::regex(R"(neuroncore-\d+ taints after the fault: \[\{.*neuron.aws.com/unhealthy)")))
      << out;
  EXPECT_NE(out.find("taints after the reset: []"), std::string::npos) << out;
  EXPECT_TRUE(std::regex_search(
      out,
      std::regex(R"(pod status after the fault: main claim:inference-2-cores \S+ Unhealthy \S)")))
      << out;
  EXPECT_TRUE(std::regex_search(
      out, std::regex(R"(pod status after the reset: main claim:inference-2-cores \S+ Healthy)")))
      << out;
  // The Node's condition from neuron-dra-api, set with the fault's type and cleared by the reset,
  // through the shipped admission policy with the node's own token.
  EXPECT_TRUE(std::regex_search(
      out,
      std::regex(
          R"(NeuronHealth after the fault: True NeuronHasError_HBM_UNCORRECTABLE_ERROR: neuron\d+: uncorrected ECC \(hbm\))")))
      << out;
  EXPECT_TRUE(
      std::regex_search(out, std::regex(R"(NeuronHealth after the reset: False NeuronHasNoError)")))
      << out;
  // The pod that asks aws.amazon.com/neuron: 4 by count (KEP-5004): the scheduler's claim of 4
  // devices of class neuron.aws.com, mapped to the container's request; the pod sees 8 cores.
  EXPECT_TRUE(std::regex_search(
      out, std::regex(
               R"(serving/by-count-0-extended-resources-\w{5}:\S+ on node-a:( neuron-\d+){4}\n)")))
      << out;
  EXPECT_NE(out.find("container main: aws.amazon.com/neuron -> request container-0-request-0"),
            std::string::npos)
      << out;
  std::smatch by_count;
  ASSERT_TRUE(std::regex_search(
      out, by_count,
      std::regex(R"(in the pod asking by count: NEURON_RT_VISIBLE_CORES=(\d+)-(\d+))")))
      << out;
  EXPECT_EQ(std::stoi(by_count[2]) - std::stoi(by_count[1]), 7) << by_count[0];
  EXPECT_NE(out.find("CDI specs left: 0"), std::string::npos) << out;
  for (const auto& entry : fs::directory_iterator(dir.path())) {
    const std::string name = entry.path().filename().string();
    EXPECT_TRUE(name == "out" || name == "err") << "left behind: " << entry.path();
  }
}

}  // namespace
}  // namespace neuron::e2e
