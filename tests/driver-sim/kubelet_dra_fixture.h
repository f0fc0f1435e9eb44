#pragma once
// A DRA kubelet plugin double for the kubelet emulator's DRA tests, over real gRPC on Unix
// sockets where a DRA driver puts them (docs/kubelet-api.md#dra; our driver's paths):
//   KUBELET_DIR/plugins_registry/<driver>-reg.sock   pluginregistration.Registration
//   KUBELET_DIR/plugins/<driver>/dra.sock            DRAPlugin v1 and v1beta1
// Faithful to the API where the emulator depends on it: GetInfo answers a PluginInfo (type,
// name, endpoint, supported_versions) the test can spoil; NodePrepareResources answers per claim
// UID with the claim's devices and CDI device IDs, after writing the CDI spec of those devices to
// the CDI directory (kind aws.amazon.com/neuron, device `<claim uid>-<device>`, env and device
// nodes), or with the error the test set for that claim; NodeUnprepareResources removes the spec.
// Both are idempotent, as a driver's must be. It records every call and registration status.
// DRAResourceHealth v1 and v1alpha1 (NodeWatchResources) send the test's health list at once and
// whenever the test changes it (SetHealth), or answer Unimplemented; each stream opened is counted.

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <condition_variable>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "dra/v1/api.grpc.pb.h"
#include "dra/v1beta1/api.grpc.pb.h"
#include "drahealth/v1/api.grpc.pb.h"
#include "drahealth/v1alpha1/api.grpc.pb.h"
#include "nlohmann/json.hpp"
#include "pluginregistration/v1/api.grpc.pb.h"
#include "tests/driver-sim/kubelet_emulator_fixture.h"
#include "tests/support/process.h"

namespace neuron::sim::kubelet_test {

namespace dra_v1 = k8s::io::kubelet::pkg::apis::dra::v1;
namespace dra_v1beta1 = k8s::io::kubelet::pkg::apis::dra::v1beta1;

// One device of the double's health list (pool "node-1").
struct HealthEntry {
  std::string device;
  int health = 1;  // the wire enum: 0 UNKNOWN, 1 HEALTHY, 2 UNHEALTHY
  std::string message;
  int64_t timeout_seconds = 0;  // v1's health_check_timeout_seconds
};

// What the double knows and saw; guarded by `mu`.
struct DraPluginState {
  std::mutex mu;
  std::condition_variable health_changed;
  std::vector<HealthEntry> health = {{"neuron-3", 1, "", 0}};  // the default claim's device
  uint64_t health_generation = 1;
  bool health_unimplemented = false;
  std::map<std::string, int> watches;  // health service version -> streams opened
  pluginregistration::PluginInfo info;
  std::vector<pluginregistration::RegistrationStatus> statuses;
  std::map<std::string, int> prepares;        // service version -> NodePrepareResources calls
  std::vector<std::string> prepared;          // claim UIDs, every call
  std::vector<std::string> unprepared;        // claim UIDs, every call
  std::map<std::string, std::string> errors;  // claim UID -> the driver's error for it
  // Device names of each claim (default: {"neuron-3"}) and the env its CDI spec sets.
  std::map<std::string, std::vector<std::string>> devices;
  std::map<std::string, std::string> env;
  bool write_cdi = true;
  std::filesystem::path cdi_dir;
};

template <typename Svc, typename PrepReq, typename PrepResp, typename UnReq, typename UnResp>
class DraService final : public Svc::Service {
 public:
  DraService(DraPluginState& st, std::string version) : st_(st), version_(std::move(version)) {}

  grpc::Status NodePrepareResources(grpc::ServerContext*, const PrepReq* req,
                                    PrepResp* out) override {
    std::lock_guard lock(st_.mu);
    ++st_.prepares[version_];
    for (const auto& claim : req->claims()) {
      st_.prepared.push_back(claim.uid());
      auto& r = (*out->mutable_claims())[claim.uid()];
      if (auto e = st_.errors.find(claim.uid()); e != st_.errors.end()) {
        r.set_error(e->second);
        continue;
      }
      auto names = st_.devices.contains(claim.uid()) ? st_.devices[claim.uid()]
                                                     : std::vector<std::string>{"neuron-3"};
      nlohmann::json devices = nlohmann::json::array();
      for (const std::string& name : names) {
        auto* d = r.add_devices();
        d->add_request_names("neurons");
        d->set_pool_name("node-1");
        d->set_device_name(name);
        d->add_cdi_device_ids("aws.amazon.com/neuron=" + claim.uid() + "-" + name);
        const std::string index = name.substr(name.find('-') + 1);
        devices.push_back(
            {{"name", claim.uid() + "-" + name},
             {"containerEdits",
              {{"deviceNodes", {{{"path", "/dev/neuron" + index}, {"permissions", "rw"}}}}}}});
      }
      nlohmann::json env = nlohmann::json::array();
      for (const auto& [k, v] : st_.env) env.push_back(std::string(k).append("=").append(v));
      if (st_.write_cdi) {
        neuron::testing::WriteFile(st_.cdi_dir / SpecFile(claim.uid()),
                                   nlohmann::json{{"cdiVersion", "0.6.0"},
                                                  {"kind", "aws.amazon.com/neuron"},
                                                  {"devices", devices},
                                                  {"containerEdits", {{"env", env}}}}
                                       .dump());
      }
    }
    return grpc::Status::OK;
  }
  grpc::Status NodeUnprepareResources(grpc::ServerContext*, const UnReq* req,
                                      UnResp* out) override {
    std::lock_guard lock(st_.mu);
    for (const auto& claim : req->claims()) {
      st_.unprepared.push_back(claim.uid());
      std::error_code ec;
      std::filesystem::remove(st_.cdi_dir / SpecFile(claim.uid()), ec);
      (*out->mutable_claims())[claim.uid()];
    }
    return grpc::Status::OK;
  }

