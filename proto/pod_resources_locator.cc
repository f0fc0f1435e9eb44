#include "proto/pod_resources_locator.h"

#include "absl/strings/str_cat.h"
#include "core/model/device_id.h"

namespace neuron {
namespace {

class PodResourcesLocator : public PodLocator {
 public:
  explicit PodResourcesLocator(std::shared_ptr<const PodResourcesCache> cache)
      : cache_(std::move(cache)) {}

  absl::StatusOr<std::optional<PodIdentity>> Locate(const ProcessRef& process) override {
    if (cache_->refreshes() == 0) {
      return absl::UnavailableError(
          absl::StrCat("no answer from the kubelet yet: ", cache_->LastStatus().message()));
    }
    const std::shared_ptr<const PodAssignments> pods = cache_->Latest();
    // Cores first: a core pod on a device shared with other core pods is told apart only there.
    for (int core : process.core_ids) {
      if (auto* holder = pods->Holder(kResourceNeuronCore, IndexId(core))) return Identity(*holder);
    }
    for (int device : process.devices) {
      for (std::string_view resource : {kResourceNeuron, kResourceNeuronDevice}) {
        if (auto* holder = pods->Holder(resource, IndexId(device))) return Identity(*holder);
      }
    }
    return std::optional<PodIdentity>();
  }
  std::string_view name() const override { return "pod-resources"; }

 private:
  static std::optional<PodIdentity> Identity(const PodDeviceAssignment& a) {
    PodIdentity id;
    id.name = a.pod_name;
    id.namespace_name = a.pod_namespace;
    id.container = a.container;
    return id;
  }

  std::shared_ptr<const PodResourcesCache> cache_;
};

}  // namespace

std::unique_ptr<PodLocator> MakePodResourcesLocator(
    std::shared_ptr<const PodResourcesCache> cache) {
  return std::make_unique<PodResourcesLocator>(std::move(cache));
}

}  // namespace neuron
