#pragma once
// The API stand-in (driver-sim/controlplane) in process over HTTPS, as the kubeapi, scheduler and
// DRA tests and the DRA bench start it: a CA and certificate made in `dir`, one bearer token "t"
// in dir/token, and the client configuration that reaches it.
#include <filesystem>
#include <memory>

#include "absl/status/statusor.h"
#include "driver-sim/controlplane/api_server.h"
#include "plugin/kubeapi/client.h"
#include "tests/support/subprocess.h"

namespace neuron::testing {

inline absl::StatusOr<std::unique_ptr<sim::apiserver::ApiServer>> StartApiStandIn(
    const std::filesystem::path& dir) {
  WriteFile(dir / "token", "t\n");
  sim::apiserver::ApiServer::Options o;
  o.cert_dir = dir.string();
  o.tokens = {"t"};
  return sim::apiserver::ApiServer::Start(o);
}

// A client configuration of the stand-in started in `dir` (default timeouts).
inline kubeapi::ClientConfig StandInClient(const sim::apiserver::ApiServer& api,
                                           const std::filesystem::path& dir) {
  kubeapi::ClientConfig c;
  c.server = api.url();
  c.token_file = (dir / "token").string();
  c.ca_file = api.ca_file();
  return c;
}

}  // namespace neuron::testing
