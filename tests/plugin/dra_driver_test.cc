// DRA prepare/unprepare (plugin/dra/driver.h) on a catalog node with a ClaimSource double:
// CDI specs and answers, idempotence, double booking across device, core and EFA claims, LNC,
// a plugin restart with prepared claims, a corrupt checkpoint; and the real HttpClaimSource
// against an HTTP server on a Unix socket, as neuron-dra-api serves it.

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <future>
#include <sstream>
#include <thread>

#include "fmt/format.h"
#include "http/http_server.h"
#include "plugin/dra/cdi.h"
#include "plugin/dra/checkpoint.h"
#include "plugin/dra/driver.h"
#include "plugin/dra/slice.h"
#include "tests/plugin/dra_driver_testing.h"
#include "tests/plugin/dra_testing.h"
#include "tests/support/temp_dir.h"

namespace neuron::plugin::dra {
namespace {

namespace fs = std::filesystem;
using ::neuron::plugin::dra::testing::CatalogHardware;
using ::neuron::testing::TempDir;
using nlohmann::json;

using ::neuron::plugin::dra::testing::kNode;

class DraDriverTest : public testing::DriverTest {
 protected:
  void SetUp() override { state_.SetHardware(CatalogHardware("trn2.48xlarge", 2)); }
};

TEST_F(DraDriverTest, PrepareWritesTheCdiSpecAndIsIdempotent) {
  auto driver = NewDriver();
  const ClaimRef ref =
      claims_.Add("four", {"neuron-4", "neuron-5", "neuron-6", "neuron-7", "efa-rdmap95s0"});
  absl::StatusOr<std::vector<PreparedDevice>> r = PrepareOne(*driver, ref);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 5u);
  EXPECT_EQ((*r)[0].cdi_ids, std::vector<std::string>{"aws.amazon.com/neuron=uid-four-neuron-4"});
  EXPECT_EQ((*r)[0].requests, std::vector<std::string>{"r"});
  EXPECT_EQ((*r)[0].pool, kNode);
  const json spec = CdiSpec(ref.uid);
  EXPECT_EQ(spec["kind"], "aws.amazon.com/neuron");
  EXPECT_EQ(spec["devices"][0]["name"], "uid-four-neuron-4");
  EXPECT_EQ(spec["devices"][0]["containerEdits"]["deviceNodes"][0]["path"], "/dev/neuron4");
  // trn2 at LNC=2: 4 logical cores per device, so devices 4..7 are cores 16..31.
  EXPECT_EQ(spec["devices"][0]["containerEdits"]["env"][0], "NEURON_RT_VISIBLE_CORES=16-31");
  EXPECT_EQ(spec["devices"][4]["containerEdits"]["deviceNodes"][0]["path"].get<std::string>().rfind(
                "/dev/infiniband/uverbs", 0),
            0u);
  EXPECT_FALSE(spec["devices"][4]["containerEdits"].contains("env"));
  EXPECT_EQ(claims_.asked, 1);
  // Again: the same answer, and the ClaimSource is not asked.
  absl::StatusOr<std::vector<PreparedDevice>> again = PrepareOne(*driver, ref);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *r);
  EXPECT_EQ(claims_.asked, 1);
  // Unprepare removes the spec; twice, and for a claim never seen, is fine.
  EXPECT_TRUE(driver->Unprepare({ref}).at(ref.uid).ok());
  EXPECT_FALSE(fs::exists(CdiSpecPath({.dir = tmp_.path() / "cdi"}, ref.uid)));
  EXPECT_TRUE(driver->Unprepare({ref}).at(ref.uid).ok());
  EXPECT_TRUE(driver->Unprepare({{"default", "never", "uid-never"}}).at("uid-never").ok());
  EXPECT_TRUE(driver->prepared().empty());
}

// neuron-dra-api answering `slow` only when the test says so (it waits on the API server), the
// other claims at once.
class GatedClaims : public ClaimSource {
 public:
  explicit GatedClaims(ClaimSource* inner) : inner_(inner) {}
  absl::StatusOr<ResourceClaim> Get(std::string_view ns, std::string_view name) override {
    if (name == "slow") gate_.wait();
    return inner_->Get(ns, name);
  }
  void Open() { open_.set_value(); }

