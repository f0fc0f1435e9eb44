// The alert rules and the Grafana dashboard against a real Prometheus that scrapes a simulated
// node (the plugin and the exporter, a pod running a workload): every expression evaluates
// without error, every series it names exists, and every rule evaluates healthy.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "tests/e2e/agent_node.h"
#include "tests/support/http_client.h"
#include "tests/support/process.h"
#include "tests/support/prometheus.h"

namespace neuron::e2e {
namespace {

using neuron::testing::PrometheusServer;
using neuron::testing::ReadFile;
using neuron::testing::Spawn;
using neuron::testing::Stop;
using neuron::testing::WaitUntil;

const fs::path kDeploy = fs::path(NEURON_SOURCE_DIR) / "deploy";
const fs::path kRules = kDeploy / "overlays/prometheus/neuron-alerts.rules.yml";
const fs::path kDashboard = kDeploy / "overlays/prometheus-operator/dashboards/neuron-node.json";

struct Expression {
  std::string where;
  std::string promql;
};

std::vector<Expression> Expressions() {
  std::vector<Expression> out;
  for (const YAML::Node& group : YAML::LoadFile(kRules.string())["groups"]) {
    for (const YAML::Node& rule : group["rules"]) {
      out.push_back({"rule " + rule["alert"].as<std::string>(), rule["expr"].as<std::string>()});
    }
  }
  std::ifstream in(kDashboard);
  const nlohmann::json dashboard = nlohmann::json::parse(in);
  for (const auto& panel : dashboard["panels"]) {
    for (const auto& target : panel.value("targets", nlohmann::json::array())) {
      // Grafana's variables, as Grafana substitutes them.
      std::string e = target["expr"].get<std::string>();
      e = std::regex_replace(e, std::regex(R"(\$__rate_interval)"), "1m");
      e = std::regex_replace(e, std::regex(R"(\$instance)"), ".*");
      out.push_back({"panel \"" + panel["title"].get<std::string>() + "\"", e});
    }
  }
  return out;
}

// Metric names in an expression: ours all start with "neuron"; label names (neuron_device,
// neuroncore) only appear inside {...} and by/on/group_left(...) lists, which go first.
std::set<std::string> MetricNamesIn(std::string promql) {
  promql = std::regex_replace(promql, std::regex(R"(\{[^}]*\})"), " ");
  promql = std::regex_replace(
      promql, std::regex(R"(\b(by|on|without|ignoring|group_left|group_right)\s*\([^)]*\))"), " ");
  std::set<std::string> names;
  const std::regex ident(R"(\bneuron[a-z0-9_]*)");
  for (auto it = std::sregex_iterator(promql.begin(), promql.end(), ident);
       it != std::sregex_iterator(); ++it) {
    names.insert(it->str());
  }
  return names;
}

// Every rule's and panel's expression evaluates without error, and every metric it names is one
// that Prometheus stored from the targets.
void ExpectEveryExpressionEvaluatesOnStoredSeries(PrometheusServer& prometheus) {
  const std::vector<std::string> stored = prometheus.MetricNames();
  const std::set<std::string> names(stored.begin(), stored.end());
  const std::vector<Expression> expressions = Expressions();
  ASSERT_GE(expressions.size(), 20u);
  for (const Expression& e : expressions) {
    std::string error;
    prometheus.Query(e.promql, &error);
    EXPECT_EQ(error, "") << e.where << ": " << e.promql;
    const std::set<std::string> referenced = MetricNamesIn(e.promql);
    EXPECT_FALSE(referenced.empty()) << e.where << ": " << e.promql;
    for (const std::string& name : referenced) {
      EXPECT_TRUE(names.count(name)) << e.where << " names " << name << ", which no target exports";
    }
  }
}

// Every alert rule has been evaluated at least once, and without error.
void ExpectEveryRuleHealthy(PrometheusServer& prometheus) {
  ASSERT_TRUE(WaitUntil(
      [&] {
        std::optional<nlohmann::json> rules = prometheus.Api("/api/v1/rules");
        if (!rules) return false;
        for (const auto& group : (*rules)["groups"]) {
          for (const auto& rule : group["rules"]) {
            if (rule.value("lastEvaluation", "").rfind("0001-", 0) == 0) return false;
          }
        }
        return true;
      },
      30s));
  // A local, not a temporary: range-for keeps only the outermost temporary alive.
  const std::optional<nlohmann::json> rules = prometheus.Api("/api/v1/rules");
  ASSERT_TRUE(rules.has_value());
  for (const auto& group : (*rules)["groups"]) {
    for (const auto& rule : group["rules"]) {
      EXPECT_EQ(rule.value("health", ""), "ok")
          << rule["name"] << ": " << rule.value("lastError", "");
    }
  }
}

TEST(RulesAndDashboardTest, EveryExpressionRefersToSeriesThatExist) {
  AgentNode node({});
  const fs::path dir = node.root().parent_path();
  // The exporter (under the simulated driver, to read the workload's datastores), and a pod
  // running a workload on cores the plugin chose.
  const pid_t exporter = Spawn(
      node.sim().UnderDriver({NEURON_EXPORTER_BIN, "--root", node.root().string(), "--kubelet-dir",
                              node.kubelet_dir().string(), "--web.listen-address", "127.0.0.1:0"}),
      dir / "exporter.out", dir / "exporter.err");
  const pid_t pod =
      Spawn({NEURON_SIM_BIN, "pod", "run", "--kubelet-dir", node.kubelet_dir().string(),
             "--namespace", "training", "--name", "bert-0", "--request", kCore + "=4", "--",
             NEURON_SIM_BIN, "run", "--workload", "bert-large"},
            dir / "pod.out", dir / "pod.err");
  int exporter_port = 0;
  ASSERT_TRUE(WaitUntil(
      [&] {
        exporter_port =
            ListeningPort(ReadFile(dir / "exporter.out") + ReadFile(dir / "exporter.err"));
        return exporter_port > 0;
      },
      60s))
      << ReadFile(dir / "exporter.err");
  ASSERT_GT(node.PluginHttpPort(), 0) << node.PluginLog();

  const fs::path prom_dir = dir / "prometheus";
  fs::create_directories(prom_dir);
  PrometheusServer prometheus(prom_dir,
                              {{"neuron-node-agent-exporter", exporter_port},
                               {"neuron-node-agent-plugin", node.PluginHttpPort()}},
                              {kRules});
  // Wait for the pod's series and a few scrapes, so that rates have two samples. Busy means more
  // than 10 %: what this test needs is the series and the join, and under ASan on a loaded
  // machine the workload's host side can leave a 4-core pod far from fully busy.
  ASSERT_TRUE(WaitUntil(
      [&] {
        return prometheus.Scalar("count(neuroncore_allocation_info{pod=\"bert-0\"})") == 4 &&
               prometheus.Scalar("count(rate(neuroncore_busy_seconds_total[1m]) > 0.1)") >= 4;
      },
      120s))
      << prometheus.Log() << ReadFile(dir / "pod.err");

  ExpectEveryExpressionEvaluatesOnStoredSeries(prometheus);

  // The pod join that the idle-core alert and the per-pod panel rely on names the pod.
  const nlohmann::json per_pod = prometheus.Query(
      "avg by (namespace, pod) (rate(neuroncore_busy_seconds_total[1m]) * on (instance, "
      "neuroncore) group_left (namespace, pod, container) neuroncore_allocation_info)");
  ASSERT_EQ(per_pod.size(), 1u) << per_pod.dump();
  EXPECT_EQ(per_pod[0]["metric"]["pod"], "bert-0");
  EXPECT_GT(std::stod(per_pod[0]["value"][1].get<std::string>()), 0.1);

  ExpectEveryRuleHealthy(prometheus);
  Stop(pod, 30s);
  Stop(exporter, 30s);
}

struct DocumentedMetric {
  bool always = false;  // "always" in the Present column
  bool compat = false;  // in the compat table
};

// The metric tables of monitor/README.md: "| `name` | type | labels | collector | present |".
std::map<std::string, DocumentedMetric> ReadmeMetrics() {
  std::map<std::string, DocumentedMetric> out;
  const std::string text = ReadFile(fs::path(NEURON_SOURCE_DIR) / "monitor/README.md");
  const std::regex row(R"(^\| `([a-z_]+)` \| [a-z]+ \| .* \| ([a-z]+) \| (.*) \|$)");
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (!std::regex_match(line, m, row)) continue;
    out[m[1]] = {.always = m[3].str().rfind("always", 0) == 0, .compat = m[2] == "compat"};
  }
  return out;
}

std::set<std::string> FamilyNames(const std::string& exposition) {
  std::set<std::string> names;
  std::istringstream lines(exposition);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("# TYPE ", 0) == 0) names.insert(line.substr(7, line.find(' ', 7) - 7));
  }
  return names;
}

