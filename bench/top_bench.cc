// neuron-ls and neuron-top cost on a simulated trn2.48xlarge (16 devices, 64 logical cores), with
// a runtime on every device whose cores a child of this program keeps busy (DatastoreWriter
// through the driver, as libnrt-sim would). The driver's device ABI is served from a thread of
// this program, which runs itself under the driver's interposer (bench/sim_driver.h); neuron-ls
// and neuron-top inherit it, as under `neuron-sim exec`, without paying for an extra exec in the
// figures. Prints medians:
//   1. neuron-ls wall time, default table and --wide (target <= 20 ms), its ratio to a plain
//      open/read/close of every sysfs file of the node timed in the same run (targets 0.2x, --wide
//      0.3x), and its syscalls under `strace -f -c` (targets 1,000, --wide 1,500);
//   2. neuron-top start-up to first frame under tmux (target <= 200 ms): from just before the
//      tmux command to the "first frame" line neuron-top logs with its realtime clock;
//   3. neuron-top CPU at a 1 s refresh under tmux (target <= 1 % of a core): utime + stime from
//      /proc/<pid>/stat over --cpu-seconds (20), after a warm-up;
//   4. for reference, the view feed's hot and full steps in process.
//
//   top_bench [--runs N] [--cpu-seconds S] [--cpu-runs N]

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "bench/plain_read.h"
#include "bench/sim_driver.h"
#include "bench/stats.h"
#include "core/base/unique_fd.h"
#include "core/driver/datastore_layout.h"
#include "core/model/catalog.h"
#include "driver-sim/driver/datastore_writer.h"
#include "driver-sim/driver/sim_tree.h"
#include "tests/support/sim_driver_thread.h"
#include "tests/support/sim_tree_fixture.h"
#include "tests/support/strace_count.h"
#include "top/view_feed.h"

namespace {

using neuron::bench::Median;
using neuron::bench::Percentile;

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// Runs argv (argv[0] looked up in PATH unless it has a '/') with stdout/stderr to /dev/null;
// returns the exit code.
int RunQuiet(std::vector<std::string> args) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  if (posix_spawnp(&pid, argv[0], &fa, nullptr, argv.data(), environ) != 0) return -1;
  posix_spawn_file_actions_destroy(&fa);
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string Capture(const std::string& cmd) {
  std::string out;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char buf[512];
    size_t n = 0;
    while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
    pclose(p);
  }
  return out;
}

// Runs a shell command; failures show in the figures (no frame, no pid), so the code is ignored.
void Sh(const std::string& cmd) {
  if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "failed: %s\n", cmd.c_str());
}

int64_t RealtimeNanos() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// utime + stime of a process in seconds.
double CpuSeconds(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream rest(text.substr(close + 2));
  std::string field;
  std::vector<std::string> f;
  while (rest >> field) f.push_back(field);
  if (f.size() < 13) return -1;
  // f[0] is field 3; utime is 14, stime 15.
  return static_cast<double>(std::stoull(f[11]) + std::stoull(f[12])) /
         static_cast<double>(sysconf(_SC_CLK_TCK));
}

constexpr const char* kBusyRuntimeFlag = "--busy-runtime";
volatile sig_atomic_t g_stop_runtime = 0;

