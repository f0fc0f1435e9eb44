// power: stats/power/utilization as ratios of maximum power (docs/metrics.md#health-metrics). The
// driver gives only percentages of max power per wall-clock minute, so no joules counter is
// possible; ratios are left out while the reading is not valid. From driver 2.29 also the last
// sample per die (stats/power/utilization_raw), exported raw.
#include "monitor/collector.h"

namespace neuron::monitor {
namespace {

class PowerCollector final : public Collector {
 public:
  std::string_view name() const override { return "power"; }
  absl::Status Collect(const ScrapeContext& ctx, Families& out) override {
    FamilyBuilder avg = Gauge("neuron_device_power_utilization_ratio",
                              "Average power over the last minute as a ratio of maximum power "
                              "(stats/power/utilization avg / 100).");
    FamilyBuilder min = Gauge("neuron_device_power_utilization_min_ratio",
                              "Minimum power over the last minute as a ratio of maximum power.");
    FamilyBuilder max = Gauge("neuron_device_power_utilization_max_ratio",
                              "Maximum power over the last minute as a ratio of maximum power.");
    FamilyBuilder valid = Gauge("neuron_device_power_data_valid",
                                "1 when stats/power/utilization reports POWER_STATUS_VALID.");
    FamilyBuilder die = Gauge(
        "neuron_device_power_die_utilization_ratio",
        "The driver's last power sample of a die as a ratio of maximum power "
        "(stats/power/utilization_raw util_bips / 10000); absent while the die's row is not a "
        "valid sample.");
    for (const DeviceSample& d : ctx.snap().devices) {
      if (d.power_raw) {
        for (const PowerDieReading& r : *d.power_raw) {
          if (r.state != PowerDieReading::State::kGood) continue;
          Labels l = DeviceLabels(d.index);
          l.push_back(L("die", Str(r.die)));
          die.Add(std::move(l), r.util_bips / 10000.0);
        }
      }
      if (!d.power) continue;
      const bool ok = d.power->status == PowerStatus::kValid;
      valid.Add(DeviceLabels(d.index), ok ? 1 : 0);
      if (!ok) continue;
      avg.Add(DeviceLabels(d.index), d.power->avg_percent / 100);
      min.Add(DeviceLabels(d.index), d.power->min_percent / 100);
      max.Add(DeviceLabels(d.index), d.power->max_percent / 100);
    }
    avg.Finish(out);
    min.Finish(out);
    max.Finish(out);
    valid.Finish(out);
    die.Finish(out);
    return absl::OkStatus();
  }
};

}  // namespace

std::unique_ptr<Collector> MakePowerCollector() { return std::make_unique<PowerCollector>(); }

}  // namespace neuron::monitor
