#pragma once
// The kubelet's side of the device-plugin API, as small as the plugin tests need, over real gRPC
// on Unix sockets (docs/kubelet-api.md#registration): a Registration server on
// KUBELET_DIR/device-plugins/ kubelet.sock that, like the kubelet, dials the plugin back and calls
// GetDevicePluginOptions before Register returns; ListAndWatch readers; a PodResources List server.
// Thread-safe.

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "deviceplugin/v1beta1/api.grpc.pb.h"
#include "podresources/v1/api.grpc.pb.h"

namespace neuron::plugin::testing {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// Cause and effect, not latency (docs/architecture.md#timing-in-tests)
inline constexpr auto kCeiling = 10s;

struct Registration {
  std::string resource;
  std::string endpoint;
  std::string version;
  bool options_answered = false;  // GetDevicePluginOptions succeeded inside Register
  bool get_preferred_allocation = false;
  bool pre_start_required = true;
};

class FakeKubelet final : public v1beta1::Registration::Service {
 public:
  explicit FakeKubelet(const fs::path& kubelet_dir) : dir_(kubelet_dir / "device-plugins") {
    fs::create_directories(dir_);
  }
  ~FakeKubelet() override { Stop(); }

  // Serves kubelet.sock (created anew, as a restarted kubelet does).
  void Start() {
    grpc::ServerBuilder b;
    b.AddListeningPort("unix:" + (dir_ / "kubelet.sock").string(),
                       grpc::InsecureServerCredentials());
    b.RegisterService(this);
    server_ = b.BuildAndStart();
    ASSERT_NE(server_, nullptr);
  }
  void Stop() {
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + 1s);
    server_.reset();
  }
  // A kubelet restart: stop, delete every socket in the directory, serve kubelet.sock again.
  void Restart() {
    Stop();
    for (const auto& e : fs::directory_iterator(dir_)) {
      if (e.is_socket()) fs::remove(e.path());
    }
    Start();
  }

  grpc::Status Register(grpc::ServerContext*, const v1beta1::RegisterRequest* req,
                        v1beta1::Empty*) override {
    Registration r{req->resource_name(), req->endpoint(), req->version()};
    auto channel = grpc::CreateChannel("unix:" + (dir_ / req->endpoint()).string(),
                                       grpc::InsecureChannelCredentials());
    auto stub = v1beta1::DevicePlugin::NewStub(channel);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 10s);
    ctx.set_wait_for_ready(true);
    v1beta1::DevicePluginOptions options;
    const grpc::Status s = stub->GetDevicePluginOptions(&ctx, v1beta1::Empty(), &options);
    r.options_answered = s.ok();
    r.get_preferred_allocation = options.get_preferred_allocation_available();
    r.pre_start_required = options.pre_start_required();
    std::lock_guard<std::mutex> lock(mu_);
    registrations_.push_back(r);
    cv_.notify_all();
    return s.ok() ? grpc::Status::OK : grpc::Status(grpc::StatusCode::UNKNOWN, s.error_message());
  }

  std::vector<Registration> registrations() {
    std::lock_guard<std::mutex> lock(mu_);
    return registrations_;
  }
  // Waits until `resource` registered at least `n` times in all.
  bool WaitRegistered(const std::string& resource, size_t n,
                      std::chrono::milliseconds ceiling = kCeiling) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, ceiling, [&] { return Count(resource) >= n; });
  }
  size_t count(const std::string& resource) {
    std::lock_guard<std::mutex> lock(mu_);
    return Count(resource);
  }
  fs::path Socket(const std::string& resource) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = registrations_.rbegin(); it != registrations_.rend(); ++it) {
      if (it->resource == resource) return dir_ / it->endpoint;
    }
    return {};
  }
  const fs::path& dir() const { return dir_; }

 private:
  size_t Count(const std::string& resource) const {
    size_t n = 0;
    for (const Registration& r : registrations_) n += r.resource == resource;
    return n;
  }

  fs::path dir_;
  std::unique_ptr<grpc::Server> server_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Registration> registrations_;
};

struct Listed {
  std::string health;
  std::vector<int64_t> numa;
};

