#include "driver-sim/cluster/cluster.h"

#include <fmt/format.h>

#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <system_error>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/hash.h"
#include "driver-sim/driver/sim_tree.h"

namespace neuron::sim {
namespace {

using json = nlohmann::json;

// The files below a node's directories that are Unix sockets, as the daemon, the kubelet
// emulator and the device plugin create them (driver-sim/README.md#cluster, "Path lengths").
constexpr const char* kRootSockets[] = {"run/neuron/driver.sock", "run/neuron/ctl.sock"};
constexpr const char* kKubeletSockets[] = {"device-plugins/kubelet.sock",
                                           "pod-resources/kubelet.sock", "neuron-sim-kubelet.sock"};
// The device plugin's sockets are device-plugins/<resource>-<instance id>.sock
// (plugin/README.md#behaviour); "neurondevice" is its longest resource name.
constexpr const char* kLongestPluginResource = "neurondevice";

bool IsDnsLabelChar(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'; }

absl::Status CheckPrefix(const std::string& prefix) {
  // The node name is a Kubernetes node name: a DNS label, 63 characters at most with "-NNN".
  bool ok = !prefix.empty() && prefix.size() <= 59 && prefix.front() >= 'a' &&
            prefix.front() <= 'z' && prefix.back() != '-';
  for (const char c : prefix) ok = ok && IsDnsLabelChar(c);
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(
      fmt::format("--name-prefix '{}': must be a DNS label (lowercase letters, digits and '-', "
                  "starting with a letter, at most 59 characters)",
                  prefix));
}

absl::StatusOr<std::string> StringField(const json& node, const char* key, size_t index,
                                        const fs::path& file, bool required) {
  const auto it = node.find(key);
  if (it == node.end() && !required) return std::string();
  if (it == node.end() || !it->is_string()) {
    return absl::InvalidArgumentError(fmt::format("{}: nodes[{}].{} is {}", file.string(), index,
                                                  key,
                                                  it == node.end() ? "missing" : "not a string"));
  }
  return it->get<std::string>();
}

absl::StatusOr<ClusterNode> ParseNode(const json& j, size_t index, const fs::path& file) {
  if (!j.is_object()) {
    return absl::InvalidArgumentError(
        fmt::format("{}: nodes[{}] is not an object", file.string(), index));
  }
  ClusterNode node;
  std::string root;
  std::string kubelet_dir;
  struct Field {
    const char* key;
    std::string* out;
    bool required;
  };
  for (const Field& f :
       {Field{"name", &node.name, true}, Field{"root", &root, true},
        Field{"kubelet_dir", &kubelet_dir, true}, Field{"address", &node.address, true},
        Field{"instance_id", &node.instance_id, false}, Field{"instance", &node.instance, false}}) {
    absl::StatusOr<std::string> v = StringField(j, f.key, index, file, f.required);
    if (!v.ok()) return v.status();
    *f.out = *std::move(v);
  }
  node.root = root;
  node.kubelet_dir = kubelet_dir;
  if (node.name.empty() || !node.root.is_absolute() || !node.kubelet_dir.is_absolute()) {
    return absl::InvalidArgumentError(fmt::format(
        "{}: nodes[{}] needs a name and absolute root and kubelet_dir", file.string(), index));
  }
  return node;
}

}  // namespace

absl::StatusOr<ClusterSpec> ReadClusterSpec(const fs::path& dir) {
  const fs::path file = ClusterFiles(dir).Json();
  std::ifstream in(file);
  if (!in) {
    return absl::NotFoundError(
        fmt::format("{}: no cluster.json (is a cluster up there? `neuron-sim cluster up --dir {}`)",
                    file.string(), dir.string()));
  }
  std::stringstream text;
  text << in.rdbuf();
  const json j = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("nodes") || !j["nodes"].is_array()) {
    return absl::InvalidArgumentError(
        fmt::format("{}: not a JSON object with a \"nodes\" array", file.string()));
  }
  ClusterSpec spec;
  for (size_t i = 0; i < j["nodes"].size(); ++i) {
    absl::StatusOr<ClusterNode> node = ParseNode(j["nodes"][i], i, file);
    if (!node.ok()) return node.status();
    spec.nodes.push_back(*std::move(node));
  }
  return spec;
}

absl::Status WriteClusterSpec(const fs::path& dir, const ClusterSpec& spec) {
  json nodes = json::array();
  for (const ClusterNode& n : spec.nodes) {
    nodes.push_back({{"name", n.name},
                     {"root", n.root.string()},
                     {"kubelet_dir", n.kubelet_dir.string()},
                     {"address", n.address},
                     {"instance", n.instance},
                     {"instance_id", n.instance_id}});
  }
  const json j = {{"nodes", std::move(nodes)}};
  return WriteFileAtomic(ClusterFiles(dir).Json(), j.dump(2) + "\n", 0644);
}

fs::path LongestSocketPath(const ClusterNode& node) {
  std::vector<fs::path> paths;
  for (const char* s : kRootSockets) paths.push_back(node.root / s);
  for (const char* s : kKubeletSockets) paths.push_back(node.kubelet_dir / s);
  paths.push_back(node.kubelet_dir / "device-plugins" /
                  absl::StrCat(kLongestPluginResource, "-", node.instance_id, ".sock"));
  fs::path longest;
  for (const fs::path& p : paths) {
    if (p.string().size() > longest.string().size()) longest = p;
  }
  return longest;
}

void RemoveNodeSockets(const ClusterNode& node) {
  std::vector<fs::path> paths;
  for (const char* s : kRootSockets) paths.push_back(node.root / s);
  for (const char* s : kKubeletSockets) paths.push_back(node.kubelet_dir / s);
  std::error_code ec;
  const std::string plugin_suffix = absl::StrCat("-", node.instance_id, ".sock");
  for (auto it = fs::directory_iterator(node.kubelet_dir / "device-plugins", ec);
       !ec && it != fs::directory_iterator(); it.increment(ec)) {
    if (it->path().filename().string().ends_with(plugin_suffix)) paths.push_back(it->path());
  }
  for (const fs::path& p : paths) {
    // Sockets only: a file of another kind at one of these names is not ours to remove.
    if (fs::is_socket(fs::symlink_status(p, ec))) fs::remove(p, ec);
  }
}

std::string ClusterInstanceId(const std::string& name) {
  // "i-" and 17 hex digits, as EC2's; the first digit 0 as in most real ids.
  // FNV-1a alone leaves names that differ in one character with ids that differ in a few digits;
  // the splitmix64 finalizer spreads the difference over all of them.
  uint64_t h = Fnv1a64(name);
  h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ULL;
  h = (h ^ (h >> 27)) * 0x94d049bb133111ebULL;
  return fmt::format("i-0{:016x}", h ^ (h >> 31));
}

absl::StatusOr<ClusterSpec> PlanCluster(const fs::path& dir, int count, const std::string& instance,
                                        const std::string& name_prefix) {
  if (!dir.is_absolute()) {
    return absl::InvalidArgumentError(fmt::format("--dir {}: must be absolute", dir.string()));
  }
  // 127.0.1.<i> for i in 1..254: one octet, without the network and broadcast values.
  if (count < 1 || count > 254) {
    return absl::InvalidArgumentError(fmt::format("--nodes {}: must be 1 to 254", count));
  }
  if (absl::Status s = CheckPrefix(name_prefix); !s.ok()) return s;
  ClusterSpec spec;
  const ClusterFiles files(dir.lexically_normal());
  for (int i = 1; i <= count; ++i) {
    ClusterNode node;
    node.name = absl::StrCat(name_prefix, "-", i);
    node.root = files.NodeDir(node.name) / "root";
    node.kubelet_dir = files.NodeDir(node.name) / "kubelet";
    node.address = absl::StrCat("127.0.1.", i);
    node.instance = instance;
    node.instance_id = ClusterInstanceId(node.name);
    spec.nodes.push_back(std::move(node));
  }
  // The last node has the longest name, so the longest paths.
  const fs::path longest = LongestSocketPath(spec.nodes.back());
  if (longest.string().size() > kMaxSocketPathLength) {
    return absl::InvalidArgumentError(fmt::format(
        "--dir {}: too long: the socket path {} would be {} bytes and Unix sockets allow {}; "
        "use a directory at least {} bytes shorter",
        dir.string(), longest.string(), longest.string().size(), kMaxSocketPathLength,
        longest.string().size() - kMaxSocketPathLength));
  }
  return spec;
}

}  // namespace neuron::sim
