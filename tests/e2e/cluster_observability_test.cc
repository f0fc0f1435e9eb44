// Watching a simulated cluster as an operator would: two trn1.32xlarge nodes (`neuron-sim cluster
// up`), the real device plugin and exporter on each under that node's driver, one real
// Prometheus scraping both exporters with a `node` label per target (what the PodMonitor's
// relabelling gives) and loading the alert rules, and the Llama-2-7B RayTrain job with one worker
// pod per node. From PromQL: both nodes busy, EFA moving on both, the job's pods per node through
// the allocation join, and the dashboard's Cluster row answering for both nodes. Then the faults:
// a rank hangs and its peers' collectives time out (hw_collectives_error on node-1's exporter and
// the NeuronCollectivePeerLost alert for node-1), and an EFA goes down on node-2 only.
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "tests/support/process.h"
#include "tests/support/prometheus.h"
#include "tests/support/sim_cluster.h"
#include "tests/support/temp_dir.h"

namespace neuron::e2e {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using neuron::testing::ListeningPort;
using neuron::testing::PrometheusServer;
using neuron::testing::ReadFile;
using neuron::testing::RunCommand;
using neuron::testing::RunResult;
using neuron::testing::SimCluster;
using neuron::testing::Spawn;
using neuron::testing::Stop;
using neuron::testing::WaitExit;
using neuron::testing::WaitUntil;
using sim::ClusterNode;

const fs::path kDeploy = fs::path(NEURON_SOURCE_DIR) / "deploy";
const fs::path kRules = kDeploy / "overlays/prometheus/neuron-alerts.rules.yml";
const fs::path kDashboard = kDeploy / "overlays/prometheus-operator/dashboards/neuron-node.json";
const std::string kJob = "llama-obs";
// Ceilings, not expectations (docs/architecture.md#timing-in-tests).
constexpr auto kJobCeiling = 150s;

// The value of each series of `result` by its `node` label.
std::map<std::string, double> ByNode(const nlohmann::json& result) {
  std::map<std::string, double> out;
  for (const auto& s : result) {
    out[s["metric"].value("node", "")] = std::stod(s["value"][1].get<std::string>());
  }
  return out;
}

// The exprs of the dashboard's "Cluster" row: the panels after that row up to the next one.
std::vector<std::string> ClusterRowExpressions() {
  std::ifstream in(kDashboard);
  const nlohmann::json dashboard = nlohmann::json::parse(in);
  std::vector<std::string> out;
  bool in_row = false;
  for (const auto& panel : dashboard["panels"]) {
    if (panel["type"] == "row") {
      in_row = panel["title"] == "Cluster";
      continue;
    }
    if (!in_row) continue;
    for (const auto& target : panel.value("targets", nlohmann::json::array())) {
      // As Grafana substitutes its variables.
      out.push_back(std::regex_replace(target["expr"].get<std::string>(),
                                       std::regex(R"(\$__rate_interval)"), "30s"));
    }
  }
  return out;
}

class ClusterObservabilityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StartCluster();
    if (HasFatalFailure()) return;
    StartAgents();
    if (HasFatalFailure()) return;
    std::vector<PrometheusServer::Target> targets;
    for (size_t i = 0; i < nodes_.size(); ++i) {
      targets.push_back(
          {"neuron-node-agent-" + nodes_[i].name, exporter_ports_[i], {{"node", nodes_[i].name}}});
    }
    fs::create_directories(dir_.path() / "prometheus");
    prometheus_ = std::make_unique<PrometheusServer>(dir_.path() / "prometheus", targets,
                                                     std::vector<fs::path>{kRules});
  }

  void TearDown() override {
    // A rank the test stopped takes the job's SIGTERM only once it runs again.
    for (const pid_t pid : stopped_) ::kill(pid, SIGCONT);
    if (job_ > 0) {
      RunCommand(dir_.path(),
                 {NEURON_SIM_BIN, "job", "delete", "--cluster", cluster_dir(), "--name", kJob,
                  "--grace-period", "10"},
                 {}, 120s);
      if (!job_exit_) Stop(job_, 60s);
    }
    prometheus_.reset();
    for (auto it = agents_.rbegin(); it != agents_.rend(); ++it) Stop(*it, 30s);
    if (cluster_ != nullptr) {
      // cluster down, and nothing of the cluster left: no child of it, no socket.
      EXPECT_EQ(cluster_->Down(), "");
    }
  }

  fs::path cluster_dir() const { return cluster_->dir(); }
  fs::path Log(const std::string& name) const { return dir_.path() / name; }

  void StartCluster() {
    cluster_ = std::make_unique<SimCluster>(
        neuron::testing::SimClusterOptions{.sim_bin = NEURON_SIM_BIN, .nodes = 2});
    ASSERT_TRUE(cluster_->Up()) << cluster_->Log();
    nodes_ = cluster_->spec().nodes;
    ASSERT_EQ(nodes_.size(), 2u);
  }

  // The plugin and the exporter of every node, under that node's driver, as scripts/demo.sh
  // starts them.
  void StartAgents() {
    for (const ClusterNode& n : nodes_) {
      const std::vector<std::string> on_node = {NEURON_SIM_BIN, "exec", "--root", n.root, "--"};
      std::vector<std::string> plugin = on_node;
      plugin.insert(plugin.end(), {NEURON_PLUGIN_BIN, "--root", n.root, "--kubelet-dir",
                                   n.kubelet_dir, "--listen", "127.0.0.1:0"});
      agents_.push_back(
          Spawn(plugin, Log("plugin." + n.name + ".out"), Log("plugin." + n.name + ".err")));
      std::vector<std::string> exporter = on_node;
      exporter.insert(exporter.end(), {NEURON_EXPORTER_BIN, "--root", n.root, "--kubelet-dir",
                                       n.kubelet_dir, "--web.listen-address", "127.0.0.1:0"});
      agents_.push_back(
          Spawn(exporter, Log("exporter." + n.name + ".out"), Log("exporter." + n.name + ".err")));
    }
    for (const ClusterNode& n : nodes_) {
      int port = 0;
      ASSERT_TRUE(WaitUntil(
          [&] {
            port = ListeningPort(ReadFile(Log("exporter." + n.name + ".out")) +
                                 ReadFile(Log("exporter." + n.name + ".err")));
            return port > 0;
          },
          60s))
          << ReadFile(Log("exporter." + n.name + ".err"));
      exporter_ports_.push_back(port);
      // The plugin has registered all 16 devices with this node's kubelet.
      ASSERT_TRUE(WaitUntil(
          [&] {
            const RunResult r = RunCommand(
                dir_.path(), {NEURON_SIM_BIN, "kubelet", "status", "--kubelet-dir", n.kubelet_dir});
            return std::regex_search(r.out, std::regex(R"(aws\.amazon\.com/neuron capacity=16)"));
          },
          60s))
          << ReadFile(Log("plugin." + n.name + ".err"));
    }
  }

  // `neuron-sim job run` of the RayTrain recipe, shrunk: 8 micro-steps of about 0.34 s simulated
  // (scale 0.5) and the optimizer phase whose gradient collectives cross EFA, for up to 200 steps
  // (TearDown deletes it).
  void StartJob(const std::vector<std::string>& env = {},
                const std::vector<std::string>& extra_args = {}) {
    std::vector<std::string> args = {NEURON_SIM_BIN, "job", "run", "--cluster", cluster_dir()};
    args.insert(args.end(), {"--recipe", "llama2-7b-raytrain", "--name", kJob, "--steps", "200"});
    args.insert(args.end(), {"--micro-steps", "8", "--scale", "0.5"});
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    job_ = Spawn(args, Log("job.out"), Log("job.err"), env);
    ASSERT_GT(job_, 0);
  }

  std::string JobLog() const { return ReadFile(Log("job.out")) + ReadFile(Log("job.err")); }

  // Waits until `promql` has a series above `threshold` for every node; returns the last answer.
  // A failure, with the job's log, when the ceiling passes or as soon as `job run` has exited.
  std::map<std::string, double> WaitAboveOnEveryNode(const std::string& promql, double threshold) {
    std::map<std::string, double> last;
    bool reached = WaitUntil(
        [&] {
          if (!job_exit_) job_exit_ = WaitExit(job_, 0ms);
          if (job_exit_) return true;  // nothing more will come
          last = ByNode(prometheus_->Query(promql));
          for (const ClusterNode& n : nodes_) {
            if (!last.count(n.name) || last[n.name] <= threshold) return false;
          }
          return true;
        },
        kJobCeiling);
    reached = reached && !job_exit_;
    if (!reached) {
      ADD_FAILURE() << promql << " not above " << threshold << " on every node"
                    << (job_exit_ ? " (job run exited with " + std::to_string(*job_exit_) + ")"
                                  : "")
                    << "\n"
                    << JobLog();
    }
    return last;
  }

  // The PIDs of the runtime processes on `node` (neuron-ls under its driver: the processes with a
  // live datastore on its devices).
  std::set<pid_t> RuntimePids(const ClusterNode& node) {
    const RunResult r = RunCommand(dir_.path(), {NEURON_SIM_BIN, "exec", "--root", node.root, "--",
                                                 NEURON_LS_BIN, "--root", node.root, "-j"});
    std::set<pid_t> pids;
    const nlohmann::json devices = nlohmann::json::parse(r.out, nullptr, false);
    if (devices.is_discarded()) return pids;
    for (const auto& d : devices) {
      if (!d["neuron_processes"].is_array()) continue;
      for (const auto& p : d["neuron_processes"]) pids.insert(p["pid"].get<pid_t>());
    }
    return pids;
  }

  neuron::testing::TempDir dir_{"cobs"};
  std::vector<ClusterNode> nodes_;
  std::vector<int> exporter_ports_;
  std::vector<pid_t> agents_;
  std::unique_ptr<PrometheusServer> prometheus_;
  std::unique_ptr<SimCluster> cluster_;
  pid_t job_ = -1;
  std::optional<int> job_exit_;  // set once a wait saw `job run` end (and reaped it)
  std::set<pid_t> stopped_;      // runtime processes the test sent SIGSTOP
};

