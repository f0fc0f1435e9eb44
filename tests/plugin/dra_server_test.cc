// The DRA server's sockets without a simulated node (plugin/dra/server.h): the health stream's
// three states (UNKNOWN for a device whose evidence cannot be read, never HEALTHY), the list sent
// again while nothing changes, a refused registration, and the sockets removed at stop.

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "drahealth/v1alpha1/api.grpc.pb.h"
#include "plugin/dra/server.h"
#include "pluginregistration/v1/api.grpc.pb.h"
#include "tests/plugin/dra_testing.h"
#include "tests/support/temp_dir.h"

namespace neuron::plugin::dra {
namespace {

namespace fs = std::filesystem;
using ::neuron::plugin::dra::testing::CatalogHardware;

class NoClaims : public ClaimSource {
 public:
  absl::StatusOr<ResourceClaim> Get(std::string_view, std::string_view) override {
    return absl::UnavailableError("no API here");
  }
};

// The driver and server for `state`, with KUBELET_DIR `tmp`/k; void so that it may ASSERT.
void Serve(const ::neuron::testing::TempDir& tmp, NodeState& state, ClaimSource& claims,
           std::unique_ptr<Driver>* driver, std::unique_ptr<Server>* server) {
  auto d = Driver::Create({.node_name = "n",
                           .cdi_dir = tmp.path() / "cdi",
                           .checkpoint_dir = tmp.path() / "ck",
                           .state = &state,
                           .claims = &claims});
  ASSERT_TRUE(d.ok()) << d.status();
  *driver = *std::move(d);
  auto s = Server::Start({.kubelet_dir = (tmp.path() / "k").string(),
                          .node_name = "n",
                          .driver = driver->get(),
                          .state = &state});
  ASSERT_TRUE(s.ok()) << s.status();
  *server = *std::move(s);
}

TEST(DraServerTest, HealthIsUnknownWhenEvidenceCannotBeRead) {
  ::neuron::testing::TempDir tmp("dras");
  NodeState state(std::chrono::milliseconds(1000));
  Hardware hw = CatalogHardware("inf2.xlarge");
  hw.devices[0].healthy = false;
  hw.devices[0].unknown = true;
  hw.devices[0].reason = "state unknown";
  state.SetHardware(hw);
  NoClaims claims;
  std::unique_ptr<Driver> driver;
  std::unique_ptr<Server> server;
  ASSERT_NO_FATAL_FAILURE(Serve(tmp, state, claims, &driver, &server));
  const std::string kdir = (tmp.path() / "k").string();
  auto channel =
      grpc::CreateChannel("unix:" + DraSocketPath(kdir), grpc::InsecureChannelCredentials());
  auto stub = ::v1alpha1::DRAResourceHealth::NewStub(channel);
  grpc::ClientContext ctx;
  auto reader = stub->NodeWatchResources(&ctx, {});
  ::v1alpha1::NodeWatchResourcesResponse r;
  ASSERT_TRUE(reader->Read(&r));
  ASSERT_EQ(r.devices_size(), 1);
  EXPECT_EQ(r.devices(0).device().pool_name(), "n");
  EXPECT_EQ(r.devices(0).device().device_name(), "neuron-0");
  EXPECT_EQ(r.devices(0).health(), ::v1alpha1::UNKNOWN);
  // Readable again and healthy: the stream says so.
  hw.devices[0].healthy = true;
  hw.devices[0].unknown = false;
  hw.devices[0].reason.clear();
  state.SetHardware(hw);
  server->OnView(state.view());
  ASSERT_TRUE(reader->Read(&r));
  EXPECT_EQ(r.devices(0).health(), ::v1alpha1::HEALTHY);
  ctx.TryCancel();

  auto reg = pluginregistration::Registration::NewStub(grpc::CreateChannel(
      "unix:" + RegistrationSocketPath(kdir), grpc::InsecureChannelCredentials()));
  pluginregistration::RegistrationStatus refused;
  refused.set_plugin_registered(false);
  refused.set_error("version not supported");
  pluginregistration::RegistrationStatusResponse resp;
  grpc::ClientContext ctx2;
  ASSERT_TRUE(reg->NotifyRegistrationStatus(&ctx2, refused, &resp).ok());
  EXPECT_FALSE(server->registered());
  EXPECT_TRUE(server->SocketsPresent());
  server.reset();
  EXPECT_FALSE(fs::exists(DraSocketPath(kdir)));
  EXPECT_FALSE(fs::exists(RegistrationSocketPath(kdir)));
}

// The kubelet reads a device it has had no report of for 30 s as Unknown (DefaultHealthTimeout,
// kubernetes/kubernetes pkg/kubelet/cm/dra/healthinfo.go): an unchanged list is sent again in
// between (every 10 s), the same list.
TEST(DraServerTest, AnUnchangedListIsSentAgainBeforeTheKubeletsTimeout) {
  ::neuron::testing::TempDir tmp("drar");
  NodeState state(std::chrono::milliseconds(1000));
  state.SetHardware(CatalogHardware("inf2.xlarge"));
  NoClaims claims;
  std::unique_ptr<Driver> driver;
  std::unique_ptr<Server> server;
  ASSERT_NO_FATAL_FAILURE(Serve(tmp, state, claims, &driver, &server));
  auto stub = ::v1alpha1::DRAResourceHealth::NewStub(grpc::CreateChannel(
      "unix:" + DraSocketPath((tmp.path() / "k").string()), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(40));
  auto reader = stub->NodeWatchResources(&ctx, {});
  ::v1alpha1::NodeWatchResourcesResponse first;
  ASSERT_TRUE(reader->Read(&first));
  const auto t0 = std::chrono::steady_clock::now();
  ::v1alpha1::NodeWatchResourcesResponse again;
  ASSERT_TRUE(reader->Read(&again));
  const auto waited = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(waited, std::chrono::seconds(9));
  EXPECT_LT(waited, std::chrono::seconds(20));
  ASSERT_EQ(again.devices_size(), 1);
  EXPECT_EQ(again.devices(0).health(), ::v1alpha1::HEALTHY);
  ctx.TryCancel();
}

}  // namespace
}  // namespace neuron::plugin::dra
