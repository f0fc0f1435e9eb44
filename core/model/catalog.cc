#include "core/model/catalog.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cstdio>

namespace neuron {
namespace {

constexpr uint64_t kGiB = 1ull << 30;
constexpr double kGiBf = 1024.0 * 1024.0 * 1024.0;

// docs/hardware.md#instance-catalog to #core-parameters and #roofline. NC-v2 peak is the clock x
// array figure (91.75), FP32 a quarter.
constexpr ChipSpec kTrainium{
    Chip::kTrainium, 0x7164,   "NDv2",   "Trn1",  "Trainium1", "NCv2", 2,       32 * kGiB,
    820 * kGiBf,     91.75e12, 91.75e12, 22.9e12, 410 * kGiBf, 190e12, 47.5e12, true};
constexpr ChipSpec kInferentia2{
    Chip::kInferentia2, 0x7264,   "NDv3",   "Inf2",  "Inferentia2", "NCv2", 2,       32 * kGiB,
    820 * kGiBf,        91.75e12, 91.75e12, 22.9e12, 410 * kGiBf,   190e12, 47.5e12, true};
constexpr ChipSpec kTrainium2{
    Chip::kTrainium2, 0x7364, "NDv3", "Trn2", "Trainium2", "NCv3", 8,      96 * kGiB,
    2.9e12,           79e12,  158e12, 20e12,  362.5e9,     667e12, 181e12, true};

std::string Bdf(int bus, int slot) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0000:%02x:%02x.0", bus, slot);
  return buf;
}

// rdma-core's NAME_FALLBACK rename for domain 0, function 0 (docs/driver-interface.md#efa).
EfaPlacement Efa(int bus, int slot, int numa) {
  return {Bdf(bus, slot), fmt::format("rdmap{}s{}", bus, slot), numa};
}

// trn1.32xlarge: docs/hardware.md#neuronlink-topology (BDF, CPUs, NUMA per device) and
// docs/hardware.md#pcie-layout (EFA on 19.0/1a.0).
std::vector<DevicePlacement> Trn1Placement() {
  // clang-format off
  constexpr std::array<std::array<int, 2>, 16> kBusSlot{{{0x10, 0x1c}, {0x10, 0x1d}, {0xa0, 0x1c},
                                                         {0xa0, 0x1d}, {0x20, 0x1b}, {0x20, 0x1c},
                                                         {0x90, 0x1b}, {0x90, 0x1c}, {0x20, 0x1d},
                                                         {0x20, 0x1e}, {0x90, 0x1d}, {0x90, 0x1e},
                                                         {0x10, 0x1e}, {0x10, 0x1b}, {0xa0, 0x1e},
                                                         {0xa0, 0x1b}}};
  // clang-format on
  std::vector<DevicePlacement> out;
  for (const auto& [bus, slot] : kBusSlot) {
    const bool node1 = bus >= 0x90;
    out.push_back({Bdf(bus, slot), node1 ? 1 : 0, node1 ? "32-63,96-127" : "0-31,64-95"});
  }
  return out;
}

std::vector<EfaPlacement> Trn1Efas(const std::vector<int>& slots) {
  std::vector<EfaPlacement> out;
  for (int bus : {0x10, 0x20, 0x90, 0xa0}) {
    for (int slot : slots) out.push_back(Efa(bus, slot, bus >= 0x90 ? 1 : 0));
  }
  return out;
}

// trn2.48xlarge: docs/hardware.md#neuronlink-topology. All chips are function 00.0 of their own
// bus.
constexpr std::array<int, 16> kTrn2Bus{0xcc, 0xb5, 0xb6, 0xcb, 0x6f, 0x58, 0x59, 0x6e,
                                       0x9b, 0x84, 0x85, 0x9a, 0xf8, 0xe1, 0xe2, 0xf7};

std::vector<DevicePlacement> Trn2Placement() {
  std::vector<DevicePlacement> out;
  for (int d = 0; d < 16; ++d) {
    const bool node1 = d < 4 || d >= 12;
    out.push_back({Bdf(kTrn2Bus[d], 0), node1 ? 1 : 0, node1 ? "48-95,144-191" : "0-47,96-143"});
  }
  return out;
}

// trn2 EFA BDFs are unpublished (docs/hardware.md#unverified-figures): one EFA per chip, derived as
// the chip's bus minus 0x10, which collides with no chip bus, on the chip's NUMA node.
std::vector<EfaPlacement> Trn2Efas() {
  std::vector<EfaPlacement> out;
  for (int d = 0; d < 16; ++d)
    out.push_back(Efa(kTrn2Bus[d] - 0x10, 0, (d < 4 || d >= 12) ? 1 : 0));
  return out;
}

// inf2.48xlarge: docs/hardware.md#neuronlink-topology.
std::vector<DevicePlacement> Inf2_48Placement() {
  struct Row {
    int bus, slot, numa;
  };
  constexpr std::array<Row, 12> kRows{{{0x80, 0x1e, 2},
                                       {0x90, 0x1e, 3},
                                       {0x80, 0x1d, 2},
                                       {0x90, 0x1f, 3},
                                       {0x80, 0x1f, 2},
                                       {0x90, 0x1d, 3},
                                       {0x20, 0x1e, 1},
                                       {0x20, 0x1f, 1},
                                       {0x10, 0x1e, 0},
                                       {0x10, 0x1f, 0},
                                       {0x10, 0x1d, 0},
                                       {0x20, 0x1d, 1}}};
  constexpr std::array<const char*, 4> kCpus{"0-23,96-119", "24-47,120-143", "48-71,144-167",
                                             "72-95,168-191"};
  std::vector<DevicePlacement> out;
  for (const Row& r : kRows) out.push_back({Bdf(r.bus, r.slot), r.numa, kCpus[r.numa]});
  return out;
}

// Unpublished layouts (docs/hardware.md#unverified-figures), derived: inf2.24xlarge as two NUMA
// halves of three devices; single-device sizes with one device on bus 0 and every vCPU local.
std::vector<DevicePlacement> Inf2_24Placement() {
  std::vector<DevicePlacement> out;
  for (int d = 0; d < 6; ++d) {
    const int numa = d / 3;
    out.push_back({Bdf(numa == 0 ? 0x10 : 0x20, 0x1d + d % 3), numa,
                   numa == 0 ? "0-23,48-71" : "24-47,72-95"});
  }
  return out;
}

std::vector<DevicePlacement> SinglePlacement(int vcpus) {
  return {{Bdf(0x00, 0x1e), 0, fmt::format("0-{}", vcpus - 1)}};
}

// The catalog in its published order, one family at a time.
void AddTrn1(std::vector<InstanceSpec>& c) {
  c.push_back({.name = "trn1.2xlarge",
               .chip = &kTrainium,
               .devices = 1,
               .vcpus = 8,
               .host_mem_bytes = 32 * kGiB,
               .numa_nodes = 1,
               .placement = SinglePlacement(8)});
  c.push_back({.name = "trn1.32xlarge",
               .chip = &kTrainium,
               .devices = 16,
               .vcpus = 128,
               .host_mem_bytes = 512 * kGiB,
               .numa_nodes = 2,
               .topology = LinkTopology::kTorus4x4,
               .neuronlink_bytes_per_s = 384 * kGiBf,
               .efa_count = 8,
               .efa_gbps = 100,
               .placement_published = true,
               .placement = Trn1Placement(),
               .efas = Trn1Efas({0x19, 0x1a})});
  // trn1n reuses the trn1.32xlarge layout (docs/hardware.md#neuronlink-topology allows it); its 16
  // EFA are derived.
  c.push_back({.name = "trn1n.32xlarge",
               .chip = &kTrainium,
               .devices = 16,
               .vcpus = 128,
               .host_mem_bytes = 512 * kGiB,
               .numa_nodes = 2,
               .topology = LinkTopology::kTorus4x4,
               .neuronlink_bytes_per_s = 768 * kGiBf,
               .efa_count = 16,
               .efa_gbps = 100,
               .placement = Trn1Placement(),
               .efas = Trn1Efas({0x17, 0x18, 0x19, 0x1a})});
}

void AddTrn2(std::vector<InstanceSpec>& c) {
  const InstanceSpec trn2{.name = "trn2.48xlarge",
                          .chip = &kTrainium2,
                          .devices = 16,
                          .default_lnc = 2,
                          .lnc_configurable = true,
                          .vcpus = 192,
                          .host_mem_bytes = 2048 * kGiB,
                          .numa_nodes = 2,
                          .topology = LinkTopology::kTorus4x4,
                          .neuronlink_bytes_per_s = 1024e9,
                          .efa_count = 16,
                          .efa_gbps = 200,
                          .placement_published = true,
                          .placement = Trn2Placement(),
                          .efas = Trn2Efas()};
  c.push_back(trn2);
  // trn2u.48xlarge: the same instance (docs/hardware.md#instance-catalog), one of the 4 of an
  // UltraServer; the links between the instances are not modelled.
  InstanceSpec trn2u = trn2;
  trn2u.name = "trn2u.48xlarge";
  trn2u.ultraserver_instances = 4;
  c.push_back(trn2u);
}

void AddInf2(std::vector<InstanceSpec>& c) {
  c.push_back({.name = "inf2.xlarge",
               .chip = &kInferentia2,
               .devices = 1,
               .vcpus = 4,
               .host_mem_bytes = 16 * kGiB,
               .numa_nodes = 1,
               .placement = SinglePlacement(4)});
  c.push_back({.name = "inf2.8xlarge",
               .chip = &kInferentia2,
               .devices = 1,
               .vcpus = 32,
               .host_mem_bytes = 128 * kGiB,
               .numa_nodes = 1,
               .placement = SinglePlacement(32)});
  c.push_back({.name = "inf2.24xlarge",
               .chip = &kInferentia2,
               .devices = 6,
               .vcpus = 96,
               .host_mem_bytes = 384 * kGiB,
               .numa_nodes = 2,
               .topology = LinkTopology::kChain,
               .neuronlink_bytes_per_s = 192 * kGiBf,
               .placement = Inf2_24Placement()});
  c.push_back({.name = "inf2.48xlarge",
               .chip = &kInferentia2,
               .devices = 12,
               .vcpus = 192,
               .host_mem_bytes = 768 * kGiB,
               .numa_nodes = 4,
               .topology = LinkTopology::kRing,
               .neuronlink_bytes_per_s = 192 * kGiBf,
               .placement_published = true,
               .placement = Inf2_48Placement()});
}

std::vector<InstanceSpec> BuildCatalog() {
  std::vector<InstanceSpec> c;
  AddTrn1(c);
  AddTrn2(c);
  AddInf2(c);
  return c;
}

// The trn2 driver lists the torus neighbours per engine group
// (docs/driver-interface.md#connected-devices).
// clang-format off
constexpr std::array<std::array<int, 4>, 16> kTrn2Neighbours{{
    {12, 1, 3, 4}, {0, 13, 5, 2}, {14, 3, 1, 6},  {2, 15, 7, 0},
    {8, 5, 7, 0},  {4, 9, 1, 6},  {10, 7, 5, 2},  {6, 11, 3, 4},
    {4, 9, 11, 12}, {8, 5, 13, 10}, {6, 11, 9, 14}, {10, 7, 15, 8},
    {0, 13, 15, 8}, {12, 1, 9, 14}, {2, 15, 13, 10}, {14, 3, 11, 12},
}};
// clang-format on

}  // namespace

