#pragma once
// The kubelet's plugin watcher and DRA plugin store, for the emulator's DraManager (not a public
// header; dra_manager.h says what is modelled).

#include <spdlog/spdlog.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "driver-sim/kubelet/dra_health.h"
#include "driver-sim/kubelet/dra_manager.h"

namespace neuron::sim {

// One claim's entry of a NodePrepareResources answer.
struct PrepareResult {
  std::string error;
  std::vector<PreparedDevice> devices;
};

// Thread-safe.
class DraPluginStore {
 public:
  DraPluginStore(std::filesystem::path registry_dir, std::chrono::milliseconds poll,
                 std::chrono::milliseconds rpc_deadline, std::shared_ptr<spdlog::logger> log);
  ~DraPluginStore();  // Stop()
  DraPluginStore(const DraPluginStore&) = delete;
  DraPluginStore& operator=(const DraPluginStore&) = delete;

  // Walks plugins_registry/ once (registering what is there), then watches it on a thread.
  // `on_registered(driver)` runs on the watcher thread after each later successful registration;
  // `on_changed(driver)` after every registration (the first walk's too) and deregistration.
  void Start(std::function<void(const std::string&)> on_registered,
             std::function<void(const std::string&)> on_changed = {});
  // Stops watching and forgets every plugin; idempotent.
  void Stop();

  // The RPCs on the driver's newest plugin, with the service version chosen at registration.
  // An error: no plugin (the kubelet's "failed to get gRPC client ...") or the RPC failed
  // ("NodePrepareResources: rpc error: ..."). Keyed by claim UID, as the answer.
  absl::StatusOr<std::map<std::string, PrepareResult>> NodePrepare(
      const std::string& driver, const std::vector<ClaimRef>& claims);
  absl::StatusOr<std::map<std::string, std::string>> NodeUnprepare(
      const std::string& driver, const std::vector<ClaimRef>& claims);

  std::map<std::string, std::vector<std::string>> Plugins() const;
  // The driver's newest plugin and the health service it advertised; nullopt when none.
  std::optional<HealthTarget> Newest(const std::string& driver) const;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace neuron::sim