TEST_F(ClusterObservabilityTest, TheJobIsBusyAndMovesEfaOnBothNodes) {
  StartJob();
  // Every core the job holds, on each node, busy through the micro-steps: the least busy
  // allocated core of each node above 90 %.
  const std::string job_cores = "neuroncore_allocation_info{pod=~\"" + kJob + "-worker-.*\"}";
  const auto busy = WaitAboveOnEveryNode(
      "min by (node) (rate(neuroncore_busy_seconds_total[10s]) * on (instance, neuroncore) "
      "group_left " +
          job_cores + ")",
      0.9);
  for (const ClusterNode& n : nodes_) {
    EXPECT_GT(busy.count(n.name) ? busy.at(n.name) : 0, 0.9) << n.name << "\n" << JobLog();
  }
  // 32 cores per worker pod (16 devices of 2 cores), on each node.
  const auto cores = ByNode(prometheus_->Query("count by (node) (" + job_cores + ")"));
  for (const ClusterNode& n : nodes_) {
    EXPECT_EQ(cores.count(n.name) ? cores.at(n.name) : 0, 32) << n.name;
  }
  // The gradient all-reduce crosses the nodes over EFA: bytes leave and arrive on both.
  for (const std::string dir : {"tx", "rx"}) {
    const auto efa = WaitAboveOnEveryNode(
        "sum by (node) (increase(neuron_efa_" + dir + "_bytes_total[30s]))", 0);
    for (const ClusterNode& n : nodes_) {
      EXPECT_GT(efa.count(n.name) ? efa.at(n.name) : 0, 0) << dir << " on " << n.name;
    }
  }
}

