// Fuzz target: the device plugin's Allocate and GetPreferredAllocation handling
// (docs/kubelet-api.md docs/kubelet-api.md#allocate, #get-preferred-allocation), in-process: the
// request protos go through the same calls the gRPC handlers make (NodeState::Commit with
// ValidateAllocate, BuildAllocateResponse, PreferredAllocation), on a simulated trn1.32xlarge (16
// devices, 32 cores, 8 EFAs; big enough for the topology rules, small enough for the smoke run's
// 100,000 inputs under ASan) scanned once at start-up by the plugin's own NodeWatcher. Each input
// starts from that node with nothing allocated.
//
// The input is text, one operation per line (unknown lines are skipped), at most kMaxOps
// operations (two: an operation and one that meets its consequences, e.g. the mask; more would
// not fit the ASan smoke run) and kMaxIds IDs:
//   A <res> [reject] [cdi]: ID... ; ID... ; ...    Allocate, one container request per ';'
//   P <res> <size>: ID... | MUST... ; ...          GetPreferredAllocation
//   H <device>   X <efa#>                          toggle a device's / an EFA's hardware health
// <res> is n (neuron), c (neuroncore), e (efa) or d (neurondevice). IDs are taken verbatim,
// except @K, which names the K-th EFA interface.
//
// An input whose first byte is 0x80 or above is a long sequence instead (Sequence below): up to
// kMaxSequenceOps operations of two bytes each, allocations of devices or cores, frees and device
// health changes, played against an independent model of the node's free units.
//
// Properties: GetPreferredAllocation never fails, changes nothing, and answers by the contract of
// core/model/allocator.h (all valid must_include, only valid candidates, exactly
// max(|must|, min(size, |candidates|)) distinct IDs). Allocate succeeds exactly when an
// independent check of the request says it should, then with one response per container request
// naming the requested devices (and masking them for the overlapping resources); otherwise it
// fails with INVALID_ARGUMENT and leaves the state as it was.
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/model/catalog.h"
#include "core/model/topology.h"
#include "core/model/visible_cores.h"
#include "driver-sim/driver/sim_tree.h"
#include "plugin/allocation.h"
#include "plugin/node_state.h"
#include "plugin/node_watcher.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

using neuron::Resource;
using neuron::plugin::Hardware;
using neuron::plugin::NodeState;
using neuron::plugin::NodeView;
using neuron::plugin::NonContiguousPolicy;
using neuron::plugin::ResourceView;

constexpr size_t kMaxOps = 2;
constexpr size_t kMaxIds = 24;
// Two bytes per operation; long enough to churn the node through many states, short enough that
// the smoke run's mutated inputs still finish in seconds.
constexpr size_t kMaxSequenceOps = 256;

Hardware* g_hardware = nullptr;
// The link graph from the catalog (core/model/catalog.h), not from the plugin's allocator: the
// sequence model's connectivity checks must not share the code they check.
neuron::Topology* g_catalog_links = nullptr;

// The node's hardware picture as the plugin's NodeWatcher publishes it, rebuilt from the view.
Hardware ScanNode() {
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / ("alloc_fuzz." + std::to_string(getpid()));
  fs::create_directories(root);
  neuron::sim::NodeConfig node;
  node.spec = *neuron::FindInstance("trn1.32xlarge");
  node.lnc = 1;
  neuron::sim::SimTree tree{neuron::RootPaths(root), node};
  FUZZ_CHECK(tree.Create().ok());
  NodeState state(std::chrono::seconds(30));
  {
    neuron::plugin::NodeWatcher::Options o;
    o.node.root = root;
    o.node.discovery = neuron::plugin::DiscoveryMode::kDirectory;
    neuron::plugin::NodeWatcher watcher(o, &state);
    FUZZ_CHECK(watcher.Start().ok());
  }
  std::error_code ec;
  fs::remove_all(root, ec);
  const std::shared_ptr<const NodeView> v = state.view();
  Hardware hw;
  for (const auto& [index, d] : v->devices) hw.devices.push_back(d);
  for (const auto& [name, e] : v->efas) hw.efas.push_back(e);
  hw.cores_per_device = v->cores_per_device;
  for (int d = 0; d < static_cast<int>(hw.devices.size()); ++d) {
    hw.links.push_back(v->allocator->topology().Neighbours(d));
  }
  FUZZ_CHECK(hw.devices.size() == 16 && hw.cores_per_device == 2 && hw.efas.size() == 8);
  for (const auto& d : hw.devices) FUZZ_CHECK(d.healthy);
  return hw;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    const size_t end = s.find(sep, start);
    out.push_back(s.substr(start, end == std::string_view::npos ? s.npos : end - start));
    if (end == std::string_view::npos) return out;
    start = end + 1;
  }
}