 private:
  ClaimSource* const inner_;
  std::promise<void> open_;
  std::shared_future<void> gate_ = open_.get_future().share();
};

// A claim whose look-up hangs holds neither another Prepare nor an Unprepare: claims are fetched
// before the driver serialises (as the library's NodePrepareResources does); and the claims of
// one call are fetched together, so the call takes the slowest look-up, not their sum.
TEST_F(DraDriverTest, ASlowClaimLookUpHoldsNoOtherCall) {
  GatedClaims gated(&claims_);
  absl::StatusOr<std::unique_ptr<Driver>> d = Driver::Create({.node_name = std::string(kNode),
                                                              .cdi_dir = tmp_.path() / "cdi",
                                                              .checkpoint_dir = tmp_.path() / "ck",
                                                              .state = &state_,
                                                              .claims = &gated});
  ASSERT_TRUE(d.ok()) << d.status();
  Driver& driver = **d;
  const ClaimRef slow = claims_.Add("slow", {"neuron-0"});
  const ClaimRef fast = claims_.Add("fast", {"neuron-1"});
  const ClaimRef other = claims_.Add("other", {"neuron-2"});
  auto held = std::async(std::launch::async, [&] { return driver.Prepare({slow, other}); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // `held` is waiting on `slow`
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(driver.Prepare({fast}).at(fast.uid).ok());
  EXPECT_TRUE(driver.Unprepare({fast}).at(fast.uid).ok());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  EXPECT_EQ(held.wait_for(std::chrono::seconds(0)), std::future_status::timeout);
  gated.Open();
  const auto both = held.get();
  EXPECT_TRUE(both.at(slow.uid).ok()) << both.at(slow.uid).status();
  EXPECT_TRUE(both.at(other.uid).ok()) << both.at(other.uid).status();
}

// Two calls for the same claim at once (a retried kubelet call): one prepares it, both answer
// the same devices, and it is prepared once.
TEST_F(DraDriverTest, TheSameClaimPreparedTwiceAtOnceIsPreparedOnce) {
  auto driver = NewDriver();
  const ClaimRef ref = claims_.Add("pair", {"neuron-4", "neuron-5"});
  auto a = std::async(std::launch::async, [&] { return driver->Prepare({ref}); });
  auto b = std::async(std::launch::async, [&] { return driver->Prepare({ref}); });
  const auto ra = a.get();
  const auto rb = b.get();
  ASSERT_TRUE(ra.at(ref.uid).ok()) << ra.at(ref.uid).status();
  ASSERT_TRUE(rb.at(ref.uid).ok()) << rb.at(ref.uid).status();
  EXPECT_EQ(*ra.at(ref.uid), *rb.at(ref.uid));
  EXPECT_EQ(driver->prepared().size(), 1u);
}

TEST_F(DraDriverTest, NoDoubleBookingAcrossDeviceCoreAndEfaClaims) {
  auto driver = NewDriver();
  ASSERT_TRUE(PrepareOne(*driver, claims_.Add("dev", {"neuron-2"})).ok());
  // Core 9 lives on device 2 (4 cores per device): refused, naming the holder.
  const absl::StatusOr<std::vector<PreparedDevice>> core =
      PrepareOne(*driver, claims_.Add("core", {"neuroncore-9"}));
  ASSERT_FALSE(core.ok());
  EXPECT_NE(core.status().message().find("default/dev"), std::string_view::npos) << core.status();
  // A core of another device is free; then its device is not.
  ASSERT_TRUE(PrepareOne(*driver, claims_.Add("core3", {"neuroncore-12"})).ok());
  EXPECT_FALSE(PrepareOne(*driver, claims_.Add("dev3", {"neuron-3"})).ok());
  ASSERT_TRUE(PrepareOne(*driver, claims_.Add("efa", {"efa-rdmap95s0"})).ok());
  EXPECT_FALSE(PrepareOne(*driver, claims_.Add("efa2", {"efa-rdmap95s0"})).ok());
  // The same device twice in one claim is refused too.
  EXPECT_FALSE(PrepareOne(*driver, claims_.Add("twice", {"neuron-9", "neuroncore-36"})).ok());
  // Released, it can be had.
  ASSERT_TRUE(driver->Unprepare({{"default", "dev", "uid-dev"}}).at("uid-dev").ok());
  EXPECT_TRUE(PrepareOne(*driver, claims_.Add("core2", {"neuroncore-9"})).ok());
}

// A claim of Neuron devices and EFAs is prepared in two parts, each driver its own results into a
// CDI spec of its own kind. efa.neuron.aws.com takes EFAs only, and no EFA that neuron.aws.com
// still holds for a claim prepared before EFA had a driver of its own.
TEST_F(DraDriverTest, TheEfaDriverPreparesTheEfasOfAClaimAndNothingElse) {
  auto neuron = NewDriver();
  auto efa = NewDriver(kEfaDriverName, neuron.get());
  const ClaimRef both =
      claims_.Add("both", {"neuron-4", "efa-rdmap95s0"}, std::nullopt, std::string(kEfaDriverName));
  absl::StatusOr<std::vector<PreparedDevice>> n = PrepareOne(*neuron, both);
  absl::StatusOr<std::vector<PreparedDevice>> e = PrepareOne(*efa, both);
  ASSERT_TRUE(n.ok()) << n.status();
  ASSERT_TRUE(e.ok()) << e.status();
  ASSERT_EQ(n->size(), 1u);
  ASSERT_EQ(e->size(), 1u);
  EXPECT_EQ((*e)[0].cdi_ids, std::vector<std::string>{"aws.amazon.com/efa=uid-both-efa-rdmap95s0"});
  const json spec = [&] {
    std::ifstream in(CdiSpecPath({.dir = tmp_.path() / "cdi", .kind = kEfaCdiKind}, both.uid));
    return json::parse(in);
  }();
  EXPECT_EQ(spec["kind"], "aws.amazon.com/efa");
  EXPECT_EQ(spec["devices"][0]["containerEdits"]["deviceNodes"][0]["path"].get<std::string>().rfind(
                "/dev/infiniband/uverbs", 0),
            0u);
  EXPECT_EQ(CdiSpec(both.uid)["devices"].size(), 1u);  // neuron.aws.com's: neuron-4 alone
  // A Neuron device under efa.neuron.aws.com is not its device.
  claims_.claims["default/both"].results[0].driver = std::string(kEfaDriverName);
  const ClaimRef wrong = claims_.Add("wrong", {"neuron-5"});
  claims_.claims["default/wrong"].results[0].driver = std::string(kEfaDriverName);
  const absl::Status refused = PrepareOne(*efa, wrong).status();
  EXPECT_NE(refused.message().find("not a device of driver efa.neuron.aws.com"), std::string::npos)
      << refused;
  // An EFA neuron.aws.com holds (allocated before the upgrade) is not given again.
  ASSERT_TRUE(PrepareOne(*neuron, claims_.Add("old", {"efa-rdmap72s0"})).ok());
  const absl::Status held = PrepareOne(*efa, claims_.Add("new", {"efa-rdmap72s0"}, std::nullopt,
                                                         std::string(kEfaDriverName)))
                                .status();
  EXPECT_TRUE(absl::IsAlreadyExists(held)) << held;
  // Each driver unprepares its own part.
  EXPECT_TRUE(efa->Unprepare({both}).at(both.uid).ok());
  EXPECT_FALSE(
      fs::exists(CdiSpecPath({.dir = tmp_.path() / "cdi", .kind = kEfaCdiKind}, both.uid)));
  EXPECT_TRUE(fs::exists(CdiSpecPath({.dir = tmp_.path() / "cdi"}, both.uid)));
}

TEST_F(DraDriverTest, NeuronCoresGetTheirDevicesNodeAndOneListOfCores) {
  auto driver = NewDriver();
  // trn2 at LNC 2: cores 4..7 are device 1's.
  const ClaimRef four = claims_.Add(
      "cores", {"neuroncore-4", "neuroncore-5", "neuroncore-6", "neuroncore-7", "efa-rdmap95s0"});
  absl::StatusOr<std::vector<PreparedDevice>> r = PrepareOne(*driver, four);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 5u);
  const json spec = CdiSpec(four.uid);
  for (int i = 0; i < 4; ++i) {
    const json& edits = spec["devices"][i]["containerEdits"];
    EXPECT_EQ(spec["devices"][i]["name"], "uid-cores-neuroncore-" + std::to_string(4 + i));
    EXPECT_EQ(edits["deviceNodes"], json::parse(R"([{"path": "/dev/neuron1"}])")) << i;
    EXPECT_EQ(edits["env"], json::parse(R"(["NEURON_RT_VISIBLE_CORES=4-7"])")) << i;
  }
  EXPECT_FALSE(spec["devices"][4]["containerEdits"].contains("env"));  // the EFA
  const ClaimRef one = claims_.Add("one", {"neuroncore-9"});
  ASSERT_TRUE(PrepareOne(*driver, one).ok());
  EXPECT_EQ(CdiSpec(one.uid)["devices"][0]["containerEdits"],
            json::parse(R"({"deviceNodes": [{"path": "/dev/neuron2"}],
                            "env": ["NEURON_RT_VISIBLE_CORES=9"]})"));
  // Cores the runtime cannot take as one run are refused, naming why.
  const absl::StatusOr<std::vector<PreparedDevice>> gap =
      PrepareOne(*driver, claims_.Add("gap", {"neuroncore-20", "neuroncore-22"}));
  ASSERT_FALSE(gap.ok());
  EXPECT_NE(gap.status().message().find("not one contiguous run"), std::string_view::npos);
  // neuron-node is offered on an UltraServer node only: this trn2.48xlarge has none.
  const absl::StatusOr<std::vector<PreparedDevice>> node =
      PrepareOne(*driver, claims_.Add("node", {"neuron-node"}));
  ASSERT_FALSE(node.ok());
  EXPECT_NE(node.status().message().find("device neuron-node is not on this node"),
            std::string_view::npos)
      << node.status();
}

TEST_F(DraDriverTest, LncOnlyWhenItIsTheNodes) {
  auto driver = NewDriver();
  const absl::StatusOr<std::vector<PreparedDevice>> one =
      PrepareOne(*driver, claims_.Add("lnc1", {"neuron-0"},
                                      json{{"apiVersion", "neuron.aws.com/v1"},
                                           {"kind", "NeuronConfig"},
                                           {"logicalNeuronCore", 1}}));
  ASSERT_FALSE(one.ok());
  EXPECT_NE(one.status().message().find("logicalNeuronCore 1 differs from this node's LNC 2"),
            std::string_view::npos)
      << one.status();
  EXPECT_TRUE(
      PrepareOne(*driver, claims_.Add("lnc2", {"neuron-0"},
                                      json{{"kind", "NeuronConfig"}, {"logicalNeuronCore", 2}}))
          .ok());
  EXPECT_FALSE(PrepareOne(*driver, claims_.Add("odd", {"neuron-1"}, json{{"kind", "Other"}})).ok());
}

// adminAccess (a monitoring pod's claim): the device's nodes, shared with whoever holds it; it
// holds nothing itself, across a restart too (the checkpoint keeps the flag).
TEST_F(DraDriverTest, AdminAccessSharesTheDeviceAndHoldsNothing) {
  auto driver = NewDriver();
  const ClaimRef training = claims_.Add("training", {"neuron-3"});
  ASSERT_TRUE(PrepareOne(*driver, training).ok());
  const ClaimRef monitor = claims_.Add("monitor", {"neuron-3"});
  claims_.claims.at("default/monitor").results[0].admin_access = true;
  const absl::StatusOr<std::vector<PreparedDevice>> shared = PrepareOne(*driver, monitor);
  ASSERT_TRUE(shared.ok()) << shared.status();
  EXPECT_TRUE(shared->at(0).admin_access);
  const json spec = CdiSpec(monitor.uid);
  EXPECT_EQ(spec["devices"][0]["containerEdits"]["deviceNodes"][0]["path"], "/dev/neuron3");
  EXPECT_FALSE(spec["devices"][0]["containerEdits"].contains("env")) << spec.dump();
  // Still the training claim's alone: another exclusive claim is refused naming it.
  const absl::StatusOr<std::vector<PreparedDevice>> thief =
      PrepareOne(*driver, claims_.Add("thief", {"neuron-3"}));
  ASSERT_FALSE(thief.ok());
  EXPECT_NE(thief.status().message().find("claim default/training"), std::string_view::npos)
      << thief.status();
  // Training done: the monitor holds nothing, after a restart as before it.
  ASSERT_TRUE(driver->Unprepare({training}).at(training.uid).ok());
  driver = NewDriver();
  EXPECT_TRUE(driver->prepared().at(monitor.uid).devices.at(0).admin_access);
  EXPECT_TRUE(PrepareOne(*driver, claims_.Add("next", {"neuron-3"})).ok());
}

// A prioritized list's result names "<request>/<subrequest>": the answer names the request (the
// kubelet knows no subrequest), and a config for the request applies to its subrequests.
TEST_F(DraDriverTest, SubrequestNamesAreStrippedAndTheRequestsConfigApplies) {
  auto driver = NewDriver();
  ClaimRef ref = claims_.Add("prio", {"neuron-0", "neuron-1"},
                             json{{"kind", "NeuronConfig"}, {"logicalNeuronCore", 1}});
  ResourceClaim& claim = claims_.claims.at("default/prio");
  for (AllocationResult& r : claim.results) r.request = "r/two-devices";
  const absl::StatusOr<std::vector<PreparedDevice>> refused = PrepareOne(*driver, ref);
  ASSERT_FALSE(refused.ok()) << "the request's NeuronConfig (LNC 1 on an LNC 2 node) applies";
  EXPECT_NE(refused.status().message().find("logicalNeuronCore 1"), std::string_view::npos);
  claim.config[0].parameters["logicalNeuronCore"] = 2;
  const absl::StatusOr<std::vector<PreparedDevice>> r = PrepareOne(*driver, ref);
  ASSERT_TRUE(r.ok()) << r.status();
  for (const PreparedDevice& d : *r) EXPECT_EQ(d.requests, std::vector<std::string>{"r"});
}

TEST_F(DraDriverTest, WhatIsNotOursOrNotThereOrReplaced) {
  auto driver = NewDriver();
  ClaimRef ref = claims_.Add("mixed", {"neuron-1"});
  claims_.claims["default/mixed"].results.push_back(
      {.request = "r", .driver = "gpu.example.com", .pool = std::string(kNode), .device = "gpu-0"});
  claims_.claims["default/mixed"].results.push_back(
      {.request = "r", .driver = "neuron.aws.com", .pool = "other-node", .device = "neuron-1"});
  absl::StatusOr<std::vector<PreparedDevice>> r = PrepareOne(*driver, ref);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->size(), 1u);  // only ours, in our pool
  EXPECT_FALSE(PrepareOne(*driver, claims_.Add("ghost", {"neuron-16"})).ok());
  EXPECT_FALSE(PrepareOne(*driver, claims_.Add("bogus", {"neuron-01"})).ok());
  ClaimRef replaced = claims_.Add("replaced", {"neuron-8"});
  replaced.uid = "uid-older";
  EXPECT_FALSE(PrepareOne(*driver, replaced).ok());
  EXPECT_TRUE(absl::IsNotFound(PrepareOne(*driver, {"default", "absent", "uid-absent"}).status()));
  claims_.Add("unallocated", {});
  claims_.claims["default/unallocated"].allocated = false;
  EXPECT_FALSE(PrepareOne(*driver, {"default", "unallocated", "uid-unallocated"}).ok());
  EXPECT_FALSE(PrepareOne(*driver, {"default", "x", "../../etc"}).ok());  // uids name files
}

