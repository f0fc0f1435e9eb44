// The DRA face in production terms (bench/README.md#dra-bench): the real neuron-device-plugin
// (--api dra) on a simulated trn1.32xlarge, the real neuron-dra-api between it and the API
// stand-in (neuron-sim apiserver's server, in process: it defaults taint times and honours delete
// preconditions as the API server does; the figures come from what it holds), and the plugin's
// DRA socket called as the kubelet calls it.
//
//   1. writes to an unchanged pool over 3 resyncs, a tainted device included, and the taint's
//      timeAdded over them (an in-process SlicePublisher whose every round is a resync);
//   2. health change -> slice updated at the API: a fault injected on device 5, then a reset,
//      each timed until the API's slice shows the change; p50 and p99;
//   3. NodePrepareResources of a claim of 16 devices and 8 EFA, neuron-dra-api answering from the
//      API stand-in, as the kubelet prepares it: neuron.aws.com's call, then efa.neuron.aws.com's
//      (each prepares its part); both, then both unprepares, --rounds times; p50 and p99 of the
//      two prepares together;
//   4. a rolling update under the kubelet emulator (tests/support/dra_rolling_update.h): the
//      longest gap between two successful prepares while a second instance, its sockets named
//      after its pod UID, replaces the first.

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "bench/stats.h"
#include "core/base/guarded_main.h"
#include "dra/v1/api.grpc.pb.h"
#include "driver-sim/controlplane/api_server.h"
#include "http/local_client.h"
#include "nlohmann/json.hpp"
#include "plugin/kubeapi/client.h"
#include "plugin/kubeapi/slice_publisher.h"
#include "tests/support/api_stand_in.h"
#include "tests/support/dra_claims_stand_in.h"
#include "tests/support/dra_rolling_update.h"
#include "tests/support/sim_node.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace {

namespace fs = std::filesystem;
namespace drav1 = ::k8s::io::kubelet::pkg::apis::dra::v1;
using neuron::bench::Ms;
using neuron::bench::Percentile;
using neuron::kubeapi::Client;
using neuron::kubeapi::PublisherOptions;
using neuron::kubeapi::SlicePublisher;
using neuron::sim::apiserver::ApiServer;
using neuron::sim::apiserver::FindKind;
using neuron::testing::ReadFile;
using neuron::testing::SimNode;
using neuron::testing::WaitUntil;
using nlohmann::json;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr char kNode[] = "node-a";

