#pragma once
// The device's power model: what a device's stats/power/utilization would report, apart from the
// daemon that writes it (docs/driver-interface.md#computed-formats). The driver samples a device's
// power every 50 ms while it is READY and, once a minute, rolls the samples up into min, max and
// average as a share of the chip's maximum; with fewer than 60 samples in the minute the rollup
// says NO_DATA. The figures themselves are a model choice (unverified; driver-sim/README.md,
// "Power"): an idle level per chip, device and minute, raised towards full load by how busy the
// device's cores were.
//
// Pure computation, no I/O; not thread-safe (the node daemon's loop owns one sampler per device).

#include <chrono>
#include <cstdint>
#include <optional>

#include "core/model/catalog.h"

namespace neuron::sim {

// Busy share of a device's cores over a power window, each in [0, 1]: the time-weighted mean and
// the extremes of the per-poll shares (DatastoreMirror::TakeBusyWindow measures it).
struct BusyWindow {
  double mean = 0;
  double min = 0;
  double max = 0;
};

// Power over a rollup window as a share of the chip's maximum, in basis points (10000 = 100%).
struct PowerFigures {
  uint32_t min_bp = 0;
  uint32_t max_bp = 0;
  uint32_t avg_bp = 0;

  bool operator==(const PowerFigures&) const = default;
};

// What `device` of `chip` draws in wall-clock minute `minute` (minutes since the epoch) with its
// cores as busy as `busy` says. Deterministic: the same arguments give the same figures.
PowerFigures ModelPower(Chip chip, int device, int64_t minute, const BusyWindow& busy);

// The driver takes this many samples per rollup period and needs kPowerMinSamples of them for a
// VALID rollup. An accelerated period (DaemonOptions::power_period) scales the sample interval
// with it, so the rules stay those of a minute.
inline constexpr int kPowerSamplesPerPeriod = 1200;
inline constexpr int kPowerMinSamples = 60;

// The driver's power sampling of one device: how many samples it took in a rollup window, which
// is how long the device was READY in it over the sample interval.
class PowerSampler {
 public:
  using Clock = std::chrono::steady_clock;

  // The device is READY from `now` on (true) or not (false); sampling runs only while READY.
  // Repeating the current state changes nothing.
  void SetReady(bool ready, Clock::time_point now);
  bool ready() const { return ready_since_.has_value(); }

  // Ends the window at `now` and starts the next: the samples taken in it, at
  // kPowerSamplesPerPeriod per `period`. A device still READY goes on sampling.
  int64_t EndWindow(Clock::time_point now, std::chrono::milliseconds period);

 private:
  std::optional<Clock::time_point> ready_since_;
  Clock::duration ready_in_window_{};
};

}  // namespace neuron::sim
