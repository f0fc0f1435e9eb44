// The real neuron-device-plugin binary in DRA mode (--api dra) against a
// simulated trn1.32xlarge, driven over its sockets as a kubelet would: plugin
// registration (GetInfo, NotifyRegistrationStatus), GET /dra/resourceslice,
// NodePrepareResources v1 and v1beta1 with the claims served by an in-test
// stand-in of neuron-dra-api on its Unix socket, LNC refusal, the health stream
// and slice taint on a fault, a deleted registration socket served again, and a
// plugin restart that keeps a prepared claim; and with --dra.partitionable on a
// simulated trn2u.48xlarge, the pool with neuron-node and its prepare with an
// UltraServerConfig whose values come from the simulated driver's election.

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>

#include "dra/v1/api.grpc.pb.h"
#include "dra/v1beta1/api.grpc.pb.h"
#include "drahealth/v1/api.grpc.pb.h"
#include "fmt/format.h"
#include "http/http_server.h"
#include "http/local_client.h"
#include "nlohmann/json.hpp"
#include "pluginregistration/v1/api.grpc.pb.h"
#include "tests/support/dra_claims_stand_in.h"
#include "tests/support/process.h"
#include "tests/support/sim_node.h"
#include "tests/support/sim_testing.h"
#include "tests/support/temp_dir.h"

namespace neuron::plugin {
namespace {

namespace fs = std::filesystem;
namespace drav1 = ::k8s::io::kubelet::pkg::apis::dra::v1;
namespace drav1beta1 = ::k8s::io::kubelet::pkg::apis::dra::v1beta1;
using ::neuron::testing::ReadFile;
using ::neuron::testing::SimNode;
using ::neuron::testing::Spawn;
using ::neuron::testing::Stop;
using ::neuron::testing::TempDir;
using ::neuron::testing::WaitUntil;
using nlohmann::json;
using namespace std::chrono_literals;

constexpr auto kCeiling = 10s;
constexpr std::string_view kNode = "node-a";

// A claim of `devices` (request "neurons") on this node, with an opaque config's parameters.
std::string Claim(const std::string& name, const std::vector<std::string>& devices,
                  std::optional<json> parameters = std::nullopt) {
  return ::neuron::testing::DraClaimAnswer(name, std::string(kNode), devices,
                                           std::move(parameters));
}

class DraBinaryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sim_ = std::make_unique<SimNode>(
        ::neuron::testing::SimNodeOptions{.sim_bin = NEURON_SIM_BIN,
                                          .root = tmp_.path() / "root",
                                          .logs = tmp_.path(),
                                          .on_stop = ::neuron::testing::ExpectCleanExit});
    ASSERT_TRUE(sim_->Up(instance_, sim_flags_)) << sim_->Log();
    // The neuron-dra-api stand-in: the contract of
    // docs/kubelet-api.md#dra-claims.
    absl::StatusOr<std::unique_ptr<HttpServer>> api = ::neuron::testing::ServeDraClaims(
        claims_address(),
        {{"four",
          Claim("four", {"neuron-0", "neuron-1", "neuron-2", "neuron-3", "efa-rdmap16s25"})},
         {"lnc2",
          Claim("lnc2", {"neuron-8"}, json{{"kind", "NeuronConfig"}, {"logicalNeuronCore", 2}})},
         {"node", Claim("node", {"neuron-node"},
                        json{{"apiVersion", "neuron.aws.com/v1"},
                             {"kind", "UltraServerConfig"},
                             {"ultraserverMode", 4}})},
         {"thief", Claim("thief", {"neuron-1"})}},
        &asked_);
    ASSERT_TRUE(api.ok()) << api.status();
    api_ = *std::move(api);
  }

  std::string claims_address() const { return "unix:" + (tmp_.path() / "dra-api.sock").string(); }
  fs::path kdir() const { return tmp_.path() / "k"; }
  fs::path reg_sock() const { return kdir() / "plugins_registry/neuron.aws.com-reg.sock"; }
  fs::path efa_reg_sock() const { return kdir() / "plugins_registry/efa.neuron.aws.com-reg.sock"; }
  std::string listen() const { return "unix:" + (tmp_.path() / "plugin.sock").string(); }