 private:
  // neuron.aws.com's specs are <uid>.json; another driver's are prefixed with its name, so that
  // two drivers preparing one claim do not overwrite each other's.
  std::string SpecFile(const std::string& uid) const {
    const std::string driver = st_.info.name();
    return driver == "neuron.aws.com" ? uid + ".json" : driver + "_" + uid + ".json";
  }

  DraPluginState& st_;
  const std::string version_;
};

template <typename Svc, typename Req, typename Resp, bool kV1>
class HealthDouble final : public Svc::Service {
 public:
  HealthDouble(DraPluginState& st, std::string version) : st_(st), version_(std::move(version)) {}
  grpc::Status NodeWatchResources(grpc::ServerContext* ctx, const Req*,
                                  grpc::ServerWriter<Resp>* writer) override;

 private:
  DraPluginState& st_;
  const std::string version_;
};

class RegistrationDouble final : public pluginregistration::Registration::Service {
 public:
  explicit RegistrationDouble(DraPluginState& st) : st_(st) {}
  grpc::Status GetInfo(grpc::ServerContext*, const pluginregistration::InfoRequest*,
                       pluginregistration::PluginInfo* out) override {
    std::lock_guard lock(st_.mu);
    *out = st_.info;
    return grpc::Status::OK;
  }
  grpc::Status NotifyRegistrationStatus(grpc::ServerContext*,
                                        const pluginregistration::RegistrationStatus* status,
                                        pluginregistration::RegistrationStatusResponse*) override {
    std::lock_guard lock(st_.mu);
    st_.statuses.push_back(*status);
    return grpc::Status::OK;
  }

 private:
  DraPluginState& st_;
};

class FakeDraPlugin {
 public:
  FakeDraPlugin(const std::filesystem::path& kubelet_dir, const std::filesystem::path& cdi_dir,
                std::string driver = "neuron.aws.com")
      : reg_socket_(kubelet_dir / "plugins_registry" / (driver + "-reg.sock")),
        dra_socket_(kubelet_dir / "plugins" / driver / "dra.sock") {
    state.cdi_dir = cdi_dir;
    state.info.set_type("DRAPlugin");
    state.info.set_name(driver);
    state.info.set_endpoint(dra_socket_.string());
    state.info.add_supported_versions("v1.DRAPlugin");
    state.info.add_supported_versions("v1beta1.DRAPlugin");
    std::filesystem::create_directories(dra_socket_.parent_path());
    std::filesystem::create_directories(reg_socket_.parent_path());
    std::filesystem::create_directories(cdi_dir);
  }
  ~FakeDraPlugin() { Stop(); }

  // Serves the DRA services, then the registration socket (the order a driver uses).
  void Serve() {
    grpc::ServerBuilder dra;
    dra.AddListeningPort("unix:" + dra_socket_.string(), grpc::InsecureServerCredentials());
    dra.RegisterService(&v1_);
    dra.RegisterService(&v1beta1_);
    dra.RegisterService(&health_v1_);
    dra.RegisterService(&health_v1alpha1_);
    dra_server_ = dra.BuildAndStart();
    ASSERT_NE(dra_server_, nullptr);
    grpc::ServerBuilder reg;
    reg.AddListeningPort("unix:" + reg_socket_.string(), grpc::InsecureServerCredentials());
    reg.RegisterService(&registration_);
    reg_server_ = reg.BuildAndStart();
    ASSERT_NE(reg_server_, nullptr);
  }
  // Stops both servers and removes the registration socket (a driver that exits).
  void Stop() {
    for (auto* server : {&reg_server_, &dra_server_}) {
      if (*server) {
        (*server)->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
        (*server)->Wait();
        server->reset();
      }
    }
    std::error_code ec;
    std::filesystem::remove(reg_socket_, ec);
  }
  std::vector<pluginregistration::RegistrationStatus> Statuses() {
    std::lock_guard lock(state.mu);
    return state.statuses;
  }
  const std::filesystem::path& dra_socket() const { return dra_socket_; }
  // Replaces the health list; every open stream sends it.
  void SetHealth(std::vector<HealthEntry> health) {
    {
      std::lock_guard lock(state.mu);
      state.health = std::move(health);
      ++state.health_generation;
    }
    state.health_changed.notify_all();
  }
  int Watches(const std::string& version) {
    std::lock_guard lock(state.mu);
    return state.watches.contains(version) ? state.watches.at(version) : 0;
  }

