// neuron-ls: the node's Neuron devices as a table (docs/tools-ux.md#neuron-ls).
//   neuron-ls --root DIR [--wide] [--show-all-procs] [--output-format table|json | --json-output]
//             [--topology] [--lnc 1|2] [--agent unix:PATH]
//   neuron-ls --health-check [--device N ...] [--programs DIR] [--state-dir DIR]
//             [--output-format json | --json-output] [--withheld-by-caller]
//             the active check (top/health_check.h)
// The default and --topology formats only read files; the default table and the JSON also ask
// the agent for its health verdicts, and judge from their own read when it cannot be reached
// (top/node_health.h). The process columns (--wide, -a, the JSON) open each device read-only for
// the runtimes' live data, as a monitor does on hardware, and close it before exiting
// (docs/tools-ux.md Q4). Exit codes (top/README.md): 0 success (also when live data
// is unavailable: stderr says why), 1 failure, 2 usage, 3 no Neuron driver, 4 no Neuron device,
// 5 permission denied; --health-check also 6 no reference program or libnrt, 7 nothing could be
// checked.

#include <fmt/format.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <optional>

#include "core/base/component_log.h"
#include "core/base/guarded_main.h"
#include "core/base/version.h"
#include "core/discovery/inventory.h"
#include "core/discovery/make_discovery.h"
#include "core/discovery/presence.h"
#include "core/model/node_flags.h"
#include "core/proc/procinfo.h"
#include "core/sample/datastore.h"
#include "core/sample/runtime_records.h"
#include "top/health_check.h"
#include "top/ls_report.h"

