// neuron-top, the real binary in a real terminal (tmux), against a simulated trn2.48xlarge node
// (`neuron-sim up`) whose NeuronCores 0-31 (devices 0-7 at LNC 2) are kept busy by
// `neuron-sim run --workload matmul` with NEURON_RT_VISIBLE_CORES=0-31 (libnrt-sim). neuron-top
// runs under `neuron-sim exec`, the simulated driver's device ABI, as it would on hardware. What
// the captured pane must show comes from docs/tools-ux.md#top-layout, #top-keys: ND0..ND15, the
// busy cores' non-zero utilization, tab switching, FLOPS mode, the memory tree's expand/collapse,
// resize, and `q`; without the driver, the reason and N/A instead of figures.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>

#include "tests/support/temp_dir.h"
#include "tests/top/top_test_util.h"
#include "top/format.h"

namespace neuron::top {
namespace {

using namespace ::neuron::top::testing;
using ::testing::HasSubstr;
using ::testing::Not;
using namespace std::chrono_literals;

// A ceiling, not an expectation (docs/architecture.md#timing-in-tests).
constexpr auto kScreen = 30s;

class TopTmuxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    node_ = std::make_unique<SimNode>(::neuron::testing::SimNodeOptions{
        .sim_bin = NEURON_SIM_BIN, .root = tmp_.path() / "root", .logs = tmp_.path()});
    ASSERT_TRUE(node_->Up("trn2.48xlarge")) << node_->Log();
    root_ = node_->root();
    sock_ = tmp_.path() / "tmux.sock";
    busy_ = node_->StartWorkload("0-31");
    ASSERT_GT(busy_, 0) << "the workload did not complete a step";
  }

  void TearDown() override {
    Tmux({"kill-server"});
    node_.reset();
  }

  RunResult Tmux(std::vector<std::string> args) {
    args.insert(args.begin(), {"/usr/bin/tmux", "-S", sock_.string()});
    return RunCommand(tmp_.path(), args, {}, 30s);
  }

  void StartTop(int width, int height, bool under_driver = true) {
    // The shell records neuron-top's exit code and stderr, which must stay empty: a sanitizer
    // report or a log line on the terminal would show there.
    std::string cmd;
    const std::vector<std::string> top = {NEURON_TOP_BIN};
    for (const std::string& a : under_driver ? node_->UnderDriver(top) : top) cmd += a + " ";
    cmd += "--root " + root_.string() + " --delay 0.5 --log-file " +
           (tmp_.path() / "top.log").string() + " 2>" + (tmp_.path() / "top.err").string() +
           "; echo $? >" + (tmp_.path() / "top.exit").string();
    const RunResult r = Tmux({"new-session", "-d", "-s", "top", "-x", std::to_string(width), "-y",
                              std::to_string(height), cmd});
    ASSERT_EQ(r.code, 0) << r.err;
  }

  std::string Pane() { return Tmux({"capture-pane", "-p", "-t", "top"}).out; }

  // Waits until the pane satisfies `pred`; returns the last capture.
  std::string WaitPane(const std::function<bool(const std::string&)>& pred) {
    std::string pane;
    WaitUntil(
        [&] {
          pane = Pane();
          return pred(pane);
        },
        kScreen);
    return pane;
  }

  void Keys(const std::vector<std::string>& keys) {
    std::vector<std::string> args{"send-keys", "-t", "top"};
    args.insert(args.end(), keys.begin(), keys.end());
    ASSERT_EQ(Tmux(args).code, 0);
  }

  ::neuron::testing::TempDir tmp_{"top_tmux"};
  std::unique_ptr<SimNode> node_;
  fs::path root_;
  fs::path sock_;
  pid_t busy_ = -1;
};

// The grid row of device `d`, or "" when the pane has none.
std::string Row(const std::string& pane, int d) {
  const std::regex re("(^|\n)(ND" + std::to_string(d) + " [^\n]*)");
  std::smatch m;
  return std::regex_search(pane, m, re) ? m[2].str() : std::string();
}

// The percentages of a grid row ("[56.81%]" -> 56.81).
std::vector<double> Values(const std::string& row) {
  std::vector<double> out;
  const std::regex re("\\[ *([0-9]+\\.[0-9]{2})%\\]");
  for (auto it = std::sregex_iterator(row.begin(), row.end(), re); it != std::sregex_iterator();
       ++it) {
    out.push_back(std::stod((*it)[1].str()));
  }
  return out;
}