TEST_F(ClusterObservabilityTest, TheJobsPodsShowPerNodeAndTheClusterRowAnswersForBoth) {
  StartJob();
  const std::string join =
      "avg by (node, namespace, pod) (rate(neuroncore_busy_seconds_total[10s]) * on (instance, "
      "neuroncore) group_left (namespace, pod, container) neuroncore_allocation_info{pod=~\"" +
      kJob + "-worker-.*\"})";
  // Each worker pod busy on its node (the join names it), then the pods themselves.
  WaitAboveOnEveryNode(join, 0.5);
  const nlohmann::json pods = prometheus_->Query(join);
  ASSERT_EQ(pods.size(), nodes_.size()) << pods.dump() << "\n" << JobLog();
  // One worker pod per node, each a different one, each busy.
  std::map<std::string, std::string> pod_of_node;
  for (const auto& s : pods) {
    pod_of_node[s["metric"].value("node", "")] = s["metric"].value("pod", "");
    EXPECT_GT(std::stod(s["value"][1].get<std::string>()), 0.5) << s.dump();
  }
  ASSERT_EQ(pod_of_node.size(), nodes_.size()) << pods.dump();
  std::set<std::string> distinct;
  for (const ClusterNode& n : nodes_) {
    ASSERT_TRUE(pod_of_node.count(n.name)) << n.name << ": " << pods.dump();
    EXPECT_TRUE(std::regex_match(pod_of_node[n.name], std::regex(kJob + "-worker-[0-9]+")));
    distinct.insert(pod_of_node[n.name]);
  }
  EXPECT_EQ(distinct.size(), nodes_.size());

  // Every query of the dashboard's Cluster row evaluates and answers for both nodes.
  const std::vector<std::string> exprs = ClusterRowExpressions();
  ASSERT_GE(exprs.size(), 3u);
  for (const std::string& e : exprs) {
    std::map<std::string, double> by_node;
    std::string error;
    WaitUntil(
        [&] {
          error.clear();
          by_node = ByNode(prometheus_->Query(e, &error));
          return error.empty() && by_node.count(nodes_[0].name) && by_node.count(nodes_[1].name);
        },
        60s);
    EXPECT_EQ(error, "") << e;
    for (const ClusterNode& n : nodes_) EXPECT_TRUE(by_node.count(n.name)) << n.name << ": " << e;
  }
}

