#include "driver-sim/driver/device_power.h"

#include <algorithm>

namespace neuron::sim {
namespace {

// Busy cores draw more (README "Power"): each figure moves from the idle level towards
// kFullLoadPowerBp in proportion to the share of the cores' time that was busy, the average by
// the minute's mean share, min and max by the least and most busy poll interval.
constexpr uint32_t kFullLoadPowerBp = 9000;
// min and max lie this far below and above the level their busy share gives.
constexpr uint32_t kMinBelowBp = 85;
constexpr uint32_t kMaxAboveBp = 140;
constexpr uint32_t kMaxPowerBp = 10000;

// Idle power as a share of the chip's maximum, in basis points (a model choice, unverified): a
// per-chip idle level, a fixed per-device offset and a small per-minute wiggle so that devices
// and minutes differ.
uint32_t IdlePowerBp(Chip chip, int device, int64_t minute) {
  int base = 1650;
  if (chip == Chip::kTrainium2) base = 1400;
  if (chip == Chip::kInferentia2) base = 1100;
  const int offset = (device * 37) % 60;
  const int wiggle = static_cast<int>((minute * 13 + device * 7) % 21) - 10;
  return static_cast<uint32_t>(base + offset + wiggle);
}

}  // namespace

PowerFigures ModelPower(Chip chip, int device, int64_t minute, const BusyWindow& busy) {
  const uint32_t idle = IdlePowerBp(chip, device, minute);
  auto at = [idle](double share) {
    share = std::clamp(share, 0.0, 1.0);
    return idle + static_cast<uint32_t>(share * (kFullLoadPowerBp - idle) + 0.5);
  };
  return {at(busy.min) - kMinBelowBp, std::min<uint32_t>(at(busy.max) + kMaxAboveBp, kMaxPowerBp),
          at(busy.mean)};
}

void PowerSampler::SetReady(bool ready, Clock::time_point now) {
  if (ready_since_ && !ready) {
    ready_in_window_ += now - *ready_since_;
    ready_since_.reset();
  } else if (!ready_since_ && ready) {
    ready_since_ = now;
  }
}

int64_t PowerSampler::EndWindow(Clock::time_point now, std::chrono::milliseconds period) {
  const auto sample_interval =
      std::chrono::duration_cast<std::chrono::nanoseconds>(period) / kPowerSamplesPerPeriod;
  if (ready_since_) {
    ready_in_window_ += now - *ready_since_;
    ready_since_ = now;
  }
  const int64_t samples = ready_in_window_ / sample_interval;
  ready_in_window_ = {};
  return samples;
}

}  // namespace neuron::sim
