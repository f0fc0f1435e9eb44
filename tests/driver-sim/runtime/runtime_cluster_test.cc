// Collective worlds that span simulated nodes (docs/runtime.md#collectives,
// driver-sim/README.md#collective-world): processes on several nodes (each its own ROOT, device
// ABI and instance id) that share NEURON_RT_ROOT_COMM_ID meet over loopback TCP, sum real
// tensors, pay the hierarchical model's cost for the membership they really have, count the EFA
// bytes that model sends on the nearest EFA, and fail with 1200 when a peer dies.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <future>
#include <memory>
#include <vector>

#include "driver-sim/driver/efa_traffic_layout.h"
#include "driver-sim/runtime/node_model.h"
#include "driver-sim/runtime/timing.h"
#include "tests/driver-sim/runtime/runtime_test_util.h"

namespace neuron::nrt::testing {
namespace {

constexpr size_t kFloats = 262144;  // 1 MiB of float32
constexpr size_t kBytes = kFloats * sizeof(float);

// Exit codes of a node's process besides NRT statuses.
enum Code : int {
  kWrongSum = 101,       // an all-reduce's output is not the sum of the ranks' inputs
  kWrongCost = 102,      // the collective's time is not the model's (1 %)
  kWrongEfaBytes = 103,  // the EFA counters are not the model's bytes (1 %)
  kNotTheStatus = 104,   // a failing collective returned another status
  kTooLate = 105,        // it failed later than the execution timeout
  kNoRefusal = 106,      // a rank used twice was not refused
};

std::string AllReduceNeff() {
  return Neff(fmt::format(R"({{"version": 1,
      "inputs": [{{"name": "x", "dtype": "float32", "shape": [{0}]}}],
      "outputs": [{{"name": "y", "dtype": "float32", "shape": [{0}]}}],
      "ops": [{{"op": "allreduce", "bytes": {1}, "input": "x", "output": "y",
                "name": "grad"}}]}})",
                          kFloats, kBytes));
}

float Value(uint32_t rank, size_t i) { return static_cast<float>((rank + 1) * (i % 100)); }

// One rank's model and tensors; the tensors and sets are freed with it (the model goes with
// nrt_close).
struct RankState {
  RankState() = default;
  RankState(const RankState&) = delete;
  RankState& operator=(const RankState&) = delete;
  ~RankState() {
    nrt_destroy_tensor_set(&in);
    nrt_destroy_tensor_set(&out);
    nrt_tensor_free(&x);
    nrt_tensor_free(&y);
  }
  nrt_model_t* model = nullptr;
  nrt_tensor_set_t* in = nullptr;
  nrt_tensor_set_t* out = nullptr;
  nrt_tensor_t* x = nullptr;
  nrt_tensor_t* y = nullptr;
};

NRT_STATUS Prepare(const std::string& neff, int vnc, uint32_t rank, uint32_t world, RankState* r) {
  if (NRT_STATUS s =
          nrt_load_collectives(neff.data(), neff.size(), vnc, -1, rank, world, &r->model);
      s != NRT_SUCCESS) {
    return s;
  }
  std::vector<float> data(kFloats);
  for (size_t i = 0; i < kFloats; ++i) data[i] = Value(rank, i);
  nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, vnc, kBytes, "x", &r->x);
  nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, vnc, kBytes, "y", &r->y);
  nrt_tensor_write(r->x, data.data(), 0, kBytes);
  nrt_allocate_tensor_set(&r->in);
  nrt_allocate_tensor_set(&r->out);
  nrt_add_tensor_to_tensor_set(r->in, "x", r->x);
  return nrt_add_tensor_to_tensor_set(r->out, "y", r->y);
}

bool SumIsRight(const RankState& r, uint32_t world) {
  std::vector<float> got(kFloats);
  nrt_tensor_read(r.y, got.data(), 0, kBytes);
  const uint32_t ranks_sum = world * (world + 1) / 2;  // 1 + 2 + ... + world
  for (size_t i = 0; i < kFloats; ++i) {
    if (got[i] != static_cast<float>(ranks_sum * (i % 100))) return false;
  }
  return true;
}

bool Near(double got, double want) { return std::abs(got - want) <= 0.01 * want; }

