// `neuron-sim cluster up|down|status` through the real binary (driver-sim/README.md#cluster):
// the nodes it starts and describes in cluster.json, their isolation from one another, what
// `down` leaves (nothing), and the directories `up` refuses.
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "core/driver/sysfs_names.h"
#include "driver-sim/driver/sim_paths.h"
#include "tests/support/sim_cluster.h"
#include "tests/support/temp_dir.h"

namespace neuron::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

SimClusterOptions TwoNodes() {
  return {.sim_bin = NEURON_SIM_BIN, .nodes = 2, .on_problem = [](const std::string& p) {
            ADD_FAILURE() << "cluster down: " << p;
          }};
}

nlohmann::json NodeJson(const sim::ClusterNode& node) {
  std::ifstream in(sim::NodeJsonPath(RootPaths(node.root)));
  return nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
}

TEST(ClusterTest, TwoNodesAreDescribedDistinctAndReachable) {
  SimCluster cluster(TwoNodes());
  ASSERT_TRUE(cluster.Up()) << cluster.Log();
  ASSERT_EQ(cluster.spec().nodes.size(), 2u);
  std::set<std::string> ids;
  std::set<std::string> hostnames;
  std::set<std::string> addresses;
  for (size_t i = 0; i < 2; ++i) {
    const sim::ClusterNode& n = cluster.node(i);
    const std::string name = "node-" + std::to_string(i + 1);
    EXPECT_EQ(n.name, name);
    EXPECT_EQ(n.root, cluster.dir() / "nodes" / name / "root");
    EXPECT_EQ(n.kubelet_dir, cluster.dir() / "nodes" / name / "kubelet");
    EXPECT_EQ(n.address, "127.0.1." + std::to_string(i + 1));
    EXPECT_EQ(n.instance, "trn1.32xlarge");
    EXPECT_TRUE(n.instance_id.starts_with("i-") && n.instance_id.size() == 19) << n.instance_id;
    // The node's own description agrees: its daemon was given the name and the id.
    const nlohmann::json node_json = NodeJson(n);
    ASSERT_TRUE(node_json.is_object()) << n.root;
    EXPECT_EQ(node_json.value("node_name", ""), name);
    EXPECT_EQ(node_json.value("instance_id", ""), n.instance_id);
    ids.insert(n.instance_id);
    hostnames.insert(node_json.value("node_name", ""));
    addresses.insert(n.address);
    const RunResult kubelet =
        cluster.Sim({"kubelet", "status", "--kubelet-dir", n.kubelet_dir.string()});
    EXPECT_EQ(kubelet.code, 0) << name << ": " << kubelet.err;
    EXPECT_NE(kubelet.out.find("registrations"), std::string::npos) << kubelet.out;
  }
  EXPECT_EQ(ids.size(), 2u);
  EXPECT_EQ(hostnames.size(), 2u);
  EXPECT_EQ(addresses.size(), 2u);
  // Two processes (daemon, kubelet) per node, each recorded for `down`.
  EXPECT_EQ(cluster.children().size(), 4u);
  const std::string pid = ReadFile(sim::ClusterFiles(cluster.dir()).Pid());
  EXPECT_EQ(pid, std::to_string(cluster.pid()) + "\n");

  const RunResult status = cluster.Sim({"cluster", "status", "--dir", cluster.dir().string()});
  EXPECT_EQ(status.code, 0) << status.out << status.err;
  for (const sim::ClusterNode& n : cluster.spec().nodes) {
    EXPECT_NE(status.out.find(n.name + " " + n.address + " " + n.instance_id +
                              " driver=ready kubelet=ready"),
              std::string::npos)
        << status.out;
  }
}

