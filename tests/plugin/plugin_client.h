#pragma once
// Calls to a device plugin's socket as the kubelet makes them (docs/kubelet-api.md#allocate), for
// the plugin tests that send requests straight to the plugin; the kubelet itself is driver-sim's
// kubelet emulator (driver-sim/kubelet/kubelet_emulator.h).

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "deviceplugin/v1beta1/api.grpc.pb.h"

namespace neuron::plugin::testing {

using namespace std::chrono_literals;

// Cause and effect, not latency (docs/architecture.md#timing-in-tests)
inline constexpr auto kCeiling = 10s;

inline std::unique_ptr<v1beta1::DevicePlugin::Stub> PluginStub(
    const std::filesystem::path& socket) {
  return v1beta1::DevicePlugin::NewStub(
      grpc::CreateChannel("unix:" + socket.string(), grpc::InsecureChannelCredentials()));
}

// One Allocate call with a container request per element of `containers`.
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