bool BusyShown(const std::string& pane) {
  for (int d = 0; d < 8; ++d) {
    const std::vector<double> v = Values(Row(pane, d));
    if (v.size() != 4) return false;
    for (const double x : v) {
      if (x <= 0) return false;
    }
  }
  return true;
}

TEST_F(TopTmuxTest, ShowsBusyCoresAndAnswersKeys) {
  StartTop(200, 60);
  std::string pane = WaitPane(BusyShown);
  ASSERT_TRUE(BusyShown(pane)) << pane;
  EXPECT_THAT(pane, HasSubstr("running on i-"));
  EXPECT_THAT(pane, HasSubstr("(trn2.48xlarge)"));
  EXPECT_THAT(pane, HasSubstr("NeuronCore v3d Utilization (Avg: "));
  for (int d = 0; d < 16; ++d) EXPECT_NE(Row(pane, d), "") << "ND" << d << " missing:\n" << pane;
  // Devices 8-15 have no runtime: their cores stay idle.
  for (int d = 8; d < 16; ++d) {
    EXPECT_EQ(Values(Row(pane, d)), (std::vector<double>{0, 0, 0, 0})) << Row(pane, d);
  }
  EXPECT_THAT(pane, HasSubstr("vCPU Utilization"));
  EXPECT_THAT(pane, HasSubstr("Memory Usage Summary"));
  EXPECT_THAT(pane, HasSubstr(">[1]:all<"));
  EXPECT_THAT(pane, Not(HasSubstr("[info]")));  // logs go to the file, never the terminal

  // Tabs: `d` goes to the runtime's tab (its NEURON_PROCESS_TAG or PID), `1` back to "all".
  Keys({"d"});
  pane = WaitPane([](const std::string& p) { return p.find(">[2]:") != std::string::npos; });
  EXPECT_THAT(pane, HasSubstr(">[2]:"));
  Keys({"1"});
  pane = WaitPane([](const std::string& p) { return p.find(">[1]:all<") != std::string::npos; });
  EXPECT_THAT(pane, HasSubstr(">[1]:all<"));

  // FLOPS on and off.
  Keys({"f"});
  pane =
      WaitPane([](const std::string& p) { return p.find("TFLOPs (Total:") != std::string::npos; });
  EXPECT_THAT(pane, HasSubstr("TFLOPs (Total:"));
  EXPECT_THAT(Row(pane, 0), HasSubstr("TF]"));
  Keys({"f"});
  pane = WaitPane(
      [](const std::string& p) { return p.find("Utilization (Avg:") != std::string::npos; });
  EXPECT_THAT(pane, HasSubstr("Utilization (Avg:"));

  // Memory tree: Enter opens ND 0, Down + Enter opens NC 0 (its categories), x closes all.
  Keys({"Enter"});
  pane = WaitPane([](const std::string& p) { return p.find("[-] ND 0") != std::string::npos; });
  EXPECT_THAT(pane, HasSubstr("[-] ND 0"));
  EXPECT_THAT(pane, HasSubstr("[+] NC 0"));
  Keys({"Down", "Enter"});
  pane = WaitPane([](const std::string& p) { return p.find("[-] NC 0") != std::string::npos; });
  EXPECT_THAT(pane, HasSubstr("[-] NC 0"));
  EXPECT_THAT(pane, HasSubstr("Model Scratchpad"));
  Keys({"x"});
  pane = WaitPane([](const std::string& p) { return p.find("[-]") == std::string::npos; });
  EXPECT_THAT(pane, Not(HasSubstr("[-]")));
  EXPECT_THAT(pane, HasSubstr("[+] ND 0"));

  // Resize: the layout follows the terminal (KEY_RESIZE).
  ASSERT_EQ(Tmux({"resize-window", "-t", "top", "-x", "100", "-y", "30"}).code, 0);
  pane = WaitPane([](const std::string& p) {
    return p.find("ND0 ") != std::string::npos && p.find("Neuron Apps") != std::string::npos;
  });
  std::istringstream lines(pane);
  std::string line;
  int count = 0;
  while (std::getline(lines, line)) {
    ++count;
    EXPECT_LE(DisplayWidth(line), 100u) << line;
  }
  EXPECT_LE(count, 30);
  EXPECT_THAT(pane, HasSubstr("ND0 "));

  // q quits: the session ends with the program.
  Keys({"q"});
  EXPECT_TRUE(WaitUntil([&] { return Tmux({"has-session", "-t", "top"}).code != 0; }, kScreen));
  EXPECT_EQ(ReadFile(tmp_.path() / "top.exit"), "0\n");
  EXPECT_EQ(ReadFile(tmp_.path() / "top.err"), "");
  EXPECT_THAT(ReadFile(tmp_.path() / "top.log"), HasSubstr("first frame"));
}

