#pragma once
// The kubelet's DRA resource-health side (KEP-4680), for the emulator's DraManager (not a public
// header). Written from kubernetes/kubernetes:
//   pkg/kubelet/cm/dra/healthinfo.go: the health cache keyed by driver and "pool/device"; every
//     report stamps its devices with the time it arrived; a device whose last report is older than
//     its timeout (the plugin's health_check_timeout_seconds, else DefaultHealthTimeout, 30 s)
//     reads as Unknown with no message, lazily, when the pod status is built; clearDriver when the
//     driver's stream ends;
//   pkg/kubelet/cm/dra/manager.go: HandleWatchResourcesStream (the stream's answers into the
//     cache, the driver's entries cleared when it ends), buildDeviceHealth (a timeout of zero or
//     less means the default; the message cut at 1024 characters);
//   pkg/kubelet/cm/dra/plugin/dra_plugin_manager.go (PR #139477, Kubernetes 1.37): the health
//     service is picked at registration from the plugin's supported_versions, v1 before v1alpha1
//     (pickHealthService), none when the plugin advertises neither; one stream per driver, on its
//     newest plugin only (no fall-back to an older one); a stream that ends is opened again 5 s
//     later (wait.UntilWithContext), except after Unimplemented, which ends health for that plugin.
//
// Thread-safe.

#include <spdlog/spdlog.h>

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace neuron::sim {

// The health service names a plugin advertises in PluginInfo.supported_versions.
inline constexpr std::string_view kHealthV1 = "v1.DRAResourceHealth";
inline constexpr std::string_view kHealthV1alpha1 = "v1alpha1.DRAResourceHealth";

// pickHealthService: the newest health service the plugin advertises that the kubelet knows, ""
// when none.
std::string PickHealthService(const std::vector<std::string>& supported);

enum class DeviceHealthStatus { kUnknown, kHealthy, kUnhealthy };

// core/v1 ResourceHealthStatus: "Healthy", "Unhealthy", "Unknown".
std::string_view HealthName(DeviceHealthStatus health);

// One device's entry of the cache (state.DeviceHealth).
struct DeviceHealth {
  std::string pool;
  std::string device;
  DeviceHealthStatus health = DeviceHealthStatus::kUnknown;
  std::string message;
  std::chrono::milliseconds timeout{0};  // 0: the cache's default
  std::chrono::steady_clock::time_point last_updated{};
};

class DraHealthCache {
 public:
  using Clock = std::chrono::steady_clock;
  explicit DraHealthCache(std::chrono::milliseconds default_timeout)
      : default_timeout_(default_timeout) {}

  // updateHealthInfo: the plugin's whole list, stamped `now`; a cached device missing from it
  // turns Unknown once its timeout has passed.
  void Update(const std::string& driver, std::vector<DeviceHealth> reported, Clock::time_point now);
  // getHealthInfo: Unknown (no message) for a device never reported or reported too long ago.
  DeviceHealth Get(const std::string& driver, const std::string& pool, const std::string& device,
                   Clock::time_point now) const;
  void ClearDriver(const std::string& driver);

 private:
  std::chrono::milliseconds TimeoutOf(const DeviceHealth& d) const;

  const std::chrono::milliseconds default_timeout_;
  mutable std::mutex mu_;
  std::map<std::string, std::map<std::string, DeviceHealth>> drivers_;  // guarded by mu_
};

// The plugin a driver's health stream follows.
struct HealthTarget {
  std::string endpoint;
  std::string service;  // kHealthV1, kHealthV1alpha1 or "" (the plugin serves no health)
  bool operator==(const HealthTarget&) const = default;
};

class DraHealthStreams {
 public:
  DraHealthStreams(DraHealthCache* cache, std::shared_ptr<spdlog::logger> log,
                   std::chrono::milliseconds retry = std::chrono::seconds(5));
  ~DraHealthStreams();  // StopAll()
  DraHealthStreams(const DraHealthStreams&) = delete;
  DraHealthStreams& operator=(const DraHealthStreams&) = delete;

  // The driver's newest plugin is now `newest` (nullopt: none registered). A stream already on
  // that plugin and service is kept; otherwise the old one is cancelled (its entries cleared) and,
  // when the plugin serves health, a new one opened.
  void Follow(const std::string& driver, const std::optional<HealthTarget>& newest);
  // Cancels every stream and joins its thread (a kubelet that stops); entries are cleared.
  void StopAll();

  class Stream;

 private:
  DraHealthCache* const cache_;
  std::shared_ptr<spdlog::logger> log_;
  const std::chrono::milliseconds retry_;
  std::mutex mu_;
  std::map<std::string, std::unique_ptr<Stream>> streams_;  // guarded by mu_; by driver
};

}  // namespace neuron::sim
