// neuron-exporter: Prometheus metrics (or a neuron-monitor-shaped JSON stream) for a Neuron
// node. Flags: monitor/README.md. Exit codes: 0 on a stop signal, 1 when the node cannot be read
// or the server cannot start, 2 for a bad command line or environment value.
#include <fmt/format.h>
#include <malloc.h>
#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>

#include "core/base/component_log.h"
#include "core/base/log_setup.h"
#include "core/base/version.h"
#include "core/model/node_flags.h"
#include "http/http_server.h"
#include "http/local_client.h"
#include "http/web_config.h"
#include "monitor/exporter.h"
#include "monitor/exporter_state.h"
#include "monitor/front.h"
#include "monitor/json_stream.h"

namespace neuron::monitor {
namespace {

constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

// The command line as given; --root and --lnc are resolved with the environment afterwards.
struct Flags {
  NodeFlagValues node;
  std::string kubelet_dir = "/var/lib/kubelet";
  std::string listen = ":9478";
  std::string web_config_file;
  std::string format = "prometheus";
  double period = 5;
  bool no_pod_resources = false;
  int share_window_ms = 1000;
  int full_sweep_ms = 10000;
  int threads = 4;
  std::string log_level = "info";
  std::string log_format = "text";
  bool disable_exporter_metrics = false;
  std::string libnrt;  // --libnrt; LibnrtPath() resolves it with NEURON_LIBNRT
  // Indexed like CollectorNames(): --collector.<name> / --no-collector.<name>.
  std::vector<char> collectors = std::vector<char>(CollectorNames().size(), 1);
  ExporterOptions exporter;
  FrontOptions front;  // front mode when front.upstream is set
  int front_timeout_ms = 5000;
  std::string probe;  // --probe PATH
};

// The collector groups' switches, one pair per group, as node_exporter spells them.
void AddCollectorFlags(CLI::App& app, Flags& f) {
  const std::vector<std::string_view>& names = CollectorNames();
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string name(names[i]);
    app.add_flag_function(
           fmt::format("--collector.{0},!--no-collector.{0}", name),
           [&f, i](std::int64_t count) { f.collectors[i] = count > 0 ? 1 : 0; },
           fmt::format("Enable the {0} collector (default on; --no-collector.{0} turns it off)",
                       name))
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)  // the last one wins
        ->group("Collectors");
  }
}

void AddFlags(CLI::App& app, Flags& f) {
  app.add_option("--root", f.node.root, "Root of the node's files (env NEURON_ROOT; default /)");
  app.add_option("--kubelet-dir", f.kubelet_dir, "Kubelet directory (pod-resources/kubelet.sock)");
  app.add_option("--web.listen-address", f.listen, "Address to serve /metrics on (host:port)");
  app.add_option("--web.config.file", f.web_config_file,
                 "exporter-toolkit web config (TLS, basic auth)");
  app.add_flag("--compat", f.exporter.compat, "Add AWS neuron-monitor-prometheus metric names");
  app.add_option("--format", f.format, "prometheus (serve /metrics) or json (stdout stream)")
      ->check(CLI::IsMember({"prometheus", "json"}));
  app.add_option("--period", f.period, "JSON mode: seconds between documents")
      ->check(CLI::PositiveNumber);
  app.add_option("--lnc", f.node.lnc,
                 "Logical NeuronCore config 1|2 (env NEURON_LOGICAL_NC_CONFIG)");
  app.add_option("--compat.instance-labels", f.exporter.compat_instance_labels,
                 "Compat mode: put instance labels on every compat series (true|false)");
  app.add_option(
      "--region", f.exporter.region,
      "With --compat: the region label (default: the node's AWS region, e.g. us-east-2)");
  app.add_option("--availability-zone", f.exporter.availability_zone,
                 "With --compat: the availability_zone label");
  app.add_option("--instance-name", f.exporter.instance_name,
                 "With --compat: the instance_name label");
  app.add_option("--subnet-id", f.exporter.subnet_id, "With --compat: the subnet_id label");
  app.add_flag("--no-pod-resources", f.no_pod_resources, "Do not query the kubelet for pods");
  app.add_option("--libnrt", f.libnrt,
                 "The Neuron runtime library to read the runtimes' records through (env "
                 "NEURON_LIBNRT; default libnrt.so.1 from the library path)");
  app.add_option("--share-window-ms", f.share_window_ms,
                 "Scrapes within this window share one sample");
  app.add_option("--full-sweep-ms", f.full_sweep_ms, "Interval of the full counter sweep");
  app.add_option("--web.threads", f.threads, "HTTP worker threads")->check(CLI::Range(1, 64));
  app.add_option("--web.telemetry-path", f.exporter.telemetry_path,
                 "Path under which to serve the metrics (default /metrics)");
  app.add_flag("--web.disable-exporter-metrics", f.disable_exporter_metrics,
               "Leave out the exporter process's own metrics (process_*)");
  // The unprivileged process that faces the network in the DaemonSet (the collector is privileged).
  static constexpr char kFrontGroup[] = "Front: serve the network, forward to a collector";
  app.add_option("--front.upstream", f.front.upstream,
                 "Front mode: read nothing of the node; forward each authorized scrape to the "
                 "collector at this address (unix:PATH)")
      ->group(kFrontGroup);
  app.add_option("--front.plugin-upstream", f.front.plugin_upstream,
                 "Front mode: serve the device plugin's /metrics at /plugin/metrics from here")
      ->group(kFrontGroup);
  app.add_option("--front.timeout-ms", f.front_timeout_ms,
                 "Front mode: give up on an upstream after this long (answer 503)")
      ->check(CLI::Range(1, 600000))
      ->group(kFrontGroup);
  app.add_option("--probe", f.probe,
                 "GET PATH from the exporter running at --web.listen-address (unix:PATH for the "
                 "collector) and exit 0 on 200: the DaemonSet's exec probes");
  app.add_option("--log.level,--log-level", f.log_level,
                 "Log level: trace|debug|info|warn|error (default info)");
  app.add_option("--log.format", f.log_format, "Log format: text|json (default text)")
      ->check(CLI::IsMember({"text", "json"}));
  AddCollectorFlags(app, f);
  app.set_version_flag("--version", VersionLine("neuron-exporter"),
                       "Print the version, revision, build date and compiler, then exit");
  app.footer(
      "Examples:\n"
      "  neuron-exporter --web.listen-address=:9478 --log.format=json\n"
      "  neuron-exporter --no-collector.efa --web.telemetry-path=/neuron/metrics\n"
      "  neuron-exporter --compat --region=us-east-2 --format=json --period=5\n"
      "  neuron-exporter --web.listen-address=unix:/run/neuron-node-agent/exporter.sock  # "
      "collector\n"
      "  neuron-exporter --front.upstream=unix:/run/neuron-node-agent/exporter.sock       # its "
      "front");
}

