// neuron-ls: the node's Neuron devices as a table (TOOLS-UX.md §1).
//   neuron-ls --root DIR [--wide] [--show-all-procs] [--json-output] [--topology] [--lnc 1|2]
// Read-only, opens no device node, so any number may run at once (TOOLS-UX Q4).
// Exit codes (top/README.md): 0 success, 1 failure, 2 usage, 3 no Neuron driver, 4 no Neuron
// device, 5 permission denied.

#include <fmt/format.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "core/datastore.h"
#include "core/inventory.h"
#include "core/presence.h"
#include "core/procinfo.h"
#include "top/ls_report.h"

namespace {

constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;
constexpr int kExitNoDriver = 3;
constexpr int kExitNoDevices = 4;
constexpr int kExitPermission = 5;

int ExitCodeFor(neuron::DevicePresence p) {
  switch (p) {
    case neuron::DevicePresence::kNoDriver:
      return kExitNoDriver;
    case neuron::DevicePresence::kNoDevices:
      return kExitNoDevices;
    case neuron::DevicePresence::kPermissionDenied:
      return kExitPermission;
    case neuron::DevicePresence::kPresent:
      break;
  }
  return 0;
}

int Run(const std::string& root_dir, int lnc, bool wide, bool all, bool json, bool topology) {
  const neuron::RootPaths root(root_dir);
  std::unique_ptr<neuron::Discovery> discovery =
      neuron::MakeDirectoryDiscovery(root, neuron::DiscoveryOptions{.lnc = lnc});
  absl::StatusOr<neuron::Inventory> inv = discovery->Scan();
  if (!inv.ok()) {
    std::cerr << "neuron-ls: " << inv.status().message() << "\n";
    return kExitFailure;
  }
  const neuron::PresenceCheck presence = neuron::CheckPresence(root, *inv);
  if (presence.presence != neuron::DevicePresence::kPresent) {
    std::cerr << "neuron-ls: " << presence.message << "\n";
    return ExitCodeFor(presence.presence);
  }
  for (const std::string& w : inv->warnings) std::cerr << "neuron-ls: warning: " << w << "\n";
  if (!presence.missing_nodes_message.empty()) {
    std::cerr << "neuron-ls: warning: " << presence.missing_nodes_message << "\n";
  }

  const bool want_processes = wide || all || json;
  std::vector<neuron::DatastoreRecord> records;
  if (want_processes) {
    neuron::DatastoreScan scan = neuron::MakeFileDatastoreReader(root)->ReadAll();
    for (const std::string& e : scan.errors) std::cerr << "neuron-ls: warning: " << e << "\n";
    records = std::move(scan.records);
  }
  const neuron::ProcReader proc(root);
  neuron::top::LsSources src;
  src.inventory = &*inv;
  src.datastores = want_processes ? &records : nullptr;
  src.proc = &proc;
  src.all_processes = all;
  for (const neuron::NeuronDevice& d : inv->devices) {
    src.device_node_paths.push_back({d.dev_node, root.DevNeuron(d.index).string()});
  }
  const neuron::top::LsReport report = neuron::top::BuildLsReport(src);

  std::string out;
  if (json) {
    out = neuron::top::RenderLsJson(report);
  } else if (topology) {
    out = neuron::top::RenderLsText(report, neuron::top::LsFormat::kTopology);
  } else if (wide && all) {
    out = neuron::top::RenderLsText(report, neuron::top::LsFormat::kWideAllProcs);
  } else if (all) {
    out = neuron::top::RenderLsText(report, neuron::top::LsFormat::kAllProcs);
  } else if (wide) {
    out = neuron::top::RenderLsText(report, neuron::top::LsFormat::kWide);
  } else {
    out = neuron::top::RenderLsText(report, neuron::top::LsFormat::kDefault);
  }
  if (std::fwrite(out.data(), 1, out.size(), stdout) != out.size() || std::fflush(stdout) != 0) {
    return kExitFailure;  // e.g. a closed pipe
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Messages from core (discovery warnings) go to stderr so stdout stays the table or JSON.
  auto logger = spdlog::stderr_logger_mt("neuron-ls");
  logger->set_level(spdlog::level::warn);
  spdlog::set_default_logger(logger);

  CLI::App app{"neuron-ls: list the node's AWS Neuron devices (see top/README.md)"};
  const char* env_root = std::getenv("NEURON_ROOT");
  std::string root = env_root != nullptr && *env_root != '\0' ? env_root : "/";
  int lnc = 0;
  bool wide = false;
  bool all = false;
  bool json = false;
  bool topology = false;
  app.add_option("--root", root, "root of the node's filesystem (default $NEURON_ROOT or /)");
  app.add_flag("-w,--wide", wide, "add PID, COMMAND (up to 80 characters) and RUNTIME VERSION");
  app.add_flag("-a,--show-all-procs", all,
               "also processes holding a device without a runtime datastore");
  app.add_flag("-j,--json-output", json, "one JSON object per device");
  app.add_flag("-t,--topology", topology, "the NeuronLink topology drawing");
  app.add_option("--lnc", lnc, "logical NeuronCore config 1|2 (trn2; default: the node's)")
      ->envname("NEURON_LOGICAL_NC_CONFIG")
      ->check(CLI::IsMember({0, 1, 2}));
  app.footer(
      "Exit codes: 0 success, 1 failure, 2 usage, 3 no Neuron driver, 4 no Neuron device, "
      "5 permission denied.");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : kExitUsage;
  }
  return Run(root, lnc, wide, all, json, topology);
}
