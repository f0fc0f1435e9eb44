// neuron-top, the real binary in a real terminal (tmux), against a simulated trn2.48xlarge node
// (`neuron-sim up`) whose NeuronCores 0-31 (devices 0-7 at LNC 2) are kept busy by
// `neuron-sim run --workload matmul` with NEURON_RT_VISIBLE_CORES=0-31 (libnrt-sim). neuron-top
// runs under `neuron-sim exec`, the simulated driver's device ABI, as it would on hardware. What
// the captured pane must show comes from docs/tools-ux.md#top-layout, #top-keys: ND0..ND15, the
// busy cores' non-zero utilization, tab switching, FLOPS mode, the memory tree's expand/collapse,
// resize, `q`, and health judged from neuron-top's own read when no agent answers
// (docs/tools-ux.md#health); without the driver, the reason and N/A instead of figures.

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

  // `env` prefixes the command (`env` arguments): by default colour is left to the terminal, so
  // a NO_COLOR in the test's own environment cannot change what the pane shows.
  void StartTop(int width, int height, bool under_driver = true,
                const std::string& env = "env -u NO_COLOR") {
    // The shell records neuron-top's exit code and stderr, which must stay empty: a sanitizer
    // report or a log line on the terminal would show there.
    std::string cmd = env + " ";
    const std::vector<std::string> top = {NEURON_TOP_BIN};
    for (const std::string& a : under_driver ? node_->UnderDriver(top) : top) cmd += a + " ";
    // No agent at --agent: health from neuron-top's own read, and a status line saying so.
    cmd += "--root " + root_.string() + " --agent unix:" + (tmp_.path() / "agent.sock").string() +
           " --delay 0.5 --log-file " + (tmp_.path() / "top.log").string() + " 2>" +
           (tmp_.path() / "top.err").string() + "; echo $? >" + (tmp_.path() / "top.exit").string();
    const RunResult r = Tmux({"new-session", "-d", "-s", "top", "-x", std::to_string(width), "-y",
                              std::to_string(height), cmd});
    ASSERT_EQ(r.code, 0) << r.err;
  }

  std::string Pane() { return Tmux({"capture-pane", "-p", "-t", "top"}).out; }
  // The pane with its colours and attributes as SGR escape sequences.
  std::string PaneWithEscapes() { return Tmux({"capture-pane", "-p", "-e", "-t", "top"}).out; }

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

// A grid row's cells: the bar before each value (its blank separator column included, as
// "  |||   ") and the value in percent.
struct Cell {
  std::string bar;
  double percent = 0;
};
std::vector<Cell> Cells(const std::string& row) {
  std::vector<Cell> out;
  const std::regex re("([| ]*)\\[ *([0-9]+\\.[0-9]{2})%\\]");
  const std::string body = row.substr(std::min(row.size(), row.find(' ')));
  for (auto it = std::sregex_iterator(body.begin(), body.end(), re); it != std::sregex_iterator();
       ++it) {
    out.push_back({(*it)[1].str(), std::stod((*it)[2].str())});
  }
  return out;
}

// The ticks of a cell's bar when it is blanks, ticks, then blanks (the separator column, the
// filled part, the empty part); -1 for any other shape, e.g. ticks after a blank.
int Ticks(const std::string& bar) {
  static const std::regex shape("^ *(\\|*) *$");
  std::smatch m;
  return std::regex_match(bar, m, shape) ? static_cast<int>(m[1].length()) : -1;
}

// Whether the captured escapes set a foreground or background colour (SGR 30-38, 40-48, 90-107)
// other than the default, as opposed to attributes only (bold, dim, reverse).
bool HasColour(const std::string& escaped) {
  const std::regex sgr("\x1b\\[([0-9;]*)m");
  for (auto it = std::sregex_iterator(escaped.begin(), escaped.end(), sgr);
       it != std::sregex_iterator(); ++it) {
    std::istringstream params((*it)[1].str());
    std::string p;
    while (std::getline(params, p, ';')) {
      if (p.empty()) continue;
      const int n = std::stoi(p);
      if (n == 39 || n == 49) continue;  // the terminal's default colours
      if ((n >= 30 && n <= 48) || (n >= 90 && n <= 107)) return true;
    }
  }
  return false;
}