  void StartPlugin() {
    pid_ = Spawn({NEURON_PLUGIN_BIN, "--api", "dra", "--node-name", std::string(kNode), "--root",
                  (tmp_.path() / "root").string(), "--kubelet-dir", kdir().string(), "--listen",
                  listen(), "--cdi-dir", (tmp_.path() / "cdi").string(), "--dra.claims",
                  claims_address(), "--dra.partitionable", partitionable_ ? "true" : "false"},
                 tmp_.path() / "p.out", tmp_.path() / "p.err");
    ASSERT_TRUE(WaitUntil([&] { return fs::exists(reg_sock()); }, kCeiling))
        << ReadFile(tmp_.path() / "p.err");
  }

  // The kubelet's plugin watcher: GetInfo, then NotifyRegistrationStatus.
  pluginregistration::PluginInfo Register() { return Register(reg_sock()); }
  pluginregistration::PluginInfo Register(const fs::path& socket) {
    auto stub = pluginregistration::Registration::NewStub(
        grpc::CreateChannel("unix:" + socket.string(), grpc::InsecureChannelCredentials()));
    pluginregistration::PluginInfo info;
    grpc::ClientContext ctx;
    EXPECT_TRUE(stub->GetInfo(&ctx, {}, &info).ok());
    pluginregistration::RegistrationStatus status;
    status.set_plugin_registered(true);
    pluginregistration::RegistrationStatusResponse resp;
    grpc::ClientContext ctx2;
    EXPECT_TRUE(stub->NotifyRegistrationStatus(&ctx2, status, &resp).ok());
    return info;
  }

  // A channel of its own: gRPC otherwise shares subchannels by address, and one
  // connected to the plugin before its restart fails the first call with
  // "Broken pipe".
  std::shared_ptr<grpc::Channel> DraChannel(const std::string& endpoint) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    return grpc::CreateCustomChannel("unix:" + endpoint, grpc::InsecureChannelCredentials(), args);
  }

  json Slice() {
    absl::StatusOr<LocalResponse> r = LocalGet(listen(), "/dra/resourceslice");
    if (!r.ok() || r->status != 200) {
      return json();
    }
    return json::parse(r->body);
  }

  std::string instance_ = "trn1.32xlarge";
  std::vector<std::string> sim_flags_;
  bool partitionable_ = false;
  TempDir tmp_{"drab"};
  std::unique_ptr<SimNode> sim_;
  std::unique_ptr<HttpServer> api_;
  std::atomic<int> asked_{0};
  pid_t pid_ = -1;
};

drav1::NodePrepareResourcesResponse PrepareV1(const std::shared_ptr<grpc::Channel>& ch,
                                              const std::string& name) {
  auto stub = drav1::DRAPlugin::NewStub(ch);
  drav1::NodePrepareResourcesRequest req;
  auto* c = req.add_claims();
  c->set_namespace_("default");
  c->set_name(name);
  c->set_uid("uid-" + name);
  drav1::NodePrepareResourcesResponse resp;
  grpc::ClientContext ctx;
  const grpc::Status s = stub->NodePrepareResources(&ctx, req, &resp);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return resp;
}

// What the plugin watcher learns from GetInfo: a DRA plugin serving both DRA
// API versions.
void ExpectDraPluginInfo(const pluginregistration::PluginInfo& info, const fs::path& kdir) {
  EXPECT_EQ(info.type(), "DRAPlugin");
  EXPECT_EQ(info.name(), "neuron.aws.com");
  EXPECT_EQ(info.endpoint(), (kdir / "plugins/neuron.aws.com/dra.sock").string());
  EXPECT_EQ(
      std::vector<std::string>(info.supported_versions().begin(), info.supported_versions().end()),
      (std::vector<std::string>{"v1.DRAPlugin", "v1beta1.DRAPlugin", "v1.DRAResourceHealth",
                                "v1alpha1.DRAResourceHealth"}));
}

// v1beta1 NodePrepareResources of the claim "four"; void so that it may ASSERT.
void ExpectV1beta1PreparesFour(const std::shared_ptr<grpc::Channel>& ch) {
  auto stub = drav1beta1::DRAPlugin::NewStub(ch);
  drav1beta1::NodePrepareResourcesRequest req;
  auto* c = req.add_claims();
  c->set_namespace_("default");
  c->set_name("four");
  c->set_uid("uid-four");
  drav1beta1::NodePrepareResourcesResponse resp;
  grpc::ClientContext ctx;
  ASSERT_TRUE(stub->NodePrepareResources(&ctx, req, &resp).ok());
  EXPECT_EQ(resp.claims().at("uid-four").devices_size(), 4);
}

