#include "driver-sim/controlplane/apiserver_command.h"

#include <signal.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "core/base/file_io.h"
#include "driver-sim/controlplane/api_server.h"
#include "driver-sim/controlplane/validation.h"

namespace neuron::sim {

namespace {

using apiserver::ApiServer;
using nlohmann::json;

struct Flags {
  std::string dir;
  std::string listen = "127.0.0.1:0";
  bool plain = false;
  std::string token_file;
  std::string read_only_token_file;
  std::vector<std::string> service_account_tokens;  // NAMESPACE/NAME@NODE=FILE
  std::vector<std::string> admission;               // manifests with policies
  std::vector<std::string> nodes;
  std::vector<std::string> loads;
  std::string feature_gates;
  std::string kubernetes_version = "1.35";
};

// `--feature-gates` as kube-apiserver takes it: comma-separated Name=true|false. Only the gates
// the stand-in models are known; any other is refused, as the real flag refuses an unknown one.
std::string ParseFeatureGates(const std::string& flag, apiserver::FeatureGates& gates) {
  for (std::string_view item : Split(flag, ',')) {
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    const std::string_view name = item.substr(0, eq);
    const std::string_view value = eq == std::string_view::npos ? "" : item.substr(eq + 1);
    if (name != "DRAPartitionableDevices") {
      return Cat("unrecognized feature gate: ", name,
                 " (the stand-in models DRAPartitionableDevices)");
    }
    if (value != "true" && value != "false") {
      return Cat("invalid value of ", name, "=", value, ", err: must be true or false");
    }
    gates.partitionable_devices = value == "true";
  }
  return "";
}

std::string ReadToken(const std::string& path) {
  std::ifstream in(path);
  std::string token;
  std::getline(in, token);
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back())) != 0) {
    token.pop_back();
  }
  return token;
}

// `--service-account-token NAMESPACE/NAME@NODE=FILE` into `tokens`: the token in FILE is the
// service account's, bound to a pod on NODE. An error message or "".
std::string ParseServiceAccountToken(const std::string& flag,
                                     std::map<std::string, apiserver::UserInfo>& tokens) {
  const size_t slash = flag.find('/');
  const size_t at = flag.find('@');
  const size_t eq = flag.find('=');
  if (slash == std::string::npos || at == std::string::npos || eq == std::string::npos ||
      !(slash < at && at < eq) || slash == 0 || at == slash + 1 || eq == at + 1) {
    return Cat("--service-account-token ", flag, ": not NAMESPACE/NAME@NODE=FILE");
  }
  const std::string token = ReadToken(flag.substr(eq + 1));
  if (token.empty()) return Cat("--service-account-token ", flag, ": the file holds no token");
  tokens[token] =
      apiserver::ServiceAccountUser(flag.substr(0, slash), flag.substr(slash + 1, at - slash - 1),
                                    flag.substr(at + 1, eq - at - 1));
  return "";
}

// The policies of the --admission manifests into `o`; an error message or "".
std::string LoadAdmission(const Flags& f, ApiServer::Options& o) {
  for (const std::string& file : f.admission) {
    absl::StatusOr<std::vector<json>> objects = apiserver::LoadManifest(file);
    if (!objects.ok()) return Cat("--admission ", std::string{objects.status().message()});
    o.admission.insert(o.admission.end(), objects->begin(), objects->end());
  }
  for (const std::string& flag : f.service_account_tokens) {
    if (std::string bad = ParseServiceAccountToken(flag, o.service_account_tokens); !bad.empty()) {
      return bad;
    }
  }
  return "";
}

// Creates `object` where its apiVersion and kind say; an error message or "".
std::string Load(ApiServer& server, const json& object) {
  const std::string api_version = object.value("apiVersion", "");
  const std::string kind = object.value("kind", "");
  std::string resource = kind;
  for (char& c : resource) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  resource += resource.ends_with("s") ? "es" : "s";
  const std::string prefix = api_version.find('/') == std::string::npos
                                 ? Cat("/api/", api_version, "/")
                                 : Cat("/apis/", api_version, "/");
  const apiserver::Kind* k = apiserver::FindKind(prefix, resource);
  if (k == nullptr) return Cat("the stand-in does not serve ", api_version, " ", kind);
  const std::string ns =
      k->namespaced ? object.value("/metadata/namespace"_json_pointer, std::string("default")) : "";
  const apiserver::ApiAnswer a = server.store().Create(*k, ns, object);
  return a.code == 201 ? "" : a.body.value("message", "create failed");
}

