#include "driver-sim/scheduler/schedule_command.h"

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "driver-sim/scheduler/schedule.h"
#include "plugin/kubeapi/client.h"

namespace neuron::sim {

namespace {

struct Flags {
  std::string api_server, token_file, ca_file, node;
  std::vector<std::string> claims;
};

int Run(const Flags& f) {
  const kubeapi::Client client(
      {.server = f.api_server, .token_file = f.token_file, .ca_file = f.ca_file});
  const scheduler::Api api{
      .get = [&](const std::string& path) { return client.Get(path); },
      .put = [&](const std::string& path,
                 const nlohmann::json& body) { return client.Put(path, body); }};
  int code = 0;
  for (const std::string& ref : f.claims) {
    const size_t slash = ref.find('/');
    if (slash == std::string::npos || slash == 0 || slash + 1 == ref.size()) {
      std::cerr << "neuron-sim schedule: " << ref << ": expected NAMESPACE/NAME\n";
      return 2;
    }
    absl::StatusOr<nlohmann::json> claim =
        scheduler::ScheduleClaim(api, ref.substr(0, slash), ref.substr(slash + 1), f.node);
    if (!claim.ok()) {
      std::cout << ref << " not allocated: " << std::string{claim.status().message()} << "\n";
      code = 1;
      continue;
    }
    std::cout << ref << " on " << f.node << ":";
    for (const nlohmann::json& r : (*claim)["status"]["allocation"]["devices"]["results"]) {
      std::cout << " " << r.value("device", "?");
    }
    std::cout << "\n";
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
  cmd->add_option("claims", f->claims, "NAMESPACE/NAME of each claim")->required();
  return {cmd, [f]() { return Run(*f); }};
}

}  // namespace neuron::sim
