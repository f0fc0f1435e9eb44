// neuron-device-plugin: makes Neuron devices, NeuronCores and EFA interfaces schedulable through
// the kubelet's device-plugin API. plugin/README.md documents the flags and the config file.

#include <malloc.h>
#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include "core/http_server.h"
#include "plugin/config.h"
#include "plugin/plugin.h"

namespace {

using neuron::HttpRequest;
using neuron::HttpResponse;
using neuron::plugin::Plugin;

int Run(const neuron::plugin::Config& config) {
  spdlog::set_default_logger(spdlog::stderr_color_mt("neuron-device-plugin"));
  spdlog::set_level(spdlog::level::from_str(config.log_level));
  spdlog::info("starting: root {}, kubelet dir {}, lnc {}, noncontiguous {}, cdi {}", config.root,
               config.kubelet_dir, config.lnc == 0 ? "auto" : std::to_string(config.lnc),
               neuron::plugin::NonContiguousPolicyName(config.noncontiguous), config.cdi);

  // Signals are taken by sigwait below; every thread started from here inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  Plugin plugin(config);
  if (absl::Status s = plugin.Start(); !s.ok()) {
    spdlog::error("{}", std::string(s.message()));
    return 1;
  }
  neuron::HttpServer::Options hopts;
  hopts.listen_address = config.listen;
  hopts.threads = 2;
  hopts.logger_name = "plugin.http";
  hopts.handlers["/healthz"] = [](const HttpRequest&) {
    HttpResponse r;
    r.body = "ok\n";
    return r;
  };
  hopts.handlers["/readyz"] = [&plugin](const HttpRequest&) {
    const bool ready = plugin.Ready();
    HttpResponse r;
    r.status = ready ? 200 : 503;
    r.body = (ready ? "ready\n" : "not ready\n") + plugin.ReadyDetail();
    return r;
  };
  hopts.handlers["/metrics"] = [&plugin](const HttpRequest&) {
    HttpResponse r;
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
    r.body = plugin.metrics().Serialize();
    return r;
  };
  absl::StatusOr<std::unique_ptr<neuron::HttpServer>> http =
      neuron::HttpServer::Start(std::move(hopts));
  if (!http.ok()) {
    spdlog::error("--listen {}: {}", config.listen, std::string(http.status().message()));
    return 1;
  }
  // Tests and operators find the bound port here (--listen with port 0 picks one).
  std::printf("listening on port %d\n", (*http)->port());
  std::fflush(stdout);
  spdlog::info("/healthz, /readyz and /metrics on port {}", (*http)->port());

  int sig = 0;
  sigwait(&signals, &sig);
  spdlog::info("signal {}: stopping, removing our sockets", sig);
  http->reset();
  plugin.Stop();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // glibc gives every thread that allocates its own arena; gRPC's and civetweb's threads would
  // each keep one resident. Two are plenty for a process that answers from memory (RSS target
  // 16 MiB).
  mallopt(M_ARENA_MAX, 2);
  // Our sockets are 0600 (resource_server.cc); with this umask they are never wider, even
  // between bind() and chmod().
  ::umask(077);
  CLI::App app{"neuron-device-plugin: Neuron devices, NeuronCores and EFA for the kubelet"};
  neuron::plugin::Flags f;
  std::string root, kubelet_dir, config_file, listen, log_level, suffix, resources, noncontig,
      discovery;
  int lnc = 0;
  bool cdi = false;
  auto* o_root = app.add_option("--root", root, "Node root (env NEURON_ROOT; default /)");
  auto* o_kdir = app.add_option("--kubelet-dir", kubelet_dir,
                                "Kubelet directory (env NEURON_DP_KUBELET_DIR; /var/lib/kubelet)");
  auto* o_cfg = app.add_option("--config", config_file, "YAML config file (env NEURON_DP_CONFIG)");
  auto* o_listen = app.add_option("--listen", listen,
                                  "/healthz /readyz /metrics address (default 0.0.0.0:9410)");
  auto* o_lnc = app.add_option("--lnc", lnc, "Logical NeuronCore config on trn2: 1 or 2")
                    ->check(CLI::IsMember({1, 2}));
  auto* o_log = app.add_option("--log-level", log_level, "trace|debug|info|warn|error");
  auto* o_suffix =
      app.add_option("--socket-suffix", suffix, "Socket name suffix (default: the instance id)");
  auto* o_res =
      app.add_option("--resources", resources, "Enabled resources, e.g. neuron,neuroncore,efa");
  auto* o_nc = app.add_option("--noncontiguous", noncontig, "warn|reject");
  auto* o_disc = app.add_option("--discovery", discovery, "auto|directory|udev");
  auto* o_cdi = app.add_option("--cdi", cdi, "Add CDI device names to Allocate answers");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (*o_root) f.root = root;
  if (*o_kdir) f.kubelet_dir = kubelet_dir;
  if (*o_cfg) f.config_file = config_file;
  if (*o_listen) f.listen = listen;
  if (*o_lnc) f.lnc = lnc;
  if (*o_log) f.log_level = log_level;
  if (*o_suffix) f.socket_suffix = suffix;
  if (*o_res) f.resources = resources;
  if (*o_nc) f.noncontiguous = noncontig;
  if (*o_disc) f.discovery = discovery;
  if (*o_cdi) f.cdi = cdi;
  absl::StatusOr<neuron::plugin::Config> config =
      neuron::plugin::ResolveConfig(f, neuron::plugin::RealGetEnv);
  if (!config.ok()) {
    std::fprintf(stderr, "neuron-device-plugin: %s\n",
                 std::string(config.status().message()).c_str());
    return 2;
  }
  try {
    return Run(*config);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "neuron-device-plugin: %s\n", e.what());
    return 1;
  }
}