// The runtime child (`top_bench --busy-runtime ROOT`): a datastore on every device, cores kept
// 60 % busy, until SIGTERM. Prints "ready" once every datastore is claimed.
int BusyRuntime(const fs::path& root) {
  std::signal(SIGTERM, [](int) { g_stop_runtime = 1; });
  std::vector<std::unique_ptr<neuron::sim::DatastoreWriter>> writers;
  for (int d = 0; d < 16; ++d) {
    // The fd stays open for the process's life: its last close would release the datastore.
    const int fd = ::open(neuron::RootPaths(root).DevNeuron(d).c_str(), O_RDWR | O_CLOEXEC);
    auto w = neuron::sim::DatastoreWriter::Acquire(fd, d, ::getpid());
    if (fd < 0 || !w.ok()) {
      std::fprintf(stderr, "busy runtime: device %d: %s\n", d,
                   fd < 0 ? std::strerror(errno) : std::string{w.status().message()}.c_str());
      return 1;
    }
    writers.push_back(*std::move(w));
  }
  std::printf("ready\n");
  std::fflush(stdout);
  auto last = Clock::now();
  while (g_stop_runtime == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const auto now = Clock::now();
    const auto us =
        static_cast<uint64_t>(0.6 * std::chrono::duration<double, std::micro>(now - last).count());
    last = now;
    for (auto& w : writers) {
      for (int k = 0; k < 4; ++k) (void)w->AddCoreCounter(k, neuron::nds::kTimeInUse, us);
    }
  }
  return 0;
}

// Starts the runtime child and waits for its "ready"; -1 on failure.
pid_t StartBusyRuntime(const fs::path& root) {
  int out[2];
  if (pipe(out) != 0) return -1;
  neuron::UniqueFd read_end(out[0]), write_end(out[1]);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, write_end.get(), 1);
  posix_spawn_file_actions_addclose(&fa, read_end.get());
  std::string self = fs::read_symlink("/proc/self/exe").string();
  std::string flag = kBusyRuntimeFlag;
  std::string dir = root.string();
  char* argv[] = {self.data(), flag.data(), dir.data(), nullptr};
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, self.c_str(), &fa, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  write_end.Reset();  // the child's alone now: its exit ends our read
  char line[16] = {};
  const bool ready = rc == 0 && read(read_end.get(), line, sizeof(line) - 1) > 0 &&
                     std::string_view(line).starts_with("ready");
  read_end.Reset();  // before waiting: a child still writing then gets EPIPE, not a full pipe
  if (rc == 0 && !ready) waitpid(pid, nullptr, 0);
  return ready ? pid : -1;
}

// A trn2.48xlarge tree, its driver served from a thread of this process, and the runtime child.
// The runtime is a process of its own because a monitor skips its own PID's datastores.
class BusyNode {
 public:
  explicit BusyNode(const fs::path& root) : root_(root) {
    absl::StatusOr<std::unique_ptr<neuron::sim::SimTree>> tree = neuron::testing::BuildSimTree(
        root, "trn2.48xlarge", {.lnc = 2, .instance_id = "i-0bec0000000000000"});
    if (!tree.ok()) {
      std::fprintf(stderr, "simulated tree: %s\n", tree.status().ToString().c_str());
      std::exit(1);
    }
    tree_ = *std::move(tree);
    driver_ =
        std::make_unique<neuron::testing::SimDriverThread>(tree_.get(), *tree_->config().spec, 2);
    if (!driver_->status().ok()) {
      std::fprintf(stderr, "simulated driver: %s\n", driver_->status().ToString().c_str());
      std::exit(1);
    }
    runtime_ = StartBusyRuntime(root);
    if (runtime_ < 0) {
      std::fprintf(stderr, "the busy runtime did not start\n");
      std::exit(1);
    }
  }
  ~BusyNode() {
    kill(runtime_, SIGTERM);
    waitpid(runtime_, nullptr, 0);
    driver_.reset();
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

 private:
  fs::path root_;
  std::unique_ptr<neuron::sim::SimTree> tree_;
  std::unique_ptr<neuron::testing::SimDriverThread> driver_;
  pid_t runtime_ = -1;
};

// Every regular file of the node's sysfs tree (ROOT/sys, links not followed): what the control
// loop reads.
std::vector<std::string> SysfsFiles(const fs::path& root) {
  std::vector<std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(root / "sys")) {
    if (e.is_regular_file()) files.push_back(e.path().string());
  }
  return files;
}

