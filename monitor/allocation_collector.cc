// allocation: info metrics joining devices, cores and EFA interfaces to the pods that hold them,
// from the kubelet's PodResources List() as last cached (docs/metrics.md#pod-attribution). Never
// calls the kubelet: the cache refreshes on its own thread.
#include <set>
#include <tuple>

#include "core/model/core_ids.h"
#include "core/model/device_id.h"
#include "monitor/collector.h"

namespace neuron::monitor {
namespace {

class AllocationCollector final : public Collector {
 public:
  std::string_view name() const override { return "allocation"; }
  absl::Status Collect(const ScrapeContext& ctx, Families& out) override {
    FamilyBuilder cores = Gauge(
        "neuroncore_allocation_info",
        "The pod container holding the NeuronCore (kubelet PodResources); a whole-device grant "
        "lists every core of the device.");
    FamilyBuilder devices = Gauge("neuron_device_allocation_info",
                                  "A pod container holding the device or some of its cores.");
    FamilyBuilder efas =
        Gauge("neuron_efa_allocation_info", "The pod container holding the EFA interface.");
    const Inventory& inv = ctx.inventory();
    const int per_device = inv.LogicalCoresPerDevice();
    const int max_device = inv.devices.empty() ? 0 : inv.devices.back().index + 1;
    std::set<std::tuple<int, std::string, std::string, std::string, std::string>> dev_seen;
    auto pod_labels = [](const PodDeviceAssignment& a) {
      return Labels{L("namespace", a.pod_namespace), L("pod", a.pod_name),
                    L("container", a.container)};
    };
    auto add_device = [&](int device, const PodDeviceAssignment& a) {
      if (!dev_seen.emplace(device, a.resource, a.pod_namespace, a.pod_name, a.container).second) {
        return;
      }
      Labels l = DeviceLabels(device);
      l.push_back(L("resource", a.resource));
      for (auto& p : pod_labels(a)) l.push_back(std::move(p));
      devices.Add(std::move(l), 1);
    };
    auto add_core = [&](int device, int global, const PodDeviceAssignment& a) {
      Labels l = CoreLabels(device, global);
      l.push_back(L("resource", a.resource));
      for (auto& p : pod_labels(a)) l.push_back(std::move(p));
      cores.Add(std::move(l), 1);
    };
    for (const PodDeviceAssignment& a : ctx.view.pods->all()) {
      absl::StatusOr<Resource> r = ParseResourceName(a.resource);
      if (!r.ok()) continue;  // another vendor's resource
      for (const std::string& id : a.ids) {
        if (*r == Resource::kEfa) {
          efas.Add({L("efa_device", id), L("namespace", a.pod_namespace), L("pod", a.pod_name),
                    L("container", a.container)},
                   1);
          continue;
        }
        if (per_device <= 0) continue;
        if (*r == Resource::kNeuronCore) {
          absl::StatusOr<int> core = ParseIndexId(id, max_device * per_device);
          if (!core.ok()) continue;
          add_core(DeviceOfCore(*core, per_device), *core, a);
          add_device(DeviceOfCore(*core, per_device), a);
        } else {
          absl::StatusOr<int> device = ParseIndexId(id, max_device);
          if (!device.ok()) continue;
          for (int k = 0; k < per_device; ++k) {
            add_core(*device, GlobalCoreId(*device, k, per_device), a);
          }
          add_device(*device, a);
        }
      }
    }
    cores.Finish(out);
    devices.Finish(out);
    efas.Finish(out);
    return absl::OkStatus();
  }
};

}  // namespace

std::unique_ptr<Collector> MakeAllocationCollector() {
  return std::make_unique<AllocationCollector>();
}

}  // namespace neuron::monitor
