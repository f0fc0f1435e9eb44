// neuron-exporter: Prometheus metrics (or a neuron-monitor-shaped JSON stream) for a Neuron
// node. Flags: monitor/README.md.
#include <malloc.h>
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <thread>

#include "core/base/component_log.h"
#include "http/http_server.h"
#include "http/web_config.h"
#include "monitor/exporter.h"
#include "monitor/json_stream.h"
#include "monitor/node_source.h"

namespace {

std::string EnvOr(const char* name, std::string fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace neuron;
  using namespace neuron::monitor;
  CLI::App app{"neuron-exporter: Prometheus metrics for AWS Neuron devices"};
  std::string root = EnvOr("NEURON_ROOT", "/");
  std::string kubelet_dir = "/var/lib/kubelet";
  std::string listen = ":9478";
  std::string web_config_file;
  std::string format = "prometheus";
  double period = 5;
  int lnc = 0;
  if (const char* v = std::getenv("NEURON_LOGICAL_NC_CONFIG")) lnc = std::atoi(v);
  bool no_pod_resources = false;
  int share_window_ms = 1000;
  int full_sweep_ms = 10000;
  int threads = 4;
  std::string log_level = "info";
  ExporterOptions eo;
  app.add_option("--root", root, "Root of the node's files (env NEURON_ROOT)");
  app.add_option("--kubelet-dir", kubelet_dir, "Kubelet directory (pod-resources/kubelet.sock)");
  app.add_option("--web.listen-address", listen, "Address to serve /metrics on (host:port)");
  app.add_option("--web.config.file", web_config_file,
                 "exporter-toolkit web config (TLS, basic auth)");
  app.add_flag("--compat", eo.compat, "Add AWS neuron-monitor-prometheus metric names");
  app.add_option("--format", format, "prometheus (serve /metrics) or json (stdout stream)")
      ->check(CLI::IsMember({"prometheus", "json"}));
  app.add_option("--period", period, "JSON mode: seconds between documents")
      ->check(CLI::PositiveNumber);
  app.add_option("--lnc", lnc, "Logical NeuronCore config 1|2 (env NEURON_LOGICAL_NC_CONFIG)")
      ->check(CLI::IsMember({0, 1, 2}));
  app.add_option("--compat.instance-labels", eo.compat_instance_labels,
                 "Compat mode: put instance labels on every compat series (true|false)");
  app.add_option("--region", eo.region, "Compat instance label region (decision 11)");
  app.add_option("--availability-zone", eo.availability_zone,
                 "Compat instance label availability_zone");
  app.add_option("--instance-name", eo.instance_name, "Compat instance label instance_name");
  app.add_option("--subnet-id", eo.subnet_id, "Compat instance label subnet_id");
  app.add_flag("--no-pod-resources", no_pod_resources, "Do not query the kubelet for pods");
  app.add_option("--share-window-ms", share_window_ms,
                 "Scrapes within this window share one sample");
  app.add_option("--full-sweep-ms", full_sweep_ms, "Interval of the full counter sweep");
  app.add_option("--web.threads", threads, "HTTP worker threads")->check(CLI::Range(1, 64));
  app.add_option("--log-level", log_level, "trace|debug|info|warn|error");
  CLI11_PARSE(app, argc, argv);
  // glibc gives each thread that allocates its own arena (up to 8 per CPU), each keeping the
  // freed room of the largest response or snapshot it once held. Two arenas hold what the
  // exporter needs; the rest is resident memory for nothing (the RSS target is 24 MiB).
  mallopt(M_ARENA_MAX, 2);
  spdlog::set_level(spdlog::level::from_str(log_level));
  auto log = ComponentLogger("exporter");

  // Signals are taken synchronously by the main thread; block them before any thread starts.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  NodeSourceOptions so;
  so.root = root;
  so.kubelet_dir = kubelet_dir;
  so.lnc = lnc;
  // The JSON stream is the only reader in json mode: one sample per document.
  so.share_window = std::chrono::milliseconds(format == "json" ? 0 : share_window_ms);
  so.full_sweep_interval = std::chrono::milliseconds(full_sweep_ms);
  so.pod_resources = !no_pod_resources;
  NodeSource source(so);

  if (format == "json") {
    if (absl::Status s = source.Init(); !s.ok()) {
      log->error("cannot read the node under {}: {}", root, s.ToString());
      return 1;
    }
    source.Start();
    JsonStream stream(source, eo);
    const auto step = std::chrono::duration<double>(period);
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

  HttpServer::Options ho;
  ho.listen_address = listen;
  ho.threads = threads;
  ho.logger_name = "exporter-http";
  if (!web_config_file.empty()) {
    absl::StatusOr<WebConfig> wc = LoadWebConfig(web_config_file);
    if (!wc.ok()) {
      log->error("{}", wc.status().ToString());
      return 1;
    }
    ho.web_config = *std::move(wc);
  }
  // The server starts before the first sample so that /healthz (liveness) answers at once and
  // /readyz says what is still missing; /metrics answers 503 until the source is ready.
  Exporter exporter(source, eo);
  ho.handlers = exporter.Handlers();
  absl::StatusOr<std::unique_ptr<HttpServer>> server = HttpServer::Start(std::move(ho));
  if (!server.ok()) {
    log->error("{}", server.status().ToString());
    return 1;
  }
  log->info("port {} bound; reading the node", (*server)->port());
  if (absl::Status s = source.Init(); !s.ok()) {
    log->error("cannot read the node under {}: {}", root, s.ToString());
    return 1;
  }
  source.Start();
  // Tests and scripts read the bound port from this line (port 0 picks one); it comes once
  // /metrics serves data.
  log->info("listening on port {}", (*server)->port());
  int sig = 0;
  sigwait(&signals, &sig);
  log->info("stopping on signal {}", sig);
  return 0;
}
