// Collectives gang-scheduled across processes of one node (docs/runtime.md#collectives,
// #timeouts): the world of NEURON_RT_ROOT_COMM_ID over loopback TCP, the ring cost over NeuronLink
// and EFA, EFA traffic on the nearest EFA, timeouts when a peer never arrives or dies, link-down
// faults, nrt_barrier and nrt_all_gather.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <future>
#include <vector>

#include "driver-sim/driver/efa_traffic_layout.h"
#include "driver-sim/driver/sim_paths.h"
#include "driver-sim/runtime/clock.h"
#include "driver-sim/runtime/timing.h"
#include "tests/driver-sim/runtime/runtime_test_util.h"

namespace neuron::nrt::testing {
namespace {

// A compute op then a 64 MiB all-reduce over the whole world.
const std::string kAllReduce = Ops(R"({"op": "vector", "flops": 1e8},
    {"op": "allreduce", "bytes": 67108864, "name": "grad"})");

class CollectivesTest : public SimNodeTest {
 protected:
  void SetUp() override {
    SimNodeTest::SetUp();
    MakeNode("trn1.32xlarge");
    ::setenv("NEURON_RT_ROOT_COMM_ID", FreeCommId().c_str(), 1);
  }

  // In a child: reserve `core`, load the NEFF as `rank` of `world` and execute it `n` times.
  // Exit codes: the first failing status, 100+ for wrong figures.
  static int Rank(int core, uint32_t rank, uint32_t world, const std::string& neff, int n,
                  double expect_ring_us) {
    ::setenv("NEURON_RT_VISIBLE_CORES", std::to_string(core).c_str(), 1);
    if (NRT_STATUS s = nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""); s != NRT_SUCCESS) return s;
    nrt_model_t* m = nullptr;
    if (NRT_STATUS s = nrt_load_collectives(neff.data(), neff.size(), 0, -1, rank, world, &m);
        s != NRT_SUCCESS) {
      return s;
    }
    for (int i = 0; i < n; ++i) {
      if (NRT_STATUS s = nrt_execute(m, nullptr, nullptr); s != NRT_SUCCESS) return s;
    }
    nrtsim_model_estimate_t est{};
    nrtsim_get_model_estimate(m, &est);
    const double ring_us = static_cast<double>(est.collective_ns) / 1000;
    if (std::abs(ring_us - expect_ring_us) > expect_ring_us * 0.05) return 101;
    nrtsim_core_stats_t stats{};
    nrtsim_get_core_stats(0, &stats);
    if (stats.collective_ns < static_cast<uint64_t>(n * expect_ring_us * 1000 * 0.95)) return 102;
    nrt_close();
    return 0;
  }
};

TEST_F(CollectivesTest, AllReduceAcrossTwoProcessesOnNeighbourDevices) {
  const std::string neff = Neff(kAllReduce);
  // Two ranks on devices 0 and 1 (NeuronLink neighbours): a ring of 2, 2(N−1)·α + 2(N−1)/N·S/β
  // with α = 1.5 µs and β the ring bandwidth calibrated on nccom-test's 2-rank all-reduce
  // (docs/hardware.md#collective-timing).
  const double ring_us = (2 * 1.5e-6 + 67108864.0 / kIntraRingBytesPerS) * 1e6;
  const pid_t r0 = Fork([&] { return Rank(0, 0, 2, neff, 3, ring_us); });
  const pid_t r1 = Fork([&] { return Rank(2, 1, 2, neff, 3, ring_us); });
  EXPECT_EQ(WaitChild(r0), 0);
  EXPECT_EQ(WaitChild(r1), 0);
  // Collectives leave nothing under the node's run directory.
  EXPECT_FALSE(fs::exists(neuron::sim::SimRunDir(root()) / "cc"));
}

TEST_F(CollectivesTest, PeerThatNeverArrivesEndsInHangOnCollectives) {
  ::setenv("NEURON_RT_EXEC_TIMEOUT", "1", 1);
  ::setenv("NEURON_RT_VISIBLE_CORES", "0", 1);
  ASSERT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_SUCCESS);
  const std::string neff = Neff(kAllReduce);
  nrt_model_t* m = nullptr;
  ASSERT_EQ(nrt_load_collectives(neff.data(), neff.size(), 0, -1, 0, 2, &m), NRT_SUCCESS);
  StderrCapture err(dir_.path() / "err.txt");
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(nrt_execute(m, nullptr, nullptr), NRT_EXEC_HW_ERR_COLLECTIVES);
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(took, 900ms);  // NEURON_RT_EXEC_TIMEOUT=1: it waited, then gave up
  EXPECT_LT(took, 10s);
  EXPECT_THAT(err.Text(), ::testing::HasSubstr("rank(s) 1 never arrived"));
  err.Restore();
  EXPECT_EQ(DsCounter(0, 0, nds::kHwErrCollectives), 1u);
  EXPECT_GE(DsCounter(0, 0, nds::kCcTime), 900'000u);
}

TEST_F(CollectivesTest, PeerKilledMidwayFailsTheNextCollectiveAtOnce) {
  ::setenv("NEURON_RT_EXEC_TIMEOUT", "1", 1);
  const std::string neff = Neff(kAllReduce);
  int ends[2];
  ASSERT_EQ(::pipe(ends), 0);
  UniqueFd status_read(ends[0]), status_write(ends[1]);
  const pid_t peer = Fork([&] {
    status_read.Reset();
    ::setenv("NEURON_RT_VISIBLE_CORES", "2", 1);
    if (nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", "") != NRT_SUCCESS) return 1;
    nrt_model_t* m = nullptr;
    if (nrt_load_collectives(neff.data(), neff.size(), 0, -1, 1, 2, &m) != NRT_SUCCESS) return 2;
    const unsigned char s = static_cast<unsigned char>(nrt_execute(m, nullptr, nullptr));
    (void)!::write(status_write.get(), &s, 1);
    ::pause();
    return 0;
  });
  status_write.Reset();
  ::setenv("NEURON_RT_VISIBLE_CORES", "0", 1);
  ASSERT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_SUCCESS);
  nrt_model_t* m = nullptr;
  ASSERT_EQ(nrt_load_collectives(neff.data(), neff.size(), 0, -1, 0, 2, &m), NRT_SUCCESS);
  EXPECT_EQ(nrt_execute(m, nullptr, nullptr), NRT_SUCCESS);
  unsigned char peer_status = 255;
  ASSERT_EQ(::read(status_read.get(), &peer_status, 1), 1);
  EXPECT_EQ(peer_status, NRT_SUCCESS);
  ::kill(peer, SIGKILL);
  ::waitpid(peer, nullptr, 0);
  StderrCapture quiet(dir_.path() / "err.txt");
  // Rank 0's process saw the peer's connection end: the collective fails at once, well before
  // NEURON_RT_EXEC_TIMEOUT (a dead peer fails its group no later than the timeout).
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(nrt_execute(m, nullptr, nullptr), NRT_EXEC_HW_ERR_COLLECTIVES);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 900ms);
  EXPECT_THAT(quiet.Text(), ::testing::HasSubstr("rank(s) 1 never arrived"));
}