// SIGTERM and SIGINT, blocked in every thread started from here on: the main thread takes them
// synchronously (sigwait, sigtimedwait).
sigset_t BlockStopSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return signals;
}

ExporterStateOptions SourceOptions(const Flags& f, const NodeFlags& node) {
  ExporterStateOptions so;
  so.node.root = node.root;
  so.node.lnc = node.lnc;
  so.kubelet_dir = f.kubelet_dir;
  so.sampling.libnrt = f.libnrt;
  // The JSON stream is the only reader in json mode: one sample per document.
  so.share_window = std::chrono::milliseconds(f.format == "json" ? 0 : f.share_window_ms);
  so.full_sweep_interval = std::chrono::milliseconds(f.full_sweep_ms);
  so.pod_resources = !f.no_pod_resources;
  return so;
}

// Reads the node and starts the source's threads; false (logged) when the node cannot be read.
bool StartSource(ExporterState& source, spdlog::logger& log) {
  if (absl::Status s = source.Init(); !s.ok()) {
    log.error("cannot read the node under {}: {}", source.options().node.root.string(),
              s.ToString());
    return false;
  }
  source.Start();
  return true;
}

// One document every --period seconds on stdout until a stop signal.
int StreamJson(ExporterState& source, const Flags& f, const sigset_t& signals,
               spdlog::logger& log) {
  if (!StartSource(source, log)) return kExitFailure;
  JsonStream stream(source, f.exporter);
  const auto step = std::chrono::duration<double>(f.period);
  auto next = std::chrono::steady_clock::now();
  for (;;) {
    std::string doc = stream.Next();
    std::fwrite(doc.data(), 1, doc.size(), stdout);
    std::fputc('\n', stdout);
    std::fflush(stdout);
    next += std::chrono::duration_cast<std::chrono::steady_clock::duration>(step);
    const auto wait = next - std::chrono::steady_clock::now();
    const int64_t ns =
        std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::nanoseconds>(wait).count());
    timespec ts{};
    ts.tv_sec = ns / 1000000000;
    ts.tv_nsec = ns % 1000000000;
    if (sigtimedwait(&signals, nullptr, &ts) > 0) return 0;
  }
}

// The server's options from the flags: address, threads, the web config (false, logged, when it
// cannot be read).
bool ServerOptions(const Flags& f, spdlog::logger& log, HttpServer::Options& ho) {
  ho.listen_address = f.listen;
  ho.threads = f.threads;
  ho.logger_name = "exporter-http";
  if (f.web_config_file.empty()) return true;
  absl::StatusOr<WebConfig> wc = LoadWebConfig(f.web_config_file);
  if (!wc.ok()) {
    log.error("{}", wc.status().ToString());
    return false;
  }
  ho.web_config = *std::move(wc);
  ho.web_config_file = f.web_config_file;  // basic_auth_users are re-read when it changes
  return true;
}

// --probe: the collector has no network port, so the kubelet probes it with this command.
int Probe(const Flags& f) {
  if (absl::Status s = neuron::Probe(f.listen, f.probe); !s.ok()) {
    std::fprintf(stderr, "neuron-exporter --probe: %s\n", std::string{s.message()}.c_str());
    return kExitFailure;
  }
  return 0;
}

