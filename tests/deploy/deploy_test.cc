// deploy/: every kustomize overlay renders (the real `kubectl kustomize`) into objects with the
// mounts, security context, probes and tolerations the DaemonSet needs (device access through
// privileged containers that keep every other restriction, the host's /proc read-only for the
// exporter, no /run/neuron, a namespace Pod Security Admission lets them into); the alert rules
// pass `promtool check rules`; the generated PrometheusRule matches its source; and every PromQL
// expression of the dashboard parses. The DaemonSet selects every instance type of the catalog, or,
// in overlays/nfd-label, the node label that a NodeFeatureRule sets on nodes with a Neuron PCI
// device (vendor and device id, never the vendor alone).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "core/model/catalog.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"

namespace neuron {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::ReadFile;
using testing::Spawn;
using testing::TempDir;
using testing::WaitExit;

const fs::path kDeploy = fs::path(NEURON_SOURCE_DIR) / "deploy";
constexpr std::string_view kNfdOverlay = "overlays/nfd-label";
constexpr std::string_view kPresentLabel = "neuron.amazonaws.com/present";

struct ToolRun {
  int code = -1;
  std::string out, err;
};

ToolRun RunTool(const std::vector<std::string>& argv) {
  TempDir dir;
  const pid_t pid = Spawn(argv, dir.path() / "out", dir.path() / "err");
  ToolRun r;
  r.code = WaitExit(pid, 120s).value_or(-1);
  r.out = ReadFile(dir.path() / "out");
  r.err = ReadFile(dir.path() / "err");
  return r;
}

bool OnPath(const std::string& tool) {
  return RunTool({"sh", "-c", "command -v " + tool}).code == 0;
}

std::vector<YAML::Node> Render(const std::string& overlay) {
  ToolRun r = RunTool({"kubectl", "kustomize", (kDeploy / overlay).string()});
  EXPECT_EQ(r.code, 0) << overlay << ": " << r.err;
  return YAML::LoadAll(r.out);
}

YAML::Node Find(const std::vector<YAML::Node>& objects, const std::string& kind) {
  for (const YAML::Node& o : objects) {
    if (o["kind"].as<std::string>() == kind) return o;
  }
  return YAML::Node();
}

YAML::Node Container(const YAML::Node& daemonset, const std::string& name) {
  for (const YAML::Node& c : daemonset["spec"]["template"]["spec"]["containers"]) {
    if (c["name"].as<std::string>() == name) return c;
  }
  return YAML::Node();
}

class OverlayTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!OnPath("kubectl")) GTEST_SKIP() << "kubectl is not installed";
  }
};

// The pod: scheduling, no API token, no host namespaces.
void ExpectPodSpec(const YAML::Node& pod) {
  EXPECT_EQ(pod["priorityClassName"].as<std::string>(), "system-node-critical");
  EXPECT_FALSE(pod["automountServiceAccountToken"].as<bool>(true));
  EXPECT_FALSE(pod["hostNetwork"].as<bool>(false));
  EXPECT_FALSE(pod["hostPID"].as<bool>(false));
  EXPECT_FALSE(pod["hostIPC"].as<bool>(false));
  // Kept although containerd applies no profile to a privileged container (daemonset.yaml).
  EXPECT_EQ(pod["securityContext"]["seccompProfile"]["type"].as<std::string>(""), "RuntimeDefault");
  bool tolerates_neuron = false;
  for (const YAML::Node& t : pod["tolerations"]) {
    tolerates_neuron |= t["key"].as<std::string>("") == "aws.amazon.com/neuron" &&
                        t["operator"].as<std::string>("") == "Exists";
  }
  EXPECT_TRUE(tolerates_neuron);
}

// The node selection: with `by_label`, nodes labelled neuron.amazonaws.com/present=true and no
// instance-type list; otherwise exactly the catalog's instance types.
void ExpectNodeSelection(const YAML::Node& pod, bool by_label) {
  std::set<std::string> instance_types;
  std::set<std::string> present_values;
  size_t expressions = 0;
  for (const YAML::Node& term :
       pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
          ["nodeSelectorTerms"]) {
    for (const YAML::Node& e : term["matchExpressions"]) {
      ++expressions;
      const std::string key = e["key"].as<std::string>();
      std::set<std::string>& into =
          key == "node.kubernetes.io/instance-type" ? instance_types : present_values;
      if (key != "node.kubernetes.io/instance-type" && key != kPresentLabel) ADD_FAILURE() << key;
      EXPECT_EQ(e["operator"].as<std::string>(), "In") << key;
      for (const YAML::Node& v : e["values"]) into.insert(v.as<std::string>());
    }
  }
  if (by_label) {
    EXPECT_EQ(present_values, std::set<std::string>{"true"});
    EXPECT_TRUE(instance_types.empty()) << "the label overlay still lists instance types";
    EXPECT_EQ(expressions, 1u);
    return;
  }
  std::set<std::string> catalog;
  for (const InstanceSpec& spec : AllInstances()) catalog.insert(std::string(spec.name));
  EXPECT_EQ(instance_types, catalog) << "the DaemonSet's instance types differ from the catalog";
  EXPECT_TRUE(present_values.empty());
}