int Run(const Flags& f) {
  sigset_t signals;
  sigemptyset(&signals);
  for (int s : {SIGTERM, SIGINT, SIGUSR1, SIGUSR2}) sigaddset(&signals, s);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  ApiServer::Options o;
  o.listen = f.listen;
  o.tls = !f.plain;
  o.cert_dir = std::filesystem::absolute(f.dir).string();
  o.feature_gates.taint_effect_none = f.kubernetes_version != "1.34";
  if (std::string bad = ParseFeatureGates(f.feature_gates, o.feature_gates); !bad.empty()) {
    std::cerr << "neuron-sim apiserver: --feature-gates: " << bad << "\n";
    return 2;
  }
  o.tokens = {ReadToken(f.token_file)};
  if (!f.read_only_token_file.empty()) o.read_only_tokens = {ReadToken(f.read_only_token_file)};
  if (o.tokens.begin()->empty()) {
    std::cerr << "neuron-sim apiserver: --token-file " << f.token_file << " holds no token\n";
    return 2;
  }
  if (std::string bad = LoadAdmission(f, o); !bad.empty()) {
    std::cerr << "neuron-sim apiserver: " << bad << "\n";
    return 2;
  }
  absl::StatusOr<std::unique_ptr<ApiServer>> server = ApiServer::Start(o);
  if (!server.ok()) {
    std::cerr << "neuron-sim apiserver: " << std::string{server.status().message()} << "\n";
    return 1;
  }
  std::vector<json> objects;
  for (const std::string& node : f.nodes) {
    objects.push_back({{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", node}}}});
  }
  for (const std::string& file : f.loads) {
    std::ifstream in(file);
    const json list = json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (!list.is_array()) {
      std::cerr << "neuron-sim apiserver: --load " << file << ": not a JSON array\n";
      return 2;
    }
    objects.insert(objects.end(), list.begin(), list.end());
  }
  for (const json& object : objects) {
    if (std::string bad = Load(**server, object); !bad.empty()) {
      std::cerr << "neuron-sim apiserver: " << bad << "\n";
      return 1;
    }
  }
  const json info = {{"url", (*server)->url()}, {"caFile", (*server)->ca_file()}};
  // Renamed into place: a reader that sees the file can parse it.
  if (absl::Status s = ReplaceFile(std::filesystem::path(f.dir) / "apiserver.json", info.dump());
      !s.ok()) {
    std::cerr << "neuron-sim apiserver: " << s.message() << "\n";
    return 1;
  }
  std::cout << "neuron-sim apiserver: listening on " << (*server)->url() << std::endl;
  for (;;) {
    int sig = 0;
    sigwait(&signals, &sig);
    if (sig == SIGUSR1 || sig == SIGUSR2) {
      const absl::Status s = (*server)->SetReachable(sig == SIGUSR2);
      std::cout << "neuron-sim apiserver: " << (sig == SIGUSR2 ? "reachable" : "unreachable")
                << (s.ok() ? "" : " failed: " + std::string{s.message()}) << std::endl;
      continue;
    }
    return 0;
  }
}

}  // namespace

std::pair<CLI::App*, std::function<int()>> AddApiServerCommand(CLI::App& app) {
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand(
      "apiserver",
      "run the API stand-in for resource.k8s.io/v1 ResourceSlices, ResourceClaims and "
      "DeviceClasses, Leases, Nodes and Events until SIGTERM/SIGINT (SIGUSR1: unreachable, "
      "SIGUSR2: reachable again)");
  cmd->add_option("--dir", f->dir, "where the CA, server certificate and apiserver.json go")
      ->required();
  cmd->add_option("--listen", f->listen, "host:port (port 0: a free one)");
  cmd->add_flag("--plain", f->plain, "plain HTTP instead of HTTPS");
  cmd->add_option("--token-file", f->token_file, "the bearer token that may read and write")
      ->required();
  cmd->add_option("--read-only-token-file", f->read_only_token_file,
                  "a bearer token that may only read (its writes get 403)");
  cmd->add_option(
      "--service-account-token", f->service_account_tokens,
      "NAMESPACE/NAME@NODE=FILE: the token in FILE is service account NAMESPACE/NAME's, "
      "bound to a pod on NODE (its user carries the node's name, as a projected "
      "token's does); it may read and write, within the --admission policies "
      "(repeatable)");
  cmd->add_option("--admission", f->admission,
                  "a YAML manifest whose ValidatingAdmissionPolicies and bindings every write "
                  "must pass (repeatable)");
  cmd->add_option("--node", f->nodes, "create a Node object of this name (repeatable)");
  cmd->add_option("--load", f->loads, "create the objects of this JSON array (repeatable)");
  cmd->add_option("--kubernetes-version", f->kubernetes_version,
                  "the version the stand-in answers as, 1.34 or 1.35 (default): before 1.35 a "
                  "device taint's effect None is refused")
      ->check(CLI::IsMember({"1.34", "1.35"}));
  cmd->add_option("--feature-gates", f->feature_gates,
                  "DRAPartitionableDevices=true|false (default true, as from Kubernetes 1.36): "
                  "false drops sharedCounters and consumesCounters from ResourceSlices written, "
                  "as a server with the gate off does");
  return {cmd, [f]() { return Run(*f); }};
}

}  // namespace neuron::sim
