#include "driver-sim/controlplane/schedule_command.h"

#include <charconv>
#include <iostream>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "driver-sim/controlplane/extended_resources.h"
#include "driver-sim/controlplane/schedule.h"
#include "plugin/kubeapi/client.h"

namespace neuron::sim {

namespace {

struct Flags {
  std::string api_server, token_file, ca_file, node;
  std::vector<std::string> claims;
  // --pod: the pod's extended resources backed by DRA (extended_resources.h).
  std::string pod, container = "main";
  std::vector<std::string> requests;
};

// "NAMESPACE/NAME" split; nullopt when it is not that.
std::optional<std::pair<std::string, std::string>> SplitRef(const std::string& ref) {
  const size_t slash = ref.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == ref.size()) return std::nullopt;
  return std::pair{ref.substr(0, slash), ref.substr(slash + 1)};
}

void PrintAllocation(const std::string& ref, const std::string& node, const nlohmann::json& claim) {
  std::cout << ref << " on " << node << ":";
  for (const nlohmann::json& r : claim["status"]["allocation"]["devices"]["results"]) {
    std::cout << " " << r.value("device", "?");
  }
  std::cout << "\n";
}

// --pod NAMESPACE/NAME --request RES=N...: the special claim made and allocated, printed with its
// UID (what `pod run --extended-resource-claim` takes) and the request each resource maps to.
int RunPod(const scheduler::Api& api, const Flags& f) {
  const auto ref = SplitRef(f.pod);
  scheduler::PodRequests pod{.name_space = ref ? ref->first : "",
                             .name = ref ? ref->second : "",
                             .containers = {{.name = f.container, .requests = {}}}};
  for (const std::string& r : f.requests) {
    const size_t eq = r.rfind('=');
    int64_t n = -1;
    if (eq != std::string::npos) {
      const auto [end, ec] = std::from_chars(r.data() + eq + 1, r.data() + r.size(), n);
      if (ec != std::errc() || end != r.data() + r.size()) n = -1;
    }
    if (eq == std::string::npos || eq == 0 || n < 0 || !ref) {
      std::cerr << "neuron-sim schedule: expected --pod NAMESPACE/NAME and --request RES=N\n";
      return 2;
    }
    pod.containers[0].requests[r.substr(0, eq)] = n;
  }
  std::mt19937_64 rng{std::random_device{}()};
  absl::StatusOr<scheduler::ExtendedResourceClaim> made =
      scheduler::ScheduleExtendedResources(api, pod, f.node, rng);
  if (!made.ok()) {
    std::cout << f.pod << " not scheduled: " << std::string{made.status().message()} << "\n";
    return 1;
  }
  if (!made->claim) {
    std::cout << f.pod << ": every request is served by the node's device plugins\n";
    return 0;
  }
  const nlohmann::json& meta = (*made->claim)["metadata"];
  const std::string claim_ref =
      pod.name_space + "/" + meta["name"].get<std::string>() + ":" + meta["uid"].get<std::string>();
  PrintAllocation(claim_ref, f.node, *made->claim);
  for (const scheduler::RequestMapping& m : made->mappings) {
    std::cout << "container " << m.container << ": " << m.resource << " -> request " << m.request
              << "\n";
  }
  return 0;
}

int Run(const Flags& f) {
  const kubeapi::Client client(
      {.server = f.api_server, .token_file = f.token_file, .ca_file = f.ca_file});
  const scheduler::Api api{
      .get = [&](const std::string& path) { return client.Get(path); },
      .put = [&](const std::string& path,
                 const nlohmann::json& body) { return client.Put(path, body); },
      .post = [&](const std::string& path,
                  const nlohmann::json& body) { return client.Post(path, body); }};
  if (!f.pod.empty()) return RunPod(api, f);
  if (f.claims.empty()) {
    std::cerr << "neuron-sim schedule: name claims, or --pod with --request\n";
    return 2;
  }
  int code = 0;
  for (const std::string& ref : f.claims) {
    const auto parts = SplitRef(ref);
    if (!parts) {
      std::cerr << "neuron-sim schedule: " << ref << ": expected NAMESPACE/NAME\n";
      return 2;
    }
    absl::StatusOr<nlohmann::json> claim =
        scheduler::ScheduleClaim(api, parts->first, parts->second, f.node);
    if (!claim.ok()) {
      std::cout << ref << " not allocated: " << std::string{claim.status().message()} << "\n";
      code = 1;
      continue;
    }
    PrintAllocation(ref, f.node, *claim);
  }
  return code;
}

}  // namespace

std::pair<CLI::App*, std::function<int()>> AddScheduleCommand(CLI::App& app) {
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand(
      "schedule", "allocate DRA claims on a node through the API server, as kube-scheduler does");
  cmd->add_option("--api-server", f->api_server, "the API server's URL")->required();
  cmd->add_option("--token-file", f->token_file, "a bearer token that may write claim status")
      ->required();
  cmd->add_option("--ca-file", f->ca_file, "the CA the server's certificate chains to");
  cmd->add_option("--node", f->node, "the node the claims' pod runs on")->required();
  cmd->add_option("claims", f->claims, "NAMESPACE/NAME of each claim");
  cmd->add_option("--pod", f->pod,
                  "NAMESPACE/NAME of a pod whose --requests of extended resources a DeviceClass "
                  "maps (spec.extendedResourceName, KEP-5004): makes and allocates its claim");
  cmd->add_option("--container", f->container, "the pod's container (main)");
  cmd->add_option("--request", f->requests, "RES=N of the container (repeatable)");
  return {cmd, [f]() { return Run(*f); }};
}

}  // namespace neuron::sim