// "port 9478", or "unix:PATH" for a Unix socket.
std::string ListeningOn(const Flags& f, const HttpServer& server) {
  return f.listen.rfind("unix:", 0) == 0 ? f.listen : fmt::format("port {}", server.port());
}

// Front mode: the network side only, forwarding to the collector (monitor/front.h). It reads
// nothing of the node.
int ServeFront(Flags f, const sigset_t& signals, spdlog::logger& log) {
  HttpServer::Options ho;
  if (!ServerOptions(f, log, ho)) return kExitFailure;
  f.front.telemetry_path = f.exporter.telemetry_path;
  f.front.timeout = std::chrono::milliseconds(f.front_timeout_ms);
  f.front.threads = f.threads;
  ho.handlers = FrontHandlers(f.front);
  absl::StatusOr<std::unique_ptr<HttpServer>> server = HttpServer::Start(std::move(ho));
  if (!server.ok()) {
    log.error("{}", server.status().ToString());
    return kExitFailure;
  }
  log.info(
      "front: forwarding {} to {}{}", f.front.telemetry_path, f.front.upstream,
      f.front.plugin_upstream.empty() ? "" : ", /plugin/metrics to " + f.front.plugin_upstream);
  log.info("listening on {}", ListeningOn(f, **server));
  int sig = 0;
  sigwait(&signals, &sig);
  log.info("stopping on signal {}", sig);
  return 0;
}

// The metrics (--web.telemetry-path), /healthz, /readyz and / until a stop signal.
int ServeMetrics(ExporterState& source, const Flags& f, const sigset_t& signals,
                 spdlog::logger& log) {
  HttpServer::Options ho;
  if (!ServerOptions(f, log, ho)) return kExitFailure;
  // The server starts before the first sample so that /healthz (liveness) answers at once and
  // /readyz says what is still missing; /metrics answers 503 until the source is ready.
  Exporter exporter(source, f.exporter);
  ho.handlers = exporter.Handlers();
  absl::StatusOr<std::unique_ptr<HttpServer>> server = HttpServer::Start(std::move(ho));
  if (!server.ok()) {
    log.error("{}", server.status().ToString());
    return kExitFailure;
  }
  log.info("{} bound; reading the node", ListeningOn(f, **server));
  if (!StartSource(source, log)) return kExitFailure;
  // Tests and scripts read the bound port (port 0 picks one) or the socket from this line; it
  // comes once /metrics serves data.
  log.info("listening on {}", ListeningOn(f, **server));
  int sig = 0;
  sigwait(&signals, &sig);
  log.info("stopping on signal {}", sig);
  return 0;
}

int Main(int argc, char** argv) {
  CLI::App app{"neuron-exporter: Prometheus metrics for AWS Neuron devices"};
  Flags f;
  AddFlags(app, f);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : kExitUsage;
  }
  if (!f.probe.empty()) return Probe(f);
  const absl::StatusOr<NodeFlags> node = ResolveNodeFlags(f.node, RealGetEnv);
  absl::Status usage = node.status();
  if (usage.ok()) usage = ValidateTelemetryPath(f.exporter.telemetry_path);
  if (usage.ok()) {
    // Logs go to stderr, as every Prometheus exporter's do: stdout carries the --format json
    // stream, which a log line would corrupt.
    spdlog::set_default_logger(spdlog::stderr_color_mt("neuron-exporter"));
    usage = ConfigureLogging(f.log_level, f.log_format);
  }
  if (!usage.ok()) {
    const std::string message(usage.message());
    std::fprintf(stderr, "neuron-exporter: %s\n", message.c_str());
    return kExitUsage;
  }
  f.exporter.exporter_metrics = !f.disable_exporter_metrics;
  for (size_t i = 0; i < f.collectors.size(); ++i) {
    if (!f.collectors[i]) f.exporter.disabled_collectors.emplace(CollectorNames()[i]);
  }
  // glibc gives each thread that allocates its own arena (up to 8 per CPU), each keeping the
  // freed room of the largest response or snapshot it once held. Two arenas hold what the
  // exporter needs; the rest is resident memory for nothing (the RSS target is 24 MiB).
  mallopt(M_ARENA_MAX, 2);
  const std::shared_ptr<spdlog::logger> log = ComponentLogger("exporter");
  const sigset_t signals = BlockStopSignals();
  if (!f.front.upstream.empty()) return ServeFront(f, signals, *log);
  ExporterState source(SourceOptions(f, *node));
  if (f.format == "json") return StreamJson(source, f, signals, *log);
  return ServeMetrics(source, f, signals, *log);
}

}  // namespace
}  // namespace neuron::monitor

// What nothing below handled (a std::bad_alloc, a filesystem error) ends the exporter with one
// line and status 1 rather than std::terminate's abort.
int main(int argc, char** argv) {
  try {
    return neuron::monitor::Main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "neuron-exporter: %s\n", e.what());
    return 1;
  }
}