// monitor/README.md's metric list against what the exporter really emits, in both modes, on a
// node with a pod running a workload.
TEST(RulesAndDashboardTest, TheReadmeListsExactlyTheMetricsTheExporterEmits) {
  AgentNode node({});
  const fs::path dir = node.root().parent_path();
  const pid_t pod =
      Spawn({NEURON_SIM_BIN, "pod", "run", "--kubelet-dir", node.kubelet_dir().string(), "--name",
             "matmul-0", "--request", kCore + "=2", "--request", kEfa + "=1", "--", NEURON_SIM_BIN,
             "run", "--workload", "matmul"},
            dir / "pod.out", dir / "pod.err");
  const std::map<std::string, DocumentedMetric> documented = ReadmeMetrics();
  ASSERT_GE(documented.size(), 60u) << "the README's metric tables did not parse";
  for (const bool compat : {false, true}) {
    SCOPED_TRACE(compat ? "--compat" : "native");
    const std::string tag = compat ? "compat" : "native";
    std::vector<std::string> argv{NEURON_EXPORTER_BIN,
                                  "--root",
                                  node.root().string(),
                                  "--kubelet-dir",
                                  node.kubelet_dir().string(),
                                  "--web.listen-address",
                                  "127.0.0.1:0"};
    if (compat) argv.push_back("--compat");
    const pid_t exporter =
        Spawn(node.sim().UnderDriver(argv), dir / (tag + ".out"), dir / (tag + ".err"));
    int port = 0;
    ASSERT_TRUE(
        WaitUntil([&] { return (port = ListeningPort(ReadFile(dir / (tag + ".err")))) > 0; }, 60s));
    // Wait until the pod shows up in the allocation series and its process in the datastore.
    std::set<std::string> emitted;
    WaitUntil(
        [&] {
          emitted = FamilyNames(neuron::testing::HttpGet(port, "/metrics").body);
          return emitted.count("neuroncore_allocation_info") &&
                 emitted.count("neuron_execution_latency_mean_seconds") &&
                 (!compat || emitted.count("execution_status_total"));
        },
        60s);
    for (const std::string& name : emitted) {
      EXPECT_TRUE(documented.count(name)) << name << " is emitted but not in monitor/README.md";
    }
    for (const auto& [name, doc] : documented) {
      if (doc.always && !doc.compat) {
        EXPECT_TRUE(emitted.count(name)) << name << " is documented as always present";
      }
    }
    Stop(exporter, 30s);
  }
  Stop(pod, 30s);
}

}  // namespace
}  // namespace neuron::e2e