namespace {

constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;
// The datastore reader's first look at every device: a normal open waits while a device is in
// reset (docs/driver-interface.md#abi-open-semantics), which is what this bounds.
constexpr std::chrono::seconds kProbeWait{5};

void Warn(std::string_view text) { std::cerr << "neuron-ls: warning: " << text << "\n"; }

// The listing's flags; --root and --lnc are NodeFlagValues, the check's AddHealthCheckOptions'.
struct ListingOptions {
  bool wide = false;
  bool all = false;
  bool json_array = false;  // -j
  std::string output_format = "table";
  bool topology = false;
  std::string libnrt;
  std::string agent{neuron::top::kDefaultAgent};
};

// Which JSON stdout gets: -j's array, kept byte for byte for the scripts that parse it, or
// --output-format json's object (docs/tools-ux.md#ls-json-object); the two exclude each other.
enum class JsonForm { kNone, kArray, kObject };

JsonForm JsonFormOf(const ListingOptions& o) {
  if (o.json_array) return JsonForm::kArray;
  return o.output_format == "json" ? JsonForm::kObject : JsonForm::kNone;
}

// The runtimes' live datastores, read through the driver's device ABI as on hardware, or why
// they cannot be (in the reader's words).
struct LiveData {
  std::vector<neuron::DatastoreRecord> records;
  std::optional<std::string> unavailable;
  neuron::RuntimeRecordsScan runtime;  // their records through libnrt (runtime versions)
};

LiveData ReadLiveData(const neuron::RootPaths& root, const neuron::Inventory& inv,
                      const std::string& libnrt) {
  neuron::DriverDatastoreOptions options;
  for (const neuron::NeuronDevice& d : inv.devices) options.devices.push_back(d.index);
  const std::shared_ptr<neuron::RuntimeRecordsReader> records =
      neuron::MakeLibnrtRecordsReader(neuron::LibnrtPath(libnrt));
  options.records = records;
  const std::unique_ptr<neuron::DatastoreReader> reader =
      neuron::MakeDriverDatastoreReader(root, std::move(options));
  LiveData live;
  if (!reader->AwaitFirstProbe(kProbeWait)) {
    live.unavailable = fmt::format(
        "the Neuron driver did not answer within {} s (a device in reset?)", kProbeWait.count());
    return live;
  }
  const neuron::SourceState state = reader->State();
  if (!state.up) {
    live.unavailable = state.reason;
    return live;
  }
  neuron::DatastoreScan scan = reader->ReadAll();
  for (const std::string& e : scan.errors) Warn(e);
  live.records = std::move(scan.records);
  live.runtime = records->Latest();
  if (!live.runtime.state.up && !live.records.empty()) {
    Warn("runtime versions unknown (NA): " + live.runtime.state.reason);
  }
  return live;
}

// The agent's verdicts, else this read's, saying so once on stderr.
neuron::top::NodeHealthView ReadHealth(const std::string& root, const neuron::Inventory& inv,
                                       const std::string& agent) {
  neuron::top::HealthSource source(
      {.root = root, .agent = agent, .timeout = neuron::top::kAgentTimeout});
  neuron::top::NodeHealthView view = source.Read(std::make_shared<const neuron::Inventory>(inv));
  if (!view.notice.empty()) Warn(view.notice);
  if (view.stale) Warn("the agent at " + agent + " says its health evidence is stale");
  return view;
}

std::string Render(const neuron::top::LsReport& report, const ListingOptions& o) {
  using neuron::top::LsFormat;
  switch (JsonFormOf(o)) {
    case JsonForm::kArray:
      return neuron::top::RenderLsJson(report);
    case JsonForm::kObject:
      return neuron::top::RenderLsJsonObject(report);
    case JsonForm::kNone:
      break;
  }
  if (o.topology) return neuron::top::RenderLsText(report, LsFormat::kTopology);
  if (o.wide && o.all) return neuron::top::RenderLsText(report, LsFormat::kWideAllProcs);
  if (o.all) return neuron::top::RenderLsText(report, LsFormat::kAllProcs);
  if (o.wide) return neuron::top::RenderLsText(report, LsFormat::kWide);
  return neuron::top::RenderLsText(report, LsFormat::kDefault);
}

// The inventory, with the catalog standing in for root-only files; exits early through `code`.
std::optional<neuron::Inventory> Scan(const neuron::RootPaths& root, int lnc, int* code) {
  // The directory scan: neuron-ls reads files only, wherever it runs.
  absl::StatusOr<std::unique_ptr<neuron::Discovery>> discovery = neuron::MakeDiscovery(
      root, neuron::DiscoveryMode::kDirectory, neuron::DiscoveryOptions{.lnc = lnc});
  absl::StatusOr<neuron::Inventory> inv =
      discovery.ok() ? (*discovery)->Scan() : absl::StatusOr<neuron::Inventory>(discovery.status());
  if (!inv.ok()) {
    std::cerr << "neuron-ls: " << inv.status().message() << "\n";
    *code = kExitFailure;
    return std::nullopt;
  }
  const std::vector<std::string> notes = neuron::FillUnreadableFromCatalog(root, &*inv);
  const neuron::PresenceCheck presence = neuron::CheckPresence(root, *inv);
  if (presence.presence != neuron::DevicePresence::kPresent) {
    std::cerr << "neuron-ls: " << presence.message << "\n";
    *code = neuron::PresenceExitCode(presence.presence);
    return std::nullopt;
  }
  for (const std::string& n : notes) Warn(n);
  for (const std::string& w : inv->warnings) Warn(w);
  if (!presence.missing_nodes_message.empty()) Warn(presence.missing_nodes_message);
  return *std::move(inv);
}

int Run(const std::string& root_dir, int lnc, const ListingOptions& o) {
  const neuron::RootPaths root(root_dir);
  int code = 0;
  const std::optional<neuron::Inventory> inv = Scan(root, lnc, &code);
  if (!inv) return code;
  const bool json = JsonFormOf(o) != JsonForm::kNone;
  // Only the process columns need the devices opened; the other formats stay read-only.
  const bool want_processes = json || (!o.topology && (o.wide || o.all));
  LiveData live;
  if (want_processes) live = ReadLiveData(root, *inv, o.libnrt);
  if (live.unavailable) {
    std::cerr << "neuron-ls: live process data unavailable: " << *live.unavailable
              << (o.all ? "; processes are listed from their open device files only\n"
                        : "; process columns show NA\n");
  }
  const neuron::ProcReader proc(root);
  neuron::top::LsSources src;
  src.inventory = &*inv;
  src.datastores = want_processes ? &live.records : nullptr;
  src.runtime_records = &live.runtime;
  src.live_data_unavailable = live.unavailable;
  src.proc = &proc;
  src.all_processes = o.all && want_processes;
  src.self_pid = proc.SelfPid().value_or(::getpid());
  src.device_numbers = neuron::top::DeviceNumbers(*inv, root);
  // Health shows in the default table and the JSON only: the other formats list processes or
  // links, and cost nothing more.
  neuron::top::NodeHealthView health;
  if (json || (!o.wide && !o.all && !o.topology)) health = ReadHealth(root_dir, *inv, o.agent);
  src.health = health.known ? &health : nullptr;
  const neuron::top::LsReport report = neuron::top::BuildLsReport(src);
  for (const std::string& n : report.notes) Warn(n);
  const std::string out = Render(report, o);
  if (std::fwrite(out.data(), 1, out.size(), stdout) != out.size() || std::fflush(stdout) != 0) {
    return kExitFailure;  // e.g. a closed pipe
  }
  return 0;
}

// The active check over the inventory's devices; exits early through Scan's codes.
int RunCheck(const std::string& root_dir, int lnc, neuron::top::HealthCheckOptions options) {
  int code = 0;
  const std::optional<neuron::Inventory> inv = Scan(neuron::RootPaths(root_dir), lnc, &code);
  if (!inv) return code;
  for (int d : options.devices) {
    if (inv->FindDevice(d) == nullptr) {
      std::cerr << "neuron-ls: --device " << d << ": no such device on this node\n";
      return kExitUsage;
    }
  }
  options.root = root_dir;
  return neuron::top::RunHealthCheck(options, *inv);
}

// --health-check and the options that go with it (top/health_check.h).
void AddHealthCheckOptions(CLI::App* app, bool* health_check,
                           neuron::top::HealthCheckOptions* check) {
  app->add_flag("--health-check", *health_check,
                "run the active health check: reference programs on idle devices and their links "
                "(exit codes below)");
  app->add_option("--device", check->devices, "with --health-check: only this device (repeatable)");
  app->add_option("--programs", check->programs,
                  "with --health-check: the reference programs and their manifest.json")
      ->capture_default_str();
  app->add_option("--state-dir", check->state_dir,
                  "with --health-check: the agent's state directory (the baseline is "
                  "STATE/health-check/baseline.json)")
      ->capture_default_str();
  app->add_option_function<int>(
         "--timeout", [check](int seconds) { check->timeout = std::chrono::seconds(seconds); },
         "with --health-check: seconds a program may run before it counts as a hang and its "
         "child is killed (default 5; at least 3, since libnrt's own timeout runs 2 s inside it)")
      ->check(CLI::Range(3, 3600));
  app->add_flag("--withheld-by-caller", check->withheld_by_caller,
                "with --health-check, for the agent's own use: the caller already holds the "
                "devices' withhold locks");
}

// --root, --lnc and the listing's flags; returns --output-format's option, whose use with -j
// Main refuses.
CLI::Option* AddListingOptions(CLI::App* app, neuron::NodeFlagValues* node, ListingOptions* o) {
  app->add_option("--root", node->root,
                  "root of the node's filesystem (default $NEURON_ROOT or /)");
  app->add_flag("-w,--wide", o->wide, "add PID, COMMAND (up to 80 characters) and RUNTIME VERSION");
  app->add_flag("-a,--show-all-procs", o->all,
                "also processes holding a device without a runtime datastore");
  CLI::Option* format =
      app->add_option("--output-format", o->output_format,
                      "table (the default) or json: one object with the instance type and id, "
                      "the driver version and the node's UltraServer place, its devices beneath; "
                      "facts that cannot be read are null")
          ->check(CLI::IsMember({"table", "json"}));
  app->add_flag("-j,--json-output", o->json_array,
                "the JSON array of devices alone, as before --output-format json (kept for "
                "existing scripts)");
  app->add_flag("-t,--topology", o->topology, "the NeuronLink topology drawing");
  app->add_option("--lnc", node->lnc,
                  "logical NeuronCore config 1|2 (trn2; default $NEURON_LOGICAL_NC_CONFIG, then "
                  "the node's)");
  app->add_option("--libnrt", o->libnrt,
                  "the Neuron runtime library to read runtime versions through (default "
                  "$NEURON_LIBNRT, then libnrt.so.1 from the library path)");
  app->add_option("--agent", o->agent,
                  "the device plugin's socket to ask for health (unix:PATH or host:port); without "
                  "an answer health is judged from this read alone")
      ->capture_default_str();
  return format;
}

int Main(int argc, char** argv) {
  // The check's child mode runs one program and reports; it shares nothing with the listing.
  if (argc > 1 && argv[1] == neuron::top::kChildModeFlag) {
    return neuron::top::HealthCheckChildMain(std::vector<std::string>(argv + 2, argv + argc));
  }
  // Messages from core (discovery warnings) go to stderr so stdout stays the table or JSON.
  auto logger = spdlog::stderr_logger_mt("neuron-ls");
  logger->set_level(spdlog::level::warn);
  logger->set_pattern("neuron-ls: %l: %v");
  spdlog::set_default_logger(logger);
  // The datastore reader's own warning repeats the reason ReadLiveData prints in a sentence.
  neuron::ComponentLogger("datastore")->set_level(spdlog::level::err);
  neuron::ComponentLogger("libnrt")->set_level(spdlog::level::err);
  // The own health read's evidence lines; its verdicts are the table's, its notice a warning.
  neuron::ComponentLogger("top.health")->set_level(spdlog::level::err);

  CLI::App app{"neuron-ls: list the node's AWS Neuron devices, their cores, memory and processes"};
  neuron::NodeFlagValues node;
  ListingOptions listing;
  const CLI::Option* format = AddListingOptions(&app, &node, &listing);
  bool health_check = false;
  neuron::top::HealthCheckOptions check;
  AddHealthCheckOptions(&app, &health_check, &check);
  app.set_version_flag("--version", neuron::VersionLine("neuron-ls"),
                       "print the version, revision, build date and compiler, then exit");
  app.footer(
      "Examples:\n"
      "  neuron-ls                 the devices, their cores and memory\n"
      "  neuron-ls --wide          and the processes using them\n"
      "  neuron-ls --output-format json | jq .\n"
      "                            the same as JSON, with the instance and UltraServer facts\n"
      "  neuron-ls --health-check  run reference programs on idle devices and links\n"
      "Exit codes: 0 success, 1 failure (--health-check: a device or link failed), 2 usage, 3 no "
      "Neuron driver, 4 no Neuron device, 5 permission denied, 6 no reference program or libnrt "
      "for --health-check, 7 --health-check could check no device.");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : kExitUsage;
  }
  const absl::StatusOr<neuron::NodeFlags> flags =
      neuron::ResolveNodeFlags(node, neuron::RealGetEnv);
  if (!flags.ok()) {
    std::cerr << "neuron-ls: " << flags.status().message() << "\n";
    return kExitUsage;
  }
  if (format->count() > 0 && listing.json_array) {
    std::cerr << "neuron-ls: --output-format and --json-output (-j) are alternatives: give one\n";
    return kExitUsage;
  }
  if (health_check) {
    // The check has one JSON form, whichever flag asks for it.
    check.json = JsonFormOf(listing) != JsonForm::kNone;
    check.libnrt = listing.libnrt;
    check.agent = listing.agent;
    return RunCheck(flags->root, flags->lnc, std::move(check));
  }
  if (!check.devices.empty() || check.withheld_by_caller) {
    std::cerr << "neuron-ls: --device and --withheld-by-caller go with --health-check\n";
    return kExitUsage;
  }
  return Run(flags->root, flags->lnc, listing);
}

}  // namespace

int main(int argc, char** argv) { return neuron::GuardedMain("neuron-ls", Main, argc, argv); }