// Reads one ListAndWatch stream on its own thread and keeps the latest list.
class ListWatcher {
 public:
  explicit ListWatcher(const fs::path& socket)
      : stub_(v1beta1::DevicePlugin::NewStub(
            grpc::CreateChannel("unix:" + socket.string(), grpc::InsecureChannelCredentials()))) {
    thread_ = std::thread([this] {
      auto reader = stub_->ListAndWatch(&ctx_, v1beta1::Empty());
      v1beta1::ListAndWatchResponse msg;
      while (reader->Read(&msg)) {
        std::map<std::string, Listed> list;
        for (const auto& d : msg.devices()) {
          Listed l{d.health(), {}};
          for (const auto& n : d.topology().nodes()) l.numa.push_back(n.id());
          list[d.id()] = l;
        }
        std::lock_guard<std::mutex> lock(mu_);
        latest_ = std::move(list);
        ++messages_;
        cv_.notify_all();
      }
      reader->Finish();
      std::lock_guard<std::mutex> lock(mu_);
      ended_ = true;
      cv_.notify_all();
    });
  }
  ~ListWatcher() {
    ctx_.TryCancel();
    thread_.join();
  }
  // Waits until the latest list satisfies `pred`.
  bool WaitFor(const std::function<bool(const std::map<std::string, Listed>&)>& pred,
               std::chrono::milliseconds ceiling = kCeiling) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, ceiling, [&] { return messages_ > 0 && pred(latest_); });
  }
  bool WaitHealth(const std::string& id, const std::string& health,
                  std::chrono::milliseconds ceiling = kCeiling) {
    return WaitFor([&](const auto& l) { return l.count(id) && l.at(id).health == health; },
                   ceiling);
  }
  std::map<std::string, Listed> latest() {
    std::lock_guard<std::mutex> lock(mu_);
    return latest_;
  }
  int messages() {
    std::lock_guard<std::mutex> lock(mu_);
    return messages_;
  }
  bool WaitEnded(std::chrono::milliseconds ceiling = kCeiling) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, ceiling, [&] { return ended_; });
  }

 private:
  std::unique_ptr<v1beta1::DevicePlugin::Stub> stub_;
  grpc::ClientContext ctx_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Listed> latest_;
  int messages_ = 0;
  bool ended_ = false;
};

// PodResources List on KUBELET_DIR/pod-resources/kubelet.sock with a settable answer.
class FakePodResources final : public v1::PodResourcesLister::Service {
 public:
  explicit FakePodResources(const fs::path& kubelet_dir) {
    fs::create_directories(kubelet_dir / "pod-resources");
    grpc::ServerBuilder b;
    b.AddListeningPort("unix:" + (kubelet_dir / "pod-resources/kubelet.sock").string(),
                       grpc::InsecureServerCredentials());
    b.RegisterService(this);
    server_ = b.BuildAndStart();
  }
  ~FakePodResources() override { server_->Shutdown(std::chrono::system_clock::now() + 1s); }

  // Pod name -> (resource -> ids).
  void Set(std::map<std::string, std::map<std::string, std::vector<std::string>>> pods) {
    std::lock_guard<std::mutex> lock(mu_);
    pods_ = std::move(pods);
  }
  // How many List calls have been answered: a test waits for answers given after a change.
  int lists() const { return lists_.load(); }
  grpc::Status List(grpc::ServerContext*, const v1::ListPodResourcesRequest*,
                    v1::ListPodResourcesResponse* out) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++lists_;
    for (const auto& [name, resources] : pods_) {
      v1::PodResources* pod = out->add_pod_resources();
      pod->set_name(name);
      pod->set_namespace_("default");
      v1::ContainerResources* c = pod->add_containers();
      c->set_name("main");
      for (const auto& [resource, ids] : resources) {
        v1::ContainerDevices* d = c->add_devices();
        d->set_resource_name(resource);
        for (const std::string& id : ids) d->add_device_ids(id);
      }
    }
    return grpc::Status::OK;
  }

 private:
  std::unique_ptr<grpc::Server> server_;
  std::mutex mu_;
  std::map<std::string, std::map<std::string, std::vector<std::string>>> pods_;
  std::atomic<int> lists_{0};
};

inline std::unique_ptr<v1beta1::DevicePlugin::Stub> PluginStub(const fs::path& socket) {
  return v1beta1::DevicePlugin::NewStub(
      grpc::CreateChannel("unix:" + socket.string(), grpc::InsecureChannelCredentials()));
}

inline grpc::Status Allocate(v1beta1::DevicePlugin::Stub* stub,
                             const std::vector<std::vector<std::string>>& containers,
                             v1beta1::AllocateResponse* out) {
  v1beta1::AllocateRequest req;
  for (const auto& ids : containers) {
    auto* c = req.add_container_requests();
    for (const std::string& id : ids) c->add_devices_ids(id);
  }
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + kCeiling);
  return stub->Allocate(&ctx, req, out);
}

}  // namespace neuron::plugin::testing
