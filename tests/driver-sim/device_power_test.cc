// The device's power model (driver-sim/driver/device_power.h) in process: the figures a device
// reports for a given load, and the driver's sample count that decides VALID or NO_DATA. The
// daemon's rollups through sysfs are tested with the real binary in sim_daemon_test.cc.

#include "driver-sim/driver/device_power.h"

#include <gtest/gtest.h>

#include <chrono>
#include <set>

namespace neuron::sim {
namespace {

using std::chrono::milliseconds;
using Clock = PowerSampler::Clock;

constexpr BusyWindow kIdle{};
constexpr BusyWindow kFull{1.0, 1.0, 1.0};

// Minute 0, device 0: no device offset, and a wiggle of (0 % 21) - 10 = -10 basis points.
TEST(ModelPower, IdleLevelPerChipMatchesTheReadme) {
  EXPECT_EQ(ModelPower(Chip::kTrainium, 0, 0, kIdle), (PowerFigures{1555, 1780, 1640}));
  EXPECT_EQ(ModelPower(Chip::kTrainium2, 0, 0, kIdle), (PowerFigures{1305, 1530, 1390}));
  EXPECT_EQ(ModelPower(Chip::kInferentia2, 0, 0, kIdle), (PowerFigures{1005, 1230, 1090}));
}

TEST(ModelPower, DevicesAndMinutesDifferByTheirOffsetAndWiggle) {
  // Device 5: offset (5 * 37) % 60 = 5; minute 3: wiggle (39 + 35) % 21 - 10 = 1.
  EXPECT_EQ(ModelPower(Chip::kTrainium, 5, 3, kIdle).avg_bp, 1650u + 5 + 1);
  std::set<uint32_t> seen;
  for (int64_t minute = 0; minute < 100; ++minute) {
    const PowerFigures p = ModelPower(Chip::kTrainium, 0, minute, kIdle);
    EXPECT_GE(p.avg_bp, 1640u);
    EXPECT_LE(p.avg_bp, 1660u);
    EXPECT_EQ(p.min_bp, p.avg_bp - 85);
    EXPECT_EQ(p.max_bp, p.avg_bp + 140);
    seen.insert(p.avg_bp);
  }
  EXPECT_EQ(seen.size(), 21u);  // every wiggle from -10 to +10
  EXPECT_EQ(ModelPower(Chip::kTrainium2, 7, 1234, kIdle),
            ModelPower(Chip::kTrainium2, 7, 1234, kIdle));
}

TEST(ModelPower, FullLoadReadsNinetyPercentOnEveryChipAndDevice) {
  for (Chip chip : {Chip::kTrainium, Chip::kTrainium2, Chip::kInferentia2}) {
    for (int device = 0; device < 16; ++device) {
      EXPECT_EQ(ModelPower(chip, device, 42, kFull), (PowerFigures{8915, 9140, 9000}));
    }
  }
}

TEST(ModelPower, BusyShareMovesEachFigureFromIdleTowardsFullLoad) {
  // Idle 1640: a quarter of the way to 9000 is 1640 + 1840, half way 1640 + 3680.
  const PowerFigures p = ModelPower(Chip::kTrainium, 0, 0, BusyWindow{0.5, 0.25, 0.75});
  EXPECT_EQ(p.avg_bp, 1640u + 3680);
  EXPECT_EQ(p.min_bp, 1640u + 1840 - 85);
  EXPECT_EQ(p.max_bp, 1640u + 5520 + 140);
}

TEST(ModelPower, SharesOutsideZeroToOneAreClamped) {
  EXPECT_EQ(ModelPower(Chip::kTrainium, 3, 9, BusyWindow{2.0, 1.5, 7.0}),
            ModelPower(Chip::kTrainium, 3, 9, kFull));
  EXPECT_EQ(ModelPower(Chip::kTrainium, 3, 9, BusyWindow{-1.0, -0.5, -2.0}),
            ModelPower(Chip::kTrainium, 3, 9, kIdle));
}

TEST(PowerSampler, AWholeReadyMinuteIsTwelveHundredSamples) {
  const Clock::time_point t0{};
  PowerSampler s;
  s.SetReady(true, t0);
  EXPECT_TRUE(s.ready());
  EXPECT_EQ(s.EndWindow(t0 + milliseconds(60000), milliseconds(60000)), kPowerSamplesPerPeriod);
  // Still READY: the next window samples from where this one ended.
  EXPECT_EQ(s.EndWindow(t0 + milliseconds(90000), milliseconds(60000)), 600);
}

TEST(PowerSampler, SamplesOnlyWhileReady) {
  const Clock::time_point t0{};
  PowerSampler s;
  EXPECT_EQ(s.EndWindow(t0 + milliseconds(60000), milliseconds(60000)), 0);  // never READY
  s.SetReady(true, t0 + milliseconds(60000));
  s.SetReady(false, t0 + milliseconds(61000));  // 20 samples
  s.SetReady(false, t0 + milliseconds(70000));  // no change
  s.SetReady(true, t0 + milliseconds(100000));
  s.SetReady(true, t0 + milliseconds(110000));   // already READY: sampling started at 100 s
  s.SetReady(false, t0 + milliseconds(112000));  // 240 samples
  EXPECT_FALSE(s.ready());
  EXPECT_EQ(s.EndWindow(t0 + milliseconds(120000), milliseconds(60000)), 260);
  EXPECT_EQ(s.EndWindow(t0 + milliseconds(180000), milliseconds(60000)), 0);
}

TEST(PowerSampler, TheValidThresholdIsThreeSecondsOfAMinute) {
  const Clock::time_point t0{};
  PowerSampler s;
  s.SetReady(true, t0 + milliseconds(57001));  // 2.999 s before the end: 59 samples
  EXPECT_LT(s.EndWindow(t0 + milliseconds(60000), milliseconds(60000)), kPowerMinSamples);
  PowerSampler t;
  t.SetReady(true, t0 + milliseconds(57000));
  EXPECT_EQ(t.EndWindow(t0 + milliseconds(60000), milliseconds(60000)), kPowerMinSamples);
}

TEST(PowerSampler, AnAcceleratedPeriodScalesTheSampleInterval) {
  const Clock::time_point t0{};
  PowerSampler s;
  s.SetReady(true, t0);
  EXPECT_EQ(s.EndWindow(t0 + milliseconds(500), milliseconds(1000)), 600);
  s.SetReady(false, t0 + milliseconds(525));  // 25 ms of a 1 s period: 30 samples
  EXPECT_EQ(s.EndWindow(t0 + milliseconds(1000), milliseconds(1000)), 30);
}

}  // namespace
}  // namespace neuron::sim
