#pragma once
// "Which pod does this process belong to?" for the tools' POD and NAMESPACE columns
// (docs/tools-ux.md#requirements Q1). One small interface with several back ends:
//   - cgroup (here): the process's cgroup path names the pod's UID and QoS class and the
//     container's runtime id (kubepods.../pod<uid>/<container>), but not the pod's name;
//   - PodResources (later, with the kubelet client in proto/): names and namespaces of the pods
//     that hold a process's devices or cores.
// MakeChainedPodLocator combines them: the first that knows the pod wins and later ones fill in
// what it left out. Locators are not thread-safe: one owner (a collector thread).

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/proc/procinfo.h"

namespace neuron {

struct PodIdentity {
  std::string uid;                            // "6b3b7a1c-...", empty when unknown
  std::optional<std::string> name;            // from PodResources
  std::optional<std::string> namespace_name;  // from PodResources
  std::optional<std::string> container;       // container name, from PodResources
  std::optional<std::string> container_id;    // runtime id from the cgroup path
  std::optional<std::string> qos;             // "guaranteed", "burstable", "besteffort"
  bool operator==(const PodIdentity&) const = default;
};

// What a locator may use to find a process's pod: PodResources knows allocations by device and
// core ids, not PIDs.
struct ProcessRef {
  int pid = 0;
  std::vector<int> devices;   // device indices the process has a datastore on
  std::vector<int> core_ids;  // global logical core ids it uses
};

class PodLocator {
 public:
  virtual ~PodLocator() = default;
  // nullopt: the process is known not to run in a pod. An error: cannot tell (cgroup unreadable,
  // the process is gone, the kubelet is away).
  virtual absl::StatusOr<std::optional<PodIdentity>> Locate(const ProcessRef& process) = 0;
  virtual std::string_view name() const = 0;
};

// Parses /proc/<pid>/cgroup text (v1 or v2; systemd or cgroupfs driver). nullopt when no line
// has a kubepods path with a pod<uid> segment.
std::optional<PodIdentity> ParsePodFromCgroup(std::string_view cgroup_text);

// Reads /proc/<pid>/cgroup through `proc` (docs/architecture.md#process-information).
std::unique_ptr<PodLocator> MakeCgroupPodLocator(ProcReader proc);
// Asks each locator in order (see the file comment). An error only when every locator failed.
std::unique_ptr<PodLocator> MakeChainedPodLocator(std::vector<std::unique_ptr<PodLocator>> chain);

}  // namespace neuron