int Number(std::string_view s, int fallback) {
  int v = fallback;
  std::from_chars(s.data(), s.data() + s.size(), v);
  return v;
}

// IDs separated by spaces or commas; @K is the K-th EFA's name.
std::vector<std::string> Ids(std::string_view s, const Hardware& hw, size_t* budget) {
  std::vector<std::string> out;
  for (std::string_view word : Split(s, ' ')) {
    for (std::string_view id : Split(word, ',')) {
      if (id.empty() || *budget == 0) continue;
      --*budget;
      if (id.size() > 1 && id[0] == '@') {
        const int k = Number(id.substr(1), -1);
        if (k >= 0 && k < static_cast<int>(hw.efas.size())) {
          out.push_back(hw.efas[static_cast<size_t>(k)].name);
          continue;
        }
      }
      out.emplace_back(id);
    }
  }
  return out;
}

// The known IDs among `ids`, as a set (what the allocation layer treats as valid).
std::set<std::string> Known(const ResourceView& rv, const std::vector<std::string>& ids) {
  std::set<std::string> out;
  for (const std::string& id : ids) {
    if (rv.Find(id) != nullptr) out.insert(id);
  }
  return out;
}

void Preferred(const NodeState& state, Resource r, int size, std::string_view body,
               const Hardware& hw, size_t* budget) {
  v1beta1::PreferredAllocationRequest request;
  for (std::string_view container : Split(body, ';')) {
    const size_t bar = container.find('|');
    auto* c = request.add_container_requests();
    for (std::string& id : Ids(container.substr(0, bar), hw, budget)) {
      c->add_available_deviceids(std::move(id));
    }
    if (bar != std::string_view::npos) {
      for (std::string& id : Ids(container.substr(bar + 1), hw, budget)) {
        c->add_must_include_deviceids(std::move(id));
      }
    }
    c->set_allocation_size(size);
  }
  const std::shared_ptr<const NodeView> before = state.view();
  const v1beta1::PreferredAllocationResponse response =
      neuron::plugin::PreferredAllocation(*before, r, request);
  FUZZ_CHECK(state.view() == before);
  FUZZ_CHECK(response.container_responses_size() == request.container_requests_size());
  const ResourceView& rv = before->Get(r);
  for (int i = 0; i < request.container_requests_size(); ++i) {
    const auto& req = request.container_requests(i);
    const std::set<std::string> must =
        Known(rv, {req.must_include_deviceids().begin(), req.must_include_deviceids().end()});
    std::set<std::string> candidates =
        Known(rv, {req.available_deviceids().begin(), req.available_deviceids().end()});
    candidates.insert(must.begin(), must.end());
    const auto& answer = response.container_responses(i).deviceids();
    const std::set<std::string> got(answer.begin(), answer.end());
    FUZZ_CHECK(got.size() == static_cast<size_t>(answer.size()));  // distinct
    for (const std::string& id : must) FUZZ_CHECK(got.count(id) == 1);
    for (const std::string& id : got) FUZZ_CHECK(candidates.count(id) == 1);
    const size_t want =
        std::max(must.size(), std::min(static_cast<size_t>(std::max(0, size)), candidates.size()));
    FUZZ_CHECK(got.size() == want);
  }
}