// Without the driver's device ABI the screen says why, shows N/A for every core and never
// claims that no runtime is attached (docs/architecture.md#unknown-is-not-zero).
TEST_F(TopTmuxTest, WithoutTheDriverTheScreenSaysWhy) {
  StartTop(200, 60, /*under_driver=*/false);
  const std::string reason =
      "live data unavailable (utilization and processes N/A): " + (root_ / "dev/neuron0").string() +
      ": no Neuron driver answers its ioctls";
  std::string pane = WaitPane([&](const std::string& p) {
    return p.find(reason) != std::string::npos && p.find("ND15") != std::string::npos;
  });
  ASSERT_THAT(pane, HasSubstr(reason));
  EXPECT_THAT(pane, HasSubstr("Utilization (Avg: N/A)"));
  EXPECT_THAT(Row(pane, 0), HasSubstr("[N/A]"));
  EXPECT_TRUE(Values(Row(pane, 0)).empty()) << Row(pane, 0);
  EXPECT_THAT(pane, HasSubstr("processes unknown: live data unavailable"));
  EXPECT_THAT(pane, Not(HasSubstr("no Neuron runtime attached")));
  Keys({"q"});
  EXPECT_TRUE(WaitUntil([&] { return Tmux({"has-session", "-t", "top"}).code != 0; }, kScreen));
  EXPECT_EQ(ReadFile(tmp_.path() / "top.exit"), "0\n");
  EXPECT_EQ(ReadFile(tmp_.path() / "top.err"), "");
}

// --snapshot needs no terminal and reports what the screen would.
TEST_F(TopTmuxTest, SnapshotWithoutTerminal) {
  const RunResult r = RunCommand(
      tmp_.path(),
      node_->UnderDriver({NEURON_TOP_BIN, "--root", root_.string(), "--snapshot", "--delay", "1",
                          "--log-file", (tmp_.path() / "snap.log").string()}));
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["instance_type"], "trn2.48xlarge");
  EXPECT_EQ(j["runtime_attached"], true);
  ASSERT_EQ(j["devices"].size(), 16u);
  EXPECT_GT(j["devices"][0]["neuroncores"][0]["utilization_ratio"].get<double>(), 0.0);
  EXPECT_EQ(j["devices"][15]["neuroncores"][0]["utilization_ratio"].get<double>(), 0.0);
  ASSERT_GE(j["processes"].size(), 1u);
  EXPECT_EQ(j["processes"][0]["neuroncore_ids"].size(), 32u);
  // Without a terminal and without --snapshot: a clear refusal.
  const RunResult no_tty = RunCommand(
      tmp_.path(),
      {NEURON_TOP_BIN, "--root", root_.string(), "--log-file", (tmp_.path() / "x.log").string()});
  EXPECT_EQ(no_tty.code, 1);
  EXPECT_THAT(no_tty.err, HasSubstr("needs a terminal"));
}

}  // namespace
}  // namespace neuron::top

namespace neuron::top {
namespace {

// Same answers as neuron-ls when there is nothing to show (docs/tools-ux.md Q3, Q9).
TEST(TopCliTest, EmptyRootAndUnknownOption) {
  ::neuron::testing::TempDir tmp("top_cli");
  const RunResult empty =
      RunCommand(tmp.path(), {NEURON_TOP_BIN, "--root", tmp.path().string(), "--snapshot",
                              "--log-file", (tmp.path() / "log").string()});
  EXPECT_EQ(empty.code, 3);
  EXPECT_EQ(empty.out, "");
  EXPECT_THAT(empty.err, HasSubstr("no Neuron driver"));
  const RunResult usage = RunCommand(tmp.path(), {NEURON_TOP_BIN, "--bogus"});
  EXPECT_EQ(usage.code, 2);
  EXPECT_THAT(usage.err, HasSubstr("--bogus"));
  const RunResult delay = RunCommand(tmp.path(), {NEURON_TOP_BIN, "--delay", "0.01"});
  EXPECT_EQ(delay.code, 2);  // below the 0.1 s floor (Q5)
}

}  // namespace
}  // namespace neuron::top