// In a child on the node at `root`: its cores 0..ranks-1 are ranks node·ranks + v of a world of
// nodes·ranks; each all-reduces its tensor `repeat` times. Checks the sums, the collective's
// cost against the hierarchical model for `ranks` per node and `nodes` nodes, and the EFA bytes
// on device 0's nearest EFA against the model's.
int RunNode(const fs::path& root, int node, int ranks, int nodes, int repeat) {
  ::setenv("NEURON_ROOT", root.c_str(), 1);
  ::setenv("NEURON_RT_VISIBLE_CORES", fmt::format("0-{}", ranks - 1).c_str(), 1);
  if (NRT_STATUS s = nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""); s != NRT_SUCCESS) return s;
  const std::string neff = AllReduceNeff();
  const auto world = static_cast<uint32_t>(ranks * nodes);
  std::vector<RankState> states(ranks);
  for (int v = 0; v < ranks; ++v) {
    if (NRT_STATUS s = Prepare(neff, v, node * ranks + v, world, &states[v]); s != NRT_SUCCESS) {
      return s;
    }
  }
  std::vector<std::future<NRT_STATUS>> runs;
  runs.reserve(states.size());
  for (RankState& r : states) {
    runs.push_back(std::async(std::launch::async, [&r, repeat] {
      NRT_STATUS s = NRT_SUCCESS;
      for (int i = 0; i < repeat && s == NRT_SUCCESS; ++i) s = nrt_execute(r.model, r.in, r.out);
      return s;
    }));
  }
  for (auto& f : runs) {
    if (NRT_STATUS s = f.get(); s != NRT_SUCCESS) return s;
  }
  for (const RankState& r : states) {
    if (!SumIsRight(r, world)) return kWrongSum;
  }
  absl::StatusOr<NodeModel> model = NodeModel::Load(RootPaths(root));
  const CollectiveCost cost =
      CostCollective(CollKind::kAllReduce, kBytes, ranks, nodes, PathFor(*model));
  nrtsim_model_estimate_t est{};
  nrtsim_get_model_estimate(states[0].model, &est);
  if (!Near(static_cast<double>(est.collective_ns), static_cast<double>(cost.ns))) {
    return kWrongCost;
  }
  const uint64_t tx = neuron::testing::ReadDatastoreWord(
                          RootPaths(root).DevNeuron(0), ::getpid(),
                          nds::EfaTrafficFieldOffset(model->NearestEfa(0), nds::kEfaTxBytes))
                          .value_or(0);
  // Both ranks of device 0 send their EFA share on its nearest EFA.
  if (!Near(static_cast<double>(tx), cost.efa_bytes * std::min(ranks, 2) * repeat)) {
    return kWrongEfaBytes;
  }
  states.clear();
  nrt_close();
  return 0;
}

class ClusterWorldTest : public ::testing::Test {
 protected:
  struct Node {
    neuron::testing::TempDir dir{"nrt_node"};
    std::unique_ptr<sim::SimTree> tree;
    std::unique_ptr<neuron::testing::SimDriverThread> driver;
  };

  void SetUp() override { ClearRuntimeEnv(); }
  void TearDown() override { ClearRuntimeEnv(); }

  // `n` trn1.32xlarge nodes, each with its own tree, device ABI and instance id, and one
  // world id for all of them.
  void MakeNodes(int n) {
    for (int i = 0; i < n; ++i) {
      auto node = std::make_unique<Node>();
      node->tree = neuron::testing::MakeSimTree(node->dir.path(), "trn1.32xlarge");
      ASSERT_NE(node->tree, nullptr);
      node->driver = std::make_unique<neuron::testing::SimDriverThread>(
          node->tree.get(), *node->tree->config().spec, node->tree->config().lnc);
      ASSERT_TRUE(node->driver->status().ok()) << node->driver->status();
      nodes_.push_back(std::move(node));
    }
    ::setenv("NEURON_RT_ROOT_COMM_ID", FreeCommId().c_str(), 1);
  }
  fs::path Root(int i) const { return nodes_[i]->dir.path(); }

  neuron::testing::TempDir dir_{"nrt_cluster"};
  std::vector<std::unique_ptr<Node>> nodes_;
};