// What Allocate must decide, worked out independently of plugin/allocation.cc.
bool ShouldSucceed(const NodeView& view, Resource r, const v1beta1::AllocateRequest& request,
                   NonContiguousPolicy policy) {
  if (request.container_requests_size() == 0) return false;
  const ResourceView& rv = view.Get(r);
  std::set<std::string> seen;
  for (const auto& c : request.container_requests()) {
    if (c.devices_ids().empty()) return false;
    std::vector<int> indices;
    for (const std::string& id : c.devices_ids()) {
      const neuron::plugin::ResourceDevice* d = rv.Find(id);
      if (d == nullptr || !d->hw_healthy || d->masked || !seen.insert(id).second) return false;
      if (r == Resource::kEfa) {
        const auto it = view.efas.find(id);
        if (it == view.efas.end() || !it->second.uverbs) return false;
      } else {
        indices.push_back(Number(id, -1));
      }
    }
    if (r != Resource::kEfa && policy == NonContiguousPolicy::kReject) {
      std::sort(indices.begin(), indices.end());
      for (size_t k = 1; k < indices.size(); ++k) {
        if (indices[k] != indices[k - 1] + 1) return false;
      }
    }
  }
  return true;
}

void Allocate(NodeState& state, Resource r, NonContiguousPolicy policy, bool cdi,
              std::string_view body, const Hardware& hw, size_t* budget) {
  v1beta1::AllocateRequest request;
  if (!Trim(body).empty()) {
    for (std::string_view container : Split(body, ';')) {
      auto* c = request.add_container_requests();
      for (std::string& id : Ids(container, hw, budget)) c->add_devices_ids(std::move(id));
    }
  }
  const std::shared_ptr<const NodeView> before = state.view();
  const size_t pending = state.pending_allocations();
  const bool expected = ShouldSucceed(*before, r, request, policy);

  // What ResourceServer's Allocate handler does.
  std::vector<neuron::plugin::ContainerPlan> plans;
  absl::StatusOr<std::shared_ptr<const NodeView>> view =
      state.Commit(r, [&](const NodeView& v) -> absl::StatusOr<std::vector<std::string>> {
        auto p = neuron::plugin::ValidateAllocate(v, r, request, policy);
        if (!p.ok()) return p.status();
        plans = *std::move(p);
        std::vector<std::string> ids;
        for (const auto& plan : plans) ids.insert(ids.end(), plan.ids.begin(), plan.ids.end());
        return ids;
      });
  FUZZ_CHECK(view.ok() == expected);
  if (!view.ok()) {
    FUZZ_CHECK(view.status().code() == absl::StatusCode::kInvalidArgument);
    FUZZ_CHECK(!view.status().message().empty());
    FUZZ_CHECK(state.view() == before);  // nothing recorded, nothing published
    FUZZ_CHECK(state.pending_allocations() == pending);
    return;
  }
  FUZZ_CHECK(*view == before);
  const v1beta1::AllocateResponse response =
      neuron::plugin::BuildAllocateResponse(**view, r, plans, cdi);
  FUZZ_CHECK(response.container_responses_size() == request.container_requests_size());
  const int cpd = before->cores_per_device;
  const std::shared_ptr<const NodeView> after = state.view();
  for (int i = 0; i < request.container_requests_size(); ++i) {
    const auto& ids = request.container_requests(i).devices_ids();
    const auto& out = response.container_responses(i);
    std::set<std::string> paths;
    for (const auto& spec : out.devices()) {
      FUZZ_CHECK(spec.host_path() == spec.container_path() && spec.permissions() == "rw");
      paths.insert(spec.host_path());
    }
    FUZZ_CHECK(out.cdi_devices_size() == (cdi ? out.devices_size() : 0));
    if (r == Resource::kEfa) {
      FUZZ_CHECK(paths.size() == static_cast<size_t>(ids.size()));
      for (const std::string& id : ids) {
        FUZZ_CHECK(paths.count("/dev/infiniband/uverbs" +
                               std::to_string(*before->efas.at(id).uverbs)) == 1);
      }
      continue;
    }
    std::set<int> devices, cores;
    for (const std::string& id : ids) {
      const int n = Number(id, -1);
      if (r == Resource::kNeuronCore) {
        cores.insert(n);
        devices.insert(n / cpd);
      } else {
        devices.insert(n);
        for (int k = 0; k < cpd; ++k) cores.insert(n * cpd + k);
      }
    }
    FUZZ_CHECK(paths.size() == devices.size());
    for (int d : devices) FUZZ_CHECK(paths.count("/dev/neuron" + std::to_string(d)) == 1);
    const auto env = out.envs().find("NEURON_RT_VISIBLE_CORES");
    FUZZ_CHECK(env != out.envs().end());
    const absl::StatusOr<std::vector<int>> listed = neuron::ParseCoreList(env->second);
    FUZZ_CHECK(listed.ok() && std::set<int>(listed->begin(), listed->end()) == cores);
    // Double-booking mask: the other whole-device or core resource now sees them held.
    for (int d : devices) {
      if (r == Resource::kNeuronCore) {
        FUZZ_CHECK(after->Get(Resource::kNeuron).Find(std::to_string(d))->masked);
      } else {
        const Resource other = r == Resource::kNeuron ? Resource::kNeuronDevice : Resource::kNeuron;
        FUZZ_CHECK(after->Get(other).Find(std::to_string(d))->masked);
        for (int k = 0; k < cpd; ++k) {
          FUZZ_CHECK(after->Get(Resource::kNeuronCore).Find(std::to_string(d * cpd + k))->masked);
        }
      }
    }
  }
}