TEST_F(DraDriverTest, ARestartedPluginKeepsItsClaims) {
  const ClaimRef ref = claims_.Add("kept", {"neuron-10", "neuron-11"});
  ASSERT_TRUE(PrepareOne(*NewDriver(), ref).ok());
  // A new driver (the plugin restarted) on the same checkpoint directory.
  auto driver = NewDriver();
  EXPECT_EQ(driver->prepared().size(), 1u);
  EXPECT_FALSE(PrepareOne(*driver, claims_.Add("thief", {"neuroncore-44"})).ok());
  const int asked = claims_.asked;
  EXPECT_TRUE(PrepareOne(*driver, ref).ok());
  EXPECT_EQ(claims_.asked, asked);  // answered from the checkpoint
}

TEST_F(DraDriverTest, ACorruptCheckpointIsRefused) {
  ASSERT_TRUE(PrepareOne(*NewDriver(), claims_.Add("kept", {"neuron-10"})).ok());
  const fs::path ck = tmp_.path() / "ck" / "checkpoint.json";
  std::stringstream text;
  text << std::ifstream(ck).rdbuf();
  std::string body = text.str();
  body.replace(body.find("neuron-10"), 9, "neuron-12");  // a one-character edit
  std::ofstream(ck) << body;
  auto driver = NewDriver();
  EXPECT_TRUE(driver->prepared().empty());
  EXPECT_TRUE(fs::exists(ck.string() + ".refused"));
  EXPECT_FALSE(fs::exists(ck));
}

