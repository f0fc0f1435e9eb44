// neuron-top: live NeuronCore utilization, vCPU, memory and processes
// (docs/tools-ux.md#neuron-top).
//   neuron-top --root DIR [--kubelet-dir DIR] [--delay SECONDS] [--snapshot] [--lnc 1|2]
//              [--agent unix:PATH] [--log-file FILE] [--no-color]
// --snapshot prints one JSON document (the view model) and exits, without a terminal. Logs go
// to a file (--log-file, default top/log_file.h's), never to the terminal.
// Exit codes as neuron-ls (top/README.md).

#include <spdlog/sinks/null_sink.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <clocale>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <thread>

#include "core/base/guarded_main.h"
#include "core/base/version.h"
#include "core/discovery/presence.h"
#include "core/model/node_flags.h"
#include "core/proc/pod_identity.h"
#include "core/proc/procinfo.h"
#include "proto/pod_resources_locator.h"
#include "top/curses_ui.h"
#include "top/log_file.h"
#include "top/screen.h"
#include "top/view_feed.h"
#include "top/view_model.h"

namespace {

constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

// A file logger for every component (top/log_file.h: never through a planted link); without a
// file, a null one and one line on stderr saying why (never the terminal once ncurses owns it).
// An empty `path` means the default.
void SetUpLogging(const std::string& path) {
  absl::StatusOr<std::string> file =
      path.empty() ? neuron::top::DefaultLogFile(neuron::RealGetEnv) : path;
  absl::StatusOr<neuron::UniqueFd> fd =
      file.ok() ? neuron::top::OpenLogFile(*file) : absl::StatusOr<neuron::UniqueFd>(file.status());
  std::shared_ptr<spdlog::logger> log;
  if (fd.ok()) {
    log = std::make_shared<spdlog::logger>("neuron-top", neuron::top::MakeFdSink(*std::move(fd)));
  } else {
    std::cerr << "neuron-top: warning: not logging: " << fd.status().message() << "\n";
    log = std::make_shared<spdlog::logger>("neuron-top",
                                           std::make_shared<spdlog::sinks::null_sink_mt>());
  }
  log->set_level(spdlog::level::info);
  log->flush_on(spdlog::level::info);
  spdlog::set_default_logger(log);
}

struct Flags {
  neuron::NodeFlagValues node;  // --root and --lnc as given, resolved into `root` and `lnc`
  std::string root = "/";
  std::string kubelet_dir = "/var/lib/kubelet";
  double delay = 1.0;
  bool snapshot = false;
  int lnc = 0;
  std::string log_file;  // empty: top/log_file.h's default
  bool no_color = false;
  std::string libnrt;  // --libnrt; LibnrtPath() resolves it with NEURON_LIBNRT
  std::string agent = std::string(neuron::top::kDefaultAgent);  // GET /health
};

// Pods: the cgroup tells the UID and container id, PodResources the names (pod_identity.h).
std::unique_ptr<neuron::PodLocator> MakePodLocator(const Flags& f) {
  neuron::PodResourcesCache::Options pod_options;
  pod_options.socket_path = f.kubelet_dir + "/pod-resources/kubelet.sock";
  auto pod_resources = std::make_shared<neuron::PodResourcesCache>(pod_options);
  std::vector<std::unique_ptr<neuron::PodLocator>> locators;
  locators.push_back(neuron::MakeCgroupPodLocator(neuron::ProcReader(neuron::RootPaths(f.root))));
  locators.push_back(neuron::MakePodResourcesLocator(pod_resources));
  return neuron::MakeChainedPodLocator(std::move(locators));
}

int PrintSnapshot(neuron::top::ViewFeed& feed, std::chrono::milliseconds delay) {
  std::this_thread::sleep_for(delay);
  const std::shared_ptr<const neuron::top::TopView> view = feed.Step();
  // No screen to carry the status lines: stderr does, and the document says it too.
  for (const std::string& line : neuron::top::StatusLines(*view)) {
    std::cerr << "neuron-top: " << line << "\n";
  }
  const std::string json = neuron::top::ViewToJson(*view);
  std::fwrite(json.data(), 1, json.size(), stdout);
  return std::fflush(stdout) == 0 ? 0 : kExitFailure;
}

int Run(const Flags& f) {
  SetUpLogging(f.log_file);
  spdlog::info("neuron-top {} root={} kubelet-dir={} delay={}s snapshot={}", neuron::AgentVersion(),
               f.root, f.kubelet_dir, f.delay, f.snapshot);
  neuron::top::ViewFeedOptions options;
  options.node.root = f.root;
  options.node.lnc = f.lnc;
  options.sampling.libnrt = f.libnrt;
  options.agent = f.agent;
  options.delay = std::chrono::milliseconds(static_cast<int64_t>(f.delay * 1000));
  options.first_delay = std::min(options.delay, std::chrono::milliseconds(250));
  neuron::top::ViewFeed feed(options, MakePodLocator(f));
  if (absl::Status s = feed.Init(); !s.ok()) {
    std::cerr << "neuron-top: " << s.message() << "\n";
    return kExitFailure;
  }
  const neuron::PresenceCheck presence =
      neuron::CheckPresence(neuron::RootPaths(f.root), feed.inventory());
  if (presence.presence != neuron::DevicePresence::kPresent) {
    std::cerr << "neuron-top: " << presence.message << "\n";
    return neuron::PresenceExitCode(presence.presence);
  }
  if (f.snapshot) return PrintSnapshot(feed, options.delay);
  if (::isatty(STDIN_FILENO) == 0 || ::isatty(STDOUT_FILENO) == 0) {
    std::cerr << "neuron-top: needs a terminal; use --snapshot for a JSON document\n";
    return kExitFailure;
  }
  feed.Start();
  const int rc = neuron::top::RunTui(feed, {std::string(neuron::AgentVersion()), !f.no_color});
  feed.Stop();
  spdlog::info("neuron-top exits");
  return rc;
}

int Main(int argc, char** argv) {
  std::setlocale(LC_ALL, "");  // wide characters for ncursesw
  CLI::App app{"neuron-top: live AWS Neuron utilization, memory and processes"};
  Flags f;
  app.add_option("--root", f.node.root,
                 "root of the node's filesystem (default $NEURON_ROOT or /)");
  app.add_option("--kubelet-dir", f.kubelet_dir,
                 "kubelet directory: pod names come from its pod-resources/kubelet.sock");
  app.add_option("--delay", f.delay, "seconds between samples (at least 0.1)")
      ->check(CLI::Range(0.1, 3600.0));
  app.add_flag("--snapshot", f.snapshot, "print one JSON document and exit");
  app.add_option("--lnc", f.node.lnc,
                 "logical NeuronCore config 1|2 (trn2; default $NEURON_LOGICAL_NC_CONFIG, then the "
                 "node's)");
  app.add_option("--log-file", f.log_file,
                 "where to log (never the terminal; default $XDG_STATE_HOME/neuron-top.log, else "
                 "~/.local/state/neuron-top.log)");
  app.add_flag("-C,--no-color", f.no_color, "monochrome");
  app.add_option("--agent", f.agent,
                 "the device plugin's socket to ask for health each refresh (unix:PATH or "
                 "host:port); without an answer health is judged from this process's own read")
      ->capture_default_str();
  app.add_option("--libnrt", f.libnrt,
                 "the Neuron runtime library to read models and tags through (default "
                 "$NEURON_LIBNRT, then libnrt.so.1 from the library path)");
  app.set_version_flag("--version", neuron::VersionLine("neuron-top"),
                       "print the version, revision, build date and compiler, then exit");
  app.footer(
      "Examples:\n"
      "  neuron-top --delay 0.5          refresh twice a second\n"
      "  neuron-top --snapshot | jq .    one JSON document, no terminal UI\n"
      "Exit codes: 0 success (also when live data is unavailable: the status line says why), "
      "1 failure, 2 usage, 3 no Neuron driver, 4 no Neuron device, 5 permission denied.");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : kExitUsage;
  }
  const absl::StatusOr<neuron::NodeFlags> node =
      neuron::ResolveNodeFlags(f.node, neuron::RealGetEnv);
  if (!node.ok()) {
    std::cerr << "neuron-top: " << node.status().message() << "\n";
    return kExitUsage;
  }
  f.root = node->root;
  f.lnc = node->lnc;
  return Run(f);
}

}  // namespace

int main(int argc, char** argv) { return neuron::GuardedMain("neuron-top", Main, argc, argv); }