TEST_F(ClusterWorldTest, TwoNodesSumTensorsAtTheModelsCostAndCountEfaBytes) {
  MakeNodes(2);
  std::vector<pid_t> pids;
  pids.reserve(4);
  for (int n = 0; n < 2; ++n) pids.push_back(Fork([&, n] { return RunNode(Root(n), n, 2, 2, 3); }));
  for (pid_t p : pids) EXPECT_EQ(WaitChild(p), 0);
}

TEST_F(ClusterWorldTest, FourNodesFormOneWorld) {
  MakeNodes(4);
  std::vector<pid_t> pids;
  pids.reserve(4);
  // Started in reverse: the ranks elsewhere wait for rank 0's process to listen.
  for (int n = 3; n >= 0; --n) {
    pids.push_back(Fork([&, n] { return RunNode(Root(n), n, 1, 4, 2); }));
  }
  for (pid_t p : pids) EXPECT_EQ(WaitChild(p), 0);
}

// In a child: rank `rank` of 2 on core 0 of `root`; executes once, then (die) kills itself, or
// executes again and expects 1200 within the timeout (3 s).
int RankThatLosesItsPeer(const fs::path& root, uint32_t rank, bool die) {
  ::setenv("NEURON_ROOT", root.c_str(), 1);
  ::setenv("NEURON_RT_VISIBLE_CORES", "0", 1);
  ::setenv("NEURON_RT_EXEC_TIMEOUT", "3", 1);
  if (NRT_STATUS s = nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""); s != NRT_SUCCESS) return s;
  const std::string neff = AllReduceNeff();
  RankState r;
  if (NRT_STATUS s = Prepare(neff, 0, rank, 2, &r); s != NRT_SUCCESS) return s;
  if (NRT_STATUS s = nrt_execute(r.model, r.in, r.out); s != NRT_SUCCESS) return s;
  if (die) ::raise(SIGKILL);
  const auto t0 = std::chrono::steady_clock::now();
  const NRT_STATUS s = nrt_execute(r.model, r.in, r.out);
  if (s != NRT_EXEC_HW_ERR_COLLECTIVES) return kNotTheStatus;
  return std::chrono::steady_clock::now() - t0 <= 3500ms ? 0 : kTooLate;
}

TEST_F(ClusterWorldTest, ADeadRankOnOneNodeFailsItsPeersWithin1200) {
  MakeNodes(2);
  // The dead rank elsewhere: rank 0's process sees its connection end.
  pid_t survivor =
      Fork([&] { return RankThatLosesItsPeer(Root(0), 0, false); }, dir_.path() / "survivor.err");
  pid_t dead = Fork([&] { return RankThatLosesItsPeer(Root(1), 1, true); });
  EXPECT_EQ(WaitChild(dead), -SIGKILL);
  EXPECT_EQ(WaitChild(survivor), 0);
  EXPECT_THAT(ReadFileText(dir_.path() / "survivor.err"),
              ::testing::HasSubstr("rank(s) 1 never arrived"));
  // Rank 0's process dies: the rank elsewhere loses its connection.
  ::setenv("NEURON_RT_ROOT_COMM_ID", FreeCommId().c_str(), 1);
  dead = Fork([&] { return RankThatLosesItsPeer(Root(0), 0, true); });
  survivor =
      Fork([&] { return RankThatLosesItsPeer(Root(1), 1, false); }, dir_.path() / "survivor.err");
  EXPECT_EQ(WaitChild(dead), -SIGKILL);
  EXPECT_EQ(WaitChild(survivor), 0);
  EXPECT_THAT(ReadFileText(dir_.path() / "survivor.err"),
              ::testing::HasSubstr("lost the connection to rank 0's process"));
}