// neuron-ls's system calls, its loader included, as `strace -f -c` counts them; -1 when strace
// could not (not installed, ptrace denied).
int64_t CountSyscalls(const std::vector<std::string>& args, const fs::path& work) {
  const fs::path summary = work / "neuron-ls.strace";
  RunQuiet(neuron::testing::UnderStrace(summary, args));
  return neuron::testing::StraceTotalCalls(summary).value_or(-1);
}

// neuron-ls's wall time and syscalls (bench/README.md#neuron-ls-cost), beside a plain
// open/read/close of every file of the node's sysfs tree timed in the same run: the targets are a
// ratio to it, so that they hold on a slower or busier machine too.
void BenchLs(const fs::path& root, const fs::path& work, int runs) {
  const std::vector<std::string> files = SysfsFiles(root);
  std::vector<double> plain;
  for (int i = 0; i < runs; ++i) {
    const auto t0 = Clock::now();
    neuron::bench::OpenReadCloseEach(files);
    plain.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  std::printf("plain open/read/close of the node's %zu sysfs files: median %.1f ms over %d runs\n",
              files.size(), Median(plain), runs);
  for (const bool wide : {false, true}) {
    std::vector<std::string> args{NEURON_LS_BIN, "--root", root.string()};
    if (wide) args.emplace_back("--wide");
    std::vector<double> ms;
    for (int i = 0; i < runs; ++i) {
      const auto t0 = Clock::now();
      if (RunQuiet(args) != 0) std::fprintf(stderr, "neuron-ls failed\n");
      ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
    std::printf(
        "neuron-ls%s, 16 devices: median %.1f ms, p90 %.1f ms over %d runs (target <= 20 ms), "
        "%.2fx the plain loop (target <= %s); %lld syscalls (strace -f -c; target <= %s)\n",
        wide ? " --wide" : "", Median(ms), Percentile(ms, 0.9), runs, Median(ms) / Median(plain),
        wide ? "0.3x" : "0.2x", static_cast<long long>(CountSyscalls(args, work)),
        wide ? "1,500" : "1,000");
  }
}

struct TopRun {
  std::string tmux;  // "tmux -S <sock>"
  fs::path log;
};

void BenchTop(const fs::path& root, const fs::path& work, int runs, int cpu_seconds, int cpu_runs) {
  const std::string tmux = "/usr/bin/tmux -S " + (work / "tmux.sock").string();
  // A server that stays up, so each run pays for a session, not for starting tmux.
  Sh(tmux + " new-session -d -s keep -x 80 -y 24 'sleep 100000'");
  auto start = [&](const std::string& name, const fs::path& log, double delay) {
    const std::string cmd = tmux + " new-session -d -s " + name + " -x 200 -y 60 'exec " +
                            NEURON_TOP_BIN + " --root " + root.string() + " --delay " +
                            std::to_string(delay) + " --log-file " + log.string() + "'";
    Sh(cmd);
  };
  std::vector<double> startup_ms;
  for (int i = 0; i < runs; ++i) {
    const fs::path log = work / ("startup." + std::to_string(i) + ".log");
    const int64_t t0 = RealtimeNanos();
    start("s" + std::to_string(i), log, 1.0);
    int64_t frame = 0;
    for (int k = 0; k < 1000 && frame == 0; ++k) {
      std::ifstream in(log);
      std::string line;
      while (std::getline(in, line)) {
        const size_t at = line.find("realtime_ns=");
        if (at != std::string::npos) frame = std::stoll(line.substr(at + 12));
      }
      if (frame == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    Sh(tmux + " kill-session -t s" + std::to_string(i));
    if (frame > 0) startup_ms.push_back(static_cast<double>(frame - t0) / 1e6);
  }
  std::printf(
      "neuron-top start-up to first frame (trn2.48xlarge, tmux): median %.0f ms, p90 %.0f "
      "ms over %zu runs (target <= 200 ms)\n",
      Median(startup_ms), Percentile(startup_ms, 0.9), startup_ms.size());

  std::vector<double> cpu;
  for (int i = 0; i < cpu_runs; ++i) {
    const std::string name = "c" + std::to_string(i);
    start(name, work / (name + ".log"), 1.0);
    std::this_thread::sleep_for(std::chrono::seconds(3));  // warm-up: first samples, full sweep
    std::string list_panes = tmux;
    list_panes.append(" list-panes -t ").append(name).append(" -F '#{pane_pid}'");
    const std::string pid_text = Capture(list_panes);
    int pid = 0;  // stays 0, and the run is skipped below, when tmux printed no pane
    std::from_chars(pid_text.data(), pid_text.data() + pid_text.size(), pid);
    const double c0 = CpuSeconds(pid);
    const auto t0 = Clock::now();
    std::this_thread::sleep_for(std::chrono::seconds(cpu_seconds));
    const double c1 = CpuSeconds(pid);
    const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
    std::string kill_session = tmux;
    kill_session.append(" kill-session -t ").append(name);
    Sh(kill_session);
    if (pid > 0 && c0 >= 0 && c1 >= c0) cpu.push_back(100.0 * (c1 - c0) / wall);
  }
  std::printf(
      "neuron-top CPU at --delay 1 (trn2.48xlarge, 16 runtimes, tmux 200x60): median "
      "%.2f %% of a core over %zu runs of %d s (target <= 1 %%)\n",
      Median(cpu), cpu.size(), cpu_seconds);
  Sh(tmux + " kill-server");
}

void BenchCollector(const fs::path& root, int runs) {
  // One feed that never needs a full sweep (nothing allocates), one that always takes one.
  auto measure = [&](std::chrono::milliseconds max_age) {
    neuron::top::ViewFeedOptions options;
    options.node.root = root;
    options.full_sweep_max_age = max_age;
    neuron::top::ViewFeed c(options, nullptr);
    std::vector<double> ms;
    if (!c.Init().ok()) return ms;
    for (int i = 0; i < runs; ++i) {
      const auto t0 = Clock::now();
      c.Step();
      ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
    return ms;
  };
  const std::vector<double> hot = measure(std::chrono::hours(1));
  const std::vector<double> full = measure(std::chrono::milliseconds(0));
  std::printf(
      "feed step in process (trn2.48xlarge): hot median %.2f ms, full median %.2f "
      "ms over %d runs\n",
      Median(hot), Median(full), runs);
}

// The value of a numeric flag, an integer >= `min`; otherwise exits 2 with a message naming it.
int IntFlag(std::string_view flag, std::string_view text, int min) {
  int v = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size() || v < min) {
    std::fprintf(stderr, "top_bench: %.*s wants an integer >= %d, got \"%.*s\"\n",
                 static_cast<int>(flag.size()), flag.data(), min, static_cast<int>(text.size()),
                 text.data());
    std::exit(2);
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  if (neuron::bench::EnsureSimDriver(argv) != 0) return 1;
  if (argc == 3 && std::string_view(argv[1]) == kBusyRuntimeFlag) return BusyRuntime(argv[2]);
  int runs = 21;
  int cpu_seconds = 20;
  int cpu_runs = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--runs") runs = IntFlag(flag, argv[i + 1], 1);
    if (flag == "--cpu-seconds") cpu_seconds = IntFlag(flag, argv[i + 1], 1);
    if (flag == "--cpu-runs") cpu_runs = IntFlag(flag, argv[i + 1], 0);  // 0: no CPU runs
  }
  const char* tmpdir = std::getenv("TMPDIR");
  const fs::path base = tmpdir != nullptr && *tmpdir != '\0' ? tmpdir : "/tmp";
  const fs::path work = base / ("top_bench." + std::to_string(::getpid()));
  fs::create_directories(work);
  {
    BusyNode node(work / "root");
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    BenchLs(work / "root", work, runs);
    BenchCollector(work / "root", runs);
    BenchTop(work / "root", work, std::max(1, runs / 2), cpu_seconds, cpu_runs);
  }
  std::error_code ec;
  fs::remove_all(work, ec);
  return 0;
}