// The release before this one's reading of a checkpoint (checkpoint.cc at 0.1.0): version 1,
// the checksum of the claims' dump, and each claim's namespace, name and devices with requests,
// pool, device and cdiIds of those types; anything else it ignores. What it would keep, by uid.
std::map<std::string, std::vector<std::string>> ReadAsTheReleaseBefore(const fs::path& path) {
  std::stringstream text;
  text << std::ifstream(path).rdbuf();
  const json doc = json::parse(text.str());
  EXPECT_EQ(doc.at("version"), 1);
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : doc.at("claims").dump()) h = (h ^ c) * 0x100000001b3ULL;
  EXPECT_EQ(doc.at("checksum").get<std::string>(), fmt::format("{:016x}", h));
  std::map<std::string, std::vector<std::string>> out;
  for (const auto& [uid, c] : doc.at("claims").items()) {
    (void)c.at("namespace").get<std::string>();
    (void)c.at("name").get<std::string>();
    for (const json& d : c.at("devices")) {
      (void)d.at("requests").get<std::vector<std::string>>();
      (void)d.at("pool").get<std::string>();
      (void)d.at("cdiIds").get<std::vector<std::string>>();
      out[uid].push_back(d.at("device").get<std::string>());
    }
  }
  return out;
}

// Upgrades and rollbacks keep the protection against double booking: this release reads the
// file release 0.1.0 wrote (tests/fixtures/plugin/dra_checkpoint_0.1.0.json, no bootId, no
// states), and the release before reads the file this one writes (its additions are fields it
// ignores), both keeping every prepared claim.
TEST_F(DraDriverTest, TheCheckpointReadsBothWaysAcrossAnUpgrade) {
  fs::create_directories(tmp_.path() / "ck");
  fs::copy_file(fs::path(NEURON_SOURCE_DIR) / "tests/fixtures/plugin/dra_checkpoint_0.1.0.json",
                tmp_.path() / "ck/checkpoint.json");
  auto driver = NewDriver();
  ASSERT_EQ(driver->prepared().size(), 1u) << "the release before's claim is kept";
  EXPECT_FALSE(PrepareOne(*driver, claims_.Add("thief", {"neuron-10"})).ok());
  // This release writes (a boot id, states, an adminAccess device); the release before reads.
  const ClaimRef monitor = claims_.Add("monitor", {"neuron-10"});
  claims_.claims.at("default/monitor").results[0].admin_access = true;
  ASSERT_TRUE(PrepareOne(*driver, monitor).ok());
  ASSERT_TRUE(PrepareOne(*driver, claims_.Add("new", {"neuron-2"})).ok());
  const auto kept = ReadAsTheReleaseBefore(tmp_.path() / "ck/checkpoint.json");
  EXPECT_EQ(kept.size(), 3u);
  EXPECT_EQ(kept.at("uid-new"), std::vector<std::string>{"neuron-2"});
}