// The alert's state for node `node`: "firing", "pending" or "" (none).
std::string AlertState(const PrometheusServer& prometheus, const std::string& node) {
  const std::optional<nlohmann::json> alerts = prometheus.Api("/api/v1/alerts");
  if (!alerts) return "";
  for (const auto& a : (*alerts)["alerts"]) {
    if (a["labels"].value("alertname", "") == "NeuronCollectivePeerLost" &&
        a["labels"].value("node", "") == node) {
      return a.value("state", "");
    }
  }
  return "";
}

// node-2's worker hangs (SIGSTOP: alive, holding its devices, never arriving), the way a rank stuck
// in its host code or on a dead host looks to its peers. node-1's ranks go on to the optimizer
// phase and wait in its EFA collectives until NEURON_RT_EXEC_TIMEOUT, then end them with 1200:
// node-1's exporter counts hw_collectives_error and a HANG_ON_COLLECTIVES record, and the alert
// fires for node-1, naming it. (A SIGKILL would not do: `job run` deletes the other pods as soon
// as one exits, and node-1 would stop between collectives.)
TEST_F(ClusterObservabilityTest, AStoppedRankFailsItsPeersAndFiresNeuronCollectivePeerLost) {
  StartJob({"NEURON_RT_EXEC_TIMEOUT=5"}, {"--grace-period", "5"});
  WaitAboveOnEveryNode("sum by (node) (rate(neuroncore_busy_seconds_total[10s]))", 1);
  const ClusterNode& survivor = nodes_[0];
  const ClusterNode& stopped = nodes_[1];
  const std::string errors =
      "sum by (node) (neuron_device_execution_errors_total{error=\"hw_collectives_error\"})";
  const auto before = ByNode(prometheus_->Query(errors));
  ASSERT_TRUE(before.count(survivor.name)) << "no error series on " << survivor.name;
  EXPECT_EQ(before.at(survivor.name), 0) << "errors before the fault";
  EXPECT_EQ(AlertState(*prometheus_, survivor.name), "");

  const std::set<pid_t> workers = RuntimePids(stopped);
  ASSERT_FALSE(workers.empty()) << "no runtime process on " << stopped.name << "\n" << JobLog();
  for (const pid_t pid : workers) {
    ASSERT_EQ(::kill(pid, SIGSTOP), 0) << pid;
    stopped_.insert(pid);
  }

  std::map<std::string, double> after;
  EXPECT_TRUE(WaitUntil(
      [&] {
        after = ByNode(prometheus_->Query(errors));
        return after[survivor.name] > 0;
      },
      kJobCeiling))
      << "no hw_collectives_error on " << survivor.name << "\n"
      << JobLog();
  // The runtime's NEURON_HW_ERR record reaches the kernel log beside the status.
  const std::string records =
      "sum by (node) (neuron_device_hw_error_log_events_total{error=\"HANG_ON_COLLECTIVES\"})";
  EXPECT_TRUE(
      WaitUntil([&] { return ByNode(prometheus_->Query(records))[survivor.name] > 0; }, 60s))
      << prometheus_->Query(records).dump();
  std::string state;
  EXPECT_TRUE(WaitUntil(
      [&] {
        state = AlertState(*prometheus_, survivor.name);
        return state == "firing";
      },
      60s))
      << "NeuronCollectivePeerLost for " << survivor.name << ": '" << state << "'\n"
      << prometheus_->Log();
  // Its description names the node.
  const std::optional<nlohmann::json> alerts = prometheus_->Api("/api/v1/alerts");
  ASSERT_TRUE(alerts.has_value());
  bool named = false;
  for (const auto& a : (*alerts)["alerts"]) {
    if (a["labels"].value("alertname", "") != "NeuronCollectivePeerLost") continue;
    named |= a["annotations"].value("description", "").find(survivor.name) != std::string::npos;
  }
  EXPECT_TRUE(named) << alerts->dump();
}

