// Each node's EFA port counters against the bytes the collective algorithm sends over EFA
// (driver-sim/README.md#collective-world): every node of a simulated trn1.32xlarge cluster runs
// its node of one Llama-2-7B job (`neuron-sim run --node-rank`), the processes meeting as one
// collective world. The expected bytes are worked out here, apart from the runtime's accounting:
// from the job's own op lists (BuildStepOps, ParseOpList), each collective's group membership
// (ranks on the node n, nodes m) and the hierarchical model's EFA bytes per rank
// (CostCollective), split over the node's EFAs by the nearest-EFA rule
// (driver-sim/README.md#collectives).
#include <arpa/inet.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <memory>
#include <optional>
#include <set>
#include <utility>

#include "core/driver/sysfs_names.h"
#include "driver-sim/model/transformer.h"
#include "driver-sim/runtime/node_model.h"
#include "driver-sim/runtime/program.h"
#include "driver-sim/runtime/timing.h"
#include "tests/support/sim_cluster.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace neuron::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// The job, shrunk to run in seconds; the same figures go to `neuron-sim run` and to the spec the
// expected bytes are computed from.
constexpr int kSteps = 2;
constexpr int kMicroSteps = 1;
constexpr double kScale = 0.001;
constexpr int kTp = 8;      // `run`'s default --tp
constexpr int kSeq = 4096;  // `run`'s default --seq for the decoders
constexpr double kTolerance = 0.01;
// Executions each core runs: the micro-step list steps × micro-steps times, the optimizer list
// once per step.
constexpr uint64_t kExecutionsPerCore = kSteps * kMicroSteps + kSteps;

// A port free on `address` now: bound to port 0 there, read back, released. Rank 0's process
// binds it moments later; 0 when the address does not bind.
int FreePort(const std::string& address) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  int port = 0;
  socklen_t len = sizeof(a);
  if (::inet_pton(AF_INET, address.c_str(), &a.sin_addr) == 1 &&
      ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  ::close(fd);
  return port;
}

// The spec `neuron-sim run --workload llama2-7b` builds for node `node_rank` of the job from its
// flags and its `cores` visible cores (Training::Configure): ZeRO-1, micro-batch 1, BF16 with
// AdamW, no pipeline.
workloads::TrainSpec JobSpec(int node_rank, int nodes, int cores) {
  workloads::TrainSpec s;
  s.model = *workloads::FindModel("llama2-7b");
  s.seq = kSeq;
  s.tp = kTp;
  s.cores_per_node = cores;
  s.nodes = nodes;
  s.node_rank = node_rank;
  s.zero1 = true;
  s.scale = kScale;
  return s;
}

// The members of the op's replica group that holds world rank `rank`: the op's `groups` entry, or
// the whole world without groups; empty when no group holds it.
std::vector<uint32_t> GroupOf(const nrt::Op& op, uint32_t rank, uint32_t world) {
  if (op.groups.empty()) {
    std::vector<uint32_t> all(world);
    for (uint32_t r = 0; r < world; ++r) all[r] = r;
    return all;
  }
  for (const std::vector<uint32_t>& g : op.groups) {
    if (std::find(g.begin(), g.end(), rank) != g.end()) return g;
  }
  return {};
}

// Bytes each of the node's ranks sends over EFA (and receives) in one execution of `program`.
// Per collective: n = the group's members on the rank's node, m = the group's nodes (times the
// nodes the op models, none in a multi-process job), and the hierarchical model's EFA phase for
// them. Ranks are numbered over the world, node r holding r·cores .. r·cores + cores − 1.
absl::StatusOr<std::vector<double>> EfaBytesPerExecution(const nrt::Program& program,
                                                         const workloads::TrainSpec& s,
                                                         const nrt::CollectivePath& path) {
  const auto cores = static_cast<uint32_t>(s.cores_per_node);
  const auto world = static_cast<uint32_t>(s.world());
  std::vector<double> bytes(cores, 0.0);
  for (size_t i = 0; i < program.ops.size(); ++i) {
    const nrt::Op& op = program.ops[i];
    if (op.engine != nrt::Engine::kCollectives) continue;
    for (uint32_t c = 0; c < cores; ++c) {
      const uint32_t rank = static_cast<uint32_t>(s.rank_base()) + c;
      const std::vector<uint32_t> group = GroupOf(op, rank, world);
      if (group.empty()) {
        return absl::InvalidArgumentError(
            fmt::format("op {} ({}): no replica group holds rank {}", i, op.name, rank));
      }
      std::set<uint32_t> nodes;
      uint64_t local = 0;
      for (uint32_t member : group) {
        nodes.insert(member / cores);
        if (member / cores == rank / cores) ++local;
      }
      const uint64_t node_count = nrt::NodesOf(op, local) * nodes.size();
      bytes[c] += nrt::CostCollective(op.coll, op.bytes, local, node_count, path).efa_bytes;
    }
  }
  return bytes;
}

