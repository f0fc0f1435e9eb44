// The PodResources client and cache against a real gRPC server on a Unix socket: the answer is
// flattened per container and resource, a missing kubelet is an error that leaves the last
// answer in place, and a kubelet that restarts (new socket file) is found again.
#include "proto/pod_resources.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <mutex>
#include <thread>

#include "podresources/v1/api.grpc.pb.h"
#include "proto/pod_resources_locator.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"

namespace neuron {
namespace {

using namespace std::chrono_literals;
using neuron::testing::TempDir;
using neuron::testing::WaitUntil;

// A kubelet's PodResources service holding one answer that tests can change.
class FakeLister final : public v1::PodResourcesLister::Service {
 public:
  void Set(v1::ListPodResourcesResponse response) {
    std::lock_guard lock(mu_);
    response_ = std::move(response);
  }
  grpc::Status List(grpc::ServerContext*, const v1::ListPodResourcesRequest*,
                    v1::ListPodResourcesResponse* out) override {
    ++calls;
    std::lock_guard lock(mu_);
    *out = response_;
    return grpc::Status::OK;
  }
  std::atomic<int> calls{0};

 private:
  std::mutex mu_;
  v1::ListPodResourcesResponse response_;
};

v1::ListPodResourcesResponse OnePod(const std::string& name,
                                    const std::vector<std::string>& cores) {
  v1::ListPodResourcesResponse r;
  v1::PodResources* pod = r.add_pod_resources();
  pod->set_name(name);
  pod->set_namespace_("training");
  v1::ContainerResources* c = pod->add_containers();
  c->set_name("main");
  v1::ContainerDevices* d = c->add_devices();
  d->set_resource_name("aws.amazon.com/neuroncore");
  for (const std::string& id : cores) d->add_device_ids(id);
  c->add_devices()->set_resource_name("vpc.amazonaws.com/efa");  // no IDs: left out
  pod->add_containers()->set_name("sidecar");                    // no devices: left out
  return r;
}

std::unique_ptr<grpc::Server> Serve(const std::string& socket, FakeLister& service) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix:" + socket, grpc::InsecureServerCredentials());
  builder.RegisterService(&service);
  return builder.BuildAndStart();
}

TEST(PodResourcesTest, ListFlattensContainersAndIndexesIds) {
  TempDir dir;
  const std::string socket = (dir.path() / "kubelet.sock").string();
  FakeLister lister;
  lister.Set(OnePod("llama-0", {"4", "5"}));
  auto server = Serve(socket, lister);
  ASSERT_NE(server, nullptr);

  absl::StatusOr<PodAssignments> got = ListPodResources(socket, 2s);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->all().size(), 1u);
  const PodDeviceAssignment* holder = got->Holder("aws.amazon.com/neuroncore", "5");
  ASSERT_NE(holder, nullptr);
  EXPECT_EQ(holder->pod_name, "llama-0");
  EXPECT_EQ(holder->pod_namespace, "training");
  EXPECT_EQ(holder->container, "main");
  EXPECT_EQ(got->Holder("aws.amazon.com/neuroncore", "6"), nullptr);
  EXPECT_EQ(got->Holder("aws.amazon.com/neuron", "5"), nullptr);
  server->Shutdown();
}

TEST(PodResourcesTest, NoKubeletIsAnErrorNamingTheSocket) {
  TempDir dir;
  const std::string socket = (dir.path() / "kubelet.sock").string();
  absl::StatusOr<PodAssignments> got = ListPodResources(socket, 500ms);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find(socket), std::string::npos) << got.status();
}