// The claim "four"'s EFA is efa.neuron.aws.com's to prepare, into a spec of its own kind.
void ExpectEfaDriverPreparesItsPart(const std::shared_ptr<grpc::Channel>& ch) {
  const drav1::NodePrepareResourcesResponse resp = PrepareV1(ch, "four");
  const auto& entry = resp.claims().at("uid-four");
  ASSERT_EQ(entry.error(), "");
  ASSERT_EQ(entry.devices_size(), 1);
  EXPECT_EQ(entry.devices(0).cdi_device_ids(0), "aws.amazon.com/efa=uid-four-efa-rdmap16s25");
}

// The health stream starts all HEALTHY; a fault on device 5 makes it UNHEALTHY.
void ExpectFaultStreamsUnhealthy(const std::shared_ptr<grpc::Channel>& ch, SimNode& sim) {
  auto stub = ::v1::DRAResourceHealth::NewStub(ch);
  grpc::ClientContext ctx;
  auto reader = stub->NodeWatchResources(&ctx, {});
  ::v1::NodeWatchResourcesResponse r;
  ASSERT_TRUE(reader->Read(&r));
  EXPECT_EQ(r.devices_size(), 24);
  for (const auto& d : r.devices()) {
    EXPECT_EQ(d.health(), ::v1::HEALTHY) << d.device().device_name();
  }
  const ::neuron::testing::RunResult inject =
      sim.Ctl({"inject", "hbm-ue", "--device", "5"}, kCeiling);
  ASSERT_EQ(inject.code, 0) << inject.err;
  bool unhealthy = false;
  while (!unhealthy && reader->Read(&r)) {
    for (const auto& d : r.devices()) {
      if (d.device().device_name() == "neuron-5") {
        unhealthy = d.health() == ::v1::UNHEALTHY;
      }
    }
  }
  EXPECT_TRUE(unhealthy);
  ctx.TryCancel();
}

bool TaintsNeuron5(const json& slice) {
  for (const json& d : slice["slices"][0]["devices"]) {
    if (d["name"] == "neuron-5" && d.contains("taints")) {
      return true;
    }
  }
  return false;
}