// Two instances of a rolling update on one checkpoint directory: what one prepares, the other
// sees before it prepares (the flock and the reload), and what one unprepares, the other frees.
TEST_F(DraDriverTest, TwoInstancesNeverHandOneDeviceToTwoClaims) {
  auto old_pod = NewDriver();
  auto new_pod = NewDriver();  // started beside it, before its next prepare
  const ClaimRef training = claims_.Add("training", {"neuron-3"});
  ASSERT_TRUE(PrepareOne(*old_pod, training).ok());
  const absl::StatusOr<std::vector<PreparedDevice>> thief =
      PrepareOne(*new_pod, claims_.Add("thief", {"neuroncore-13"}));
  ASSERT_FALSE(thief.ok());
  EXPECT_NE(thief.status().message().find("claim default/training"), std::string_view::npos)
      << thief.status();
  // The kubelet follows the newest instance: it answers the old one's claim as prepared, and
  // its unprepare frees the device for the old instance too.
  const int asked = claims_.asked;
  EXPECT_TRUE(PrepareOne(*new_pod, training).ok());
  EXPECT_EQ(claims_.asked, asked) << "answered from the shared checkpoint";
  ASSERT_TRUE(new_pod->Unprepare({training}).at(training.uid).ok());
  EXPECT_TRUE(PrepareOne(*old_pod, claims_.Add("next", {"neuron-3"})).ok());
}