// `neuron-sim ctl efa-down` on node-2: the simulator removes the interface as a VF reset does
// (driver-sim/README.md#efa-devices), so node-2's exporter drops that port's series after its
// next sweep and Prometheus counts one ACTIVE port fewer on node-2 only.
TEST_F(ClusterObservabilityTest, AnEfaDownShowsOnlyOnItsNode) {
  const std::string active = "count by (node) (neuron_efa_port_state_id == 4)";
  std::map<std::string, double> ports;
  ASSERT_TRUE(WaitUntil(
      [&] {
        ports = ByNode(prometheus_->Query(active));
        return ports[nodes_[0].name] == 8 && ports[nodes_[1].name] == 8;
      },
      60s))
      << prometheus_->Query(active).dump();
  const RunResult down = cluster_->Ctl(1, {"efa-down", "--efa", "rdmap16s25"});
  ASSERT_EQ(down.code, 0) << down.out << down.err;
  EXPECT_TRUE(WaitUntil(
      [&] {
        ports = ByNode(prometheus_->Query(active));
        return ports[nodes_[1].name] == 7;
      },
      60s))
      << prometheus_->Query(active).dump();
  EXPECT_EQ(ports[nodes_[0].name], 8);
  // Gone, not unreadable: the query itself must succeed for an empty answer to mean anything.
  std::string error;
  const nlohmann::json gone = prometheus_->Query(
      "neuron_efa_port_state_id{efa_device=\"rdmap16s25\",node=\"" + nodes_[1].name + "\"}",
      &error);
  EXPECT_EQ(error, "");
  EXPECT_EQ(gone.size(), 0u) << gone.dump();
}

}  // namespace
}  // namespace neuron::e2e
