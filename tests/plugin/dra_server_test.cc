// The DRA server's sockets without a simulated node (plugin/dra/server.h): the health stream's
// three states (UNKNOWN for a device whose evidence cannot be read, never HEALTHY), the list sent
// again while nothing changes only while the evidence is read again (the test plays the node
// watcher), a refused registration, and the sockets removed at stop.

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "drahealth/v1/api.grpc.pb.h"
#include "drahealth/v1alpha1/api.grpc.pb.h"
#include "plugin/dra/server.h"
#include "pluginregistration/v1/api.grpc.pb.h"
#include "tests/plugin/dra_testing.h"
#include "tests/support/subprocess.h"
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
           std::unique_ptr<Driver>* driver, std::unique_ptr<Server>* server,
           std::chrono::milliseconds stale_after = std::chrono::seconds(30)) {
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
                          .state = &state,
                          .stale_after = stale_after});
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

// The liveness probe asks both sockets as the kubelet would: a DRA socket that is gone (deleted,
// not yet served again) fails it, naming the socket.
TEST(DraServerTest, TheLivenessProbeAsksBothSockets) {
  ::neuron::testing::TempDir tmp("drap");
  NodeState state(std::chrono::milliseconds(1000));
  state.SetHardware(CatalogHardware("inf2.xlarge"));
  NoClaims claims;
  std::unique_ptr<Driver> driver;
  std::unique_ptr<Server> server;
  ASSERT_NO_FATAL_FAILURE(Serve(tmp, state, claims, &driver, &server));
  const std::string kdir = (tmp.path() / "k").string();
  EXPECT_TRUE(ProbeSockets(kdir).ok()) << ProbeSockets(kdir);
  fs::remove(DraSocketPath(kdir));
  const absl::Status gone = ProbeSockets(kdir);
  EXPECT_TRUE(absl::IsUnavailable(gone)) << gone;
  EXPECT_NE(gone.message().find("NodePrepareResources on " + DraSocketPath(kdir)),
            std::string_view::npos)
      << gone;
  server.reset();
  const absl::Status stopped = ProbeSockets(kdir);
  EXPECT_NE(stopped.message().find("GetInfo on " + RegistrationSocketPath(kdir)),
            std::string_view::npos)
      << stopped;
}

// The node watcher, played by the test: the same hardware handed in every 100 ms (each health
// poll does so, changed or not) until Stall().
class Watcher {
 public:
  Watcher(NodeState& state, const Hardware& hw)
      : thread_([this, &state, hw] {
          std::unique_lock<std::mutex> lock(mu_);
          while (!stalled_) {
            state.SetHardware(hw);
            cv_.wait_for(lock, std::chrono::milliseconds(100), [this] { return stalled_; });
          }
        }) {}
  ~Watcher() { Stall(); }
  void Stall() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stalled_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool stalled_ = false;
  std::thread thread_;
};

// The kubelet reads a device it has had no report of within health_check_timeout_seconds as
// Unknown (kubernetes/kubernetes pkg/kubelet/cm/dra/healthinfo.go): an unchanged list is sent
// again every third of health.stale_after while the evidence is read, stamped with when it was
// read; once the watcher stalls, nothing more is sent.
TEST(DraServerTest, AnUnchangedListIsSentAgainOnlyWhileTheEvidenceIsRead) {
  ::neuron::testing::TempDir tmp("drar");
  NodeState state(std::chrono::milliseconds(1000));
  Watcher watcher(state, CatalogHardware("inf2.xlarge"));
  ASSERT_TRUE(::neuron::testing::WaitUntil([&] { return state.evidence_time().has_value(); },
                                           std::chrono::seconds(5)));
  NoClaims claims;
  std::unique_ptr<Driver> driver;
  std::unique_ptr<Server> server;
  ASSERT_NO_FATAL_FAILURE(Serve(tmp, state, claims, &driver, &server, std::chrono::seconds(3)));
  auto stub = ::v1::DRAResourceHealth::NewStub(grpc::CreateChannel(
      "unix:" + DraSocketPath((tmp.path() / "k").string()), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  auto reader = stub->NodeWatchResources(&ctx, {});
  ::v1::NodeWatchResourcesResponse first;
  ASSERT_TRUE(reader->Read(&first));
  ASSERT_EQ(first.devices_size(), 1);
  EXPECT_EQ(first.devices(0).health_check_timeout_seconds(), 3);
  const auto t0 = std::chrono::steady_clock::now();
  ::v1::NodeWatchResourcesResponse again;
  ASSERT_TRUE(reader->Read(&again));
  const auto waited = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(waited, std::chrono::milliseconds(900));
  EXPECT_LT(waited, std::chrono::milliseconds(2500));
  EXPECT_EQ(again.devices(0).health(), ::v1::HEALTHY);
  const auto read_at =
      std::chrono::duration_cast<std::chrono::seconds>(state.evidence_time()->time_since_epoch())
          .count();
  EXPECT_NEAR(again.devices(0).last_updated_time(), read_at, 1);

  // The watcher stalls: the list is not sent again, however long the stream stays open.
  watcher.Stall();
  std::atomic<int> more{0};
  std::thread drain([&] {
    ::v1::NodeWatchResourcesResponse r;
    while (reader->Read(&r)) ++more;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(3500));
  ctx.TryCancel();
  drain.join();
  EXPECT_LE(more.load(), 1) << "at most the send already under way when the watcher stalled";
}

}  // namespace
}  // namespace neuron::plugin::dra
