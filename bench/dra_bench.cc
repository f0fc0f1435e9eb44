// The DRA face in production terms (bench/README.md#dra-bench): the real
// neuron-device-plugin (--api dra) on a simulated trn1.32xlarge serves its pool; neuron-dra-api's
// SlicePublisher writes it to the API stand-in (neuron-sim apiserver's server, in process, which
// defaults taint times and counts nothing for us: the figures come from what it holds).
//
//   writes to an unchanged pool over 3 resyncs, a tainted device included: the publisher's
//     creates + updates + deletes, and the slices' resourceVersions, across three resyncs one
//     second apart after the taint is published;
//   the taint's timeAdded over those resyncs: unchanged or moved.

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <thread>

#include "driver-sim/apiserver/api_server.h"
#include "nlohmann/json.hpp"
#include "plugin/kubeapi/client.h"
#include "plugin/kubeapi/slice_publisher.h"
#include "tests/support/sim_node.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using neuron::kubeapi::Client;
using neuron::kubeapi::ClientConfig;
using neuron::kubeapi::PublisherOptions;
using neuron::kubeapi::SlicePublisher;
using neuron::sim::apiserver::ApiServer;
using neuron::sim::apiserver::FindKind;
using neuron::testing::ReadFile;
using neuron::testing::SimNode;
using neuron::testing::WaitUntil;
using nlohmann::json;
using namespace std::chrono_literals;

constexpr char kNode[] = "node-a";

const neuron::sim::apiserver::Kind& Slices() {
  return *FindKind("/apis/resource.k8s.io/v1/", "resourceslices");
}

// name -> resourceVersion of node-a's slices, and the first taint's timeAdded found.
struct Held {
  std::map<std::string, std::string> versions;
  std::string time_added;
};

Held Read(ApiServer& api) {
  Held h;
  const json list = api.store().List(Slices(), "", "", "spec.nodeName=node-a").body;
  for (const json& s : list["items"]) {
    h.versions[s["metadata"]["name"]] = s["metadata"]["resourceVersion"];
    for (const json& d : s["spec"].value("devices", json::array())) {
      for (const json& t : d.value("taints", json::array())) {
        if (h.time_added.empty()) h.time_added = t.value("timeAdded", "");
      }
    }
  }
  return h;
}

int Run(const fs::path& tmp) {
  SimNode sim({.sim_bin = NEURON_SIM_BIN, .root = tmp / "root", .logs = tmp, .log_name = "sim"});
  if (!sim.Up("trn1.32xlarge")) {
    std::fprintf(stderr, "neuron-sim up failed: %s\n", sim.Log().c_str());
    return 1;
  }
  const std::string listen = "unix:" + (tmp / "plugin.sock").string();
  const pid_t plugin = neuron::testing::StartProcess(
      {NEURON_PLUGIN_BIN, "--api", "dra", "--node-name", kNode, "--root", (tmp / "root").string(),
       "--kubelet-dir", (tmp / "k").string(), "--listen", listen, "--cdi-dir",
       (tmp / "cdi").string(), "--dra.claims", "unix:" + (tmp / "dra-api.sock").string()},
      tmp / "plugin.out", tmp / "plugin.err");
  neuron::testing::WriteFile(tmp / "token", "t\n");
  ApiServer::Options ao;
  ao.cert_dir = tmp.string();
  ao.tokens = {"t"};
  absl::StatusOr<std::unique_ptr<ApiServer>> api = ApiServer::Start(ao);
  if (!api.ok()) return std::fprintf(stderr, "%s\n", api.status().ToString().c_str()), 1;
  (*api)->store().Create(*FindKind("/api/v1/", "nodes"), "", {{"metadata", {{"name", kNode}}}});
  const Client client(ClientConfig{(*api)->url(), (tmp / "token").string(), (*api)->ca_file()});
  PublisherOptions o;
  o.plugin_address = listen;
  o.node_name = kNode;
  o.resync = 0ms;  // every SyncOnce re-checks the pool against the server
  SlicePublisher publisher(client, o);
  if (!WaitUntil([&] { return publisher.SyncOnce().ok(); }, 30s)) {
    std::fprintf(stderr, "no pool published: %s\n", ReadFile(tmp / "plugin.err").c_str());
    return 1;
  }
  sim.Ctl({"inject", "hbm-ue", "--device", "5"});
  if (!WaitUntil([&] { return publisher.SyncOnce().ok() && !Read(**api).time_added.empty(); },
                 30s)) {
    std::fprintf(stderr, "the fault's taint never reached the API\n");
    return 1;
  }
  const Held before = Read(**api);
  const uint64_t writes = publisher.writes().total();
  for (int resync = 0; resync < 3; ++resync) {
    std::this_thread::sleep_for(1s);  // the server's clock moves a second on
    if (absl::Status s = publisher.SyncOnce(); !s.ok()) {
      std::fprintf(stderr, "resync: %s\n", s.ToString().c_str());
    }
  }
  const Held after = Read(**api);
  size_t moved = 0;
  for (const auto& [name, rv] : after.versions)
    moved += before.versions.count(name) == 0 || before.versions.at(name) != rv;
  std::printf("pool of %zu slices, device 5 tainted (timeAdded %s)\n", before.versions.size(),
              before.time_added.c_str());
  std::printf(
      "writes to the unchanged pool over 3 resyncs: %llu (slices whose resourceVersion moved: "
      "%zu)\n",
      static_cast<unsigned long long>(publisher.writes().total() - writes), moved);
  std::printf("the taint's timeAdded over 3 resyncs: %s\n",
              after.time_added == before.time_added ? "unchanged"
                                                    : ("moved to " + after.time_added).c_str());
  neuron::testing::Stop(plugin, 10s);
  return 0;
}

}  // namespace

int main() {
  neuron::testing::TempDir tmp("dra_bench");
  return Run(tmp.path());
}
