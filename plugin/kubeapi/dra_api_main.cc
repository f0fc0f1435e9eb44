// neuron-dra-api: the agent's unprivileged API container. Publishes the node's ResourceSlice
// from the plugin's socket (--slices), keeps the Node's NeuronHealth condition from the plugin's
// health (--node-condition) and answers the plugin's claim look-ups; the only process of the
// agent with a service-account token (plugin/kubeapi/README.md).

#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "core/base/duration.h"
#include "core/base/guarded_main.h"
#include "core/base/log_setup.h"
#include "core/base/version.h"
#include "fmt/format.h"
#include "http/http_server.h"
#include "plugin/kubeapi/claim_server.h"
#include "plugin/kubeapi/client.h"
#include "plugin/kubeapi/lease.h"
#include "plugin/kubeapi/node_condition.h"
#include "plugin/kubeapi/slice_publisher.h"

namespace {

constexpr int kExitUsage = 2;

struct Flags {
  std::string api_server;
  std::string token_file;
  std::string ca_file;
  int api_timeout_ms = 10000;
  neuron::kubeapi::PublisherOptions publisher;
  std::string listen = "unix:/run/neuron-node-agent/dra-api.sock";
  int poll_ms = 250;
  int backoff_max_ms = 30000;
  std::string log_level = "info";
  std::string log_format = "text";
  // One slice writer per node (plugin/kubeapi/lease.h).
  bool lease = true;
  std::string lease_duration = "15s";
  std::string lease_renew_deadline = "10s";
  std::string lease_retry = "2s";
  std::string lease_namespace;
  neuron::kubeapi::LeaseOptions lease_options;  // from the four above
  // What it writes: the slices (DRA), the Node's NeuronHealth condition (either API mode).
  bool slices = true;
  bool node_condition = true;
  std::string node_condition_stale = "1m";
  neuron::kubeapi::ConditionOptions condition;  // from the above and --poll, --backoff-max
};

void AddWriteFlags(CLI::App& app, Flags& f) {
  app.add_option("--slices", f.slices,
                 "Publish the node's ResourceSlices from the plugin's /dra/resourceslice (false "
                 "beside the device-plugin API, where there are none)");
  app.add_option("--node-condition", f.node_condition,
                 "Keep the Node's NeuronHealth condition (as AWS's node-problem-detector sets "
                 "it) from the plugin's /health");
  app.add_option("--node-condition-stale", f.node_condition_stale,
                 "With no answer from the plugin, or evidence older than this, for longer than "
                 "this, the condition is Unknown (3s to 10m; e.g. 1m)");
}

void AddLeaseFlags(CLI::App& app, Flags& f) {
  app.add_option("--lease", f.lease,
                 "Write slices and the condition only while holding the node's Lease, so that "
                 "the two pods of a rolling update never both write (false: one instance per "
                 "node, as systemd installs it)");
  app.add_option("--lease-duration", f.lease_duration,
                 "How long after the holder's last renewal another may take the lease over "
                 "(whole seconds; e.g. 15s)");
  app.add_option("--lease-renew-deadline", f.lease_renew_deadline,
                 "A holder that could not renew for this long stops writing (below the duration)");
  app.add_option("--lease-retry", f.lease_retry,
                 "Renew, or try to acquire, this often (e.g. 2s or 500ms)");
  app.add_option("--lease-namespace", f.lease_namespace,
                 "The Lease's namespace (default: the service account's, else neuron-system)")
      ->envname("POD_NAMESPACE");
}

void AddFlags(CLI::App& app, Flags& f) {
  app.add_option("--api-server", f.api_server,
                 "The API server's URL (default: in-cluster, from KUBERNETES_SERVICE_HOST and "
                 "KUBERNETES_SERVICE_PORT)");
  app.add_option("--token-file", f.token_file,
                 "Bearer token file, re-read when it changes (default: the service account's)");
  app.add_option("--ca-file", f.ca_file,
                 "CA bundle the API server's certificate must chain to (default: the service "
                 "account's ca.crt)");
  app.add_option("--api-timeout-ms", f.api_timeout_ms, "Give up on one API request after this")
      ->check(CLI::Range(100, 600000));
  app.add_option("--node-name", f.publisher.node_name,
                 "This node's name: the pool, the slice's nodeName, the Node whose condition is "
                 "written")
      ->envname("NODE_NAME");
  app.add_option("--plugin", f.publisher.plugin_address,
                 "The plugin's HTTP socket, where GET /dra/resourceslice and GET /health are "
                 "served");
  app.add_option("--listen", f.listen, "Where to answer GET /claims/<ns>/<name> (unix:PATH)");
  app.add_option("--poll", f.poll_ms,
                 "Ask the plugin for its slice and its health every this many ms")
      ->check(CLI::Range(100, 3600000));
  app.add_option("--backoff-max", f.backoff_max_ms,
                 "Cap of the back-off while the API server is unreachable, in ms")
      ->check(CLI::Range(100, 3600000));
  app.add_option("--log.level,--log-level", f.log_level,
                 "Log level: trace|debug|info|warn|error (default info)");
  app.add_option("--log.format", f.log_format, "Log format: text|json (default text)")
      ->check(CLI::IsMember({"text", "json"}));
  AddLeaseFlags(app, f);
  AddWriteFlags(app, f);
  app.set_version_flag("--version", neuron::VersionLine("neuron-dra-api"),
                       "Print the version, revision, build date and compiler, then exit");
}

absl::StatusOr<neuron::kubeapi::ClientConfig> ClientConfigFrom(const Flags& f) {
  neuron::kubeapi::ClientConfig c;
  if (f.api_server.empty()) {
    absl::StatusOr<neuron::kubeapi::ClientConfig> in_cluster = neuron::kubeapi::InClusterConfig();
    if (!in_cluster.ok()) return in_cluster.status();
    c = *in_cluster;
  } else {
    c.server = f.api_server;
  }
  if (!f.token_file.empty()) c.token_file = f.token_file;
  if (!f.ca_file.empty()) c.ca_file = f.ca_file;
  c.timeout = std::chrono::milliseconds(f.api_timeout_ms);
  return c;
}

// The --lease-* flags as LeaseOptions for this node and pod; InvalidArgument naming the flag.
absl::Status ParseLeaseFlags(Flags& f) {
  neuron::kubeapi::LeaseOptions& o = f.lease_options;
  struct Time {
    const char* flag;
    const std::string& text;
    std::chrono::milliseconds& out;
  };
  for (const Time& t : {Time{"--lease-duration", f.lease_duration, o.duration},
                        Time{"--lease-renew-deadline", f.lease_renew_deadline, o.renew_deadline},
                        Time{"--lease-retry", f.lease_retry, o.retry}}) {
    absl::StatusOr<std::chrono::milliseconds> d = neuron::ParseDurationIn(
        t.text, std::chrono::milliseconds(100), std::chrono::minutes(10), "100ms to 10m");
    if (!d.ok()) {
      return absl::InvalidArgumentError(
          fmt::format("{}: {}", t.flag, std::string{d.status().message()}));
    }
    t.out = *d;
  }
  o.lease_namespace =
      f.lease_namespace.empty() ? neuron::kubeapi::DefaultLeaseNamespace() : f.lease_namespace;
  o.name = neuron::kubeapi::LeaseName(f.publisher.node_name);
  o.identity = neuron::kubeapi::DefaultLeaseIdentity();
  return neuron::kubeapi::CheckLeaseTimes(o);
}

// --slices, --node-condition and the options both writers take from the other flags;
// InvalidArgument naming the flag.
absl::Status ParseWriteFlags(Flags& f) {
  if (!f.slices && !f.node_condition) {
    return absl::InvalidArgumentError(
        "--slices=false with --node-condition=false leaves nothing to write");
  }
  absl::StatusOr<std::chrono::milliseconds> stale = neuron::ParseDurationIn(
      f.node_condition_stale, std::chrono::seconds(3), std::chrono::minutes(10), "3s to 10m");
  if (!stale.ok()) {
    return absl::InvalidArgumentError(
        fmt::format("--node-condition-stale: {}", std::string{stale.status().message()}));
  }
  f.publisher.poll = std::chrono::milliseconds(f.poll_ms);
  f.publisher.backoff_max = std::chrono::milliseconds(f.backoff_max_ms);
  f.condition.plugin_address = f.publisher.plugin_address;
  f.condition.node_name = f.publisher.node_name;
  f.condition.poll = f.publisher.poll;
  f.condition.backoff_max = f.publisher.backoff_max;
  f.condition.stale = *stale;
  return absl::OkStatus();
}

// The claim server on --listen: /healthz and GET /claims/<ns>/<name>, whoever writes the slices.
absl::StatusOr<std::unique_ptr<neuron::HttpServer>> ServeClaims(
    const neuron::kubeapi::Client& client, const Flags& f) {
  neuron::HttpServer::Options o;
  o.listen_address = f.listen;
  o.threads = 2;
  o.logger_name = "dra-api.http";
  o.handlers["/healthz"] = [](const neuron::HttpRequest&) {
    neuron::HttpResponse r;
    r.body = "ok\n";
    return r;
  };
  o.fallback = [&client](const neuron::HttpRequest& r) {
    return neuron::kubeapi::ServeClaim(client, r);
  };
  return neuron::HttpServer::Start(o);
}

// The slice publisher and the condition writer, as the flags ask, made anew each time this process
// becomes the node's writer (what they remembered is from before another wrote; the condition
// writer's start is when a heartbeat it did not write becomes another writer's) and stopped,
// with no write after, when it stops being it. Start and Stop from one thread at a time (the
// lease's, then main's after it ended).
class Writers {
 public:
  Writers(const neuron::kubeapi::Client& client, const Flags& f) : client_(client), f_(f) {}
  void Start() {
    if (f_.slices) {
      publisher_ = std::make_unique<neuron::kubeapi::SlicePublisher>(client_, f_.publisher);
      publisher_->Start();
    }
    if (f_.node_condition) {
      condition_ = std::make_unique<neuron::kubeapi::ConditionWriter>(client_, f_.condition);
      condition_->Start();
    }
  }
  void Stop() {  // the destructors stop and join
    publisher_.reset();
    condition_.reset();
  }