// --- Long sequences against a model of the allocator's contract (core/model/allocator.h).
//
// The model owns the node's occupancy, as the kubelet and the plugin's double-booking mask see it
// (docs/architecture.md#health): a device request may take devices that are healthy, not held
// whole and with no core in use; a core request may take cores of healthy devices not held whole.
// Each allocation asks the plugin's GetPreferredAllocation (on the NodeView the NodeState
// publishes after each health change) with every such unit, and checks the answer. The model, not
// NodeState::Commit, records what is taken: ending a holding in the plugin needs a PodResources
// answer after the grace period, too slow for hundreds of frees per input; the text mode above
// checks Allocate and its masks. The checks:
//   - the answer holds only offered units, each once, and min(size, offered) of them;
//   - the request is satisfied (recorded) exactly when enough free healthy units exist, and no
//     unit is then handed out twice;
//   - it is contiguous whenever a contiguous free window exists, connected on the NeuronLink
//     graph whenever a contiguous connected window exists, and otherwise of the smallest span
//     there is (brute force over windows here, independent of the allocator's search).
class SequenceModel {
 public:
  explicit SequenceModel(int per)
      : per_(per),
        healthy_(16, 1),
        owner_(static_cast<size_t>(16) * static_cast<size_t>(per), -1) {}

  // Units a request of that kind may draw from.
  std::vector<int> Offered(bool cores) const {
    std::vector<int> out;
    for (int u = 0; u < (cores ? 16 * per_ : 16); ++u) {
      const int d = cores ? u / per_ : u;
      if (!healthy_[d] || HeldWhole(d)) continue;
      if (cores ? owner_[u] == -1 : CoresFree(d)) out.push_back(u);
    }
    return out;
  }

  void Take(bool cores, const std::vector<int>& units) {
    const int id = next_id_++;
    for (int u : units) {
      for (int c : CoresOf(cores, u)) {
        FUZZ_CHECK(owner_[c] == -1);  // never handed out twice
        owner_[c] = id;
      }
      if (!cores) whole_.insert(u);
    }
    live_.push_back({id, cores, units});
  }

  void Free(size_t pick) {
    if (live_.empty()) return;
    const Live l = live_[pick % live_.size()];
    for (int u : l.units) {
      for (int c : CoresOf(l.cores, u)) {
        FUZZ_CHECK(owner_[c] == l.id);
        owner_[c] = -1;
      }
      if (!l.cores) whole_.erase(u);
    }
    live_.erase(live_.begin() + static_cast<std::ptrdiff_t>(pick % live_.size()));
  }

  bool ToggleHealth(int d) { return healthy_[d] ^= 1; }
  int per() const { return per_; }

