// neuron-device-plugin: makes Neuron devices, NeuronCores and EFA interfaces schedulable through
// the kubelet's device-plugin API. plugin/README.md documents the flags and the config file.

#include <malloc.h>
#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <charconv>
#include <cstdio>
#include <exception>
#include <optional>

#include "core/base/guarded_main.h"
#include "core/base/log_setup.h"
#include "core/base/version.h"
#include "http/http_server.h"
#include "http/local_client.h"
#include "http/web_config.h"
#include "plugin/config.h"
#include "plugin/plugin.h"

namespace {

using neuron::HttpRequest;
using neuron::HttpResponse;
using neuron::plugin::Plugin;

// `unless=N` of GET /dra/resourceslice's query: the generation the reader has (304 while current).
std::optional<uint64_t> UnlessOf(std::string_view query) {
  constexpr std::string_view kKey = "unless=";
  const size_t at = query.find(kKey);
  if (at == std::string_view::npos || (at > 0 && query[at - 1] != '&')) return std::nullopt;
  const std::string_view value =
      query.substr(at + kKey.size(), query.find('&', at) - at - kKey.size());
  uint64_t n = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  if (ec != std::errc() || end != value.data() + value.size()) return std::nullopt;
  return n;
}

// /healthz (liveness), /readyz (every enabled resource with devices registered with the kubelet)
// and /metrics on --listen, with --web.config.file's TLS and basic auth when given.
absl::StatusOr<neuron::HttpServer::Options> HttpOptions(const neuron::plugin::Config& config,
                                                        Plugin& plugin) {
  neuron::HttpServer::Options hopts;
  hopts.listen_address = config.listen;
  if (!config.web_config_file.empty()) {
    absl::StatusOr<neuron::WebConfig> wc = neuron::LoadWebConfig(config.web_config_file);
    if (!wc.ok()) return wc.status();
    hopts.web_config = *std::move(wc);
    hopts.web_config_file = config.web_config_file;  // basic_auth_users re-read on change
  }
  hopts.threads = 2;
  hopts.logger_name = "plugin.http";
  // Liveness: in DRA mode the kubelet's sockets must answer too (the face's Live).
  hopts.handlers["/healthz"] = [&plugin](const HttpRequest&) {
    const absl::Status live = plugin.Live();
    HttpResponse r;
    r.status = live.ok() ? 200 : 503;
    r.body = live.ok() ? "ok\n" : std::string{live.message()} + "\n";
    return r;
  };
  hopts.handlers["/readyz"] = [&plugin](const HttpRequest&) {
    const bool ready = plugin.Ready();
    HttpResponse r;
    r.status = ready ? 200 : 503;
    r.body = (ready ? "ready\n" : "not ready\n") + plugin.ReadyDetail();
    return r;
  };
  // The node's health, in both modes (plugin/README.md#health-api).
  hopts.handlers["/health"] = [&plugin](const HttpRequest& req) {
    neuron::plugin::HealthResponse doc = plugin.Health(UnlessOf(req.query));
    HttpResponse r;
    r.status = doc.status;
    if (doc.status == 200) r.content_type = "application/json";
    r.body = std::move(doc.body);
    return r;
  };
  // DRA mode: the ResourceSlice the unprivileged neuron-dra-api publishes
  // (docs/kubelet-api.md#dra-slice).
  if (config.api == neuron::plugin::Api::kDra) {
    hopts.handlers["/dra/resourceslice"] = [&plugin](const HttpRequest& req) {
      const neuron::plugin::dra::SliceState::Document doc = plugin.DraSlice(UnlessOf(req.query));
      HttpResponse r;
      r.status = doc.status;
      if (doc.status == 200) r.content_type = "application/json";
      r.body = doc.body;
      return r;
    };
  }
  hopts.handlers["/metrics"] = [&plugin](const HttpRequest&) {
    HttpResponse r;
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
    r.body = plugin.metrics().Serialize();
    return r;
  };
  return hopts;
}

int Run(const neuron::plugin::Config& config) {
  spdlog::info(
      "neuron-device-plugin {} starting: api {}, root {}, kubelet dir {}, lnc {}, noncontiguous "
      "{}, cdi {}, device numbering {}, dra partitionable {}, dra efa {}",
      neuron::AgentVersion(), neuron::plugin::ApiName(config.api), config.root, config.kubelet_dir,
      config.lnc == 0 ? "auto" : std::to_string(config.lnc),
      neuron::plugin::NonContiguousPolicyName(config.noncontiguous), config.cdi,
      neuron::plugin::DeviceNumberingName(config.device_numbering), config.dra_partitionable,
      config.dra_efa);

  // Signals are taken by sigwait below; every thread started from here inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  Plugin plugin(config);
  if (absl::Status s = plugin.Start(); !s.ok()) {
    spdlog::error("{}", std::string{s.message()});
    return 1;
  }
  absl::StatusOr<neuron::HttpServer::Options> hopts = HttpOptions(config, plugin);
  absl::StatusOr<std::unique_ptr<neuron::HttpServer>> http =
      hopts.ok() ? neuron::HttpServer::Start(*std::move(hopts)) : hopts.status();
  if (!http.ok()) {
    spdlog::error("--listen {}: {}", config.listen, std::string{http.status().message()});
    return 1;
  }
  // Tests and operators find the bound port (--listen with port 0 picks one) or socket here.
  const std::string where = config.listen.rfind("unix:", 0) == 0
                                ? config.listen
                                : "port " + std::to_string((*http)->port());
  std::printf("listening on %s\n", where.c_str());
  std::fflush(stdout);
  spdlog::info("/healthz, /readyz and /metrics on {}", where);

  int sig = 0;
  sigwait(&signals, &sig);
  spdlog::info("signal {}: stopping, removing our sockets", sig);
  http->reset();
  plugin.Stop();
  return 0;
}

// --probe PATH: the DaemonSet's exec probes (the plugin has no network port, so the kubelet
// cannot GET it). Asks the running plugin at --listen (flag, NEURON_DP_LISTEN or the config file,
// as the plugin itself resolves it): exit 0 on 200, 1 on any other answer or none within a
// second, saying why on stderr. Plain HTTP: with TLS in the web config it cannot probe.
int Probe(const neuron::plugin::Config& config, const std::string& path) {
  if (absl::Status s = neuron::Probe(config.listen, path); !s.ok()) {
    std::fprintf(stderr, "neuron-device-plugin --probe: %s\n", std::string{s.message()}.c_str());
    return 1;
  }
  return 0;
}

// The flags of the DRA face (plugin/README.md#dra); they matter only with --api dra.
void AddDraFlags(CLI::App& app, neuron::plugin::Flags& f) {
  app.add_option("--node-name", f.node_name,
                 "DRA: this node's name, the ResourceSlice pool (env NODE_NAME)");
  app.add_option("--cdi-dir", f.cdi_dir,
                 "DRA: where prepared claims' CDI specs go (env NEURON_DP_CDI_DIR; /var/run/cdi)");
  app.add_option("--dra.claims", f.dra_claims,
                 "DRA: neuron-dra-api's claim socket (env NEURON_DP_DRA_CLAIMS; default "
                 "unix:/run/neuron-node-agent/dra-api.sock)");
  app.add_option("--dra.taint-effect", f.dra_taint_effect,
                 "DRA: NoSchedule|NoExecute for an unhealthy device's taint (env "
                 "NEURON_DP_DRA_TAINT_EFFECT; default NoSchedule)");
  app.add_option("--dra.partitionable", f.dra_partitionable,
                 "DRA: also offer NeuronCores (and an UltraServer's neuron-node) through shared "
                 "counters; needs the API server's DRAPartitionableDevices (env "
                 "NEURON_DP_DRA_PARTITIONABLE; default false)");
  app.add_option("--dra.efa", f.dra_efa,
                 "DRA: serve the EFA interfaces as driver efa.neuron.aws.com; false where AWS's "
                 "EFA DRA driver serves them (env NEURON_DP_DRA_EFA; default true)");
}

int Main(int argc, char** argv) {
  // glibc gives every thread that allocates its own arena; gRPC's and the HTTP server's threads
  // would each keep one resident. Two are plenty for a process that answers from memory (RSS target
  // 16 MiB).
  mallopt(M_ARENA_MAX, 2);
  // Our sockets are 0600 (resource_server.cc); with this umask they are never wider, even
  // between bind() and chmod().
  ::umask(077);
  CLI::App app{"neuron-device-plugin: Neuron devices, NeuronCores and EFA for the kubelet"};
  // Flags bind to optionals: an unset flag leaves the environment and the config file alone.
  neuron::plugin::Flags f;
  app.add_option("--root", f.root, "Node root (env NEURON_ROOT; default /)");
  app.add_option("--kubelet-dir", f.kubelet_dir,
                 "Kubelet directory (env NEURON_DP_KUBELET_DIR; /var/lib/kubelet)");
  app.add_option("--config", f.config_file, "YAML config file (env NEURON_DP_CONFIG)");
  app.add_option("--listen", f.listen,
                 "/healthz /readyz /metrics address: host:port or unix:PATH (default "
                 "127.0.0.1:9410)");
  app.add_option("--web.config.file", f.web_config_file,
                 "exporter-toolkit web config for --listen (TLS, basic auth)");
  std::string probe;
  app.add_option("--probe", probe,
                 "Probe the running plugin at --listen: GET PATH, exit 0 on 200 (exec probes)");
  app.add_option("--lnc", f.lnc,
                 "Logical NeuronCore config on trn2: 1 or 2 (env NEURON_LOGICAL_NC_CONFIG)");
  app.add_option("--log.level,--log-level", f.log_level,
                 "Log level: trace|debug|info|warn|error (env NEURON_DP_LOG_LEVEL; default info)");
  app.add_option("--log.format", f.log_format,
                 "Log format: text|json (env NEURON_DP_LOG_FORMAT; default text)");
  app.add_option("--socket-suffix", f.socket_suffix,
                 "Socket name suffix (default: the instance id)");
  app.add_option("--resources", f.resources, "Enabled resources, e.g. neuron,neuroncore,efa");
  app.add_option("--noncontiguous", f.noncontiguous, "warn|reject");
  app.add_option("--discovery", f.discovery, "auto|directory|udev");
  app.add_option("--cdi", f.cdi, "Add CDI device names to Allocate answers");
  app.add_option("--device-numbering", f.device_numbering,
                 "host|container: the device and core indices pods see (default host)");
  app.add_option("--api", f.api,
                 "Kubelet API: device-plugin|dra (env NEURON_DP_API; default device-plugin)");
  AddDraFlags(app, f);
  app.set_version_flag("--version", neuron::VersionLine("neuron-device-plugin"),
                       "Print the version, revision, build date and compiler, then exit");
  app.footer(
      "Examples:\n"
      "  neuron-device-plugin --log.format=json\n"
      "  neuron-device-plugin --resources=neuron,neuroncore --listen=127.0.0.1:9410\n"
      "  neuron-device-plugin --config=/etc/neuron/device-plugin.yaml --log.level=debug\n"
      "  neuron-device-plugin --listen=unix:/run/neuron-node-agent/plugin.sock --probe=/healthz\n"
      "  neuron-device-plugin --api=dra --node-name=$NODE_NAME "
      "--listen=unix:/run/neuron-node-agent/plugin.sock");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  absl::StatusOr<neuron::plugin::Config> config =
      neuron::plugin::ResolveConfig(f, neuron::RealGetEnv);
  absl::Status usage = config.status();
  if (usage.ok() && !probe.empty()) return Probe(*config, probe);
  if (usage.ok()) {
    spdlog::set_default_logger(spdlog::stderr_color_mt("neuron-device-plugin"));
    usage = neuron::ConfigureLogging(config->log_level, config->log_format);
  }
  if (!usage.ok()) {
    const std::string message(usage.message());
    std::fprintf(stderr, "neuron-device-plugin: %s\n", message.c_str());
    return 2;
  }
  return Run(*config);
}

}  // namespace

int main(int argc, char** argv) {
  return neuron::GuardedMain("neuron-device-plugin", Main, argc, argv);
}