const neuron::sim::apiserver::Kind& Kind(const char* prefix, const char* resource) {
  return *FindKind(prefix, resource);
}
const neuron::sim::apiserver::Kind& Slices() {
  return Kind("/apis/resource.k8s.io/v1/", "resourceslices");
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

// The node, the plugin, the API stand-in and (Scenario 2, 3) neuron-dra-api.
struct Rig {
  explicit Rig(const fs::path& tmp)
      : tmp(tmp),
        sim({.sim_bin = NEURON_SIM_BIN, .root = tmp / "root", .logs = tmp, .log_name = "sim"}) {}
  ~Rig() {
    if (dra_api > 0) neuron::testing::Stop(dra_api, 10s);
    if (plugin > 0) neuron::testing::Stop(plugin, 10s);
  }

  bool Start() {
    if (!sim.Up("trn1.32xlarge")) return Fail("neuron-sim up", sim.Log());
    plugin = neuron::testing::StartProcess(
        {NEURON_PLUGIN_BIN, "--api", "dra", "--node-name", kNode, "--root", (tmp / "root").string(),
         "--kubelet-dir", (tmp / "k").string(), "--listen", plugin_sock(), "--cdi-dir",
         (tmp / "cdi").string(), "--dra.claims", claims_sock()},
        tmp / "plugin.out", tmp / "plugin.err");
    absl::StatusOr<std::unique_ptr<ApiServer>> started = neuron::testing::StartApiStandIn(tmp);
    if (!started.ok()) return Fail("API stand-in", started.status().ToString());
    api = *std::move(started);
    api->store().Create(Kind("/api/v1/", "nodes"), "", {{"metadata", {{"name", kNode}}}});
    client = std::make_unique<Client>(neuron::testing::StandInClient(*api, tmp));
    return WaitUntil([&] { return fs::exists(tmp / "k/plugins/efa.neuron.aws.com/dra.sock"); },
                     30s) ||
           Fail("the plugin's DRA socket", ReadFile(tmp / "plugin.err"));
  }
  // The real neuron-dra-api with its default poll (as the DaemonSet runs it).
  bool StartDraApi() {
    dra_api = neuron::testing::StartProcess(
        {NEURON_DRA_API_BIN, "--api-server", api->url(), "--token-file", (tmp / "token").string(),
         "--ca-file", api->ca_file(), "--plugin", plugin_sock(), "--listen", claims_sock()},
        tmp / "dra-api.out", tmp / "dra-api.err", {std::string("NODE_NAME=") + kNode});
    return WaitUntil(
               [&] { return !Read(*api).versions.empty() && fs::exists(tmp / "dra-api.sock"); },
               30s) ||
           Fail("neuron-dra-api", ReadFile(tmp / "dra-api.err"));
  }
  static bool Fail(const std::string& what, const std::string& log) {
    std::fprintf(stderr, "%s failed: %s\n", what.c_str(), log.c_str());
    return false;
  }
  std::string plugin_sock() const { return "unix:" + (tmp / "plugin.sock").string(); }
  std::string claims_sock() const { return "unix:" + (tmp / "dra-api.sock").string(); }

  fs::path tmp;
  SimNode sim;
  pid_t plugin = -1;
  pid_t dra_api = -1;
  std::unique_ptr<ApiServer> api;
  std::unique_ptr<Client> client;
};

bool Resyncs(Rig& rig) {
  PublisherOptions o;
  o.plugin_address = rig.plugin_sock();
  o.node_name = kNode;
  o.resync = 0ms;  // every SyncOnce re-checks the pool against the server
  SlicePublisher publisher(*rig.client, o);
  if (!WaitUntil([&] { return publisher.SyncOnce().ok(); }, 30s)) return false;
  rig.sim.Ctl({"inject", "hbm-ue", "--device", "5"});
  if (!WaitUntil([&] { return publisher.SyncOnce().ok() && !Read(*rig.api).time_added.empty(); },
                 30s)) {
    return Rig::Fail("the fault's taint", "never reached the API");
  }
  const Held before = Read(*rig.api);
  const uint64_t writes = publisher.writes().total();
  for (int resync = 0; resync < 3; ++resync) {
    std::this_thread::sleep_for(1s);  // the server's clock moves a second on
    if (absl::Status s = publisher.SyncOnce(); !s.ok()) Rig::Fail("resync", s.ToString());
  }
  const Held after = Read(*rig.api);
  size_t moved = 0;
  for (const auto& [name, rv] : after.versions) {
    moved += before.versions.count(name) == 0 || before.versions.at(name) != rv;
  }
  std::printf("pool of %zu slice(s), device 5 tainted (timeAdded %s)\n", before.versions.size(),
              before.time_added.c_str());
  std::printf("writes to the unchanged pool over 3 resyncs: %llu (slices rewritten: %zu)\n",
              static_cast<unsigned long long>(publisher.writes().total() - writes), moved);
  std::printf("the taint's timeAdded over 3 resyncs: %s\n",
              after.time_added == before.time_added ? "unchanged"
                                                    : ("moved to " + after.time_added).c_str());
  rig.sim.Ctl({"reset", "--device", "5"});
  return WaitUntil([&] { return publisher.SyncOnce().ok() && Read(*rig.api).time_added.empty(); },
                   30s) ||
         Rig::Fail("the reset", "the taint stayed");
}

bool HealthToApi(Rig& rig, int rounds) {
  std::vector<double> ms;
  std::this_thread::sleep_for(1s);  // after the resyncs' reset: see below
  for (int i = 0; i < 2 * rounds; ++i) {
    const bool fault = i % 2 == 0;
    const auto start = Clock::now();
    rig.sim.Ctl(fault ? std::vector<std::string>{"inject", "hbm-ue", "--device", "5"}
                      : std::vector<std::string>{"reset", "--device", "5"});
    if (!WaitUntil([&] { return Read(*rig.api).time_added.empty() != fault; }, 30s)) {
      return Rig::Fail(fault ? "health -> API (no taint)" : "health -> API (the taint stayed)",
                       ReadFile(rig.tmp / "dra-api.err"));
    }
    ms.push_back(Ms(Clock::now() - start));
    // Changes a second apart: a fault injected while the watcher still takes the reset's new
    // baseline would be part of that baseline (health evidence's matter, not this figure's).
    std::this_thread::sleep_for(1s);
  }
  std::printf("health change -> slice at the API (%zu changes): p50 %.0f ms, p99 %.0f ms\n",
              ms.size(), Percentile(ms, 0.5), Percentile(ms, 0.99));
  return true;
}

// A claim of all 16 devices and 8 EFA (the EFAs' driver's pool), allocated on node-a, in the API
// stand-in.
json WholeNodeClaim(Rig& rig) {
  json results = json::array();
  for (int d = 0; d < 16; ++d) {
    results.push_back({{"request", "node"},
                       {"driver", "neuron.aws.com"},
                       {"pool", kNode},
                       {"device", "neuron-" + std::to_string(d)}});
  }
  const json slice = rig.api->store().Get(Slices(), "", "node-a-efa.neuron.aws.com").body;
  for (const json& d : slice["spec"]["devices"]) {
    results.push_back({{"request", "efas"},
                       {"driver", "efa.neuron.aws.com"},
                       {"pool", kNode},
                       {"device", d["name"]}});
  }
  const auto& claims = Kind("/apis/resource.k8s.io/v1/", "resourceclaims");
  json made = rig.api->store()
                  .Create(claims, "ml",
                          {{"metadata", {{"name", "whole-node"}}},
                           {"spec", {{"devices", {{"requests", json::array()}}}}}})
                  .body;
  made["status"] = {{"allocation", {{"devices", {{"results", results}}}}}};
  rig.api->store().Update(claims, "ml", "whole-node", made, true);
  return made;
}

bool Prepare(Rig& rig, int rounds) {
  const json claim = WholeNodeClaim(rig);
  std::vector<std::unique_ptr<drav1::DRAPlugin::Stub>> stubs;  // the kubelet's order
  for (const char* driver : {"neuron.aws.com", "efa.neuron.aws.com"}) {
    stubs.push_back(drav1::DRAPlugin::NewStub(
        grpc::CreateChannel("unix:" + (rig.tmp / "k/plugins" / driver / "dra.sock").string(),
                            grpc::InsecureChannelCredentials())));
  }
  drav1::NodePrepareResourcesRequest prepare;
  auto* c = prepare.add_claims();
  c->set_namespace_("ml");
  c->set_name("whole-node");
  c->set_uid(claim["metadata"]["uid"].get<std::string>());
  drav1::NodeUnprepareResourcesRequest unprepare;
  *unprepare.add_claims() = *c;
  std::vector<double> ms;
  size_t devices = 0;
  for (int i = 0; i < rounds; ++i) {
    const auto start = Clock::now();
    devices = 0;
    for (const auto& stub : stubs) {
      drav1::NodePrepareResourcesResponse resp;
      grpc::ClientContext ctx;
      const grpc::Status s = stub->NodePrepareResources(&ctx, prepare, &resp);
      const auto& r = resp.claims().at(c->uid());
      if (!s.ok() || !r.error().empty()) return Rig::Fail("prepare", s.error_message() + r.error());
      devices += static_cast<size_t>(r.devices_size());
    }
    ms.push_back(Ms(Clock::now() - start));
    for (const auto& stub : stubs) {
      drav1::NodeUnprepareResourcesResponse uresp;
      grpc::ClientContext uctx;
      if (!stub->NodeUnprepareResources(&uctx, unprepare, &uresp).ok()) return false;
    }
  }
  std::vector<double> fetch;
  for (int i = 0; i < rounds; ++i) {
    const auto start = Clock::now();
    if (!neuron::LocalGet(rig.claims_sock(), "/claims/ml/whole-node").ok()) return false;
    fetch.push_back(Ms(Clock::now() - start));
  }
  std::printf(
      "  the claim alone from neuron-dra-api (GET /claims and the API read behind it): "
      "p50 %.2f ms, p99 %.2f ms\n",
      Percentile(fetch, 0.5), Percentile(fetch, 0.99));
  std::printf(
      "NodePrepareResources of both drivers, claim of %zu devices via neuron-dra-api (%d "
      "rounds): p50 %.2f "
      "ms, p90 %.2f ms, p99 %.2f ms\n",
      devices, rounds, Percentile(ms, 0.5), Percentile(ms, 0.9), Percentile(ms, 0.99));
  return true;
}

// The same node, another kubelet directory: the kubelet emulator, a claim on devices 4 and 5
// answered by a stand-in of neuron-dra-api, and two plugin instances one after the other.
bool Roll(Rig& rig) {
  const fs::path dir = rig.tmp / "roll";
  fs::create_directories(dir);
  absl::StatusOr<std::unique_ptr<neuron::HttpServer>> claims = neuron::testing::ServeDraClaims(
      "unix:" + (dir / "dra-api.sock").string(),
      {{"pair", neuron::testing::DraClaimAnswer("pair", kNode, {"neuron-4", "neuron-5"})}});
  if (!claims.ok()) return Rig::Fail("claims stand-in", claims.status().ToString());
  neuron::sim::KubeletEmulator::Options k;
  k.kubelet_dir = (dir / "k").string();
  k.root = (rig.tmp / "root").string();
  k.cdi_dir = (dir / "cdi").string();
  k.plugin_poll = 20ms;
  k.rpc_deadline = 10s;
  absl::StatusOr<std::unique_ptr<neuron::sim::KubeletEmulator>> kubelet =
      neuron::sim::KubeletEmulator::Start(k);
  if (!kubelet.ok()) return Rig::Fail("kubelet emulator", kubelet.status().ToString());
  const auto start = [&](const std::string& uid) {
    return neuron::testing::StartProcess(
        {NEURON_PLUGIN_BIN, "--api", "dra", "--node-name", kNode, "--root",
         (rig.tmp / "root").string(), "--kubelet-dir", k.kubelet_dir, "--listen",
         "unix:" + (dir / ("plugin-" + uid + ".sock")).string(), "--cdi-dir", k.cdi_dir,
         "--dra.claims", "unix:" + (dir / "dra-api.sock").string()},
        dir / (uid + ".out"), dir / (uid + ".err"), std::vector<std::string>{"POD_UID=" + uid});
  };
  const neuron::testing::RollingUpdateResult r = neuron::testing::RollDraPlugin(**kubelet, start);
  std::printf(
      "rolling update, sockets per pod UID: longest gap between prepares %lld ms (%d "
      "pods admitted, %d refused%s%s)\n",
      static_cast<long long>(r.longest_gap.count()), r.admissions, r.failures,
      r.failures > 0 ? ": " : "", r.first_failure.substr(0, 120).c_str());
  return true;
}

// "--rounds N" and "--health-rounds N"; a value that is not a positive number keeps the default.
void ParseFlags(int argc, char** argv, int* rounds, int* health_rounds) {
  for (int i = 1; i + 1 < argc; i += 2) {
    int* out = std::strcmp(argv[i], "--rounds") == 0          ? rounds
               : std::strcmp(argv[i], "--health-rounds") == 0 ? health_rounds
                                                              : nullptr;
    const std::string_view v(argv[i + 1]);
    int n = 0;
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (out != nullptr && ec == std::errc() && end == v.data() + v.size() && n > 0) *out = n;
  }
}

int Main(int argc, char** argv) {
  int rounds = 200;
  int health_rounds = 10;
  ParseFlags(argc, argv, &rounds, &health_rounds);
  neuron::testing::TempDir tmp("dra_bench");
  Rig rig(tmp.path());
  if (!rig.Start() || !Resyncs(rig) || !rig.StartDraApi() || !HealthToApi(rig, health_rounds) ||
      !Prepare(rig, rounds) || !Roll(rig)) {
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return neuron::GuardedMain("dra_bench", Main, argc, argv); }