 private:
  struct Live {
    int id;
    bool cores;
    std::vector<int> units;
  };
  std::vector<int> CoresOf(bool cores, int u) const {
    if (cores) return {u};
    std::vector<int> out(static_cast<size_t>(per_));
    for (int k = 0; k < per_; ++k) out[static_cast<size_t>(k)] = u * per_ + k;
    return out;
  }
  bool HeldWhole(int d) const { return whole_.count(d) == 1; }
  bool CoresFree(int d) const {
    for (int k = 0; k < per_; ++k) {
      if (owner_[d * per_ + k] != -1) return false;
    }
    return true;
  }

  int per_;
  std::vector<char> healthy_;
  std::vector<int> owner_;  // by global core: the live allocation holding it, or -1
  std::set<int> whole_;     // devices held whole
  std::vector<Live> live_;
  int next_id_ = 0;
};

std::vector<int> DevicesOfUnits(const std::vector<int>& units, int upd) {
  std::set<int> d;
  for (int u : units) d.insert(u / upd);
  return {d.begin(), d.end()};
}

// Over free windows [lo, lo + k) of `free`: does one exist, and does a connected one?
std::pair<bool, bool> FreeWindows(const std::vector<char>& free, int k, int upd) {
  bool any = false;
  const int n = static_cast<int>(free.size());
  for (int lo = 0; lo + k <= n; ++lo) {
    bool all = true;
    for (int u = lo; u < lo + k && all; ++u) all = free[u] != 0;
    if (!all) continue;
    any = true;
    std::vector<int> w;
    for (int u = lo; u < lo + k; ++u) w.push_back(u);
    if (g_catalog_links->IsConnected(DevicesOfUnits(w, upd))) return {true, true};
  }
  return {any, false};
}

// The smallest max - min over k free units.
int SmallestSpan(const std::vector<int>& offered, int k) {
  const size_t n = static_cast<size_t>(k);
  int best = INT_MAX;
  for (size_t i = 0; i + n <= offered.size(); ++i) {
    best = std::min(best, offered[i + n - 1] - offered[i]);
  }
  return best;
}

void SequenceAllocate(const NodeState& state, SequenceModel& model, bool cores, int size) {
  const std::vector<int> offered = model.Offered(cores);
  v1beta1::PreferredAllocationRequest request;
  auto* c = request.add_container_requests();
  for (int u : offered) c->add_available_deviceids(std::to_string(u));
  c->set_allocation_size(size);
  const Resource r = cores ? Resource::kNeuronCore : Resource::kNeuron;
  const auto response = neuron::plugin::PreferredAllocation(*state.view(), r, request);
  FUZZ_CHECK(response.container_responses_size() == 1);
  std::vector<int> got;
  for (const std::string& id : response.container_responses(0).deviceids()) {
    got.push_back(Number(id, -1));
  }
  std::sort(got.begin(), got.end());
  FUZZ_CHECK(std::adjacent_find(got.begin(), got.end()) == got.end());
  for (int u : got) FUZZ_CHECK(std::binary_search(offered.begin(), offered.end(), u));
  const int k = std::min(size, static_cast<int>(offered.size()));
  FUZZ_CHECK(static_cast<int>(got.size()) == k);
  // Too few free healthy units: the kubelet cannot admit the pod, so nothing is taken.
  if (k < size || k == 0) return;
  const int upd = cores ? model.per() : 1;
  std::vector<char> free(static_cast<size_t>(16 * upd), 0);
  for (int u : offered) free[u] = 1;
  const auto [contiguous, connected] = FreeWindows(free, k, upd);
  if (contiguous) {
    FUZZ_CHECK(got.back() - got.front() == k - 1);
    if (connected) FUZZ_CHECK(g_catalog_links->IsConnected(DevicesOfUnits(got, upd)));
  } else {
    FUZZ_CHECK(got.back() - got.front() == SmallestSpan(offered, k));
  }
  model.Take(cores, got);
}

