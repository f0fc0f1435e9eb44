#pragma once
// The fixture the kubelet emulator's tests share (kubelet_emulator_test.cc, pod_run_test.cc): a
// scripted device plugin over real gRPC on a Unix socket that records what the kubelet asked, and
// a test base that starts the emulator on temporary directories with that plugin registered.

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <mutex>

#include "deviceplugin/v1beta1/api.grpc.pb.h"
#include "driver-sim/kubelet/kubelet_emulator.h"
#include "podresources/v1/api.grpc.pb.h"
#include "proto/pod_resources.h"
#include "tests/support/process.h"
#include "tests/support/sim_testing.h"
#include "tests/support/temp_dir.h"

namespace neuron::sim::kubelet_test {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using neuron::testing::TempDir;
using neuron::testing::WaitUntil;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

inline constexpr char kResource[] = "example.com/dev";

// A device plugin with scripted health and answers that records what the kubelet asked.
class TestPlugin final : public v1beta1::DevicePlugin::Service {
 public:
  TestPlugin(fs::path plugin_dir, std::string socket_name, const std::vector<std::string>& ids)
      : dir_(std::move(plugin_dir)), socket_name_(std::move(socket_name)) {
    for (const std::string& id : ids) health_.emplace_back(id, true);
  }
  ~TestPlugin() override { Stop(); }

  void Serve() {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix:" + (dir_ / socket_name_).string(),
                             grpc::InsecureServerCredentials());
    builder.RegisterService(this);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
  }
  void Stop() {
    if (!server_) return;
    {
      std::lock_guard lock(mu_);
      ++version_;
    }
    cv_.notify_all();
    server_->Shutdown(std::chrono::system_clock::now() + 200ms);
    server_->Wait();
    server_.reset();
  }
  grpc::Status Register(const std::string& resource = kResource,
                        const std::string& version = "v1beta1") {
    auto stub = v1beta1::Registration::NewStub(grpc::CreateChannel(
        "unix:" + (dir_ / "kubelet.sock").string(), grpc::InsecureChannelCredentials()));
    v1beta1::RegisterRequest request;
    request.set_version(version);
    request.set_endpoint(socket_name_);
    request.set_resource_name(resource);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + 20s);
    v1beta1::Empty reply;
    return stub->Register(&context, request, &reply);
  }
  // Replaces the device list (id -> healthy); ListAndWatch sends it at once.
  void SetDevices(std::vector<std::pair<std::string, bool>> health) {
    {
      std::lock_guard lock(mu_);
      health_ = std::move(health);
      ++version_;
    }
    cv_.notify_all();
  }
  void SetNuma(std::map<std::string, int> numa) {
    {
      std::lock_guard lock(mu_);
      numa_ = std::move(numa);
      ++version_;
    }
    cv_.notify_all();
  }

  grpc::Status GetDevicePluginOptions(grpc::ServerContext*, const v1beta1::Empty*,
                                      v1beta1::DevicePluginOptions* out) override {
    ++options_calls;
    out->set_get_preferred_allocation_available(offer_gpa);
    return grpc::Status::OK;
  }
  grpc::Status ListAndWatch(grpc::ServerContext* context, const v1beta1::Empty*,
                            grpc::ServerWriter<v1beta1::ListAndWatchResponse>* writer) override {
    std::unique_lock lock(mu_);
    uint64_t sent = 0;
    while (!context->IsCancelled() && server_) {
      if (sent != version_) {
        sent = version_;
        v1beta1::ListAndWatchResponse r;
        for (const auto& [id, ok] : health_) {
          v1beta1::Device* d = r.add_devices();
          d->set_id(id);
          d->set_health(ok ? "Healthy" : "Unhealthy");
          if (auto n = numa_.find(id); n != numa_.end()) {
            d->mutable_topology()->add_nodes()->set_id(n->second);
          }
        }
        lock.unlock();
        if (!writer->Write(r)) return grpc::Status::OK;
        lock.lock();
      }
      cv_.wait_for(lock, 50ms);
    }
    return grpc::Status::OK;
  }
  grpc::Status GetPreferredAllocation(grpc::ServerContext*,
                                      const v1beta1::PreferredAllocationRequest* request,
                                      v1beta1::PreferredAllocationResponse* out) override {
    std::lock_guard lock(mu_);
    gpa_requests.push_back(*request);
    calls.push_back("GetPreferredAllocation");
    if (!gpa_error.ok()) return gpa_error;
    for (int i = 0; i < request->container_requests_size(); ++i) {
      auto* r = out->add_container_responses();
      for (const std::string& id : gpa_answer) r->add_deviceids(id);
    }
    return grpc::Status::OK;
  }
  grpc::Status Allocate(grpc::ServerContext*, const v1beta1::AllocateRequest* request,
                        v1beta1::AllocateResponse* out) override {
    std::lock_guard lock(mu_);
    allocate_requests.push_back(*request);
    calls.push_back("Allocate");
    if (!allocate_error.ok()) return allocate_error;
    for (const auto& c : request->container_requests()) {
      auto* r = out->add_container_responses();
      std::vector<std::string> ids(c.devices_ids().begin(), c.devices_ids().end());
      std::sort(ids.begin(), ids.end());
      std::string joined;
      for (size_t k = 0; k < ids.size(); ++k) {
        joined += (joined.empty() ? "" : ",") + ids[k];
        auto* d = r->add_devices();
        d->set_container_path(device_prefix + (container_numbering ? std::to_string(k) : ids[k]));
        d->set_host_path(device_prefix + ids[k]);
        d->set_permissions("rw");
      }
      (*r->mutable_envs())["NEURON_RT_VISIBLE_CORES"] = joined;
    }
    return grpc::Status::OK;
  }

  // Script and record; read and written under lock() by tests while the emulator runs.
  std::unique_lock<std::mutex> lock() { return std::unique_lock(mu_); }
  std::atomic<int> options_calls{0};
  bool offer_gpa = true;
  std::vector<std::string> gpa_answer;
  grpc::Status gpa_error;
  grpc::Status allocate_error;
  // Allocate names host device PREFIX<id>, seen in the container under the same path, or as
  // PREFIX<k> for the k-th ID (ascending) with container numbering (the device plugin's
  // device_numbering: container, docs/architecture.md#device-numbering).
  std::string device_prefix = "/dev/neuron";
  bool container_numbering = false;
  std::vector<v1beta1::PreferredAllocationRequest> gpa_requests;
  std::vector<v1beta1::AllocateRequest> allocate_requests;
  std::vector<std::string> calls;

 private:
  const fs::path dir_;
  const std::string socket_name_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::pair<std::string, bool>> health_;
  std::map<std::string, int> numa_;
  uint64_t version_ = 1;
  std::unique_ptr<grpc::Server> server_;
};

