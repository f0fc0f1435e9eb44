// deploy/: every kustomize overlay renders (the real `kubectl kustomize`) into objects with the
// mounts, security context, probes and tolerations the DaemonSet needs: the plugin and the
// collector privileged for device access (each privilege with its reason beside it), keeping every
// other restriction, with no port and exec probes over their Unix sockets; the exporter's front
// unprivileged (non-root, no escalation, no capabilities, RuntimeDefault seccomp, read-only root,
// no host mount) and the only container with a port; a NetworkPolicy that admits only the
// Prometheus namespace to that port, and whose documented patch replaces that namespace; the host's
// /proc read-only for the collector, no /run/neuron, a namespace Pod Security Admission lets them
// into. The alert rules pass `promtool check rules`; the generated PrometheusRule matches its
// source; every PromQL expression of the dashboard parses. The DaemonSet selects every instance
// type of the catalog, or, in overlays/nfd-label, the node label that a NodeFeatureRule sets on
// nodes with a Neuron PCI device (vendor and device id, never the vendor alone). Without kubectl
// or promtool the tests that need them fail, naming the missing tool.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/model/catalog.h"
#include "tests/deploy/deploy_testing.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"

namespace neuron {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using deploy_testing::Arg;
using deploy_testing::Args;
using deploy_testing::Container;
using deploy_testing::ExpectBounded;
using deploy_testing::ExpectUnprivileged;
using deploy_testing::Find;
using deploy_testing::kDeploy;
using deploy_testing::kDraOverlay;
using deploy_testing::Missing;
using deploy_testing::OnPath;
using deploy_testing::Render;
using deploy_testing::RunTool;
using deploy_testing::ToolRun;
using testing::TempDir;

constexpr std::string_view kNfdOverlay = "overlays/nfd-label";
constexpr std::string_view kPresentLabel = "neuron.amazonaws.com/present";

class OverlayTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { ASSERT_TRUE(OnPath("kubectl")) << Missing("kubectl"); }
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

// A privileged container (the plugin, the collector): device access and otherwise locked down;
// no port: its HTTP on a Unix socket in the pod (`listen_flag`), probed by exec over it.
void ExpectPrivilegedContainer(const YAML::Node& c, const std::string& listen_flag) {
  ExpectBounded(c);
  const YAML::Node sc = c["securityContext"];
  // Device access: a hostPath of /dev does not get past the device cgroup.
  EXPECT_TRUE(sc["privileged"].as<bool>(false));
  // The API server rejects allowPrivilegeEscalation: false beside privileged: true.
  EXPECT_TRUE(sc["allowPrivilegeEscalation"].as<bool>(true))
      << "allowPrivilegeEscalation: false with privileged: true does not validate";
  EXPECT_FALSE(c["ports"]) << "a privileged container with a network port";
  EXPECT_NE(Args(c).find("--root=/host"), std::string::npos) << Args(c);
  const std::string listen = Arg(c, listen_flag);
  EXPECT_EQ(listen.rfind("unix:/run/neuron-node-agent/", 0), 0u) << listen_flag << "=" << listen;
  for (const auto& [probe, path] :
       {std::pair{"livenessProbe", "/healthz"}, std::pair{"readinessProbe", "/readyz"}}) {
    SCOPED_TRACE(probe);
    EXPECT_FALSE(c[probe]["httpGet"]) << "nothing listens on a port to GET";
    const auto command =
        c[probe]["exec"]["command"].as<std::vector<std::string>>(std::vector<std::string>{});
    ASSERT_EQ(command.size(), 3u);
    EXPECT_EQ(command[0], c["command"][0].as<std::string>()) << "the container's own binary";
    const std::string listen_arg = std::string(listen_flag).append("=").append(listen);
    EXPECT_EQ(command[1], listen_arg) << "the socket the container listens on";
    EXPECT_EQ(command[2], std::string("--probe=") + path);
    EXPECT_GE(c[probe]["timeoutSeconds"].as<int>(1), 2) << "the probe's own deadline is 1 s";
  }
}

// The front: the only container with a port, and nothing privileged about it.
void ExpectFront(const YAML::Node& c, const std::string& collector, const std::string& plugin) {
  ExpectUnprivileged(c);
  ASSERT_EQ(c["ports"].size(), 1u);
  EXPECT_EQ(c["ports"][0]["name"].as<std::string>(), "metrics");
  EXPECT_EQ(c["ports"][0]["containerPort"].as<int>(), 9478);
  EXPECT_EQ(Arg(c, "--web.listen-address"), ":9478");
  EXPECT_EQ(Arg(c, "--front.upstream"), collector);
  EXPECT_EQ(Arg(c, "--front.plugin-upstream"), plugin);
  EXPECT_EQ(c["livenessProbe"]["httpGet"]["path"].as<std::string>(""), "/healthz");
  EXPECT_EQ(c["readinessProbe"]["httpGet"]["path"].as<std::string>(""), "/readyz");
}

// Each `privileged: true` in the source manifest comes with its reason on the line above.
TEST(DeployTest, EveryPrivilegeSaysWhy) {
  std::ifstream in(kDeploy / "base/daemonset.yaml");
  std::string line, previous;
  int privileged = 0;
  while (std::getline(in, line)) {
    const size_t text = line.find_first_not_of(' ');
    if (text != std::string::npos && line[text] != '#' &&
        line.find("privileged: true") != std::string::npos) {
      ++privileged;
      EXPECT_NE(previous.find('#'), std::string::npos) << "no reason above: " << line;
    }
    previous = line;
  }
  EXPECT_EQ(privileged, 2) << "the plugin and the collector, nothing else";
}

// Where the plugin writes: its sockets in the kubelet's device-plugins/, the withhold locks; with
// the reset, the driver's sysfs `reset` and the agent's state directory; in DRA mode its
// registration socket, its DRA socket and checkpoint, and the CDI specs of prepared claims.
bool PluginWritable(const std::string& path, bool dra, bool reset) {
  if (path == "/var/lib/kubelet/device-plugins") return true;
  if (path == "/host/run/neuron-node-agent/withheld") return true;
  if (reset && (path == "/host/sys" || path == "/var/lib/neuron-node-agent")) return true;
  return dra && (path == "/var/lib/kubelet/plugins_registry" ||
                 path == "/var/lib/kubelet/plugins/neuron.aws.com" ||
                 path == "/var/lib/kubelet/plugins/efa.neuron.aws.com" || path == "/var/run/cdi");
}

// A container's mounts: the host's /sys and /dev under /host, everything read-only but where the
// plugin writes, nothing of the simulator's private state.
void ExpectContainerMounts(const YAML::Node& c, std::map<std::string, std::string> host_paths,
                           bool dra, bool reset) {
  std::map<std::string, std::pair<std::string, bool>> mounts;  // path -> (host path, ro)
  for (const YAML::Node& m : c["volumeMounts"]) {
    mounts[m["mountPath"].as<std::string>()] = {host_paths[m["name"].as<std::string>()],
                                                m["readOnly"].as<bool>(false)};
  }
  for (const std::string p : {"/sys", "/dev"}) {
    ASSERT_TRUE(mounts.count("/host" + p)) << p;
    EXPECT_EQ(mounts["/host" + p].first, p);
  }
  // The simulator's private state: /run/neuron and below (not /run/neuron-node-agent, the pod's
  // socket directory, an emptyDir).
  auto simulator_state = [](const std::string& p) {
    return p == "/run/neuron" || p.rfind("/run/neuron/", 0) == 0;
  };
  for (const auto& [path, mount] : mounts) {
    EXPECT_FALSE(simulator_state(path)) << path;
    EXPECT_FALSE(simulator_state(mount.first)) << path << " <- " << mount.first;
    if (!PluginWritable(path, dra, reset) && path != "/run/neuron-node-agent") {
      EXPECT_TRUE(mount.second) << path << " is writable";
    }
  }
  ASSERT_TRUE(mounts.count("/run/neuron-node-agent")) << "the pod's socket directory";
  EXPECT_EQ(mounts["/run/neuron-node-agent"].first, "") << "an emptyDir, not a host path";
  ASSERT_TRUE(mounts.count("/var/lib/kubelet/pod-resources"));
  EXPECT_EQ(mounts["/var/lib/kubelet/pod-resources"].first, "/var/lib/kubelet/pod-resources");
}

// Ingress only to the front's port, only from Prometheus's namespace; egress left open.
void ExpectNetworkPolicy(const std::vector<YAML::Node>& objects, const YAML::Node& front) {
  const YAML::Node np = Find(objects, "NetworkPolicy");
  ASSERT_TRUE(np) << "no NetworkPolicy";
  EXPECT_EQ(np["apiVersion"].as<std::string>(), "networking.k8s.io/v1");
  EXPECT_EQ(np["spec"]["podSelector"]["matchLabels"]["app.kubernetes.io/name"].as<std::string>(""),
            "neuron-node-agent");
  EXPECT_EQ(np["spec"]["policyTypes"].as<std::vector<std::string>>(),
            std::vector<std::string>{"Ingress"});
  const YAML::Node rules = np["spec"]["ingress"];
  ASSERT_EQ(rules.size(), 1u);
  ASSERT_EQ(rules[0]["from"].size(), 1u);
  const YAML::Node peer = rules[0]["from"][0];
  EXPECT_FALSE(peer["podSelector"]) << "any pod of the namespace, nothing narrower or wider";
  EXPECT_FALSE(peer["ipBlock"]);
  EXPECT_EQ(peer["namespaceSelector"]["matchLabels"].size(), 1u);
  EXPECT_EQ(
      peer["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"].as<std::string>(""),
      "monitoring");
  ASSERT_EQ(rules[0]["ports"].size(), 1u);
  EXPECT_EQ(rules[0]["ports"][0]["port"].as<int>(0), front["ports"][0]["containerPort"].as<int>());
  EXPECT_EQ(rules[0]["ports"][0]["protocol"].as<std::string>(""), "TCP");
}

// The front mounts the socket directory, read-only, and nothing else: no host path.
void ExpectFrontMounts(const YAML::Node& pod, const YAML::Node& front) {
  ASSERT_EQ(front["volumeMounts"].size(), 1u);
  EXPECT_EQ(front["volumeMounts"][0]["mountPath"].as<std::string>(), "/run/neuron-node-agent");
  EXPECT_TRUE(front["volumeMounts"][0]["readOnly"].as<bool>(false));
  const std::string sockets = front["volumeMounts"][0]["name"].as<std::string>();
  for (const YAML::Node& v : pod["volumes"]) {
    if (v["name"].as<std::string>() == sockets) {
      EXPECT_TRUE(v["emptyDir"]) << sockets;
    }
  }
}

TEST_P(OverlayTest, RendersADaemonSetThatIsSafeAndComplete) {
  const std::vector<YAML::Node> objects = Render(GetParam());
  ASSERT_FALSE(objects.empty());
  for (const YAML::Node& o : objects) {
    const std::string kind = o["kind"].as<std::string>();
    if (kind == "Namespace") continue;
    if (kind == "NodeFeatureRule" || kind == "DeviceClass" || kind == "ClusterRole" ||
        kind == "ClusterRoleBinding" || kind == "ValidatingAdmissionPolicy" ||
        kind == "ValidatingAdmissionPolicyBinding") {  // cluster-scoped
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
    host_paths[v["name"].as<std::string>()] =
        v["hostPath"] ? v["hostPath"]["path"].as<std::string>("") : "";
    // Nothing of the simulator's private state (/run/neuron and below; the agent's own
    // /run/neuron-node-agent/withheld is the node's).
    const std::string& host = host_paths[v["name"].as<std::string>()];
    EXPECT_TRUE(host != "/run/neuron" && !host.starts_with("/run/neuron/")) << host;
  }
  const bool dra = GetParam() == kDraOverlay;
  const bool reset = GetParam() == deploy_testing::kResetOverlay;
  const bool with_api = dra || GetParam() == deploy_testing::kNodeConditionOverlay;
  ASSERT_EQ(pod["containers"].size(), with_api ? 4u : 3u);
  for (const auto& [name, listen_flag] :
       {std::pair{"device-plugin", "--listen"}, std::pair{"exporter", "--web.listen-address"}}) {
    SCOPED_TRACE(name);
    const YAML::Node c = Container(ds, name);
    ASSERT_TRUE(c);
    ExpectPrivilegedContainer(c, listen_flag);
    ExpectContainerMounts(c, host_paths, dra, reset);
  }
  const YAML::Node front = Container(ds, "exporter-front");
  ASSERT_TRUE(front);
  ExpectFront(front, Arg(Container(ds, "exporter"), "--web.listen-address"),
              Arg(Container(ds, "device-plugin"), "--listen"));
  ExpectFrontMounts(pod, front);
  // The sockets are 0660 (HttpServer), so the front reaches them through the group that fsGroup
  // gives the directory.
  EXPECT_EQ(pod["securityContext"]["fsGroup"].as<int>(-1),
            front["securityContext"]["runAsGroup"].as<int>(-2));
  ExpectNetworkPolicy(objects, front);
  // The exporter resolves the driver's host PIDs through the host's /proc, read-only.
  bool host_proc = false;
  for (const YAML::Node& m : Container(ds, "exporter")["volumeMounts"]) {
    if (m["mountPath"].as<std::string>() != "/host/proc") continue;
    host_proc = true;
    EXPECT_EQ(host_paths[m["name"].as<std::string>()], "/proc");
    EXPECT_TRUE(m["readOnly"].as<bool>(false)) << "/host/proc is writable";
  }
  EXPECT_TRUE(host_proc) << "the exporter does not mount the host's /proc at /host/proc";
  // Only the plugin writes to the host, and only where PluginWritable says.
  size_t plugin_dirs_writable = 0;
  for (const YAML::Node& m : Container(ds, "device-plugin")["volumeMounts"]) {
    if (PluginWritable(m["mountPath"].as<std::string>(), dra, reset)) {
      plugin_dirs_writable += !m["readOnly"].as<bool>(false);
    }
  }
  EXPECT_EQ(plugin_dirs_writable, (dra ? 6u : 2u) + (reset ? 2u : 0u));
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
                                           "overlays/prometheus", std::string(kNfdOverlay),
                                           std::string(kDraOverlay),
                                           std::string(deploy_testing::kNodeConditionOverlay),
                                           std::string(deploy_testing::kResetOverlay)),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n) ch = std::isalnum(ch) ? ch : '_';
                           return n;
                         });

