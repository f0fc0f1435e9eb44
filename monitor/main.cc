// neuron-exporter: Prometheus metrics (or a neuron-monitor-shaped JSON stream) for a Neuron
// node. Flags: monitor/README.md. Exit codes: 0 on a stop signal, 1 when the node cannot be read
// or the server cannot start, 2 for a bad command line or environment value.
#include <malloc.h>
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>

#include "core/base/component_log.h"
#include "core/model/node_flags.h"
#include "http/http_server.h"
#include "http/web_config.h"
#include "monitor/exporter.h"
#include "monitor/json_stream.h"
#include "monitor/node_source.h"

namespace {

using namespace neuron;
using namespace neuron::monitor;

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
  ExporterOptions exporter;
};

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
  app.add_option("--region", f.exporter.region,
                 "Compat instance label region (docs/architecture.md#instance-identity)");
  app.add_option("--availability-zone", f.exporter.availability_zone,
                 "Compat instance label availability_zone");
  app.add_option("--instance-name", f.exporter.instance_name,
                 "Compat instance label instance_name");
  app.add_option("--subnet-id", f.exporter.subnet_id, "Compat instance label subnet_id");
  app.add_flag("--no-pod-resources", f.no_pod_resources, "Do not query the kubelet for pods");
  app.add_option("--share-window-ms", f.share_window_ms,
                 "Scrapes within this window share one sample");
  app.add_option("--full-sweep-ms", f.full_sweep_ms, "Interval of the full counter sweep");
  app.add_option("--web.threads", f.threads, "HTTP worker threads")->check(CLI::Range(1, 64));
  app.add_option("--log-level", f.log_level, "trace|debug|info|warn|error");
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

NodeSourceOptions SourceOptions(const Flags& f, const NodeFlags& node) {
  NodeSourceOptions so;
  so.root = node.root;
  so.lnc = node.lnc;
  so.kubelet_dir = f.kubelet_dir;
  // The JSON stream is the only reader in json mode: one sample per document.
  so.share_window = std::chrono::milliseconds(f.format == "json" ? 0 : f.share_window_ms);
  so.full_sweep_interval = std::chrono::milliseconds(f.full_sweep_ms);
  so.pod_resources = !f.no_pod_resources;
  return so;
}

// Reads the node and starts the source's threads; false (logged) when the node cannot be read.
bool StartSource(NodeSource& source, spdlog::logger& log) {
  if (absl::Status s = source.Init(); !s.ok()) {
    log.error("cannot read the node under {}: {}", source.options().root.string(), s.ToString());
    return false;
  }
  source.Start();
  return true;
}

// One document every --period seconds on stdout until a stop signal.
int StreamJson(NodeSource& source, const Flags& f, const sigset_t& signals, spdlog::logger& log) {
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
    const long ns =
        std::max<long>(0, std::chrono::duration_cast<std::chrono::nanoseconds>(wait).count());
    timespec ts{ns / 1000000000L, ns % 1000000000L};
    if (sigtimedwait(&signals, nullptr, &ts) > 0) return 0;
  }
}

// /metrics, /healthz and /readyz until a stop signal.
int ServeMetrics(NodeSource& source, const Flags& f, const sigset_t& signals, spdlog::logger& log) {
  HttpServer::Options ho;
  ho.listen_address = f.listen;
  ho.threads = f.threads;
  ho.logger_name = "exporter-http";
  if (!f.web_config_file.empty()) {
    absl::StatusOr<WebConfig> wc = LoadWebConfig(f.web_config_file);
    if (!wc.ok()) {
      log.error("{}", wc.status().ToString());
      return kExitFailure;
    }
    ho.web_config = *std::move(wc);
  }
  // The server starts before the first sample so that /healthz (liveness) answers at once and
  // /readyz says what is still missing; /metrics answers 503 until the source is ready.
  Exporter exporter(source, f.exporter);
  ho.handlers = exporter.Handlers();
  absl::StatusOr<std::unique_ptr<HttpServer>> server = HttpServer::Start(std::move(ho));
  if (!server.ok()) {
    log.error("{}", server.status().ToString());
    return kExitFailure;
  }
  log.info("port {} bound; reading the node", (*server)->port());
  if (!StartSource(source, log)) return kExitFailure;
  // Tests and scripts read the bound port from this line (port 0 picks one); it comes once
  // /metrics serves data.
  log.info("listening on port {}", (*server)->port());
  int sig = 0;
  sigwait(&signals, &sig);
  log.info("stopping on signal {}", sig);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"neuron-exporter: Prometheus metrics for AWS Neuron devices"};
  Flags f;
  AddFlags(app, f);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : kExitUsage;
  }
  const absl::StatusOr<NodeFlags> node = ResolveNodeFlags(f.node, RealGetEnv);
  if (!node.ok()) {
    std::fprintf(stderr, "neuron-exporter: %s\n", std::string(node.status().message()).c_str());
    return kExitUsage;
  }
  // glibc gives each thread that allocates its own arena (up to 8 per CPU), each keeping the
  // freed room of the largest response or snapshot it once held. Two arenas hold what the
  // exporter needs; the rest is resident memory for nothing (the RSS target is 24 MiB).
  mallopt(M_ARENA_MAX, 2);
  spdlog::set_level(spdlog::level::from_str(f.log_level));
  const std::shared_ptr<spdlog::logger> log = ComponentLogger("exporter");
  const sigset_t signals = BlockStopSignals();
  NodeSource source(SourceOptions(f, *node));
  if (f.format == "json") return StreamJson(source, f, signals, *log);
  return ServeMetrics(source, f, signals, *log);
}
