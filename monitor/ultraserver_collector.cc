// ultraserver: neuron_ultraserver_info (docs/metrics.md#device-utilization-memory), from the
// driver's UltraServer class attributes as discovery read them (core/discovery/ultraserver.h).
#include "core/discovery/ultraserver.h"
#include "monitor/collector.h"

namespace neuron::monitor {
namespace {

class UltraServerCollector final : public Collector {
 public:
  std::string_view name() const override { return "ultraserver"; }
  absl::Status Collect(const ScrapeContext& ctx, Families& out) override {
    FamilyBuilder info = Gauge(
        "neuron_ultraserver_info",
        "The node's place in each UltraServer configuration it is in: mode x4 from node_id_4 and "
        "server_id_4, x2h or x2v from node_id_2 and server_id_2 (class attributes of "
        "/sys/class/neuron_device). No series outside an UltraServer or while unknown.");
    const std::optional<UltraServerInfo>& us = ctx.inventory().ultraserver;
    if (us) {
      for (const UltraServerMembership& m : us->memberships) {
        info.Add({L("mode", m.mode), L("node_id", Str(m.node_id)), L("server_id", m.server_id)}, 1);
      }
    }
    info.Finish(out);
    return absl::OkStatus();
  }
};

}  // namespace

std::unique_ptr<Collector> MakeUltraServerCollector() {
  return std::make_unique<UltraServerCollector>();
}

}  // namespace neuron::monitor