TEST_F(ClusterWorldTest, AnEfaDownOnOneNodeFailsTheCollectivesThatLeaveIt) {
  MakeNodes(2);
  int ends[2];
  ASSERT_EQ(::pipe(ends), 0);
  UniqueFd go_read(ends[0]), go_write(ends[1]);
  // Node 1's rank: one all-reduce over EFA, then (once node 0's EFA is down) another, which
  // waits for the rank that cannot send and ends in 1200 at its timeout.
  const pid_t peer = Fork([&] {
    go_write.Reset();
    ::setenv("NEURON_ROOT", Root(1).c_str(), 1);
    ::setenv("NEURON_RT_VISIBLE_CORES", "0", 1);
    ::setenv("NEURON_RT_EXEC_TIMEOUT", "2", 1);
    if (nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", "") != NRT_SUCCESS) return 1;
    const std::string neff = AllReduceNeff();
    RankState r;
    if (Prepare(neff, 0, 1, 2, &r) != NRT_SUCCESS) return 2;
    if (nrt_execute(r.model, r.in, r.out) != NRT_SUCCESS) return 3;
    char go = 0;
    if (::read(go_read.get(), &go, 1) != 1) return 4;
    const NRT_STATUS s = nrt_execute(r.model, r.in, r.out);
    return s == NRT_EXEC_HW_ERR_COLLECTIVES ? 0 : int{kNotTheStatus};
  });
  go_read.Reset();
  ::setenv("NEURON_ROOT", Root(0).c_str(), 1);
  ::setenv("NEURON_RT_VISIBLE_CORES", "0", 1);
  ::setenv("NEURON_RT_EXEC_TIMEOUT", "2", 1);
  ASSERT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_SUCCESS);
  {
    RankState r;
    ASSERT_EQ(Prepare(AllReduceNeff(), 0, 0, 2, &r), NRT_SUCCESS);
    ASSERT_EQ(nrt_execute(r.model, r.in, r.out), NRT_SUCCESS);
    absl::StatusOr<NodeModel> model = NodeModel::Load(RootPaths(Root(0)));
    ASSERT_TRUE(model.ok());
    const std::string efa = model->spec().efas[model->NearestEfa(0)].name;
    ASSERT_TRUE(nodes_[0]->tree->RemoveEfa(efa).ok());  // what `ctl efa-down` does
    RefreshForTesting();
    ASSERT_EQ(::write(go_write.get(), "g", 1), 1);
    StderrCapture err(dir_.path() / "err.txt");
    EXPECT_EQ(nrt_execute(r.model, r.in, r.out), NRT_EXEC_HW_ERR_COLLECTIVES);
    EXPECT_THAT(err.Text(), ::testing::HasSubstr("through EFA " + efa + ", which is down"));
    err.Restore();
    EXPECT_EQ(WaitChild(peer), 0);
  }
  nrt_close();
}

TEST_F(ClusterWorldTest, ARankUsedTwiceIsRefused) {
  MakeNodes(2);
  const std::string neff = AllReduceNeff();
  int ends[2];
  ASSERT_EQ(::pipe(ends), 0);
  UniqueFd go_read(ends[0]), go_write(ends[1]);
  // A process on the other node claims rank 1 as well, once this one holds ranks 0 and 1: rank
  // 0's process refuses it, and its collective fails at once instead of joining the group.
  const pid_t twin = Fork(
      [&] {
        go_write.Reset();
        char go = 0;
        if (::read(go_read.get(), &go, 1) != 1) return 3;
        ::setenv("NEURON_ROOT", Root(1).c_str(), 1);
        ::setenv("NEURON_RT_VISIBLE_CORES", "0", 1);
        if (nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", "") != NRT_SUCCESS) return 1;
        RankState r;
        if (Prepare(neff, 0, 1, 2, &r) != NRT_SUCCESS) return 2;
        const NRT_STATUS s = nrt_execute(r.model, r.in, r.out);
        return s == NRT_EXEC_HW_ERR_COLLECTIVES ? 0 : int{kNoRefusal};
      },
      dir_.path() / "twin.err");
  go_read.Reset();
  ::setenv("NEURON_ROOT", Root(0).c_str(), 1);
  ::setenv("NEURON_RT_VISIBLE_CORES", "0-1", 1);
  ASSERT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_SUCCESS);
  {
    RankState r0;
    RankState r1;
    ASSERT_EQ(Prepare(neff, 0, 0, 2, &r0), NRT_SUCCESS);
    ASSERT_EQ(Prepare(neff, 1, 1, 2, &r1), NRT_SUCCESS);
    ASSERT_EQ(::write(go_write.get(), "g", 1), 1);
    EXPECT_EQ(WaitChild(twin), 0);
    EXPECT_THAT(ReadFileText(dir_.path() / "twin.err"), ::testing::HasSubstr("already used by"));
  }
  nrt_close();
}

}  // namespace
}  // namespace neuron::nrt::testing