  DraPluginState state;

 private:
  const std::filesystem::path reg_socket_;
  const std::filesystem::path dra_socket_;
  DraService<dra_v1::DRAPlugin, dra_v1::NodePrepareResourcesRequest,
             dra_v1::NodePrepareResourcesResponse, dra_v1::NodeUnprepareResourcesRequest,
             dra_v1::NodeUnprepareResourcesResponse>
      v1_{state, "v1"};
  DraService<dra_v1beta1::DRAPlugin, dra_v1beta1::NodePrepareResourcesRequest,
             dra_v1beta1::NodePrepareResourcesResponse, dra_v1beta1::NodeUnprepareResourcesRequest,
             dra_v1beta1::NodeUnprepareResourcesResponse>
      v1beta1_{state, "v1beta1"};
  HealthDouble<::v1::DRAResourceHealth, ::v1::NodeWatchResourcesRequest,
               ::v1::NodeWatchResourcesResponse, true>
      health_v1_{state, "v1"};
  HealthDouble<::v1alpha1::DRAResourceHealth, ::v1alpha1::NodeWatchResourcesRequest,
               ::v1alpha1::NodeWatchResourcesResponse, false>
      health_v1alpha1_{state, "v1alpha1"};
  RegistrationDouble registration_{state};
  std::unique_ptr<grpc::Server> dra_server_;
  std::unique_ptr<grpc::Server> reg_server_;
};

// The DRA tests' base: the emulator with the double registered, and pods using its claims.
class KubeletDraTestBase : public KubeletEmulatorTest {
 protected:
  KubeletEmulator::Options DraOpts() {
    KubeletEmulator::Options o = Opts();
    o.cdi_dir = cdi_.str();
    o.plugin_poll = std::chrono::milliseconds(20);
    return o;
  }
  // Starts the emulator with the plugin served first, and waits for its registration.
  std::unique_ptr<KubeletEmulator> StartRegistered() { return StartRegistered(DraOpts()); }
  std::unique_ptr<KubeletEmulator> StartRegistered(KubeletEmulator::Options o) {
    plugin_.Serve();
    std::unique_ptr<KubeletEmulator> k = Start(std::move(o));
    EXPECT_TRUE(WaitUntil([&] { return k->DraPlugins().contains("neuron.aws.com"); },
                          std::chrono::seconds(10)));
    return k;
  }
  static PodSpec ClaimPod(const std::string& name, std::vector<ClaimRef> claims) {
    PodSpec pod;
    pod.namespace_name = "training";
    pod.name = name;
    pod.containers.push_back(ContainerSpec{});
    pod.claims = std::move(claims);
    return pod;
  }
  std::vector<std::string> Unprepared() {
    std::lock_guard lock(plugin_.state.mu);
    return plugin_.state.unprepared;
  }

  TempDir cdi_{"cdi"};
  FakeDraPlugin plugin_{dir_.path(), cdi_.path()};
  const ClaimRef claim_{"training", "llama-0-neurons", "uid-1", {"neuron.aws.com"}};
};

template <typename Svc, typename Req, typename Resp, bool kV1>
grpc::Status HealthDouble<Svc, Req, Resp, kV1>::NodeWatchResources(
    grpc::ServerContext* ctx, const Req*, grpc::ServerWriter<Resp>* writer) {
  std::unique_lock lock(st_.mu);
  ++st_.watches[version_];
  if (st_.health_unimplemented) {
    return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "no device health in this driver");
  }
  uint64_t sent = 0;
  while (!ctx->IsCancelled()) {
    if (sent != st_.health_generation) {
      Resp r;
      for (const HealthEntry& e : st_.health) {
        auto* d = r.add_devices();
        d->mutable_device()->set_pool_name("node-1");
        d->mutable_device()->set_device_name(e.device);
        d->set_health(static_cast<decltype(d->health())>(e.health));
        d->set_last_updated_time(1);
        if constexpr (kV1) {
          d->set_message(e.message);
          d->set_health_check_timeout_seconds(e.timeout_seconds);
        }
      }
      sent = st_.health_generation;
      lock.unlock();
      const bool ok = writer->Write(r);
      lock.lock();
      if (!ok) break;
    }
    st_.health_changed.wait_for(lock, std::chrono::milliseconds(50));
  }
  return grpc::Status::OK;
}

}  // namespace neuron::sim::kubelet_test