TEST(ClusterTest, WithTheDevicePluginStatusShowsWhatEachKubeletAdvertises) {
  SimClusterOptions options = TwoNodes();
  options.extra = {"--device-plugin", NEURON_DEVICE_PLUGIN_BIN};
  SimCluster cluster(options);
  ASSERT_TRUE(cluster.Up()) << cluster.Log();
  EXPECT_EQ(cluster.children().size(), 6u);
  // Ready means the plugin serves its sockets; its lists reach the kubelet right after.
  // trn1.32xlarge: 16 devices, 32 cores, 8 EFAs (core/model/catalog).
  const std::string advertised =
      "aws.amazon.com/neuron=16 aws.amazon.com/neuroncore=32 vpc.amazonaws.com/efa=8";
  RunResult status;
  EXPECT_TRUE(WaitUntil(
      [&] {
        status = cluster.Sim({"cluster", "status", "--dir", cluster.dir().string()});
        return status.code == 0 &&
               status.out.find("node-1 127.0.1.1 " + cluster.node(0).instance_id +
                               " driver=ready kubelet=ready " + advertised) != std::string::npos &&
               status.out.find("node-2 127.0.1.2 " + cluster.node(1).instance_id +
                               " driver=ready kubelet=ready " + advertised) != std::string::npos;
      },
      60s))
      << status.out << status.err;
  // Each plugin serves HTTP on its node's address, on a port of its choice.
  for (size_t i = 0; i < 2; ++i) {
    const std::string log =
        ReadFile(cluster.dir() / "nodes" / cluster.node(i).name / "logs" / "plugin.out");
    EXPECT_GT(ListeningPort(log), 0) << log;
  }
}

TEST(ClusterTest, AFaultOnOneNodeShowsOnlyInItsOwnSysfs) {
  SimCluster cluster(TwoNodes());
  ASSERT_TRUE(cluster.Up()) << cluster.Log();
  const auto ecc = [&](size_t i) {
    return ReadU64File(RootPaths(cluster.node(i).root).NeuronDevice(0) /
                       "stats/hardware/mem_ecc_uncorrected");
  };
  ASSERT_EQ(ecc(0), 0u);
  ASSERT_EQ(ecc(1), 0u);
  const RunResult inject = cluster.Ctl(1, {"inject", "hbm-ue", "--device", "0"});
  ASSERT_EQ(inject.code, 0) << inject.err;
  EXPECT_EQ(ecc(1), 1u);
  EXPECT_EQ(ecc(0), 0u);
}

TEST(ClusterTest, DownLeavesNothingAndIsIdempotent) {
  SimCluster cluster(TwoNodes());
  ASSERT_TRUE(cluster.Up()) << cluster.Log();
  EXPECT_FALSE(SocketsUnder(cluster.dir()).empty());
  EXPECT_EQ(cluster.Down(), "");
  const sim::ClusterFiles files(cluster.dir());
  EXPECT_FALSE(fs::exists(files.Ready()));
  EXPECT_FALSE(fs::exists(files.Pid()));
  EXPECT_FALSE(sim::LiveSupervisor(cluster.dir()).has_value());
  // cluster.json stays for what reads the logs; status sees every node down.
  const RunResult status = cluster.Sim({"cluster", "status", "--dir", cluster.dir().string()});
  EXPECT_EQ(status.code, 1) << status.out;
  EXPECT_NE(status.out.find("supervisor down"), std::string::npos) << status.out;
  EXPECT_NE(status.out.find("node-2 127.0.1.2"), std::string::npos) << status.out;
  EXPECT_EQ(status.out.find("driver=ready"), std::string::npos) << status.out;
  const RunResult again = cluster.Sim({"cluster", "down", "--dir", cluster.dir().string()});
  EXPECT_EQ(again.code, 0) << again.err;
  EXPECT_NE(again.out.find("no cluster running"), std::string::npos) << again.out;
}

TEST(ClusterTest, DownAfterTheSupervisorWasKilledStopsItsNodes) {
  SimCluster cluster(TwoNodes());
  ASSERT_TRUE(cluster.Up()) << cluster.Log();
  ASSERT_EQ(::kill(cluster.pid(), SIGKILL), 0);
  ASSERT_TRUE(WaitUntil([&] { return cluster.Poll().has_value(); }, 30s));
  const RunResult down = cluster.Sim({"cluster", "down", "--dir", cluster.dir().string()});
  EXPECT_EQ(down.code, 0) << down.err;
  for (const sim::ClusterChild& c : cluster.children()) {
    EXPECT_FALSE(RunsWithin(c.pid, cluster.dir())) << c.node << " " << c.role;
  }
  EXPECT_FALSE(fs::exists(sim::ClusterFiles(cluster.dir()).Pid()));
}