// What each of node `node_rank`'s ranks sends over EFA in the whole run: the micro-step list
// steps × micro-steps times, the optimizer list once per step (kExecutionsPerCore in all).
absl::StatusOr<std::vector<double>> ExpectedRankBytes(const workloads::TrainSpec& s,
                                                      const nrt::CollectivePath& path) {
  const workloads::StepOps ops = workloads::BuildStepOps(s, 0);
  absl::StatusOr<nrt::Program> micro = nrt::ParseOpList(ops.micro_step);
  if (!micro.ok()) return micro.status();
  absl::StatusOr<nrt::Program> opt = nrt::ParseOpList(ops.optimizer);
  if (!opt.ok()) return opt.status();
  absl::StatusOr<std::vector<double>> per_micro = EfaBytesPerExecution(*micro, s, path);
  if (!per_micro.ok()) return per_micro.status();
  absl::StatusOr<std::vector<double>> per_opt = EfaBytesPerExecution(*opt, s, path);
  if (!per_opt.ok()) return per_opt.status();
  std::vector<double> total(per_micro->size());
  for (size_t c = 0; c < total.size(); ++c) {
    total[c] = (*per_micro)[c] * kSteps * kMicroSteps + (*per_opt)[c] * kSteps;
  }
  return total;
}

// One EFA port counter of the node, by the EFA's index in the catalog; nullopt when unreadable.
std::optional<uint64_t> EfaCounter(const fs::path& root, const InstanceSpec& spec, size_t efa,
                                   const std::string& counter) {
  return ReadU64File(RootPaths(root).InfinibandClassDir() / spec.efas.at(efa).name /
                     "ports/1/hw_counters" / counter);
}

// Whether the node's daemon has folded the job's released datastores into sysfs for cores
// first..first + count − 1: each core's inference_count total shows the job's executions. The
// daemon mirrors a released slot's last EFA traffic before it folds the slot's counters
// (driver-sim/README.md#the-daemon-and-the-datastores), so the port counters are final then.
bool Folded(const fs::path& root, const nrt::NodeModel& node, int first, int count) {
  for (int g = first; g < first + count; ++g) {
    const nrt::CoreLocation loc = node.Locate(g);
    const fs::path core = RootPaths(root).NeuronDevice(loc.device) /
                          fmt::format("neuron_core{}", loc.device_core * node.lnc());
    if (ReadU64File(core / "stats/other_info/inference_count/total") != kExecutionsPerCore) {
      return false;
    }
  }
  return true;
}

double RelativeError(double measured, double expected) {
  return expected > 0 ? std::abs(measured - expected) / expected : std::abs(measured);
}

// The pci0000:<bus> component of a sysfs path once its links are resolved: the root bus the
// device sits on; empty when there is none.
std::string RootBus(const fs::path& sysfs_path) {
  std::error_code ec;
  for (const fs::path& part : fs::canonical(sysfs_path, ec)) {
    if (part.string().starts_with("pci0000:")) return part.string();
  }
  return "";
}

// One node's share of the job: every node runs `cores` consecutive cores from `first_core`
// (NEURON_RT_VISIBLE_CORES when not the whole node).
struct JobShape {
  int nodes = 2;
  int first_core = 0;
  int cores = 0;  // 0: every core of the node
};

class ClusterEfaTest : public ::testing::Test {
 protected:
  // Brings up the cluster, runs the job's node on each and waits until every node's daemon has
  // folded its process's traffic.
  void RunJob(JobShape shape);
  // Starts `neuron-sim exec -- neuron-sim run --node-rank i` on every node, rank 0's process
  // listening on node-1's address.
  void StartNodes();
  // Stops what a failed test left running (a process already reaped is -1).
  void TearDown() override {
    for (pid_t& pid : pids_) Stop(std::exchange(pid, -1), 10s);
  }
  // Compares node `i`'s EFA counters with the algorithm's bytes, per EFA and in all.
  void CheckNode(size_t i);
  // The expected bytes per EFA of node `i`, from its ranks' bytes and their nearest EFAs.
  std::vector<double> ExpectedPerEfa(size_t i);