TEST(PodResourcesTest, CacheKeepsTheLastAnswerAndFindsARestartedKubelet) {
  TempDir dir;
  const std::string socket = (dir.path() / "kubelet.sock").string();
  FakeLister lister;
  lister.Set(OnePod("llama-0", {"0", "1"}));
  auto server = Serve(socket, lister);

  std::atomic<int> changes{0};
  PodResourcesCache cache({.socket_path = socket,
                           .period = 50ms,
                           .timeout = 500ms,
                           .on_answer = [&](auto, bool changed) {
                             changes += changed ? 1 : 0;
                             return 50ms;
                           }});
  ASSERT_TRUE(WaitUntil([&] { return cache.Latest()->all().size() == 1; }, 10s));
  // Unchanged answers do not count as changes.
  const int calls = lister.calls;
  ASSERT_TRUE(WaitUntil([&] { return lister.calls >= calls + 3; }, 10s));
  EXPECT_EQ(changes, 1);

  // The kubelet goes away: errors are counted, the last answer stays.
  server->Shutdown();
  server.reset();
  std::filesystem::remove(socket);
  ASSERT_TRUE(WaitUntil([&] { return cache.failures() >= 2; }, 10s));
  EXPECT_FALSE(cache.LastStatus().ok());
  EXPECT_EQ(cache.Latest()->all().size(), 1u);

  // It comes back on a new socket file with a new answer.
  FakeLister restarted;
  restarted.Set(OnePod("llama-1", {"8"}));
  server = Serve(socket, restarted);
  ASSERT_TRUE(WaitUntil(
      [&] {
        const PodDeviceAssignment* h = cache.Latest()->Holder("aws.amazon.com/neuroncore", "8");
        return h != nullptr && h->pod_name == "llama-1";
      },
      10s));
  EXPECT_TRUE(cache.LastStatus().ok());
  EXPECT_EQ(changes, 2);
  server->Shutdown();
}

// The wait after an answer is what on_answer returns; RefreshSoon cuts it short, and a failure
// waits `period` whatever on_answer would say.
TEST(PodResourcesTest, OnAnswerSetsTheWaitAndRefreshSoonCutsIt) {
  TempDir dir;
  const std::string socket = (dir.path() / "kubelet.sock").string();
  FakeLister lister;
  lister.Set(OnePod("llama-0", {"0"}));
  auto server = Serve(socket, lister);
  std::atomic<int> answers{0};
  PodResourcesCache cache(
      {.socket_path = socket, .period = 50ms, .timeout = 500ms, .on_answer = [&](auto, bool) {
         ++answers;
         return std::chrono::milliseconds(1h);
       }});
  ASSERT_TRUE(WaitUntil([&] { return answers == 1; }, 10s));
  std::this_thread::sleep_for(300ms);  // six periods
  EXPECT_EQ(lister.calls, 1);
  cache.RefreshSoon();
  ASSERT_TRUE(WaitUntil([&] { return answers == 2; }, 10s));

  server->Shutdown();
  server.reset();
  std::filesystem::remove(socket);
  cache.RefreshSoon();
  ASSERT_TRUE(WaitUntil([&] { return cache.failures() >= 3; }, 10s));  // each `period`
  EXPECT_EQ(answers, 2);
}

TEST(PodResourcesTest, LocatorFindsThePodByCoreOrDeviceAndWaitsForTheKubelet) {
  TempDir dir;
  const std::string socket = (dir.path() / "kubelet.sock").string();
  PodResourcesCache::Options options;
  options.socket_path = socket;
  options.period = 50ms;
  auto cache = std::make_shared<PodResourcesCache>(options);
  std::unique_ptr<PodLocator> locator = MakePodResourcesLocator(cache);
  // No kubelet yet: cannot tell, which is not the same as "not in a pod".
  EXPECT_FALSE(locator->Locate({.pid = 1, .devices = {2}, .core_ids = {4}}).ok());

  FakeLister lister;
  v1::ListPodResourcesResponse r = OnePod("bert-0", {"4", "5"});
  v1::ContainerDevices* whole = r.mutable_pod_resources(0)->mutable_containers(0)->add_devices();
  whole->set_resource_name("aws.amazon.com/neuron");
  whole->add_device_ids("7");
  lister.Set(r);
  auto server = Serve(socket, lister);
  ASSERT_TRUE(WaitUntil([&] { return cache->refreshes() > 0; }, 10s));

  auto by_core = locator->Locate({.pid = 1, .devices = {2}, .core_ids = {5}});
  ASSERT_TRUE(by_core.ok() && by_core->has_value()) << by_core.status();
  EXPECT_EQ((*by_core)->name, "bert-0");
  EXPECT_EQ((*by_core)->namespace_name, "training");
  EXPECT_EQ((*by_core)->container, "main");
  auto by_device = locator->Locate({.pid = 2, .devices = {7}, .core_ids = {14}});
  ASSERT_TRUE(by_device.ok() && by_device->has_value());
  EXPECT_EQ((*by_device)->name, "bert-0");
  auto none = locator->Locate({.pid = 3, .devices = {3}, .core_ids = {6}});
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  server->Shutdown();
}

}  // namespace
}  // namespace neuron