// A checkpoint from before the node's last boot names claims whose CDI specs went with the boot
// (/var/run): dropped, and the kubelet prepares again. The same boot keeps them.
TEST_F(DraDriverTest, AnotherBootsClaimsAreDropped) {
  auto make = [&](const std::string& boot) {
    auto d = Driver::Create({.node_name = std::string(kNode),
                             .cdi_dir = tmp_.path() / "cdi",
                             .checkpoint_dir = tmp_.path() / "ck",
                             .state = &state_,
                             .claims = &claims_,
                             .boot_id = boot});
    EXPECT_TRUE(d.ok()) << d.status();
    return *std::move(d);
  };
  ASSERT_TRUE(PrepareOne(*make("boot-1"), claims_.Add("kept", {"neuron-4"})).ok());
  EXPECT_EQ(make("boot-1")->prepared().size(), 1u);
  EXPECT_TRUE(make("boot-2")->prepared().empty());
  EXPECT_TRUE(PrepareOne(*make("boot-2"), claims_.Add("next", {"neuron-4"})).ok());
}

// A claim recorded as started (the plugin stopped while its CDI spec was being written) is rolled
// back at start: forgotten, its spec removed; the kubelet asks again.
TEST_F(DraDriverTest, AClaimLeftStartedIsRolledBack) {
  const ClaimRef ref = claims_.Add("half", {"neuron-6"});
  ASSERT_TRUE(PrepareOne(*NewDriver(), ref).ok());
  const fs::path ck = tmp_.path() / "ck/checkpoint.json";
  absl::StatusOr<Checkpoint> loaded = LoadCheckpoint(ck);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->claims.at(ref.uid).state, PrepareState::kCompleted);
  loaded->claims.at(ref.uid).state = PrepareState::kStarted;
  ASSERT_TRUE(SaveCheckpoint(ck, *loaded).ok());
  auto driver = NewDriver();
  EXPECT_TRUE(driver->prepared().empty());
  EXPECT_FALSE(fs::exists(CdiSpecPath({.dir = tmp_.path() / "cdi"}, ref.uid)));
  EXPECT_TRUE(LoadCheckpoint(ck)->claims.empty()) << "the roll-back is recorded";
  EXPECT_TRUE(PrepareOne(*driver, ref).ok());
}