  std::unique_ptr<SimCluster> cluster_;
  std::optional<nrt::NodeModel> model_;
  JobShape shape_;
  std::vector<pid_t> pids_;
  TempDir out_{"cefa"};
};

void ClusterEfaTest::RunJob(JobShape shape) {
  shape_ = shape;
  cluster_ = std::make_unique<SimCluster>(SimClusterOptions{
      .sim_bin = NEURON_SIM_BIN, .nodes = shape.nodes, .on_problem = [](const std::string& p) {
        ADD_FAILURE() << "cluster down: " << p;
      }});
  ASSERT_TRUE(cluster_->Up()) << cluster_->Log();
  absl::StatusOr<nrt::NodeModel> model = nrt::NodeModel::Load(RootPaths(cluster_->node(0).root));
  ASSERT_TRUE(model.ok()) << model.status();
  model_.emplace(*std::move(model));
  if (shape_.cores == 0) shape_.cores = model_->total_cores();
  // A fresh node has sent nothing: what the counters show afterwards is the job's.
  for (size_t i = 0; i < cluster_->spec().nodes.size(); ++i) {
    for (size_t e = 0; e < model_->spec().efas.size(); ++e) {
      for (const char* counter : {"tx_bytes", "rx_bytes"}) {
        ASSERT_EQ(EfaCounter(cluster_->node(i).root, model_->spec(), e, counter), 0u);
      }
    }
  }
  ASSERT_NO_FATAL_FAILURE(StartNodes());
  for (int i = 0; i < shape_.nodes; ++i) {
    const std::string out = out_.path() / fmt::format("run{}", i);
    const std::optional<int> code = WaitExit(pids_[static_cast<size_t>(i)], 180s);
    if (code.has_value()) pids_[static_cast<size_t>(i)] = -1;
    EXPECT_EQ(code, 0) << ReadFile(out + ".out") << ReadFile(out + ".err");
    // The executions the expected bytes count are the ones that ran.
    EXPECT_NE(ReadFile(out + ".out").find(fmt::format("done: {} steps; runtime closed", kSteps)),
              std::string::npos)
        << ReadFile(out + ".out");
  }
  for (size_t i = 0; i < cluster_->spec().nodes.size(); ++i) {
    ASSERT_TRUE(WaitUntil(
        [&] { return Folded(cluster_->node(i).root, *model_, shape_.first_core, shape_.cores); },
        30s))
        << cluster_->node(i).name << ": cores " << shape_.first_core << "-"
        << shape_.first_core + shape_.cores - 1 << " never showed " << kExecutionsPerCore
        << " executions each in sysfs";
  }
}

void ClusterEfaTest::StartNodes() {
  const int port = FreePort(cluster_->node(0).address);
  ASSERT_GT(port, 0) << cluster_->node(0).address;
  std::vector<std::string> env = {
      fmt::format("NEURON_RT_ROOT_COMM_ID={}:{}", cluster_->node(0).address, port)};
  if (shape_.cores != model_->total_cores()) {
    env.push_back(fmt::format("NEURON_RT_VISIBLE_CORES={}-{}", shape_.first_core,
                              shape_.first_core + shape_.cores - 1));
  }
  for (int i = 0; i < shape_.nodes; ++i) {
    const std::string root = cluster_->node(static_cast<size_t>(i)).root.string();
    pids_.push_back(StartProcess(
        {NEURON_SIM_BIN, "exec", "--root", root, "--", NEURON_SIM_BIN, "run", "--workload",
         "llama2-7b", "--node-rank", std::to_string(i), "--nodes", std::to_string(shape_.nodes),
         "--steps", std::to_string(kSteps), "--micro-steps", std::to_string(kMicroSteps), "--scale",
         fmt::format("{}", kScale)},
        out_.path() / fmt::format("run{}.out", i), out_.path() / fmt::format("run{}.err", i), env));
    ASSERT_GT(pids_.back(), 0);
  }
}