 private:
  const neuron::kubeapi::Client& client_;
  const Flags& f_;
  std::unique_ptr<neuron::kubeapi::SlicePublisher> publisher_;
  std::unique_ptr<neuron::kubeapi::ConditionWriter> condition_;
};

// What this instance writes, for the start-up line.
std::string Duties(const Flags& f) {
  std::string what = f.slices && f.node_condition ? "slices and the NeuronHealth condition"
                     : f.slices                   ? "slices"
                                                  : "the NeuronHealth condition";
  return f.lease ? fmt::format("{} written while holding lease {}/{} as {}", what,
                               f.lease_options.lease_namespace, f.lease_options.name,
                               f.lease_options.identity)
                 : fmt::format("no lease (--lease=false): the only writer of {}", what);
}

int Serve(const neuron::kubeapi::ClientConfig& config, Flags& f) {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  const neuron::kubeapi::Client client(config);
  absl::StatusOr<std::unique_ptr<neuron::HttpServer>> server = ServeClaims(client, f);
  if (!server.ok()) {
    spdlog::critical("cannot listen on {}: {}", f.listen, std::string{server.status().message()});
    return 1;
  }
  Writers writer(client, f);
  // The lease's requests end within a retry period, so that a holder decides on time that it
  // could not renew.
  neuron::kubeapi::ClientConfig lease_config = config;
  lease_config.timeout = std::min(config.timeout, f.lease_options.retry);
  const neuron::kubeapi::Client lease_client(lease_config);
  neuron::kubeapi::LeaderLease lease(lease_client, f.lease_options);
  spdlog::info("neuron-dra-api {}: node {}, API server {}, plugin {}, claims on {}, {}",
               neuron::AgentVersion(), f.publisher.node_name, config.server,
               f.publisher.plugin_address, f.listen, Duties(f));
  if (f.lease) {
    lease.Start([&writer] { writer.Start(); }, [&writer] { writer.Stop(); });
  } else {
    writer.Start();
  }
  int sig = 0;
  sigwait(&signals, &sig);
  spdlog::info("signal {}: stopping", sig);
  lease.Stop();  // the writer's last write, then the lease released
  writer.Stop();
  return 0;
}

int Main(int argc, char** argv) {
  CLI::App app{
      "neuron-dra-api: publishes the node's ResourceSlice for the Neuron DRA driver and "
      "reads ResourceClaims for the plugin"};
  Flags f;
  AddFlags(app, f);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : kExitUsage;
  }
  spdlog::set_default_logger(spdlog::stderr_color_mt("neuron-dra-api"));
  absl::Status usage = neuron::ConfigureLogging(f.log_level, f.log_format);
  if (usage.ok() && f.publisher.node_name.empty()) {
    usage = absl::InvalidArgumentError("--node-name (or NODE_NAME) is required");
  }
  if (usage.ok() && f.lease) usage = ParseLeaseFlags(f);
  if (usage.ok()) usage = ParseWriteFlags(f);
  absl::StatusOr<neuron::kubeapi::ClientConfig> config =
      usage.ok() ? ClientConfigFrom(f) : absl::StatusOr<neuron::kubeapi::ClientConfig>(usage);
  if (!config.ok()) {
    std::fprintf(stderr, "neuron-dra-api: %s\n", std::string{config.status().message()}.c_str());
    return kExitUsage;
  }
  return Serve(*config, f);
}

}  // namespace

int main(int argc, char** argv) { return neuron::GuardedMain("neuron-dra-api", Main, argc, argv); }