// A CDI spec that cannot be written refuses the claim and leaves no record of it.
TEST_F(DraDriverTest, ASpecThatCannotBeWrittenLeavesNoRecord) {
  std::ofstream(tmp_.path() / "cdi") << "a file where the directory should be";
  const ClaimRef ref = claims_.Add("nowhere", {"neuron-6"});
  auto driver = NewDriver();
  EXPECT_FALSE(PrepareOne(*driver, ref).ok());
  EXPECT_TRUE(driver->prepared().empty());
  EXPECT_TRUE(LoadCheckpoint(tmp_.path() / "ck/checkpoint.json")->claims.empty());
}

TEST(DraClaimSourceTest, ParseIsStrict) {
  const char* good = R"({"metadata":{"namespace":"ns","name":"c","uid":"u1"},
    "status":{"allocation":{"devices":{"results":[{"request":"r","driver":"neuron.aws.com",
    "pool":"p","device":"neuron-0"}],"config":[{"source":"FromClaim","requests":["r"],
    "opaque":{"driver":"neuron.aws.com","parameters":{"kind":"NeuronConfig"}}}]}}}})";
  absl::StatusOr<ResourceClaim> c = ParseClaim(good);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->allocated);
  EXPECT_EQ(c->results.at(0).device, "neuron-0");
  EXPECT_EQ(c->config.at(0).parameters["kind"], "NeuronConfig");
  absl::StatusOr<ResourceClaim> pending =
      ParseClaim(R"({"metadata":{"namespace":"ns","name":"c","uid":"u"}})");
  ASSERT_TRUE(pending.ok());
  EXPECT_FALSE(pending->allocated);
  for (
      const char* bad :
      {"", "[]", "{", R"({"metadata":{"name":"c","uid":"u"}})",
       R"({"metadata":{"namespace":"ns","name":"c","uid":7}})",
       R"({"metadata":{"namespace":"ns","name":"c","uid":"u"},"status":{"allocation":{"devices":{"results":[{"request":"r"}]}}}})",
       R"({"metadata":{"namespace":"ns","name":"c","uid":"u"},"status":{"allocation":{"devices":{"config":[{"opaque":{"driver":"d"}}]}}}})"}) {
    EXPECT_FALSE(ParseClaim(bad).ok()) << bad;
  }
}