inline bool IsSocket(const fs::path& p) { return fs::is_socket(fs::symlink_status(p)); }

inline std::vector<std::string> Strings(const google::protobuf::RepeatedPtrField<std::string>& r) {
  std::vector<std::string> v(r.begin(), r.end());
  std::sort(v.begin(), v.end());
  return v;
}

class KubeletEmulatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(root_.path() / "dev");
    for (int i = 0; i < 4; ++i) {
      neuron::testing::WriteFile(root_.path() / "dev" / ("neuron" + std::to_string(i)), "");
    }
  }
  KubeletEmulator::Options Opts() {
    KubeletEmulator::Options o;
    o.kubelet_dir = dir_.str();
    o.root = root_.str();
    o.rpc_deadline = 10s;
    o.dial_timeout = 5s;
    o.seed = 42;
    return o;
  }
  std::unique_ptr<KubeletEmulator> Start(KubeletEmulator::Options o) {
    absl::StatusOr<std::unique_ptr<KubeletEmulator>> k = KubeletEmulator::Start(std::move(o));
    EXPECT_TRUE(k.ok()) << k.status();
    return k.ok() ? std::move(*k) : nullptr;
  }
  fs::path PluginDir() const { return dir_.path() / "device-plugins"; }
  // A plugin with devices 0..3 registered and its first list consumed.
  std::unique_ptr<TestPlugin> Plugin(KubeletEmulator& k, const std::string& socket = "test.sock") {
    auto p = std::make_unique<TestPlugin>(PluginDir(), socket,
                                          std::vector<std::string>{"0", "1", "2", "3"});
    p->Serve();
    grpc::Status s = p->Register();
    EXPECT_TRUE(s.ok()) << s.error_message();
    EXPECT_TRUE(WaitUntil(
        [&] {
          auto r = k.Resource(kResource);
          return r && r->capacity == 4 && r->allocatable == 4;
        },
        10s));
    return p;
  }
  static PodSpec Pod(const std::string& name, int count, const std::string& res = kResource) {
    PodSpec pod;
    pod.name = name;
    pod.containers.push_back(ContainerSpec{.name = "main", .requests = {{res, count}}});
    return pod;
  }
  static int InUse(KubeletEmulator& k) {
    return k.Resource(kResource).value_or(ResourceState{}).in_use;
  }

  TempDir dir_{"kubelet"};
  TempDir root_{"root"};
};

}  // namespace neuron::sim::kubelet_test