const std::vector<InstanceSpec>& AllInstances() {
  static const std::vector<InstanceSpec>* const kCatalog =
      new std::vector<InstanceSpec>(BuildCatalog());
  return *kCatalog;
}

absl::StatusOr<const InstanceSpec*> FindInstance(std::string_view name) {
  std::vector<std::string_view> known;
  for (const InstanceSpec& spec : AllInstances()) {
    if (spec.name == name) return &spec;
    known.push_back(spec.name);
  }
  return absl::NotFoundError(
      fmt::format("unknown instance type '{}'; known types: {}", name, fmt::join(known, ", ")));
}

absl::StatusOr<int> ResolveLnc(const InstanceSpec& spec, int requested_lnc) {
  if (requested_lnc == 0) return spec.default_lnc;
  if (requested_lnc == 1) return 1;
  if (requested_lnc == 2 && spec.lnc_configurable) return 2;
  return absl::InvalidArgumentError(
      fmt::format("LNC {} is not valid for {} ({})", requested_lnc, spec.name,
                  spec.lnc_configurable ? "use 1 or 2" : "LNC applies only to Trn2; use 1"));
}

int LogicalCoresPerDevice(const InstanceSpec& spec, int lnc) {
  return spec.chip->physical_cores / (lnc > 0 ? lnc : 1);
}