TEST(ClusterTest, AChildThatDiesIsReportedAndTheRestKeepsRunning) {
  SimCluster cluster(TwoNodes());
  ASSERT_TRUE(cluster.Up()) << cluster.Log();
  pid_t kubelet = -1;
  for (const sim::ClusterChild& c : cluster.children()) {
    if (c.node == "node-2" && c.role == "kubelet") kubelet = c.pid;
  }
  ASSERT_GT(kubelet, 0);
  ASSERT_EQ(::kill(kubelet, SIGKILL), 0);
  EXPECT_TRUE(WaitUntil(
      [&] {
        return cluster.Log().find("node-2: kubelet (pid " + std::to_string(kubelet) +
                                  ") exited unexpectedly") != std::string::npos;
      },
      30s))
      << cluster.Log();
  EXPECT_FALSE(cluster.Poll().has_value());  // the supervisor goes on
  const RunResult status = cluster.Sim({"cluster", "status", "--dir", cluster.dir().string()});
  EXPECT_EQ(status.code, 1) << status.out;
  EXPECT_NE(status.out.find("node-1 127.0.1.1 " + cluster.node(0).instance_id +
                            " driver=ready kubelet=ready"),
            std::string::npos)
      << status.out;
  EXPECT_NE(status.out.find("driver=ready kubelet=down"), std::string::npos) << status.out;
  // `down` still stops the rest; the supervisor reports the lost child in its exit code.
  const RunResult down = cluster.Sim({"cluster", "down", "--dir", cluster.dir().string()});
  EXPECT_EQ(down.code, 0) << down.err;
  ASSERT_TRUE(WaitUntil([&] { return cluster.Poll().has_value(); }, 30s));
  EXPECT_EQ(cluster.Poll(), 1);
  for (const sim::ClusterChild& c : cluster.children()) {
    EXPECT_FALSE(RunsWithin(c.pid, cluster.dir())) << c.node << " " << c.role;
  }
  EXPECT_TRUE(SocketsUnder(cluster.dir()).empty());
}

TEST(ClusterTest, ASecondUpOnALiveDirectoryIsRefused) {
  SimCluster cluster(TwoNodes());
  ASSERT_TRUE(cluster.Up()) << cluster.Log();
  const RunResult second = cluster.Sim({"cluster", "up", "--nodes", "1", "--instance",
                                        "trn1.32xlarge", "--dir", cluster.dir().string()});
  EXPECT_EQ(second.code, 1);
  EXPECT_NE(second.err.find("already holds a live cluster (supervisor pid " +
                            std::to_string(cluster.pid()) + ")"),
            std::string::npos)
      << second.err;
  // The first cluster is untouched.
  const RunResult status = cluster.Sim({"cluster", "status", "--dir", cluster.dir().string()});
  EXPECT_EQ(status.code, 0) << status.out;
}

TEST(ClusterTest, ADirectoryTooLongForTheSocketsIsRefusedNamingThePath) {
  TempDir base("nc");
  const fs::path dir = base.path() / std::string(60, 'd');
  const RunResult up =
      RunCommand(base.path(), {NEURON_SIM_BIN, "cluster", "up", "--nodes", "2", "--instance",
                               "trn1.32xlarge", "--dir", dir.string()});
  EXPECT_EQ(up.code, 2);
  const std::string longest = dir.string() + "/nodes/node-2/kubelet/device-plugins/neurondevice-" +
                              sim::ClusterInstanceId("node-2") + ".sock";
  EXPECT_NE(up.err.find("the socket path " + longest + " would be " +
                        std::to_string(longest.size()) + " bytes"),
            std::string::npos)
      << up.err;
  EXPECT_FALSE(fs::exists(dir));  // refused before anything was created
}

}  // namespace
}  // namespace neuron::testing
