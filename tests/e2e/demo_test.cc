// `make demo` without a terminal (docs/architecture.md#two-commands): the whole story runs to its
// end and shows the Llama pod's cores busy, with the pod's labels on the exporter's series.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <string>

#include "tests/support/process.h"
#include "tests/support/temp_dir.h"

namespace neuron::e2e {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

TEST(DemoTest, NonInteractiveDemoEndsAndShowsThePodsCoresBusy) {
  neuron::testing::TempDir dir;
  // The build directory is the one these binaries were built in: build/<preset>.
  const fs::path build = fs::path(NEURON_SIM_BIN).parent_path().parent_path();
  const pid_t pid = neuron::testing::Spawn(
      {"bash", std::string(NEURON_SOURCE_DIR) + "/scripts/demo.sh", build.string()},
      dir.path() / "out", dir.path() / "err", {"DEMO_NONINTERACTIVE=1", "TMPDIR=" + dir.str()});
  const std::optional<int> code = neuron::testing::WaitExit(pid, 180s);
  const std::string out = neuron::testing::ReadFile(dir.path() / "out");
  const std::string err = neuron::testing::ReadFile(dir.path() / "err");
  if (!code) neuron::testing::Stop(pid, 30s);
  ASSERT_EQ(code, 0) << out << err;

  std::smatch m;
  ASSERT_TRUE(
      std::regex_search(out, m, std::regex(R"(mean utilization of the pod's cores: ([0-9.]+))")))
      << out;
  EXPECT_GT(std::stod(m[1]), 0.9) << out;
  EXPECT_NE(out.find("NEURON_RT_VISIBLE_CORES=0-31"), std::string::npos) << out;
  EXPECT_NE(out.find("pod=\"llama2-7b-worker-0\""), std::string::npos) << out;
  EXPECT_NE(out.find("training/llama2-7b-worker-0 main aws.amazon.com/neuron 0 1 2"),
            std::string::npos)
      << out;
  // Everything it started is gone: its work directory (the simulated root, the kubelet
  // directory, the logs) was made under our TMPDIR and removed.
  for (const auto& entry : fs::directory_iterator(dir.path())) {
    const std::string name = entry.path().filename().string();
    EXPECT_TRUE(name == "out" || name == "err") << "left behind: " << entry.path();
  }
}

}  // namespace
}  // namespace neuron::e2e