std::vector<double> ClusterEfaTest::ExpectedPerEfa(size_t i) {
  const nrt::NodeModel& node = *model_;
  const workloads::TrainSpec spec = JobSpec(static_cast<int>(i), shape_.nodes, shape_.cores);
  std::vector<double> expected(node.spec().efas.size(), 0.0);
  absl::StatusOr<std::vector<double>> ranks = ExpectedRankBytes(spec, nrt::PathFor(node));
  EXPECT_TRUE(ranks.ok()) << ranks.status();
  if (!ranks.ok()) return expected;
  // Rank c of the node runs on global core first_core + c; its bytes go to the EFA nearest its
  // device, which sits on the device's PCI root bus (driver-sim/README.md#collectives).
  const RootPaths paths(cluster_->node(i).root);
  for (size_t c = 0; c < ranks->size(); ++c) {
    const int device = node.Locate(shape_.first_core + static_cast<int>(c)).device;
    const int efa = node.NearestEfa(device);
    EXPECT_GE(efa, 0) << "device " << device;
    if (efa < 0) continue;
    expected[static_cast<size_t>(efa)] += (*ranks)[c];
    const std::string& bdf = node.spec().placement.at(static_cast<size_t>(device)).bdf;
    const std::string& efa_name = node.spec().efas[static_cast<size_t>(efa)].name;
    const std::string bus = RootBus(paths.PciDevice(bdf));
    EXPECT_FALSE(bus.empty()) << paths.PciDevice(bdf);
    EXPECT_EQ(bus, RootBus(paths.InfinibandClassDir() / efa_name))
        << "device " << device << " (" << bdf << ") and its nearest EFA " << efa_name;
  }
  return expected;
}

void ClusterEfaTest::CheckNode(size_t i) {
  const InstanceSpec& instance = model_->spec();
  const std::vector<double> expected = ExpectedPerEfa(i);
  double expected_total = 0;
  double tx_total = 0;
  double rx_total = 0;
  for (size_t e = 0; e < expected.size(); ++e) {
    const std::optional<uint64_t> tx_read =
        EfaCounter(cluster_->node(i).root, instance, e, "tx_bytes");
    const std::optional<uint64_t> rx_read =
        EfaCounter(cluster_->node(i).root, instance, e, "rx_bytes");
    ASSERT_TRUE(tx_read.has_value() && rx_read.has_value()) << instance.efas[e].name;
    const auto tx = static_cast<double>(*tx_read);
    const auto rx = static_cast<double>(*rx_read);
    const std::string where = cluster_->node(i).name + " " + instance.efas[e].name;
    EXPECT_LE(RelativeError(tx, expected[e]), kTolerance)
        << where << ": tx_bytes " << *tx_read << ", expected " << expected[e];
    EXPECT_LE(RelativeError(rx, expected[e]), kTolerance)
        << where << ": rx_bytes " << *rx_read << ", expected " << expected[e];
    expected_total += expected[e];
    tx_total += tx;
    rx_total += rx;
  }
  // The job's data-parallel collectives cross the nodes: a test that compared zeros would prove
  // nothing.
  ASSERT_GT(expected_total, 0);
  EXPECT_LE(RelativeError(tx_total, expected_total), kTolerance);
  EXPECT_LE(RelativeError(rx_total, expected_total), kTolerance);
  std::cout << fmt::format(
      "{}: EFA tx_bytes {:.0f}, rx_bytes {:.0f}, expected {:.0f}; error tx {:.4f} %, rx {:.4f} %; "
      "EFAs with traffic {}/{}\n",
      cluster_->node(i).name, tx_total, rx_total, expected_total,
      100 * RelativeError(tx_total, expected_total), 100 * RelativeError(rx_total, expected_total),
      std::count_if(expected.begin(), expected.end(), [](double b) { return b > 0; }),
      expected.size());
}

TEST_F(ClusterEfaTest, TwoNodesCountWhatTheCollectivesSendWithinOnePercent) {
  ASSERT_NO_FATAL_FAILURE(RunJob({.nodes = 2}));
  // Every core runs a rank and every EFA of a trn1.32xlarge is the nearest of two devices, so
  // all eight carry traffic.
  for (size_t i = 0; i < 2; ++i) CheckNode(i);
}

TEST_F(ClusterEfaTest, FourNodesCountWhatTheCollectivesSendWithinOnePercent) {
  ASSERT_NO_FATAL_FAILURE(RunJob({.nodes = 4}));
  for (size_t i = 0; i < 4; ++i) CheckNode(i);
}

// Half of each node's cores, off-centre: only the EFAs nearest devices 4-11 may carry traffic,
// so the split is tested on which EFAs count, not only on equal shares.
TEST_F(ClusterEfaTest, OnPartOfTheNodeOnlyTheNearestEfasCount) {
  ASSERT_NO_FATAL_FAILURE(RunJob({.nodes = 2, .first_core = 8, .cores = 16}));
  for (size_t i = 0; i < 2; ++i) CheckNode(i);
}

}  // namespace
}  // namespace neuron::testing