TEST_F(TopTmuxTest, ShowsBusyCoresAndAnswersKeys) {
  StartTop(200, 60);
  std::string pane = WaitPane(BusyShown);
  ASSERT_TRUE(BusyShown(pane)) << pane;
  // The terminal has colour and NO_COLOR is unset: the frame is in colour, which is what the
  // monochrome test below must not see.
  EXPECT_TRUE(HasColour(PaneWithEscapes()));
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
  EXPECT_THAT(pane, HasSubstr("Health (this read only): devices 16 healthy"));
  EXPECT_THAT(pane, HasSubstr("health from this read only (agent at unix:"));
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

// Without colour the bars must still read right (docs/tools-ux.md#top-colours): on a terminal
// without colours (TERM=vt100) and with NO_COLOR=1 on one with colours, the frame has no colour,
// an idle core's bar is blank, a busy core's bar is ticks in proportion to its value, full when
// the value rounds to a full bar.
class TopMonochromeTest : public TopTmuxTest, public ::testing::WithParamInterface<const char*> {};

TEST_P(TopMonochromeTest, IdleBarsAreEmptyAndBusyBarsFilled) {
  StartTop(200, 60, /*under_driver=*/true, GetParam());
  std::string pane =
      WaitPane([](const std::string& p) { return BusyShown(p) && Values(Row(p, 15)).size() == 4; });
  ASSERT_TRUE(BusyShown(pane)) << pane;
  EXPECT_FALSE(HasColour(PaneWithEscapes()));
  // Devices 8-15 have no runtime: 0.00% and not one tick.
  for (int d = 8; d < 16; ++d) {
    const std::vector<Cell> cells = Cells(Row(pane, d));
    ASSERT_EQ(cells.size(), 4u) << Row(pane, d);
    for (const Cell& cell : cells) {
      EXPECT_EQ(cell.percent, 0.0) << Row(pane, d);
      EXPECT_EQ(Ticks(cell.bar), 0) << Row(pane, d);
    }
  }
  // Devices 0-7 run the workload. Cells after the first start with their one blank separator
  // column, so their bar is the rest; the ticks are that width times the value, rounded.
  int full = 0;
  double least = 100;
  for (int d = 0; d < 8; ++d) {
    const std::vector<Cell> cells = Cells(Row(pane, d));
    ASSERT_EQ(cells.size(), 4u) << Row(pane, d);
    for (size_t j = 0; j < cells.size(); ++j) {
      const int ticks = Ticks(cells[j].bar);
      least = std::min(least, cells[j].percent);
      ASSERT_GT(ticks, 0) << Row(pane, d);
      if (j == 0) continue;
      const int width = static_cast<int>(cells[j].bar.size()) - 1;
      EXPECT_NEAR(ticks, cells[j].percent / 100.0 * width, 0.51) << Row(pane, d);
      if (ticks == width) ++full;
      if (cells[j].percent / 100.0 * width >= width - 0.49) {
        EXPECT_EQ(ticks, width) << Row(pane, d);
      }
    }
  }
  // How busy the workload kept the cores here (a loaded machine slows the simulated runtime).
  RecordProperty("full_bars", full);
  RecordProperty("least_busy_percent", std::to_string(least));
  Keys({"q"});
  EXPECT_TRUE(WaitUntil([&] { return Tmux({"has-session", "-t", "top"}).code != 0; }, kScreen));
  EXPECT_EQ(ReadFile(tmp_.path() / "top.exit"), "0\n");
  EXPECT_EQ(ReadFile(tmp_.path() / "top.err"), "");
}

INSTANTIATE_TEST_SUITE_P(NoColour, TopMonochromeTest,
                         ::testing::Values("env -u NO_COLOR TERM=vt100",
                                           "env TERM=xterm-256color NO_COLOR=1"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return info.index == 0 ? std::string("Vt100") : std::string("NoColor");
                         });

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