// A container: privileged for device access and otherwise locked down, probed, bounded.
void ExpectContainerSecurity(const YAML::Node& c) {
  const YAML::Node sc = c["securityContext"];
  // Device access: a hostPath of /dev does not get past the device cgroup.
  EXPECT_TRUE(sc["privileged"].as<bool>(false));
  EXPECT_TRUE(sc["readOnlyRootFilesystem"].as<bool>(false));
  // The API server rejects allowPrivilegeEscalation: false beside privileged: true.
  if (sc["privileged"].as<bool>(false)) {
    EXPECT_TRUE(sc["allowPrivilegeEscalation"].as<bool>(true))
        << "allowPrivilegeEscalation: false with privileged: true does not validate";
  }
  ASSERT_TRUE(sc["capabilities"]["drop"]);
  EXPECT_EQ(sc["capabilities"]["drop"][0].as<std::string>(), "ALL");
  EXPECT_FALSE(sc["capabilities"]["add"]) << "capabilities added";
  EXPECT_EQ(c["livenessProbe"]["httpGet"]["path"].as<std::string>(), "/healthz");
  EXPECT_EQ(c["readinessProbe"]["httpGet"]["path"].as<std::string>(), "/readyz");
  EXPECT_TRUE(c["resources"]["requests"]["memory"]);
  EXPECT_TRUE(c["resources"]["limits"]["memory"]);
  std::string joined;
  for (const YAML::Node& a : c["args"]) joined += a.as<std::string>() + " ";
  EXPECT_NE(joined.find("--root=/host"), std::string::npos) << joined;
  EXPECT_NE(joined.find("--log.format=json"), std::string::npos) << joined;
}

// A container's mounts: the host's /sys and /dev under /host, everything read-only but the
// kubelet's device-plugins/, nothing of the simulator's private state.
void ExpectContainerMounts(const YAML::Node& c, std::map<std::string, std::string> host_paths) {
  std::map<std::string, std::pair<std::string, bool>> mounts;  // path -> (host path, ro)
  for (const YAML::Node& m : c["volumeMounts"]) {
    mounts[m["mountPath"].as<std::string>()] = {host_paths[m["name"].as<std::string>()],
                                                m["readOnly"].as<bool>(false)};
  }
  for (const std::string p : {"/sys", "/dev"}) {
    ASSERT_TRUE(mounts.count("/host" + p)) << p;
    EXPECT_EQ(mounts["/host" + p].first, p);
  }
  for (const auto& [path, mount] : mounts) {
    EXPECT_EQ(path.find("/run/neuron"), std::string::npos) << path;
    EXPECT_EQ(mount.first.find("/run/neuron"), std::string::npos) << path << " <- " << mount.first;
    if (path != "/var/lib/kubelet/device-plugins") {
      EXPECT_TRUE(mount.second) << path << " is writable";
    }
  }
  ASSERT_TRUE(mounts.count("/var/lib/kubelet/pod-resources"));
  EXPECT_EQ(mounts["/var/lib/kubelet/pod-resources"].first, "/var/lib/kubelet/pod-resources");
}