TEST_F(DraBinaryTest, RegistersPublishesPreparesAndKeepsClaimsAcrossARestart) {
  StartPlugin();
  const pluginregistration::PluginInfo info = Register();
  ExpectDraPluginInfo(info, kdir());
  // Ready once both drivers are registered: the EFAs' too.
  EXPECT_FALSE(Probe(listen(), "/readyz").ok());
  const pluginregistration::PluginInfo efa = Register(efa_reg_sock());
  EXPECT_EQ(efa.name(), "efa.neuron.aws.com");
  EXPECT_EQ(efa.endpoint(), (kdir() / "plugins/efa.neuron.aws.com/dra.sock").string());
  EXPECT_TRUE(WaitUntil([&] { return Probe(listen(), "/readyz").ok(); }, kCeiling));
  // No device-plugin resources in DRA mode.
  EXPECT_FALSE(fs::exists(kdir() / "device-plugins/kubelet.sock"));
  EXPECT_TRUE(!fs::exists(kdir() / "device-plugins") || fs::is_empty(kdir() / "device-plugins"));
  // Liveness asks the kubelet's sockets too (ProbeSockets).
  EXPECT_TRUE(Probe(listen(), "/healthz").ok());
  // The watcher reads the evidence every 250 ms: fresh, and said so on /metrics.
  absl::StatusOr<LocalResponse> metrics = LocalGet(listen(), "/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_NE(metrics->body.find("\nneuron_plugin_health_evidence_stale 0\n"), std::string::npos)
      << metrics->body;
  EXPECT_NE(metrics->body.find("\nneuron_plugin_health_evidence_age_seconds 0."), std::string::npos)
      << metrics->body;

  const json slice = Slice();
  ASSERT_TRUE(slice.is_object());
  EXPECT_EQ(slice["nodeName"], kNode);
  // Without --dra.partitionable: one slice per driver.
  ASSERT_EQ(slice["slices"].size(), 2u);
  EXPECT_EQ(slice["slices"][0]["driver"], "neuron.aws.com");
  EXPECT_EQ(slice["slices"][0]["devices"].size(), 16u);
  EXPECT_EQ(slice["slices"][1]["driver"], "efa.neuron.aws.com");
  EXPECT_EQ(slice["slices"][1]["devices"].size(), 8u);
  const uint64_t generation = slice["generation"].get<uint64_t>();

  const auto channel = DraChannel(info.endpoint());
  drav1::NodePrepareResourcesResponse four = PrepareV1(channel, "four");
  const auto& entry = four.claims().at("uid-four");
  ASSERT_EQ(entry.error(), "");
  ASSERT_EQ(entry.devices_size(), 4);
  EXPECT_EQ(entry.devices(0).cdi_device_ids(0), "aws.amazon.com/neuron=uid-four-neuron-0");
  const std::string spec = ReadFile(tmp_.path() / "cdi/aws.amazon.com-neuron_uid-four.json");
  EXPECT_NE(spec.find("/dev/neuron3"), std::string::npos) << spec;
  EXPECT_NE(spec.find("NEURON_RT_VISIBLE_CORES=0-7"), std::string::npos) << spec;
  ASSERT_NO_FATAL_FAILURE(ExpectEfaDriverPreparesItsPart(DraChannel(efa.endpoint())));
  const std::string efa_spec = ReadFile(tmp_.path() / "cdi/aws.amazon.com-efa_uid-four.json");
  EXPECT_NE(efa_spec.find("/dev/infiniband/uverbs"), std::string::npos) << efa_spec;
  // v1beta1, the same claim: the same answer, without asking neuron-dra-api
  // again.
  const int asked = asked_;
  ASSERT_NO_FATAL_FAILURE(ExpectV1beta1PreparesFour(channel));
  EXPECT_EQ(asked_, asked);
  // trn1 runs LNC 1: a claim for LNC 2 is refused, naming both.
  const std::string lnc = PrepareV1(channel, "lnc2").claims().at("uid-lnc2").error();
  EXPECT_NE(lnc.find("logicalNeuronCore 2 differs from this node's LNC 1"), std::string::npos)
      << lnc;

  // Health: a fault on device 5 makes it UNHEALTHY on the stream and taints it
  // in the slice.
  ASSERT_NO_FATAL_FAILURE(ExpectFaultStreamsUnhealthy(channel, *sim_));
  json tainted;
  ASSERT_TRUE(WaitUntil(
      [&] {
        tainted = Slice();
        return TaintsNeuron5(tainted);
      },
      kCeiling));
  EXPECT_GT(tainted["generation"].get<uint64_t>(), generation);

  // A deleted registration socket is served again.
  fs::remove(reg_sock());
  EXPECT_TRUE(WaitUntil([&] { return fs::exists(reg_sock()); }, kCeiling));

  // A restart keeps the prepared claim: device 1 is still held.
  EXPECT_EQ(Stop(pid_, kCeiling), 0) << ReadFile(tmp_.path() / "p.err");
  EXPECT_FALSE(fs::exists(reg_sock()));
  StartPlugin();
  const std::string thief =
      PrepareV1(DraChannel(info.endpoint()), "thief").claims().at("uid-thief").error();
  EXPECT_NE(thief.find("already held by claim default/four"), std::string::npos) << thief;
  EXPECT_EQ(Stop(pid_, kCeiling), 0) << ReadFile(tmp_.path() / "p.err");
}

// The v1 health stream: `core` (one of device 5's) and neuron-node HEALTHY, then UNHEALTHY after a
// fault on device 5, the node's message naming it.
void ExpectNodeAndCoresFollowDevice5(const std::shared_ptr<grpc::Channel>& ch, SimNode& sim,
                                     const std::string& core) {
  auto stub = ::v1::DRAResourceHealth::NewStub(ch);
  grpc::ClientContext ctx;
  auto reader = stub->NodeWatchResources(&ctx, {});
  ::v1::NodeWatchResourcesResponse r;
  auto find = [&](const std::string& name) -> const ::v1::DeviceHealth* {
    for (const auto& d : r.devices()) {
      if (d.device().device_name() == name) return &d;
    }
    return nullptr;
  };
  ASSERT_TRUE(reader->Read(&r));
  ASSERT_NE(find(core), nullptr);
  ASSERT_NE(find("neuron-node"), nullptr);
  EXPECT_EQ(find(core)->health(), ::v1::HEALTHY);
  EXPECT_EQ(find("neuron-node")->health(), ::v1::HEALTHY);
  ASSERT_EQ(sim.Ctl({"inject", "hbm-ue", "--device", "5"}, kCeiling).code, 0);
  while (reader->Read(&r) && find("neuron-node")->health() != ::v1::UNHEALTHY) {
  }
  EXPECT_EQ(find("neuron-node")->health(), ::v1::UNHEALTHY);
  EXPECT_EQ(find("neuron-node")->message().rfind("neuron-5: ", 0), 0u)
      << find("neuron-node")->message();
  EXPECT_EQ(find(core)->health(), ::v1::UNHEALTHY);
  ctx.TryCancel();
}

// A trn2u.48xlarge, node 3 of a 4-node UltraServer, with --dra.partitionable.
class DraBinaryUltraServerTest : public DraBinaryTest {
 protected:
  void SetUp() override {
    instance_ = "trn2u.48xlarge";
    sim_flags_ = {"--ultraserver-node-id", "3", "--ultraserver-server-id", "00000000c0ffee42"};
    partitionable_ = true;
    DraBinaryTest::SetUp();
  }
};

TEST_F(DraBinaryUltraServerTest, PublishesThePoolAndPreparesTheNode) {
  StartPlugin();
  const pluginregistration::PluginInfo info = Register();
  json pool;
  ASSERT_TRUE(WaitUntil(
      [&] {
        pool = Slice();
        return pool.is_object();
      },
      kCeiling));
  // Devices and neuron-node; the counters; the cores (64 at LNC 2, 128 at LNC 1); the EFAs' pool.
  ASSERT_GE(pool["slices"].size(), 4u);
  const json& first = pool["slices"][0];
  EXPECT_EQ(first["pool"]["resourceSliceCount"], pool["slices"].size() - 1);
  EXPECT_EQ(pool["slices"].back()["driver"], "efa.neuron.aws.com");
  EXPECT_EQ(first["devices"].back()["name"], "neuron-node");
  EXPECT_EQ(pool["slices"][1]["sharedCounters"][0]["counters"].size(), 16u);
  const drav1::NodePrepareResourcesResponse r = PrepareV1(DraChannel(info.endpoint()), "node");
  ASSERT_EQ(r.claims().at("uid-node").error(), "");
  const std::string spec = ReadFile(tmp_.path() / "cdi/aws.amazon.com-neuron_uid-node.json");
  EXPECT_NE(spec.find("/dev/neuron15"), std::string::npos) << spec;
  EXPECT_NE(spec.find("NEURON_RT_ULTRASERVER_MODE=1"), std::string::npos) << spec;
  EXPECT_NE(spec.find("NEURON_RT_ULTRASERVER_SERVER_ID=00000000c0ffee42"), std::string::npos)
      << spec;
  EXPECT_NE(spec.find("NEURON_RT_ULTRASERVER_NODE_ID=3"), std::string::npos) << spec;
  // Health: cores and the node are on the stream; a fault on device 5 makes its cores and the
  // node UNHEALTHY, the node naming the device.
  const int cores = std::stoi(
      pool["slices"][1]["sharedCounters"][0]["counters"]["neuron-5"]["value"].get<std::string>());
  ASSERT_NO_FATAL_FAILURE(ExpectNodeAndCoresFollowDevice5(DraChannel(info.endpoint()), *sim_,
                                                          fmt::format("neuroncore-{}", 5 * cores)));
  // The node holds every device: a claim of one of them is refused.
  const std::string thief =
      PrepareV1(DraChannel(info.endpoint()), "thief").claims().at("uid-thief").error();
  EXPECT_NE(thief.find("already held by claim default/node (neuron-node)"), std::string::npos)
      << thief;
  EXPECT_EQ(Stop(pid_, kCeiling), 0) << ReadFile(tmp_.path() / "p.err");
}

}  // namespace
}  // namespace neuron::plugin