TEST_F(CollectivesTest, LinkDownFailsCollectivesThatCrossIt) {
  ::setenv("NEURON_RT_EXEC_TIMEOUT", "1", 1);
  ::setenv("NEURON_RT_VISIBLE_CORES", "1-2", 1);  // core 1 on device 0, core 2 on device 1
  ASSERT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_SUCCESS);
  const std::string neff = Neff(Ops(R"({"op": "allreduce", "bytes": 1048576,
      "groups": [[0, 1]]})"));
  nrt_model_t *a = nullptr, *b = nullptr;
  ASSERT_EQ(nrt_load_collectives(neff.data(), neff.size(), 0, -1, 0, 2, &a), NRT_SUCCESS);
  ASSERT_EQ(nrt_load_collectives(neff.data(), neff.size(), 1, -1, 1, 2, &b), NRT_SUCCESS);
  auto both = [&] {
    auto fa = std::async(std::launch::async, [a] { return nrt_execute(a, nullptr, nullptr); });
    auto fb = std::async(std::launch::async, [b] { return nrt_execute(b, nullptr, nullptr); });
    return std::make_pair(fa.get(), fb.get());
  };
  EXPECT_EQ(both(), std::make_pair(NRT_SUCCESS, NRT_SUCCESS));
  WriteFaults({{1, sim::FaultKind::kLinkDown, 0, std::nullopt, 1, 1735689600000}});
  StderrCapture quiet(dir_.path() / "err.txt");
  EXPECT_EQ(both(), std::make_pair(NRT_EXEC_HW_ERR_COLLECTIVES, NRT_EXEC_HW_ERR_COLLECTIVES));
  EXPECT_THAT(quiet.Text(), ::testing::HasSubstr("NeuronLink between devices 0 and 1"));
  // A link elsewhere does not matter.
  WriteFaults({{2, sim::FaultKind::kLinkDown, 4, std::nullopt, 5, 1735689600000}});
  EXPECT_EQ(both(), std::make_pair(NRT_SUCCESS, NRT_SUCCESS));
}

