#pragma once
// A failed RPC as the kubelet's Go gRPC client words it in its errors and logs
// ("rpc error: code = N desc = ..."), for every part of the emulator that calls a plugin.

#include <fmt/format.h>
#include <grpcpp/support/status.h>

#include <string>

namespace neuron::sim {

inline std::string RpcError(const grpc::Status& s) {
  return fmt::format("rpc error: code = {} desc = {}", static_cast<int>(s.error_code()),
                     s.error_message());
}

}  // namespace neuron::sim