TEST_P(OverlayTest, RendersADaemonSetThatIsSafeAndComplete) {
  const std::vector<YAML::Node> objects = Render(GetParam());
  ASSERT_FALSE(objects.empty());
  for (const YAML::Node& o : objects) {
    const std::string kind = o["kind"].as<std::string>();
    if (kind == "Namespace") continue;
    if (kind == "NodeFeatureRule") {  // cluster-scoped
      EXPECT_FALSE(o["metadata"]["namespace"]) << "a namespace on the cluster-scoped rule";
      continue;
    }
    EXPECT_EQ(o["metadata"]["namespace"].as<std::string>(""), "neuron-system")
        << o["kind"] << " " << o["metadata"]["name"];
  }
  const YAML::Node ds = Find(objects, "DaemonSet");
  ASSERT_TRUE(ds) << "no DaemonSet in " << GetParam();
  const YAML::Node pod = ds["spec"]["template"]["spec"];
  ExpectPodSpec(pod);
  ExpectNodeSelection(pod, GetParam() == kNfdOverlay);
  std::map<std::string, std::string> host_paths;  // volume name -> host path
  for (const YAML::Node& v : pod["volumes"]) {
    host_paths[v["name"].as<std::string>()] = v["hostPath"]["path"].as<std::string>("");
    EXPECT_EQ(host_paths[v["name"].as<std::string>()].find("/run/neuron"), std::string::npos);
  }
  for (const std::string name : {"device-plugin", "exporter"}) {
    SCOPED_TRACE(name);
    const YAML::Node c = Container(ds, name);
    ASSERT_TRUE(c);
    ExpectContainerSecurity(c);
    ExpectContainerMounts(c, host_paths);
  }
  // The exporter resolves the driver's host PIDs through the host's /proc, read-only.
  bool host_proc = false;
  for (const YAML::Node& m : Container(ds, "exporter")["volumeMounts"]) {
    if (m["mountPath"].as<std::string>() != "/host/proc") continue;
    host_proc = true;
    EXPECT_EQ(host_paths[m["name"].as<std::string>()], "/proc");
    EXPECT_TRUE(m["readOnly"].as<bool>(false)) << "/host/proc is writable";
  }
  EXPECT_TRUE(host_proc) << "the exporter does not mount the host's /proc at /host/proc";
  // Only the plugin writes, and only into the kubelet's device-plugins/ directory.
  bool plugin_dir_writable = false;
  for (const YAML::Node& m : Container(ds, "device-plugin")["volumeMounts"]) {
    if (m["mountPath"].as<std::string>() == "/var/lib/kubelet/device-plugins") {
      plugin_dir_writable = !m["readOnly"].as<bool>(false);
    }
  }
  EXPECT_TRUE(plugin_dir_writable);
  // Pod Security Admission lets privileged pods into the namespace.
  const YAML::Node ns = Find(objects, "Namespace");
  ASSERT_TRUE(ns) << "no Namespace in " << GetParam();
  EXPECT_EQ(ns["metadata"]["name"].as<std::string>(""), "neuron-system");
  for (const std::string mode : {"enforce", "audit", "warn"}) {
    EXPECT_EQ(ns["metadata"]["labels"]["pod-security.kubernetes.io/" + mode].as<std::string>(""),
              "privileged")
        << mode;
  }
}

INSTANTIATE_TEST_SUITE_P(Deploy, OverlayTest,
                         ::testing::Values("base", "overlays/prometheus-operator",
                                           "overlays/prometheus", std::string(kNfdOverlay)),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n) ch = std::isalnum(ch) ? ch : '_';
                           return n;
                         });

TEST(DeployTest, OperatorOverlayScrapesBothEndpointsAndShipsRulesAndDashboard) {
  if (!OnPath("kubectl")) GTEST_SKIP() << "kubectl is not installed";
  const std::vector<YAML::Node> objects = Render("overlays/prometheus-operator");
  const YAML::Node monitor = Find(objects, "PodMonitor");
  ASSERT_TRUE(monitor);
  std::set<std::string> ports;
  for (const YAML::Node& e : monitor["spec"]["podMetricsEndpoints"]) {
    ports.insert(e["port"].as<std::string>());
  }
  EXPECT_EQ(ports, (std::set<std::string>{"metrics", "plugin-http"}));
  EXPECT_TRUE(Find(objects, "PrometheusRule"));
  const YAML::Node dashboard = Find(objects, "ConfigMap");
  ASSERT_TRUE(dashboard);
  EXPECT_EQ(dashboard["metadata"]["labels"]["grafana_dashboard"].as<std::string>(), "1");
}