// Each operation is two bytes (op, arg): op % 8 is 0-2 a device request of 1 + arg % 16
// devices, 3-5 a core request of 1 + arg % 32 cores, 6 the end of live allocation arg, 7 a health
// flip of device arg % 16.
void Sequence(NodeState& state, Hardware hw, const uint8_t* data, size_t size) {
  SequenceModel model(hw.cores_per_device);
  const size_t ops = std::min(size / 2, kMaxSequenceOps);
  for (size_t i = 0; i < ops; ++i) {
    const int op = data[2 * i] % 8, arg = data[2 * i + 1];
    if (op < 6) {
      const bool cores = op >= 3;
      SequenceAllocate(state, model, cores, cores ? 1 + arg % 32 : 1 + arg % 16);
    } else if (op == 6) {
      model.Free(static_cast<size_t>(arg));
    } else {
      const int d = arg % 16;
      const bool healthy = model.ToggleHealth(d);
      hw.devices[static_cast<size_t>(d)].healthy = healthy;
      state.SetHardware(hw);
      // The published view agrees with the model on the device's hardware health.
      FUZZ_CHECK(state.view()->Get(Resource::kNeuron).Find(std::to_string(d))->hw_healthy ==
                 healthy);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_hardware = new Hardware(ScanNode());
  const neuron::InstanceSpec& spec = **neuron::FindInstance("trn1.32xlarge");
  std::vector<std::vector<int>> links(static_cast<size_t>(spec.devices));
  for (int d = 0; d < spec.devices; ++d) {
    links[static_cast<size_t>(d)] = neuron::ConnectedDevices(spec, d);
  }
  g_catalog_links = new neuron::Topology(links);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  // One NodeState for all inputs (building one per input costs more than most inputs), brought
  // back to the scanned node before each: healthy hardware, no holdings (a PodResources answer
  // showing nothing, taken after the grace period, ends every Allocate holding).
  static NodeState& state = *new NodeState(std::chrono::seconds(30));
  Hardware hw = *g_hardware;
  state.SetHardware(hw);
  if (state.pending_allocations() > 0) {
    state.SetPodAssignments(neuron::PodAssignments(),
                            std::chrono::steady_clock::now() + std::chrono::hours(1));
  }
  FUZZ_CHECK(state.pending_allocations() == 0);
  if (size > 0 && data[0] >= 0x80) {
    Sequence(state, hw, data + 1, size - 1);
    return 0;
  }
  size_t ops = 0, budget = kMaxIds;
  for (std::string_view line : Split(text, '\n')) {
    if (ops >= kMaxOps || budget == 0) break;
    line = Trim(line);
    if (line.size() < 2) continue;
    const char op = line[0];
    if (op == 'H' || op == 'X') {
      const int k = Number(Trim(line.substr(1)), -1);
      if (op == 'H' && k >= 0 && k < static_cast<int>(hw.devices.size())) {
        hw.devices[static_cast<size_t>(k)].healthy ^= true;
      } else if (op == 'X' && k >= 0 && k < static_cast<int>(hw.efas.size())) {
        hw.efas[static_cast<size_t>(k)].healthy ^= true;
      } else {
        continue;
      }
      ++ops;
      state.SetHardware(hw);
      continue;
    }
    if (op != 'A' && op != 'P') continue;
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const std::vector<std::string_view> head = Split(Trim(line.substr(1, colon - 1)), ' ');
    static const std::map<std::string_view, Resource> kRes{{"n", Resource::kNeuron},
                                                           {"c", Resource::kNeuronCore},
                                                           {"e", Resource::kEfa},
                                                           {"d", Resource::kNeuronDevice}};
    const auto res = kRes.find(head[0]);
    if (res == kRes.end()) continue;
    ++ops;
    const std::string_view body = line.substr(colon + 1);
    if (op == 'P') {
      Preferred(state, res->second, head.size() > 1 ? Number(head[1], 1) : 1, body, hw, &budget);
    } else {
      const bool reject = std::find(head.begin(), head.end(), "reject") != head.end();
      const bool cdi = std::find(head.begin(), head.end(), "cdi") != head.end();
      Allocate(state, res->second,
               reject ? NonContiguousPolicy::kReject : NonContiguousPolicy::kWarn, cdi, body, hw,
               &budget);
    }
  }
  return 0;
}
