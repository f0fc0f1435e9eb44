// The binaries end to end: `neuron-sim apiserver` (the API stand-in as a process) and
// `neuron-dra-api` with the flags the DaemonSet gives it, against a stand-in for the plugin's
// socket. The slice appears, follows a change, survives the API server going away and coming
// back (SIGUSR1/SIGUSR2), and a claim is answered on dra-api.sock.

#include <gtest/gtest.h>
#include <signal.h>

#include <mutex>

#include "http/http_server.h"
#include "http/local_client.h"
#include "plugin/kubeapi/client.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace neuron::kubeapi {
namespace {

using neuron::testing::ReadFile;
using neuron::testing::WaitUntil;
using nlohmann::json;

json Spec(const std::vector<std::string>& devices) {
  json list = json::array();
  for (const std::string& d : devices) list.push_back({{"name", d}});
  return {{"driver", "neuron.aws.com"},
          {"pool", {{"name", "node-1"}, {"generation", 1}, {"resourceSliceCount", 1}}},
          {"nodeName", "node-1"},
          {"devices", std::move(list)}};
}

// `neuron-sim apiserver` in `d` with token "t" and one unallocated claim, ml/c1; ready when
// d/apiserver.json exists.
pid_t StartStandIn(const std::filesystem::path& d) {
  neuron::testing::WriteFile(d / "token", "t\n");
  neuron::testing::WriteFile(d / "objects.json",
                             R"([{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim",
           "metadata":{"name":"c1","namespace":"ml"},"spec":{}}])");
  return neuron::testing::StartProcess(
      {NEURON_SIM_BIN, "apiserver", "--dir", d.string(), "--token-file", (d / "token").string(),
       "--node", "node-1", "--load", (d / "objects.json").string()},
      d / "api.out", d / "api.err");
}

TEST(DraApiBinary, PublishesThroughTheStandInAndServesClaims) {
  neuron::testing::TempDir dir;
  const auto& d = dir.path();
  const pid_t api = StartStandIn(d);
  ASSERT_TRUE(WaitUntil([&] { return std::filesystem::exists(d / "apiserver.json"); },
                        std::chrono::seconds(20)))
      << ReadFile(d / "api.err");
  const json info = json::parse(ReadFile(d / "apiserver.json"));

  std::mutex mu;
  json spec = Spec({"neuron-0", "neuron-1"});
  uint64_t generation = 1;
  HttpServer::Options o;
  o.listen_address = "unix:" + (d / "plugin.sock").string();
  o.handlers["/dra/resourceslice"] = [&](const HttpRequest&) {
    std::lock_guard<std::mutex> lock(mu);
    HttpResponse r;
    r.content_type = "application/json";
    r.body = json{{"generation", generation}, {"nodeName", "node-1"}, {"spec", spec}}.dump();
    return r;
  };
  auto plugin = *HttpServer::Start(std::move(o));

  const pid_t dra = neuron::testing::StartProcess(
      {NEURON_DRA_API_BIN, "--api-server", info["url"], "--token-file", (d / "token").string(),
       "--ca-file", info["caFile"], "--plugin", "unix:" + (d / "plugin.sock").string(), "--listen",
       "unix:" + (d / "dra-api.sock").string(), "--poll", "100", "--backoff-max", "500"},
      d / "dra.out", d / "dra.err", {"NODE_NAME=node-1"});
  const Client client(ClientConfig{info["url"], (d / "token").string(), info["caFile"]});
  const auto devices = [&] {
    std::vector<std::string> out;
    absl::StatusOr<json> s =
        client.Get("/apis/resource.k8s.io/v1/resourceslices/node-1-neuron.aws.com");
    if (s.ok()) {
      for (const json& dev : (*s)["spec"]["devices"]) out.push_back(dev["name"]);
    }
    return out;
  };
  EXPECT_TRUE(WaitUntil([&] { return devices().size() == 2; }, std::chrono::seconds(20)))
      << ReadFile(d / "dra.err");

  ASSERT_EQ(kill(api, SIGUSR1), 0);  // the API server goes away
  ASSERT_TRUE(
      WaitUntil([&] { return ReadFile(d / "api.out").find("unreachable") != std::string::npos; },
                std::chrono::seconds(10)));
  {
    std::lock_guard<std::mutex> lock(mu);
    spec = Spec({"neuron-1"});
    ++generation;
  }
  // It has tried and failed (said once, when the state changed) before the server comes back.
  ASSERT_TRUE(WaitUntil(
      [&] {
        return ReadFile(d / "dra.err").find("the API server cannot be reached") !=
               std::string::npos;
      },
      std::chrono::seconds(10)))
      << ReadFile(d / "dra.err");
  ASSERT_EQ(kill(api, SIGUSR2), 0);  // and comes back
  EXPECT_TRUE(WaitUntil([&] { return devices() == std::vector<std::string>{"neuron-1"}; },
                        std::chrono::seconds(10)))
      << ReadFile(d / "dra.err");
  const std::string log = ReadFile(d / "dra.err");
  EXPECT_NE(log.find("the API server cannot be reached"), std::string::npos) << log;
  EXPECT_NE(log.find("the API server is reachable again"), std::string::npos) << log;

  absl::StatusOr<LocalResponse> claim =
      LocalGet("unix:" + (d / "dra-api.sock").string(), "/claims/ml/c1");
  ASSERT_TRUE(claim.ok()) << claim.status();
  EXPECT_EQ(claim->status, 200) << claim->body;
  const json c = json::parse(claim->body);
  EXPECT_EQ(c["metadata"]["name"], "c1");
  EXPECT_FALSE(c["status"].contains("allocation")) << claim->body;

  EXPECT_EQ(neuron::testing::Stop(dra, std::chrono::seconds(10)), 0);
  EXPECT_EQ(neuron::testing::Stop(api, std::chrono::seconds(10)), 0);
}

}  // namespace
}  // namespace neuron::kubeapi
