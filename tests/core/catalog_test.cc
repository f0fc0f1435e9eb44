#include "core/model/catalog.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "core/model/device_id.h"
#include "core/model/topology.h"

namespace neuron {
namespace {

using ::testing::ElementsAre;

const InstanceSpec& Spec(std::string_view name) {
  absl::StatusOr<const InstanceSpec*> spec = FindInstance(name);
  EXPECT_TRUE(spec.ok()) << spec.status();
  return **spec;
}

TEST(Catalog, EveryInstanceHasConsistentPlacement) {
  for (const InstanceSpec& spec : AllInstances()) {
    SCOPED_TRACE(std::string(spec.name));
    EXPECT_EQ(static_cast<int>(spec.placement.size()), spec.devices);
    EXPECT_EQ(static_cast<int>(spec.efas.size()), spec.efa_count);
    std::set<std::string> bdfs;
    for (const auto& p : spec.placement) bdfs.insert(p.bdf);
    for (const auto& e : spec.efas) bdfs.insert(e.bdf);
    EXPECT_EQ(bdfs.size(), spec.placement.size() + spec.efas.size()) << "BDFs must be unique";
    for (const auto& p : spec.placement) EXPECT_LT(p.numa_node, spec.numa_nodes);
  }
}

TEST(Catalog, UnknownInstanceNamesKnownTypes) {
  absl::StatusOr<const InstanceSpec*> spec = FindInstance("p4d.24xlarge");
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(spec.status().message(), ::testing::HasSubstr("trn1.32xlarge"));
}

TEST(Catalog, Trn1FiguresMatchHardwareMd) {
  const InstanceSpec& s = Spec("trn1.32xlarge");
  EXPECT_EQ(s.devices, 16);
  EXPECT_EQ(s.chip->physical_cores, 2);
  EXPECT_EQ(s.chip->hbm_bytes, 32ull << 30);
  EXPECT_EQ(s.chip->arch_type, "NDv2");
  EXPECT_EQ(s.chip->pci_device_id, 0x7164);
  EXPECT_EQ(s.efa_count, 8);
  EXPECT_EQ(s.placement[0].bdf, "0000:10:1c.0");
  EXPECT_EQ(s.placement[13].bdf, "0000:10:1b.0");
  EXPECT_EQ(s.placement[2].cpulist, "32-63,96-127");
  EXPECT_EQ(s.efas[0].name, "rdmap16s25");
  EXPECT_EQ(s.efas[7].name, "rdmap160s26");
  EXPECT_EQ(EfaRateString(s.efa_gbps), "100 Gb/sec (4X EDR)");
}

// trn2u.48xlarge: the trn2.48xlarge's devices, host and layout, one of the 4 instances of an
// UltraServer (docs/hardware.md#instance-catalog); no other type is.
TEST(Catalog, Trn2uIsATrn2InAnUltraServer) {
  const InstanceSpec& u = Spec("trn2u.48xlarge");
  const InstanceSpec& t = Spec("trn2.48xlarge");
  EXPECT_EQ(u.chip, t.chip);
  EXPECT_EQ(u.devices, 16);
  EXPECT_EQ(u.default_lnc, 2);
  EXPECT_TRUE(u.lnc_configurable);
  EXPECT_EQ(u.vcpus, t.vcpus);
  EXPECT_EQ(u.efa_count, 16);
  EXPECT_EQ(u.placement.size(), t.placement.size());
  EXPECT_EQ(u.placement[0].bdf, t.placement[0].bdf);
  EXPECT_EQ(u.efas[15].name, t.efas[15].name);
  EXPECT_THAT(ConnectedDevices(u, 0), ElementsAre(12, 1, 3, 4));
  EXPECT_EQ(u.ultraserver_instances, 4);
  for (const InstanceSpec& spec : AllInstances()) {
    if (spec.name != "trn2u.48xlarge") {
      EXPECT_EQ(spec.ultraserver_instances, 0) << spec.name;
    }
  }
}

TEST(Catalog, LncRules) {
  const InstanceSpec& trn2 = Spec("trn2.48xlarge");
  EXPECT_EQ(*ResolveLnc(trn2, 0), 2);
  EXPECT_EQ(LogicalCoresPerDevice(trn2, 2), 4);
  EXPECT_EQ(LogicalCoresPerDevice(trn2, 1), 8);
  EXPECT_FALSE(ResolveLnc(Spec("trn1.32xlarge"), 2).ok());
  EXPECT_FALSE(ResolveLnc(trn2, 3).ok());
}

TEST(Topology, DriverNeighbourOrders) {
  EXPECT_THAT(ConnectedDevices(Spec("trn1.32xlarge"), 0), ElementsAre(12, 3, 4, 1));
  EXPECT_THAT(ConnectedDevices(Spec("trn1.32xlarge"), 15), ElementsAre(11, 14, 3, 12));
  EXPECT_THAT(ConnectedDevices(Spec("trn2.48xlarge"), 0), ElementsAre(12, 1, 3, 4));
  EXPECT_THAT(ConnectedDevices(Spec("trn2.48xlarge"), 15), ElementsAre(14, 3, 11, 12));
  EXPECT_THAT(ConnectedDevices(Spec("inf2.48xlarge"), 0), ElementsAre(11, 1));
  EXPECT_THAT(ConnectedDevices(Spec("inf2.48xlarge"), 11), ElementsAre(10, 0));
  EXPECT_THAT(ConnectedDevices(Spec("inf2.24xlarge"), 0), ElementsAre(1));
  EXPECT_THAT(ConnectedDevices(Spec("inf2.24xlarge"), 5), ElementsAre(4));
  EXPECT_TRUE(ConnectedDevices(Spec("trn1.2xlarge"), 0).empty());
}

TEST(Topology, Trn2HasTheSameNeighbourSetsAsTrn1) {
  for (int d = 0; d < 16; ++d) {
    std::vector<int> a = ConnectedDevices(Spec("trn1.32xlarge"), d);
    std::vector<int> b = ConnectedDevices(Spec("trn2.48xlarge"), d);
    EXPECT_EQ(std::set<int>(a.begin(), a.end()), std::set<int>(b.begin(), b.end())) << d;
  }
}

Topology TopologyOf(const InstanceSpec& s) {
  std::vector<std::vector<int>> n;
  for (int d = 0; d < s.devices; ++d) n.push_back(ConnectedDevices(s, d));
  return Topology(n);
}

using Ids = std::vector<int>;

// What the allocator walks (Neighbours) and checks (IsConnected), per link shape.
TEST(Topology, TorusNeighboursAndConnectivity) {
  const Topology t = TopologyOf(Spec("trn1.32xlarge"));
  ASSERT_EQ(t.size(), 16);
  EXPECT_EQ(t.Neighbours(0), (Ids{1, 3, 4, 12}));  // the row and the column wrap round
  EXPECT_EQ(t.Neighbours(5), (Ids{1, 4, 6, 9}));
  for (int d = 0; d < 16; ++d) EXPECT_EQ(t.Neighbours(d).size(), 4u) << d;
  EXPECT_TRUE(t.Adjacent(0, 3));
  EXPECT_FALSE(t.Adjacent(0, 5));  // diagonal
  EXPECT_FALSE(t.Adjacent(0, 0));
  EXPECT_TRUE(t.IsConnected({0, 1, 2, 3}));
  EXPECT_TRUE(t.IsConnected({0, 4, 8, 12}));
  EXPECT_TRUE(t.IsConnected({0, 1, 5, 6, 10}));  // to the opposite corner, hop by hop
  EXPECT_FALSE(t.IsConnected({0, 2}));
  EXPECT_FALSE(t.IsConnected({0, 10}));
  EXPECT_FALSE(t.IsConnected({}));
}

TEST(Topology, RingAndChain) {
  const Topology ring = TopologyOf(Spec("inf2.48xlarge"));
  EXPECT_EQ(ring.Neighbours(0), (Ids{1, 11}));
  EXPECT_EQ(ring.Neighbours(6), (Ids{5, 7}));
  EXPECT_TRUE(ring.IsConnected({10, 11, 0, 1}));
  EXPECT_FALSE(ring.IsConnected({0, 6}));
  const Topology chain = TopologyOf(Spec("inf2.24xlarge"));
  EXPECT_EQ(chain.Neighbours(0), (Ids{1}));
  EXPECT_EQ(chain.Neighbours(2), (Ids{1, 3}));
  EXPECT_EQ(chain.Neighbours(5), (Ids{4}));
  EXPECT_TRUE(chain.IsConnected({0, 1, 2, 3, 4, 5}));
  EXPECT_FALSE(chain.IsConnected({0, 5}));  // no wrap
  const Topology none = TopologyOf(Spec("trn1.2xlarge"));
  EXPECT_TRUE(none.Neighbours(0).empty());
  EXPECT_TRUE(none.IsConnected({0}));
}

TEST(Topology, LinksCountBothWaysAndBadIdsAreIgnored) {
  const Topology t({{1, 1, 7, -1, 0}, {}, {1}, {}});
  EXPECT_EQ(t.size(), 4);
  EXPECT_EQ(t.Neighbours(0), (Ids{1}));     // repeat, out of range, negative and self dropped
  EXPECT_EQ(t.Neighbours(1), (Ids{0, 2}));  // listed only by 0 and 2
  EXPECT_EQ(t.Neighbours(2), (Ids{1}));
  EXPECT_TRUE(t.Neighbours(3).empty());
  EXPECT_TRUE(t.Neighbours(4).empty());  // outside the node
  EXPECT_TRUE(t.Neighbours(-1).empty());
  EXPECT_TRUE(t.Adjacent(1, 0));
  EXPECT_FALSE(t.Adjacent(0, 7));
  EXPECT_TRUE(t.IsConnected({0, 1, 2}));
  EXPECT_FALSE(t.IsConnected({0, 3}));
  EXPECT_FALSE(t.IsConnected({0, 4}));
}

TEST(DeviceId, Codec) {
  EXPECT_EQ(IndexId(12), "12");
  EXPECT_EQ(*ParseIndexId("5", 16), 5);
  for (const char* bad : {"", "-1", "05", "1.0", " 3", "3 ", "abc", "99999999999"}) {
    EXPECT_FALSE(ParseIndexId(bad, 16).ok()) << bad;
  }
  EXPECT_EQ(ParseIndexId("16", 16).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_TRUE(ValidateEfaId("rdmap16s25").ok());
  EXPECT_FALSE(ValidateEfaId("../etc").ok());
  EXPECT_EQ(*ParseResourceName("aws.amazon.com/neuroncore"), Resource::kNeuronCore);
  EXPECT_FALSE(ParseResourceName("nvidia.com/gpu").ok());
}

}  // namespace
}  // namespace neuron
