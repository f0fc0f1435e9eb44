#include "driver-sim/runtime/node_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <string>

#include "driver-sim/driver/sim_paths.h"

namespace neuron::nrt {
namespace {

// Per physical core, docs/hardware.md#peak-compute, #core-parameters and #roofline (VectorE,
// ScalarE FP32 rates).
struct EngineRates {
  double vector;
  double scalar;
  int link_ports;
};
EngineRates RatesOf(Chip chip) {
  switch (chip) {
    case Chip::kTrainium:
      return {2.3e12, 2.9e12, 4};
    case Chip::kInferentia2:
      return {2.3e12, 2.9e12, 2};
    case Chip::kTrainium2:
      return {1.0e12, 1.2e12, 4};
  }
  return {2.3e12, 2.9e12, 4};
}

std::string BusOf(const std::string& bdf) { return bdf.substr(0, bdf.rfind(':')); }

}  // namespace

NodeModel::NodeModel(RootPaths root, NodeInfo info, const InstanceSpec* spec, int lnc)
    : root_(std::move(root)),
      info_(std::move(info)),
      spec_(spec),
      lnc_(lnc),
      cores_per_device_(LogicalCoresPerDevice(*spec, lnc)) {
  std::vector<std::vector<int>> neighbours;
  for (int d = 0; d < spec->devices; ++d) neighbours.push_back(ConnectedDevices(*spec, d));
  topology_ = Topology(neighbours);
}

absl::StatusOr<NodeModel> NodeModel::Load(const RootPaths& root) {
  absl::StatusOr<NodeInfo> info = ReadNodeInfo(root);
  if (!info.ok()) {
    if (absl::IsNotFound(info.status())) {
      return absl::NotFoundError(
          fmt::format("no simulated Neuron node at NEURON_ROOT={} ({} is missing); start one with "
                      "neuron-sim up --root DIR",
                      root.root().string(), sim::NodeJsonPath(root).string()));
    }
    return info.status();
  }
  absl::StatusOr<const InstanceSpec*> spec = FindInstance(info->instance_type);
  if (!spec.ok()) return spec.status();
  absl::StatusOr<int> lnc = ResolveLnc(**spec, info->lnc);
  if (!lnc.ok()) return lnc.status();
  return NodeModel(root, *info, *spec, *lnc);
}

CoreLocation NodeModel::Locate(int global_core) const {
  return {global_core, global_core / cores_per_device_, global_core % cores_per_device_};
}

CorePerf NodeModel::Perf() const {
  const ChipSpec& c = *spec_->chip;
  const EngineRates r = RatesOf(c.chip);
  const double k = lnc_;
  CorePerf p;
  p.p_bf16 = c.peak_bf16_flops * k;
  p.p_fp8 = c.peak_fp8_flops * k;
  p.p_fp32 = c.peak_fp32_flops * k;
  // INT8: 190 TOPS per NC-v2 core (2 x BF16, docs/hardware.md#peak-compute); unpublished on NC-v3:
  // FP8's rate.
  p.p_int8 = c.chip == Chip::kTrainium2 ? p.p_fp8 : 2 * p.p_bf16;
  p.p_vector = r.vector * k;
  p.p_scalar = r.scalar * k;
  p.mem_bw = c.core_mem_bytes_per_s * k;
  return p;
}

uint64_t NodeModel::CoreHbmBytes() const {
  const ChipSpec& c = *spec_->chip;
  return c.hbm_bytes / static_cast<uint64_t>(c.physical_cores) * static_cast<uint64_t>(lnc_);
}

double NodeModel::LinkBytesPerS() const {
  return spec_->neuronlink_bytes_per_s / RatesOf(spec_->chip->chip).link_ports;
}

double NodeModel::EfaShareBytesPerS() const {
  const double gbps = spec_->efa_count > 0 ? double(spec_->efa_count) * spec_->efa_gbps : 25.0;
  return gbps * 1e9 / 8 / total_cores();
}

std::vector<int> NodeModel::Route(int a, int b) const {
  if (a == b) return {a};
  const int n = spec_->devices;
  if (a < 0 || b < 0 || a >= n || b >= n) return {};
  std::vector<int> prev(static_cast<size_t>(n), -1);
  std::deque<int> queue{a};
  prev[static_cast<size_t>(a)] = a;
  while (!queue.empty()) {
    const int d = queue.front();
    queue.pop_front();
    if (d == b) break;
    for (int nb : topology_.Neighbours(d)) {
      if (prev[static_cast<size_t>(nb)] != -1) continue;
      prev[static_cast<size_t>(nb)] = d;
      queue.push_back(nb);
    }
  }
  if (prev[static_cast<size_t>(b)] == -1) return {};
  std::vector<int> path{b};
  while (path.back() != a) path.push_back(prev[static_cast<size_t>(path.back())]);
  std::reverse(path.begin(), path.end());
  return path;
}

int NodeModel::NearestEfa(int device) const {
  if (spec_->efas.empty() || device < 0 || device >= spec_->devices) return -1;
  const auto& place = spec_->placement;
  if (static_cast<size_t>(device) >= place.size()) return 0;
  // Same PCI bus: the bus's devices in BDF order share its EFAs in order.
  const std::string bus = BusOf(place[static_cast<size_t>(device)].bdf);
  std::vector<std::string> dev_bdfs;
  for (const DevicePlacement& p : place) {
    if (BusOf(p.bdf) == bus) dev_bdfs.push_back(p.bdf);
  }
  std::vector<int> efas;
  for (size_t i = 0; i < spec_->efas.size(); ++i) {
    if (BusOf(spec_->efas[i].bdf) == bus) efas.push_back(static_cast<int>(i));
  }
  if (!efas.empty()) {
    std::sort(dev_bdfs.begin(), dev_bdfs.end());
    const auto rank =
        std::find(dev_bdfs.begin(), dev_bdfs.end(), place[static_cast<size_t>(device)].bdf) -
        dev_bdfs.begin();
    return efas[static_cast<size_t>(rank) * efas.size() / dev_bdfs.size()];
  }
  // Same NUMA node: the node's devices in index order share its EFAs in catalog order.
  const int numa = place[static_cast<size_t>(device)].numa_node;
  std::vector<int> devs;
  for (size_t d = 0; d < place.size(); ++d) {
    if (place[d].numa_node == numa) devs.push_back(static_cast<int>(d));
  }
  for (size_t i = 0; i < spec_->efas.size(); ++i) {
    if (spec_->efas[i].numa_node == numa) efas.push_back(static_cast<int>(i));
  }
  if (efas.empty()) return 0;
  const auto rank = std::find(devs.begin(), devs.end(), device) - devs.begin();
  return efas[static_cast<size_t>(rank) * efas.size() / devs.size()];
}

}  // namespace neuron::nrt