TEST(DraClaimSourceTest, HttpClientOfTheApiSocket) {
  TempDir tmp;
  const std::string address = "unix:" + (tmp.path() / "dra-api.sock").string();
  HttpServer::Options o;
  o.listen_address = address;
  o.threads = 1;
  o.handlers["/claims/default/c1"] = [](const HttpRequest&) {
    HttpResponse r;
    r.content_type = "application/json";
    r.body = R"({"metadata":{"namespace":"default","name":"c1","uid":"u1"}})";
    return r;
  };
  o.handlers["/claims/default/down"] = [](const HttpRequest&) {
    HttpResponse r;
    r.status = 503;
    r.body = "API server unreachable: connection refused\nmore";
    return r;
  };
  absl::StatusOr<std::unique_ptr<HttpServer>> server = HttpServer::Start(o);
  ASSERT_TRUE(server.ok()) << server.status();
  HttpClaimSource source(address);
  absl::StatusOr<ResourceClaim> c = source.Get("default", "c1");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->uid, "u1");
  EXPECT_TRUE(absl::IsNotFound(source.Get("default", "nope").status()));
  const absl::Status down = source.Get("default", "down").status();
  EXPECT_TRUE(absl::IsUnavailable(down));
  EXPECT_NE(down.message().find("API server unreachable"), std::string_view::npos) << down;
  EXPECT_EQ(down.message().find("more"), std::string_view::npos);  // one line
  EXPECT_TRUE(absl::IsInvalidArgument(source.Get("../x", "c1").status()));
  server->reset();
  EXPECT_TRUE(absl::IsUnavailable(source.Get("default", "c1").status()));
}

}  // namespace
}  // namespace neuron::plugin::dra
