// neuron-top: live NeuronCore utilization, vCPU, memory and processes (TOOLS-UX.md §2).
//   neuron-top --root DIR [--kubelet-dir DIR] [--delay SECONDS] [--snapshot] [--lnc 1|2]
//              [--log-file FILE] [--no-color]
// --snapshot prints one JSON document (the view model) and exits, without a terminal. Logs go
// to a file (--log-file, default $XDG_STATE_HOME/neuron-top.log), never to the terminal.
// Exit codes as neuron-ls (top/README.md).

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/null_sink.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <clocale>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <thread>

#include "core/pod_identity.h"
#include "core/presence.h"
#include "core/procinfo.h"
#include "proto/pod_resources_locator.h"
#include "top/collector.h"
#include "top/curses_ui.h"
#include "top/view_model.h"

#ifndef NEURON_TOP_VERSION
#define NEURON_TOP_VERSION "0.0.0"
#endif

namespace {

constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

std::string DefaultLogFile() {
  if (const char* state = std::getenv("XDG_STATE_HOME"); state != nullptr && *state != '\0') {
    return std::string(state) + "/neuron-top.log";
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    return std::string(home) + "/.local/state/neuron-top.log";
  }
  return "/tmp/neuron-top-" + std::to_string(::getuid()) + ".log";
}

// A file logger for every component; a null one when the file cannot be opened (never the
// terminal, which ncurses owns).
void SetUpLogging(const std::string& path) {
  std::shared_ptr<spdlog::logger> log;
  try {
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
    log = std::make_shared<spdlog::logger>(
        "neuron-top", std::make_shared<spdlog::sinks::basic_file_sink_mt>(path));
  } catch (const spdlog::spdlog_ex&) {
    log = std::make_shared<spdlog::logger>("neuron-top",
                                           std::make_shared<spdlog::sinks::null_sink_mt>());
  }
  log->set_level(spdlog::level::info);
  log->flush_on(spdlog::level::info);
  spdlog::set_default_logger(log);
}

int ExitCodeFor(neuron::DevicePresence p) {
  switch (p) {
    case neuron::DevicePresence::kNoDriver:
      return 3;
    case neuron::DevicePresence::kNoDevices:
      return 4;
    case neuron::DevicePresence::kPermissionDenied:
      return 5;
    case neuron::DevicePresence::kPresent:
      break;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::setlocale(LC_ALL, "");  // wide characters for ncursesw
  CLI::App app{"neuron-top: live AWS Neuron utilization, memory and processes (top/README.md)"};
  const char* env_root = std::getenv("NEURON_ROOT");
  std::string root = env_root != nullptr && *env_root != '\0' ? env_root : "/";
  std::string kubelet_dir = "/var/lib/kubelet";
  double delay = 1.0;
  bool snapshot = false;
  int lnc = 0;
  std::string log_file = DefaultLogFile();
  bool no_color = false;
  app.add_option("--root", root, "root of the node's filesystem (default $NEURON_ROOT or /)");
  app.add_option("--kubelet-dir", kubelet_dir,
                 "kubelet directory: pod names come from its pod-resources/kubelet.sock");
  app.add_option("--delay", delay, "seconds between samples (at least 0.1)")
      ->check(CLI::Range(0.1, 3600.0));
  app.add_flag("--snapshot", snapshot, "print one JSON document and exit");
  app.add_option("--lnc", lnc, "logical NeuronCore config 1|2 (trn2; default: the node's)")
      ->envname("NEURON_LOGICAL_NC_CONFIG")
      ->check(CLI::IsMember({0, 1, 2}));
  app.add_option("--log-file", log_file, "where to log (never the terminal)");
  app.add_flag("-C,--no-color", no_color, "monochrome");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : kExitUsage;
  }
  SetUpLogging(log_file);
  spdlog::info("neuron-top {} root={} kubelet-dir={} delay={}s snapshot={}", NEURON_TOP_VERSION,
               root, kubelet_dir, delay, snapshot);

  const neuron::RootPaths paths(root);
  neuron::top::CollectorOptions options;
  options.root = root;
  options.lnc = lnc;
  options.delay = std::chrono::milliseconds(static_cast<int64_t>(delay * 1000));
  options.first_delay = std::min(options.delay, std::chrono::milliseconds(250));
  // Pods: the cgroup tells the UID and container id, PodResources the names (pod_identity.h).
  neuron::PodResourcesCache::Options pod_options;
  pod_options.socket_path = kubelet_dir + "/pod-resources/kubelet.sock";
  auto pod_resources = std::make_shared<neuron::PodResourcesCache>(pod_options);
  std::vector<std::unique_ptr<neuron::PodLocator>> locators;
  locators.push_back(neuron::MakeCgroupPodLocator(neuron::ProcReader(paths)));
  locators.push_back(neuron::MakePodResourcesLocator(pod_resources));
  neuron::top::Collector collector(options, neuron::MakeChainedPodLocator(std::move(locators)));
  if (absl::Status s = collector.Init(); !s.ok()) {
    std::cerr << "neuron-top: " << s.message() << "\n";
    return kExitFailure;
  }
  const neuron::PresenceCheck presence = neuron::CheckPresence(paths, collector.inventory());
  if (presence.presence != neuron::DevicePresence::kPresent) {
    std::cerr << "neuron-top: " << presence.message << "\n";
    return ExitCodeFor(presence.presence);
  }

  if (snapshot) {
    std::this_thread::sleep_for(options.delay);
    const std::string json = neuron::top::ViewToJson(*collector.Step());
    std::fwrite(json.data(), 1, json.size(), stdout);
    return std::fflush(stdout) == 0 ? 0 : kExitFailure;
  }
  if (::isatty(STDIN_FILENO) == 0 || ::isatty(STDOUT_FILENO) == 0) {
    std::cerr << "neuron-top: needs a terminal; use --snapshot for a JSON document\n";
    return kExitFailure;
  }
  collector.Start();
  const int rc = neuron::top::RunTui(collector, {NEURON_TOP_VERSION, !no_color});
  collector.Stop();
  spdlog::info("neuron-top exits");
  return rc;
}