TEST(DeployTest, OperatorOverlayScrapesBothEndpointsAndShipsRulesAndDashboard) {
  ASSERT_TRUE(OnPath("kubectl")) << Missing("kubectl");
  const std::vector<YAML::Node> objects = Render("overlays/prometheus-operator");
  const YAML::Node monitor = Find(objects, "PodMonitor");
  ASSERT_TRUE(monitor);
  // Both through the front's port: the exporter's /metrics and the plugin's, as a job of its own.
  std::set<std::string> ports, paths, jobs;
  for (const YAML::Node& e : monitor["spec"]["podMetricsEndpoints"]) {
    ports.insert(e["port"].as<std::string>());
    paths.insert(e["path"].as<std::string>("/metrics"));
    for (const YAML::Node& r : e["relabelings"]) {
      if (r["targetLabel"].as<std::string>("") == "job") {
        jobs.insert(r["replacement"].as<std::string>());
      }
    }
  }
  EXPECT_EQ(ports, (std::set<std::string>{"metrics"}));
  EXPECT_EQ(paths, (std::set<std::string>{"/metrics", "/plugin/metrics"}));
  EXPECT_EQ(jobs, (std::set<std::string>{"neuron-node-agent-plugin"}));
  EXPECT_TRUE(Find(objects, "PrometheusRule"));
  const YAML::Node dashboard = Find(objects, "ConfigMap");
  ASSERT_TRUE(dashboard);
  EXPECT_EQ(dashboard["metadata"]["labels"]["grafana_dashboard"].as<std::string>(), "1");
}

