// Per-core counter sets are per physical core (driver-sim/README.md "Counter sets are physical",
// docs/metrics.md#labels-and-liveness), through the whole chain: libnrt-sim running on logical core
// k of device 0 moves exactly the sets of k's physical cores (busy time in each, counts in the
// first, memory split); the simulated driver folds set i into sysfs neuron_core<i> when the
// process exits; and core's per-logical-core figures (what the exporter serves) follow the rule
// (counts sum the physical cores, busy time is their mean) and stay the same across the fold. On a
// trn2.48xlarge at LNC=2 and LNC=1 and on a trn1.2xlarge. The runtime is a forked child; this
// process reads its datastore through the driver's device ABI as a monitor does.
#include <gtest/gtest.h>
#include <unistd.h>

#include <set>

#include "core/discovery/inventory.h"
#include "core/sample/process_usage.h"
#include "core/sample/sampler.h"
#include "driver-sim/runtime/clock.h"
#include "tests/driver-sim/runtime/runtime_test_util.h"
#include "tests/support/sim_discovery.h"
#include "tests/support/subprocess.h"

namespace neuron::nrt::testing {
namespace {

constexpr const char* kGemm1k =
    R"({"op": "matmul", "m": 1024, "k": 1024, "n": 1024, "dtype": "bfloat16"})";
constexpr uint64_t kExecutions = 3;
constexpr uint64_t kMacs = 1024ull * 1024 * 1024;  // per execution: M·K·N

struct CounterCase {
  const char* instance;
  int lnc;
  int core;                // logical core of device 0 the workload runs on
  std::set<int> physical;  // its physical cores = its counter sets
};

void PrintTo(const CounterCase& c, std::ostream* os) {
  *os << c.instance << " LNC " << c.lnc << " core " << c.core;
}

std::string Name(const ::testing::TestParamInfo<CounterCase>& info) {
  std::string n = std::string(info.param.instance) + "_lnc" + std::to_string(info.param.lnc);
  for (char& c : n) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return n;
}

class CounterSetsTest : public SimNodeTest, public ::testing::WithParamInterface<CounterCase> {
 protected:
  // The child's datastore on device 0, parsed as the agent parses it.
  std::optional<DatastoreRecord> Record(pid_t pid) {
    const std::optional<std::vector<uint8_t>> bytes =
        neuron::testing::ReadDatastoreBytes(root().DevNeuron(0), pid);
    if (!bytes) return std::nullopt;
    absl::StatusOr<DatastoreRecord> r =
        ParseDatastore(std::as_bytes(std::span(*bytes)), 0, pid, "test");
    if (!r.ok()) return std::nullopt;
    return *std::move(r);
  }
  std::optional<uint64_t> Sysfs(int physical, const std::string& rel) const {
    return neuron::testing::ReadU64File(
        root().NeuronDevice(0) / fmt::format("neuron_core{}", physical) / "stats" / rel / "total");
  }
  // Device 0's per-logical-core totals from one sample of core's Sampler (the exporter's source).
  std::vector<LogicalCoreTotals> Totals(const Inventory& inv) {
    std::unique_ptr<DatastoreReader> reader = MakeDriverDatastoreReader(root(), {.devices = {0}});
    EXPECT_TRUE(reader->AwaitFirstProbe(30s));
    SamplerOptions options;
    options.datastore = std::move(reader);
    Sampler sampler(root(), inv, std::move(options));
    const std::shared_ptr<const Snapshot> snap = sampler.Sample(SampleKind::kFull);
    EXPECT_TRUE(snap->datastore_source.up) << snap->datastore_source.reason;
    const DeviceSample* d = snap->FindDevice(0);
    if (d == nullptr) return {};
    return LogicalCores(*snap, *d);
  }
};

// The runtime: kExecutions GEMMs on its only visible core, then it waits for `go` before it closes
// (RELEASE_NEURON_DS, the fold) and exits.
int RunWorkload(int ready_fd, int go_fd) {
  SetClockForTesting(std::make_shared<ManualClock>(1'000'000'000));
  if (nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", "") != NRT_SUCCESS) return 10;
  nrt_model_t* m = Load(Neff(Ops(kGemm1k)));
  if (m == nullptr) return 11;
  for (uint64_t i = 0; i < kExecutions; ++i) {
    if (nrt_execute(m, nullptr, nullptr) != NRT_SUCCESS) return 12;
  }
  char c = 'r';
  if (::write(ready_fd, &c, 1) != 1 || ::read(go_fd, &c, 1) != 1) return 13;
  nrt_close();
  return 0;
}

// Live: exactly the sets of `c`'s physical cores moved, busy time in each, counts in the first,
// memory in each; the logical core's figures follow the rule. Returns the busy time of one set.
uint64_t ExpectLiveSets(const DatastoreRecord& rec, const CounterCase& c) {
  const int first = *c.physical.begin();
  const uint64_t busy = rec.Core(first, nds::kTimeInUse);
  EXPECT_GT(busy, 0u);
  uint64_t code = 0;
  for (int set = 0; set < nds::kMaxCores; ++set) {
    SCOPED_TRACE(fmt::format("set {}", set));
    if (!c.physical.contains(set)) {
      for (int i = 0; i < nds::kCoreCounterCount; ++i) EXPECT_EQ(rec.Core(set, i), 0u) << i;
      continue;
    }
    EXPECT_EQ(rec.Core(set, nds::kTimeInUse), busy);
    const uint64_t n = set == first ? kExecutions : 0;
    EXPECT_EQ(rec.Core(set, nds::kInferCompleted), n);
    EXPECT_EQ(rec.Core(set, nds::kInferenceCount), n);
    EXPECT_EQ(rec.Core(set, nds::kModelLoadCount), set == first ? 1u : 0u);
    EXPECT_EQ(rec.Core(set, nds::kMacCount), n * kMacs);
    EXPECT_GT(rec.Core(set, nds::kMemUsageCodeDevice), 0u);  // microcode on each physical core
    code += rec.Core(set, nds::kMemUsageCodeDevice);
  }
  // The rule: the logical core's counts sum its sets, its busy time is their mean.
  EXPECT_EQ(LogicalCoreCounter(rec, c.core, nds::kTimeInUse, c.lnc), busy);
  EXPECT_EQ(LogicalCoreCounter(rec, c.core, nds::kInferCompleted, c.lnc), kExecutions);
  EXPECT_EQ(LogicalCoreCounter(rec, c.core, nds::kMemUsageCodeDevice, c.lnc), code);
  return busy;
}

TEST_P(CounterSetsTest, WorkloadMovesItsPhysicalSetsAndTheDriverFoldsEachIntoItsCore) {
  const CounterCase& c = GetParam();
  MakeNode(c.instance, c.lnc);
  ::setenv("NEURON_RT_VISIBLE_CORES", std::to_string(c.core).c_str(), 1);
  int ready[2], go[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(go), 0);
  const pid_t child = Fork([&] { return RunWorkload(ready[1], go[0]); });
  char byte = 0;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1) << "the runtime did not get ready";
  const std::optional<DatastoreRecord> rec = Record(child);
  ASSERT_TRUE(rec.has_value());
  const uint64_t busy = ExpectLiveSets(*rec, c);

  absl::StatusOr<Inventory> inv =
      MakeDirectoryDiscovery(root(),
                             neuron::testing::SimDiscoveryOptions(*tree_->config().spec, c.lnc))
          ->Scan();
  ASSERT_TRUE(inv.ok()) << inv.status();
  const std::vector<LogicalCoreTotals> live = Totals(*inv);
  ASSERT_GT(live.size(), static_cast<size_t>(c.core));
  for (const LogicalCoreTotals& t : live) {
    const uint64_t n = t.logical_index == c.core ? kExecutions : 0;
    EXPECT_EQ(t.busy_us, n > 0 ? busy : 0u) << t.logical_index;
    EXPECT_EQ(t.inferences, n) << t.logical_index;
    EXPECT_EQ(t.flops, 2 * n * kMacs) << t.logical_index;
  }

  // Exit: the driver folds set i into neuron_core<i>, for each physical core.
  ASSERT_EQ(::write(go[1], &byte, 1), 1);
  ASSERT_EQ(WaitChild(child), 0);
  for (int fd : {ready[0], ready[1], go[0], go[1]}) ::close(fd);
  const int first = *c.physical.begin();
  for (int p = 0; p < tree_->config().spec->chip->physical_cores; ++p) {
    SCOPED_TRACE(fmt::format("neuron_core{}", p));
    const uint64_t want_busy = c.physical.contains(p) ? busy : 0;
    ASSERT_TRUE(WaitUntil([&] { return Sysfs(p, "other_info/nc_time_in_use") == want_busy; }, 30s));
    const uint64_t n = p == first ? kExecutions : 0;
    EXPECT_EQ(Sysfs(p, "status/success"), n);
    EXPECT_EQ(Sysfs(p, "other_info/inference_count"), n);
    EXPECT_EQ(Sysfs(p, "other_info/flop_count"), 2 * n * kMacs);
    EXPECT_EQ(Sysfs(p, "memory_usage/device_mem"), 0u);  // freed at exit
  }
  // The per-logical-core figures do not move across the fold.
  ASSERT_TRUE(WaitUntil([&] { return !Record(child).has_value(); }, 30s)) << "slot not released";
  const std::vector<LogicalCoreTotals> folded = Totals(*inv);
  ASSERT_EQ(folded.size(), live.size());
  for (size_t k = 0; k < folded.size(); ++k) {
    EXPECT_EQ(folded[k].busy_us, live[k].busy_us) << k;
    EXPECT_EQ(folded[k].inferences, live[k].inferences) << k;
    EXPECT_EQ(folded[k].flops, live[k].flops) << k;
  }
}

INSTANTIATE_TEST_SUITE_P(Instances, CounterSetsTest,
                         ::testing::Values(CounterCase{"trn2.48xlarge", 2, 1, {2, 3}},
                                           CounterCase{"trn2.48xlarge", 1, 5, {5}},
                                           CounterCase{"trn1.2xlarge", 1, 1, {1}}),
                         Name);

}  // namespace
}  // namespace neuron::nrt::testing
