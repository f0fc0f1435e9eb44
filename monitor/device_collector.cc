// device: neuron_device_info, neuron_device_state, neuron_device_link_info
// (docs/metrics.md#device-utilization-memory), neuron_driver_info and
// neuron_exporter_sysfs_nodes_missing (docs/metrics.md#self-metrics): what discovery found of the
// driver's generation and layout, no file read at scrape time.
#include "monitor/collector.h"

namespace neuron::monitor {
namespace {

// neuron_driver_info: what discovery read of the module's version and the generation it picked.
void AddDriverInfo(const ScrapeContext& ctx, Families& out) {
  FamilyBuilder driver = Gauge(
      "neuron_driver_info",
      "The Neuron driver module: version from /sys/module/neuron/version (\"\" when absent) and "
      "the sysfs generation it is read as (\"unknown\": not one with public source).");
  const DriverInfo& drv = ctx.inventory().driver;
  driver.Add(
      {L("version", drv.version.value_or("")), L("generation", std::string(drv.GenerationLabel()))},
      1);
  driver.Finish(out);
}

class DeviceCollector final : public Collector {
 public:
  std::string_view name() const override { return "device"; }
  absl::Status Collect(const ScrapeContext& ctx, Families& out) override {
    FamilyBuilder info =
        Gauge("neuron_device_info",
              "Neuron device identity (info/architecture, info/serial_number, core_count, PCI).");
    FamilyBuilder state =
        Gauge("neuron_device_state", "Device state from the reset file: 1 on the current state.");
    FamilyBuilder link =
        Gauge("neuron_device_link_info", "NeuronLink peers of the device (connected_devices).");
    FamilyBuilder missing = Gauge(
        "neuron_exporter_sysfs_nodes_missing",
        "sysfs files the agent reads that the driver's generation (an unknown one: the newest "
        "known) has and this device lacks; absent, never read as 0. Checked at each rescan.");
    const Snapshot& snap = ctx.snap();
    for (const NeuronDevice& d : ctx.inventory().devices) {
      const DeviceSample* s = snap.FindDevice(d.index);
      if (s == nullptr) continue;  // unplugged: no series
      Labels l = DeviceLabels(d.index);
      l.push_back(L("pci_bdf", d.bdf));
      l.push_back(L("arch_type", d.arch_type));
      l.push_back(L("device_name", d.device_name));
      const std::optional<std::string>& serial =
          s->serial_number ? s->serial_number : d.attributes.Get("serial_number");
      l.push_back(L("serial_number", serial.value_or("")));
      l.push_back(L("numa_node", d.numa_node ? Str(*d.numa_node) : ""));
      l.push_back(L("physical_cores", Str(d.physical_cores)));
      l.push_back(L("lnc", Str(ctx.inventory().lnc)));
      info.Add(std::move(l), 1);
      if (s->state) {
        constexpr std::pair<DeviceState, const char*> kStates[] = {
            {DeviceState::kReady, "ready"},
            {DeviceState::kReset, "reset"},
            {DeviceState::kInvalid, "invalid"}};
        for (const auto& [st, label] : kStates) {
          Labels sl = DeviceLabels(d.index);
          sl.push_back(L("state", label));
          state.Add(std::move(sl), *s->state == st ? 1 : 0);
        }
      }
      missing.Add(DeviceLabels(d.index), static_cast<double>(d.missing_nodes.size()));
      for (int peer : d.connected) {
        Labels ll = DeviceLabels(d.index);
        ll.push_back(L("peer", Str(peer)));
        link.Add(std::move(ll), 1);
      }
    }
    info.Finish(out);
    state.Finish(out);
    link.Finish(out);
    AddDriverInfo(ctx, out);
    missing.Finish(out);
    return absl::OkStatus();
  }
};

}  // namespace

std::unique_ptr<Collector> MakeDeviceCollector() { return std::make_unique<DeviceCollector>(); }

}  // namespace neuron::monitor