// The patch networkpolicy.yaml and docs/OPERATIONS.md#network-policy give for another Prometheus
// namespace replaces exactly that value.
TEST(DeployTest, PrometheusNamespaceIsReplacedByTheDocumentedPatch) {
  ASSERT_TRUE(OnPath("kubectl")) << Missing("kubectl");
  std::ifstream in(kDeploy / "base/networkpolicy.yaml");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // The example in the file's comment, uncommented.
  const size_t from = text.find("#   patches:");
  ASSERT_NE(from, std::string::npos);
  std::string example;
  std::istringstream lines(text.substr(from));
  for (std::string line; std::getline(lines, line) && line.rfind("#   ", 0) == 0;) {
    example += line.substr(4) + "\n";
  }
  TempDir dir;
  const fs::path overlay = dir.path() / "overlay";
  fs::create_directories(overlay);
  // kustomize loads bases by relative path.
  testing::WriteFile(
      overlay / "kustomization.yaml",
      "resources:\n  - " + fs::relative(kDeploy / "base", overlay).string() + "\n" + example);
  ToolRun r = RunTool({"kubectl", "kustomize", overlay.string()});
  ASSERT_EQ(r.code, 0) << r.err << "\n" << example;
  const YAML::Node np = Find(YAML::LoadAll(r.out), "NetworkPolicy");
  ASSERT_TRUE(np);
  EXPECT_EQ(np["spec"]["ingress"][0]["from"][0]["namespaceSelector"]["matchLabels"]
              ["kubernetes.io/metadata.name"]
                  .as<std::string>(""),
            "prometheus");
}

// The rule labels a node for a Neuron chip of the catalog (vendor 1d0f and one of its device ids)
// and for nothing else of Amazon's: ENA, EFA and NVMe share the vendor.
TEST(DeployTest, NfdRuleMatchesNeuronDevicesOnly) {
  ASSERT_TRUE(OnPath("kubectl")) << Missing("kubectl");
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
  ASSERT_TRUE(OnPath("promtool")) << Missing("promtool");
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
  ASSERT_TRUE(OnPath("promtool")) << Missing("promtool");
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