TEST_F(CollectivesTest, BarrierAndAllGatherAcrossProcesses) {
  constexpr uint32_t kBytes = 100000;
  auto rank = [&](int core, uint32_t r) {
    return Fork([core, r] {
      ::setenv("NEURON_RT_VISIBLE_CORES", std::to_string(core).c_str(), 1);
      if (NRT_STATUS s = nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""); s != NRT_SUCCESS) return 1;
      if (nrt_barrier(0, r, 2) != NRT_SUCCESS) return 2;
      std::vector<uint8_t> in(kBytes), out(size_t{2} * kBytes, 0);
      for (uint32_t i = 0; i < kBytes; ++i) in[i] = static_cast<uint8_t>(i * 7 + r);
      if (nrt_all_gather(0, r, 2, kBytes, in.data(), out.data()) != NRT_SUCCESS) return 3;
      for (uint32_t peer = 0; peer < 2; ++peer) {
        for (uint32_t i = 0; i < kBytes; ++i) {
          if (out[peer * kBytes + i] != static_cast<uint8_t>(i * 7 + peer)) return 4;
        }
      }
      if (nrt_barrier(0, r, 2) != NRT_SUCCESS) return 5;
      nrt_close();
      return 0;
    });
  };
  const pid_t r0 = rank(0, 0);
  const pid_t r1 = rank(5, 1);
  EXPECT_EQ(WaitChild(r0), 0);
  EXPECT_EQ(WaitChild(r1), 0);
}

TEST_F(CollectivesTest, RingAcrossNodesPaysEfaAndCountsTrafficOnTheNearestEfa) {
  SetClockForTesting(std::make_shared<ManualClock>(1'000'000'000));
  ::setenv("NEURON_RT_VISIBLE_CORES", "4", 1);  // device 2, on PCI bus 0xa0
  ASSERT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_SUCCESS);
  // One local rank whose data-parallel peer is on another node: a ring of 2 over EFA.
  const std::string neff =
      Neff(Ops(R"({"op": "allreduce", "bytes": 1e9, "nodes": 2, "name": "dp"})"));
  nrt_model_t* m = nullptr;
  ASSERT_EQ(nrt_load_collectives(neff.data(), neff.size(), 0, -1, 0, 1, &m), NRT_SUCCESS);
  ASSERT_EQ(nrt_execute(m, nullptr, nullptr), NRT_SUCCESS);
  // The EFA phase of the hierarchical all-reduce: its fixed cost, 2(N−1)·15 µs and 2(N−1)/N·S at
  // 25 Gbps per rank (docs/hardware.md#efa-per-instance: 800 Gbps over 32 ranks).
  const double expect_us = kEfaCollectiveFixedS * 1e6 + 2 * 15 + 1e9 * 8 / 25e9 * 1e6;
  EXPECT_NEAR(static_cast<double>(DsCounter(2, 0, nds::kCcTime)), expect_us, 2.0);
  // Device 2 sits on bus 0xa0 (docs/hardware.md#pcie-layout) with devices 15, 3, 14; its EFAs are
  // rdmap160s25 and rdmap160s26, the 7th and 8th of the catalog (indices 6, 7); in BDF order
  // devices 15 and 2 share the first.
  EXPECT_EQ(DsWord(2, nds::EfaTrafficFieldOffset(6, nds::kEfaTxBytes)), 1'000'000'000u);
  EXPECT_EQ(DsWord(2, nds::EfaTrafficFieldOffset(6, nds::kEfaRxBytes)), 1'000'000'000u);
  EXPECT_EQ(DsWord(2, nds::EfaTrafficFieldOffset(6, nds::kEfaTxPkts)), 122071u);  // 8 KiB each
  EXPECT_EQ(DsWord(2, nds::EfaTrafficFieldOffset(7, nds::kEfaTxBytes)), 0u);
  EXPECT_EQ(DsWord(2, nds::EfaTrafficFieldOffset(0, nds::kEfaTxBytes)), 0u);
}

}  // namespace
}  // namespace neuron::nrt::testing