// The rule labels a node for a Neuron chip of the catalog (vendor 1d0f and one of its device ids)
// and for nothing else of Amazon's: ENA, EFA and NVMe share the vendor.
TEST(DeployTest, NfdRuleMatchesNeuronDevicesOnly) {
  if (!OnPath("kubectl")) GTEST_SKIP() << "kubectl is not installed";
  const std::vector<YAML::Node> objects = Render(std::string(kNfdOverlay));
  const YAML::Node rule = Find(objects, "NodeFeatureRule");
  ASSERT_TRUE(rule);
  EXPECT_EQ(rule["apiVersion"].as<std::string>(), "nfd.k8s-sigs.io/v1alpha1");
  ASSERT_EQ(rule["spec"]["rules"].size(), 1u);
  const YAML::Node r = rule["spec"]["rules"][0];
  EXPECT_EQ(r["labels"][std::string(kPresentLabel)].as<std::string>(), "true");
  ASSERT_EQ(r["matchFeatures"].size(), 1u)
      << "one feature, so vendor and device must match together";
  const YAML::Node pci = r["matchFeatures"][0];
  EXPECT_EQ(pci["feature"].as<std::string>(), "pci.device");
  const YAML::Node exprs = pci["matchExpressions"];
  ASSERT_TRUE(exprs["vendor"]);
  ASSERT_TRUE(exprs["device"]) << "vendor 1d0f alone matches ENA, EFA and NVMe too";
  EXPECT_EQ(exprs["vendor"]["op"].as<std::string>(), "In");
  EXPECT_EQ(exprs["vendor"]["value"].as<std::vector<std::string>>(),
            std::vector<std::string>{fmt::format("{:04x}", kPciVendorAmazon)});
  EXPECT_EQ(exprs["device"]["op"].as<std::string>(), "In");
  const auto devices = exprs["device"]["value"].as<std::vector<std::string>>();
  std::set<std::string> catalog_ids;
  for (const InstanceSpec& spec : AllInstances()) {
    catalog_ids.insert(fmt::format("{:04x}", spec.chip->pci_device_id));
  }
  EXPECT_EQ(std::set<std::string>(devices.begin(), devices.end()), catalog_ids);
  EXPECT_EQ(catalog_ids, (std::set<std::string>{"7164", "7264", "7364"}));
}

TEST(DeployTest, PrometheusRuleIsGeneratedFromTheRulesFile) {
  const YAML::Node rules =
      YAML::LoadFile((kDeploy / "overlays/prometheus/neuron-alerts.rules.yml").string());
  const YAML::Node wrapped =
      YAML::LoadFile((kDeploy / "overlays/prometheus-operator/prometheusrule.yaml").string());
  EXPECT_EQ(YAML::Dump(wrapped["spec"]), YAML::Dump(rules)) << "stale: run `make deploy-gen`";
}

TEST(DeployTest, PromtoolAcceptsTheAlertRules) {
  if (!OnPath("promtool")) GTEST_SKIP() << "promtool is not installed";
  ToolRun r = RunTool({"promtool", "check", "rules",
                       (kDeploy / "overlays/prometheus/neuron-alerts.rules.yml").string()});
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  const YAML::Node rules =
      YAML::LoadFile((kDeploy / "overlays/prometheus/neuron-alerts.rules.yml").string());
  std::set<std::string> alerts;
  for (const YAML::Node& rule : rules["groups"][0]["rules"]) {
    alerts.insert(rule["alert"].as<std::string>());
  }
  // The issue's four: device unhealthy, uncorrectable ECC, allocated core idle, exporter down.
  for (const char* a : {"NeuronDeviceUnhealthy", "NeuronUncorrectableEccErrors",
                        "NeuronCoreAllocatedButIdle", "NeuronExporterDown"}) {
    EXPECT_TRUE(alerts.count(a)) << a;
  }
}

TEST(DeployTest, EveryDashboardExpressionParses) {
  if (!OnPath("promtool")) GTEST_SKIP() << "promtool is not installed";
  std::ifstream in(kDeploy / "overlays/prometheus-operator/dashboards/neuron-node.json");
  const nlohmann::json dashboard = nlohmann::json::parse(in);
  std::vector<std::string> exprs;
  for (const auto& panel : dashboard["panels"]) {
    for (const auto& target : panel.value("targets", nlohmann::json::array())) {
      exprs.push_back(target["expr"].get<std::string>());
    }
  }
  ASSERT_GE(exprs.size(), 15u);
  // Grafana's variables, as Grafana would substitute them.
  YAML::Emitter out;
  out << YAML::BeginMap << YAML::Key << "groups" << YAML::Value << YAML::BeginSeq << YAML::BeginMap
      << YAML::Key << "name" << YAML::Value << "dashboard" << YAML::Key << "rules" << YAML::Value
      << YAML::BeginSeq;
  for (size_t i = 0; i < exprs.size(); ++i) {
    std::string e = std::regex_replace(exprs[i], std::regex(R"(\$__rate_interval)"), "1m");
    e = std::regex_replace(e, std::regex(R"(\$instance)"), ".*");
    out << YAML::BeginMap << YAML::Key << "record" << YAML::Value
        << "dashboard:expr_" + std::to_string(i) << YAML::Key << "expr" << YAML::Value << e
        << YAML::EndMap;
  }
  out << YAML::EndSeq << YAML::EndMap << YAML::EndSeq << YAML::EndMap;
  TempDir dir;
  testing::WriteFile(dir.path() / "dashboard.rules.yml", out.c_str());
  ToolRun r =
      RunTool({"promtool", "check", "rules", (dir.path() / "dashboard.rules.yml").string()});
  EXPECT_EQ(r.code, 0) << r.out << r.err;
}

}  // namespace
}  // namespace neuron