std::vector<int> ConnectedDevices(const InstanceSpec& spec, int d) {
  const int n = spec.devices;
  if (d < 0 || d >= n) return {};
  switch (spec.topology) {
    case LinkTopology::kNone:
      return {};
    case LinkTopology::kTorus4x4: {
      if (spec.chip->chip == Chip::kTrainium2) {
        const auto& row = kTrn2Neighbours[d];
        return {row.begin(), row.end()};
      }
      const int r = d / 4, col = d % 4;  // up, left, down, right
      return {((r + 3) % 4) * 4 + col, r * 4 + (col + 3) % 4, ((r + 1) % 4) * 4 + col,
              r * 4 + (col + 1) % 4};
    }
    case LinkTopology::kRing:
      return {(d + n - 1) % n, (d + 1) % n};
    case LinkTopology::kChain: {
      std::vector<int> out;
      if (d > 0) out.push_back(d - 1);
      if (d < n - 1) out.push_back(d + 1);
      return out;
    }
  }
  return {};
}

std::string EfaRateString(int gbps) {
  // The kernel prints "<speed> Gb/sec (<width>X<lane>)"; EFA reports 4 lanes.
  const char* lane = gbps >= 400 ? "NDR" : gbps >= 200 ? "HDR" : gbps >= 100 ? "EDR" : "FDR";
  return fmt::format("{} Gb/sec (4X {})", gbps, lane);
}

bool IsInstanceId(std::string_view id) {
  if (!id.starts_with("i-")) return false;
  const std::string_view hex = id.substr(2);
  return (hex.size() == 8 || hex.size() == 17) && std::all_of(hex.begin(), hex.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

}  // namespace neuron
