// neuron-dra-api's two jobs against the API stand-in: publishing the pool a stand-in for the
// plugin's socket serves (created, updated, a removed device gone, stale slices deleted, the API
// server down and back; several slices with shared counters, and an API server whose
// DRAPartitionableDevices gate is off; the check of the cluster's DeviceClass neuron.aws.com
// against the NeuronCores published), and answering claim look-ups on its own socket.

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "driver-sim/controlplane/api_server.h"
#include "http/http_server.h"
#include "http/local_client.h"
#include "plugin/kubeapi/claim_server.h"
#include "plugin/kubeapi/client.h"
#include "plugin/kubeapi/slice_publisher.h"
#include "tests/http/captured_log.h"
#include "tests/support/api_stand_in.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace neuron::kubeapi {
namespace {

using nlohmann::json;
using sim::apiserver::ApiServer;
using sim::apiserver::FindKind;

const sim::apiserver::Kind& K(const char* prefix, const char* resource) {
  return *FindKind(prefix, resource);
}

json Spec(const std::vector<std::string>& devices, bool taint = false) {
  json list = json::array();
  for (const std::string& d : devices) {
    json device = {{"name", d}, {"attributes", {{"resourceType", {{"string", "neuron_device"}}}}}};
    if (taint) {
      device["taints"] = {
          {{"key", "neuron.aws.com/unhealthy"}, {"value", "hbm"}, {"effect", "NoSchedule"}}};
    }
    list.push_back(std::move(device));
  }
  return {{"driver", "neuron.aws.com"},
          {"pool", {{"name", "node-1"}, {"generation", 1}, {"resourceSliceCount", 1}}},
          {"nodeName", "node-1"},
          {"devices", std::move(list)}};
}

// The plugin's HTTP socket, serving `GET /dra/resourceslice` as the contract says:
// {"generation", "nodeName", "slices": [spec, ...]}; Set(spec) serves a pool of one slice.
class FakePlugin {
 public:
  explicit FakePlugin(const std::string& socket) {
    HttpServer::Options o;
    o.listen_address = "unix:" + socket;
    o.handlers["/dra/resourceslice"] = [this](const HttpRequest&) {
      std::lock_guard<std::mutex> lock(mu_);
      HttpResponse r;
      if (slices_.is_null()) {
        r.status = 503;
        r.body = "no hardware scan yet\n";
        return r;
      }
      r.content_type = "application/json";
      r.body =
          json{{"generation", generation_}, {"nodeName", "node-1"}, {"slices", slices_}}.dump();
      return r;
    };
    server_ = *HttpServer::Start(std::move(o));
  }
  void Set(json spec) { SetPool({std::move(spec)}); }
  void Mangle(const std::function<void(json&)>& f) {
    std::lock_guard<std::mutex> lock(mu_);
    f(slices_);
  }
  void SetPool(std::vector<json> slices) {
    std::lock_guard<std::mutex> lock(mu_);
    ++generation_;
    for (json& s : slices) {
      s["pool"]["generation"] = generation_;
      s["pool"]["resourceSliceCount"] = slices.size();
    }
    slices_ = std::move(slices);
  }

 private:
  std::mutex mu_;
  json slices_;
  uint64_t generation_ = 0;
  std::unique_ptr<HttpServer> server_;
};

class DraApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    api_ = *neuron::testing::StartApiStandIn(dir_.path());
    ASSERT_EQ(
        api_->store().Create(K("/api/v1/", "nodes"), "", {{"metadata", {{"name", "node-1"}}}}).code,
        201);
    ClientConfig config = neuron::testing::StandInClient(*api_, dir_.path());
    config.timeout = std::chrono::milliseconds(2000);
    config.connect_timeout = std::chrono::milliseconds(500);
    client_ = std::make_unique<Client>(config);
    plugin_ = std::make_unique<FakePlugin>((dir_.path() / "plugin.sock").string());
    options_.plugin_address = "unix:" + (dir_.path() / "plugin.sock").string();
    options_.node_name = "node-1";
    options_.poll = std::chrono::milliseconds(50);
    options_.backoff_initial = std::chrono::milliseconds(50);
    options_.backoff_max = std::chrono::milliseconds(400);
  }
  // The slice the API server holds for node-1 (null when none).
  json Published() {
    const auto a = api_->store().Get(K("/apis/resource.k8s.io/v1/", "resourceslices"), "",
                                     "node-1-neuron.aws.com");
    return a.code == 200 ? a.body : json();
  }
  std::vector<std::string> PublishedDevices() {
    std::vector<std::string> out;
    const json s = Published();
    if (s.is_null()) return out;
    for (const json& d : s["spec"]["devices"]) out.push_back(d["name"]);
    return out;
  }

  neuron::testing::TempDir dir_;
  std::unique_ptr<ApiServer> api_;
  std::unique_ptr<Client> client_;
  std::unique_ptr<FakePlugin> plugin_;
  PublisherOptions options_;
};

TEST_F(DraApiTest, PublishesUpdatesAndRemoves) {
  SlicePublisher publisher(*client_, options_);
  // Before the plugin's first scan nothing is published.
  EXPECT_TRUE(absl::IsFailedPrecondition(publisher.SyncOnce()));
  EXPECT_TRUE(Published().is_null());

  // A slice left from before (another name, same node and driver) and another node's slice.
  const auto& slices = K("/apis/resource.k8s.io/v1/", "resourceslices");
  json stale = {{"metadata", {{"name", "node-1-old"}}}, {"spec", Spec({"neuron-7"})}};
  ASSERT_EQ(api_->store().Create(slices, "", stale).code, 201);
  json other = {{"metadata", {{"name", "node-2-neuron.aws.com"}}}, {"spec", Spec({"neuron-0"})}};
  other["spec"]["nodeName"] = "node-2";
  ASSERT_EQ(api_->store().Create(slices, "", other).code, 201);

  plugin_->Set(Spec({"neuron-0", "neuron-1"}));
  ASSERT_TRUE(publisher.SyncOnce().ok());
  const json s = Published();
  ASSERT_FALSE(s.is_null());
  EXPECT_EQ(PublishedDevices(), (std::vector<std::string>{"neuron-0", "neuron-1"}));
  const json owner = s["metadata"]["ownerReferences"][0];
  EXPECT_EQ(owner["kind"], "Node");
  EXPECT_EQ(owner["name"], "node-1");
  EXPECT_EQ(owner["uid"],
            api_->store().Get(K("/api/v1/", "nodes"), "", "node-1").body["metadata"]["uid"]);
  EXPECT_EQ(api_->store().Get(slices, "", "node-1-old").code, 404);
  EXPECT_EQ(api_->store().Get(slices, "", "node-2-neuron.aws.com").code, 200);
  EXPECT_EQ(publisher.published_generation(), 1u);

  // A taint (health) changes the spec: the slice follows.
  plugin_->Set(Spec({"neuron-0", "neuron-1"}, /*taint=*/true));
  ASSERT_TRUE(publisher.SyncOnce().ok());
  EXPECT_EQ(Published()["spec"]["devices"][1]["taints"][0]["effect"], "NoSchedule");
  // A device goes: no slice claims it any more.
  plugin_->Set(Spec({"neuron-0"}));
  ASSERT_TRUE(publisher.SyncOnce().ok());
  EXPECT_EQ(PublishedDevices(), std::vector<std::string>{"neuron-0"});
}

// The EFAs are a pool of their own driver's: a slice listed, written and deleted apart from
// neuron.aws.com's, and gone once the plugin's document has none (--dra.efa=false).
TEST_F(DraApiTest, EachDriversPoolIsPublishedApart) {
  SlicePublisher publisher(*client_, options_);
  json efa = Spec({"efa-rdmap16s25"});
  efa["driver"] = "efa.neuron.aws.com";
  plugin_->SetPool({Spec({"neuron-0"}), efa});
  ASSERT_TRUE(publisher.SyncOnce().ok());
  EXPECT_EQ(PublishedDevices(), (std::vector<std::string>{"neuron-0"}));
  const auto& slices = K("/apis/resource.k8s.io/v1/", "resourceslices");
  const auto stored = api_->store().Get(slices, "", "node-1-efa.neuron.aws.com");
  ASSERT_EQ(stored.code, 200);
  EXPECT_EQ(stored.body["spec"]["driver"], "efa.neuron.aws.com");
  EXPECT_EQ(stored.body["spec"]["pool"]["name"], "node-1");
  EXPECT_EQ(stored.body["spec"]["pool"]["resourceSliceCount"], 1);
  EXPECT_EQ(stored.body["spec"]["devices"][0]["name"], "efa-rdmap16s25");
  EXPECT_EQ(Published()["spec"]["pool"]["resourceSliceCount"], 1);
  EXPECT_EQ(publisher.writes().creates, 2u);

  plugin_->SetPool({Spec({"neuron-0"})});
  ASSERT_TRUE(publisher.SyncOnce().ok());
  EXPECT_EQ(api_->store().Get(slices, "", "node-1-efa.neuron.aws.com").code, 404);
  EXPECT_EQ(PublishedDevices(), (std::vector<std::string>{"neuron-0"}));
  EXPECT_EQ(publisher.writes().total(), 3u);  // the delete alone: neuron.aws.com's is unchanged
}

TEST_F(DraApiTest, AnotherWritersEditIsReplaced) {
  SlicePublisher publisher(*client_, options_);
  plugin_->Set(Spec({"neuron-0"}));
  ASSERT_TRUE(publisher.SyncOnce().ok());
  // Someone else edits the slice: the next round reads it (its resourceVersion) and puts ours.
  json edited = Published();
  edited["spec"]["devices"][0]["name"] = "neuron-9";
  ASSERT_EQ(api_->store()
                .Update(K("/apis/resource.k8s.io/v1/", "resourceslices"), "",
                        "node-1-neuron.aws.com", edited, false)
                .code,
            200);
  plugin_->Set(Spec({"neuron-0", "neuron-1"}));
  ASSERT_TRUE(publisher.SyncOnce().ok());
  EXPECT_EQ(PublishedDevices(), (std::vector<std::string>{"neuron-0", "neuron-1"}));
}

TEST_F(DraApiTest, TheNewestSliceArrivesWhenTheApiServerComesBack) {
  SlicePublisher publisher(*client_, options_);
  plugin_->Set(Spec({"neuron-0", "neuron-1"}));
  publisher.Start();
  ASSERT_TRUE(neuron::testing::WaitUntil([&] { return PublishedDevices().size() == 2; },
                                         std::chrono::seconds(10)));
  ASSERT_TRUE(api_->SetReachable(false).ok());
  plugin_->Set(Spec({"neuron-1"}));
  std::this_thread::sleep_for(std::chrono::milliseconds(600));  // several failed attempts
  ASSERT_TRUE(api_->SetReachable(true).ok());
  const auto back = std::chrono::steady_clock::now();
  ASSERT_TRUE(neuron::testing::WaitUntil(
      [&] { return PublishedDevices() == std::vector<std::string>{"neuron-1"}; },
      std::chrono::seconds(10)));
  // Within the back-off cap (400 ms) and a request, not a fixed long retry period.
  EXPECT_LT(std::chrono::steady_clock::now() - back, std::chrono::milliseconds(2000));
  publisher.Stop();
}

// A partitionable pool as --dra.partitionable=true serves it (docs/kubelet-api.md#resourceslices):
// slices[0] two Neuron devices consuming their counters whole, an EFA and (UltraServer)
// neuron-node; slices[1] the counter set; slices[2] (with `cores`) four NeuronCores.
std::vector<json> Partitionable(bool ultraserver, bool cores) {
  auto consumes = [](json counters) {
    return json::array({{{"counterSet", "neuron-devices"}, {"counters", std::move(counters)}}});
  };
  json first = Spec({"neuron-0", "neuron-1", "efa-0"});
  first["devices"][2]["attributes"]["resourceType"]["string"] = "efa";
  json both = json::object();
  for (int i = 0; i < 2; ++i) {
    const std::string c = "neuron-" + std::to_string(i);
    first["devices"][i]["consumesCounters"] = consumes({{c, {{"value", "2"}}}});
    both[c] = {{"value", "2"}};
  }
  if (ultraserver) {
    first["devices"].push_back({{"name", "neuron-node"},
                                {"attributes", {{"resourceType", {{"string", "neuron_node"}}}}},
                                {"consumesCounters", consumes(both)}});
  }
  json counters = first;
  counters.erase("devices");
  counters["sharedCounters"] = {{{"name", "neuron-devices"}, {"counters", both}}};
  std::vector<json> pool = {first, counters};
  if (cores) {
    json core_slice = Spec({"neuroncore-0", "neuroncore-1", "neuroncore-2", "neuroncore-3"});
    for (int c = 0; c < 4; ++c) {
      core_slice["devices"][c]["attributes"]["resourceType"]["string"] = "neuron_core";
      core_slice["devices"][c]["consumesCounters"] =
          consumes({{"neuron-" + std::to_string(c / 2), {{"value", "1"}}}});
    }
    pool.push_back(core_slice);
  }
  return pool;
}

// Every slice of node-1's pool the API server holds, by name.
std::map<std::string, json> PoolSlices(ApiServer& api) {
  std::map<std::string, json> out;
  const auto list = api.store().List(K("/apis/resource.k8s.io/v1/", "resourceslices"), "", "",
                                     "spec.nodeName=node-1");
  for (const json& s : list.body["items"]) out[s["metadata"]["name"]] = s;
  return out;
}

std::vector<std::string> DeviceNames(const json& slice) {
  std::vector<std::string> out;
  for (const json& d : slice["spec"].value("devices", json::array())) out.push_back(d["name"]);
  return out;
}

// A pool whose slices disagree with the document's generation is not published: a consumer
// could otherwise take slices of two pools for one.
TEST_F(DraApiTest, SlicesOfAnotherGenerationAreRefused) {
  SlicePublisher publisher(*client_, options_);
  std::vector<json> pool = Partitionable(/*ultraserver=*/false, /*cores=*/false);
  plugin_->SetPool(pool);
  ASSERT_TRUE(publisher.SyncOnce().ok());
  plugin_->SetPool(pool);  // generation 2
  plugin_->Mangle([](json& slices) { slices[1]["pool"]["generation"] = 1; });
  const absl::Status s = publisher.SyncOnce();
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_EQ(s.message(), "the plugin's slices[1] has pool generation 1, its document 2");
  EXPECT_EQ(PoolSlices(*api_).at("node-1-neuron.aws.com")["spec"]["pool"]["generation"], 1)
      << "what was published stays";
}

// The resync is a check, not a rewrite (the library's controller): over three resyncs an
// unchanged pool, a tainted device included, is not written, and the taint keeps the timeAdded
// the server gave it (the server stamps a taint sent without one anew, and the seconds move on
// between the resyncs).
TEST_F(DraApiTest, ResyncsOfAnUnchangedPoolWriteNothingAndKeepTaintTimes) {
  options_.resync = std::chrono::milliseconds(0);  // every round re-checks
  SlicePublisher publisher(*client_, options_);
  std::vector<json> pool = Partitionable(/*ultraserver=*/false, /*cores=*/true);
  pool[0]["devices"][1]["taints"] = Spec({"neuron-1"}, /*taint=*/true)["devices"][0]["taints"];
  plugin_->SetPool(pool);
  ASSERT_TRUE(publisher.SyncOnce().ok());
  const std::map<std::string, json> first = PoolSlices(*api_);
  ASSERT_EQ(first.size(), 3u);
  const json added =
      first.at("node-1-neuron.aws.com")["spec"]["devices"][1]["taints"][0]["timeAdded"];
  ASSERT_TRUE(added.is_string()) << first.at("node-1-neuron.aws.com").dump();
  EXPECT_EQ(publisher.writes().creates, 3u);
  const uint64_t writes = publisher.writes().total();
  for (int resync = 0; resync < 3; ++resync) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    plugin_->SetPool(pool);  // the plugin's document generation moves; the content does not
    ASSERT_TRUE(publisher.SyncOnce().ok());
  }
  EXPECT_EQ(publisher.writes().total(), writes);
  const std::map<std::string, json> now = PoolSlices(*api_);
  for (const auto& [name, s] : now) {
    EXPECT_EQ(s["metadata"]["resourceVersion"], first.at(name)["metadata"]["resourceVersion"])
        << name;
  }
  EXPECT_EQ(now.at("node-1-neuron.aws.com")["spec"]["devices"][1]["taints"][0]["timeAdded"], added);
}

// pool.generation as the library's controller keeps it: one slice changing keeps it (one write
// is atomic for a consumer), two slices changing raise it for every slice.
TEST_F(DraApiTest, OneSliceChangedKeepsTheGenerationTwoRaiseIt) {
  SlicePublisher publisher(*client_, options_);
  std::vector<json> pool = Partitionable(/*ultraserver=*/false, /*cores=*/true);
  plugin_->SetPool(pool);
  ASSERT_TRUE(publisher.SyncOnce().ok());
  const auto generations = [&] {
    std::set<int64_t> out;
    for (const auto& [name, s] : PoolSlices(*api_)) {
      out.insert(s["spec"]["pool"]["generation"].get<int64_t>());
    }
    return out;
  };
  EXPECT_EQ(generations(), std::set<int64_t>{1});
  pool[0]["devices"][1]["taints"] = Spec({"neuron-1"}, /*taint=*/true)["devices"][0]["taints"];
  plugin_->SetPool(pool);
  ASSERT_TRUE(publisher.SyncOnce().ok());
  EXPECT_EQ(generations(), std::set<int64_t>{1});
  EXPECT_EQ(publisher.writes().updates, 1u);
  pool[0]["devices"][0]["taints"] = pool[0]["devices"][1]["taints"];
  pool[2]["devices"][0]["taints"] = pool[0]["devices"][1]["taints"];
  plugin_->SetPool(pool);
  ASSERT_TRUE(publisher.SyncOnce().ok());
  EXPECT_EQ(generations(), std::set<int64_t>{2});
  EXPECT_EQ(publisher.writes().updates, 4u) << "every slice carries the new generation";
}

TEST(DraApiPlan, WithoutCountersOnlyWholeDevicesStayAndLoseTheirConsumption) {
  std::vector<json> pool = Partitionable(/*ultraserver=*/true, /*cores=*/true);
  std::vector<PlannedSlice> plan = PlanPool("node-1", pool, false, {});
  ASSERT_EQ(plan.size(), 3u);
  EXPECT_EQ(plan[0].name, "node-1-neuron.aws.com-1") << "the counter slice first";
  EXPECT_EQ(plan[1].name, "node-1-neuron.aws.com");
  EXPECT_EQ(plan[2].name, "node-1-neuron.aws.com-2");
  plan = PlanPool("node-1", pool, true, {});
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0].name, "node-1-neuron.aws.com");
  EXPECT_EQ(plan[0].spec["pool"]["resourceSliceCount"], 1);
  EXPECT_EQ(DeviceNames({{"spec", plan[0].spec}}),
            (std::vector<std::string>{"neuron-0", "neuron-1", "efa-0"}));
  for (const json& d : plan[0].spec["devices"]) EXPECT_FALSE(d.contains("consumesCounters"));
  // A refused device is left out; a slice other than the first left empty goes.
  plan = PlanPool("node-1", pool, false,
                  {"neuron-1", "neuroncore-0", "neuroncore-1", "neuroncore-2", "neuroncore-3"});
  ASSERT_EQ(plan.size(), 2u);
  EXPECT_EQ(DeviceNames({{"spec", plan[1].spec}}),
            (std::vector<std::string>{"neuron-0", "efa-0", "neuron-node"}));
}

TEST_F(DraApiTest, PublishesEverySliceOfThePoolCountersFirst) {
  SlicePublisher publisher(*client_, options_);
  plugin_->SetPool(Partitionable(/*ultraserver=*/false, /*cores=*/true));
  ASSERT_TRUE(publisher.SyncOnce().ok());
  std::map<std::string, json> slices = PoolSlices(*api_);
  ASSERT_EQ(slices.size(), 3u);
  for (const auto& [name, s] : slices) {
    EXPECT_EQ(s["spec"]["pool"]["generation"], 1) << name;
    EXPECT_EQ(s["spec"]["pool"]["resourceSliceCount"], 3) << name;
    EXPECT_EQ(s["metadata"]["ownerReferences"][0]["name"], "node-1") << name;
  }
  auto rv = [&](const std::string& name) {
    return std::stoull(slices.at(name)["metadata"]["resourceVersion"].get<std::string>());
  };
  EXPECT_LT(rv("node-1-neuron.aws.com-1"), rv("node-1-neuron.aws.com")) << "counters first";
  EXPECT_EQ(DeviceNames(slices.at("node-1-neuron.aws.com-2")).size(), 4u);
  EXPECT_EQ(slices.at("node-1-neuron.aws.com-1")["spec"]["sharedCounters"][0]["name"],
            "neuron-devices");
  // Back to one slice (--dra.partitionable=false): the others are deleted.
  plugin_->Set(Spec({"neuron-0", "neuron-1"}));
  ASSERT_TRUE(publisher.SyncOnce().ok());
  slices = PoolSlices(*api_);
  ASSERT_EQ(slices.size(), 1u);
  EXPECT_EQ(slices.begin()->second["spec"]["pool"]["resourceSliceCount"], 1);
}

// DRAPartitionableDevices off: the server clears sharedCounters and consumesCounters. No core,
// no neuron-node is published, the whole devices go without consumesCounters, until the gate
// is on and a resync tries again.
TEST_F(DraApiTest, WithTheGateOffNoCoreIsPublishedUntilItIsOn) {
  api_->store().SetFeatureGates({.partitionable_devices = false});
  options_.resync = std::chrono::milliseconds(0);
  SlicePublisher publisher(*client_, options_);
  plugin_->SetPool(Partitionable(/*ultraserver=*/true, /*cores=*/true));
  for (int round = 0; round < 2; ++round) {
    ASSERT_TRUE(publisher.SyncOnce().ok());
    const std::map<std::string, json> slices = PoolSlices(*api_);
    ASSERT_EQ(slices.size(), 1u) << round;
    const json& only = slices.at("node-1-neuron.aws.com");
    EXPECT_EQ(DeviceNames(only), (std::vector<std::string>{"neuron-0", "neuron-1", "efa-0"}));
    EXPECT_EQ(only["spec"]["pool"]["resourceSliceCount"], 1);
    for (const json& d : only["spec"]["devices"]) EXPECT_FALSE(d.contains("consumesCounters"));
  }
  EXPECT_EQ(publisher.class_check().gets(), 0u) << "no core is published: no class to check";
  api_->store().SetFeatureGates({.partitionable_devices = true});
  ASSERT_TRUE(publisher.SyncOnce().ok());
  EXPECT_EQ(publisher.class_check().verdict(), ClassVerdict::kAbsent);
  const std::map<std::string, json> slices = PoolSlices(*api_);
  ASSERT_EQ(slices.size(), 3u);
  EXPECT_EQ(DeviceNames(slices.at("node-1-neuron.aws.com")).back(), "neuron-node");
  EXPECT_EQ(slices.at("node-1-neuron.aws.com")["spec"]["devices"][3]["consumesCounters"].size(),
            1u);
}

// A degraded device's taint has effect None (Kubernetes 1.35). An API server before 1.35 refuses
// it: the pool is written with NoSchedule instead, and the log says so once.
TEST_F(DraApiTest, EffectNoneIsWrittenNoScheduleWhereTheServerRefusesIt) {
  neuron::testing::CapturedLog log("dra-api.slices");
  json spec = Spec({"neuron-0", "neuron-1"});
  spec["devices"][1]["taints"] = {{{"key", "neuron.aws.com/unhealthy"},
                                   {"value", "degraded-corrected-ECC"},
                                   {"effect", "None"}}};
  plugin_->Set(spec);
  {
    SlicePublisher publisher(*client_, options_);
    ASSERT_TRUE(publisher.SyncOnce().ok());
    EXPECT_EQ(Published()["spec"]["devices"][1]["taints"][0]["effect"], "None");
  }
  api_->store().SetFeatureGates({.partitionable_devices = true, .taint_effect_none = false});
  api_->store().Delete(K("/apis/resource.k8s.io/v1/", "resourceslices"), "",
                       "node-1-neuron.aws.com");
  SlicePublisher publisher(*client_, options_);
  ASSERT_TRUE(publisher.SyncOnce().ok());
  EXPECT_EQ(Published()["spec"]["devices"][1]["taints"][0]["effect"], "NoSchedule");
  ASSERT_TRUE(publisher.SyncOnce().ok());
  EXPECT_EQ(log.Count("refuses device taint effect None"), 1);
}

// The gate turned off after the pool was published: the stored slices keep their fields (the
// server keeps a field the old object uses), but new cores come back without consumesCounters
// and are left out.
TEST_F(DraApiTest, ADeviceReturnedWithoutItsCountersIsLeftOut) {
  SlicePublisher publisher(*client_, options_);
  plugin_->SetPool(Partitionable(/*ultraserver=*/false, /*cores=*/false));
  ASSERT_TRUE(publisher.SyncOnce().ok());
  ASSERT_EQ(PoolSlices(*api_).size(), 2u);
  api_->store().SetFeatureGates({.partitionable_devices = false});
  plugin_->SetPool(Partitionable(/*ultraserver=*/false, /*cores=*/true));
  ASSERT_TRUE(publisher.SyncOnce().ok());
  const std::map<std::string, json> slices = PoolSlices(*api_);
  ASSERT_EQ(slices.size(), 2u) << "the cores' slice is gone";
  // Two slices changed (their resourceSliceCount) and one was added then left: a new
  // generation, one for the whole pool.
  for (const auto& [name, s] : slices) {
    EXPECT_EQ(s["spec"]["pool"]["resourceSliceCount"], 2) << name;
    EXPECT_EQ(s["spec"]["pool"]["generation"], slices.begin()->second["spec"]["pool"]["generation"])
        << name;
    EXPECT_GT(s["spec"]["pool"]["generation"], 1) << name;
  }
  EXPECT_EQ(slices.at("node-1-neuron.aws.com")["spec"]["devices"][0]["consumesCounters"].size(),
            1u);
}

// AWS's DeviceClass neuron.aws.com selects by driver alone. Once the pool holds NeuronCores it
// selects them too: checked when they appear, then only when the kinds change or at a resync,
// and said once (class_check.h). Before, with no core, the class is not read at all.
TEST_F(DraApiTest, TheClassIsCheckedWhenCoresAppearAndSaidOnce) {
  neuron::testing::CapturedLog log("dra-api.class");
  ASSERT_EQ(
      api_->store()
          .Create(K("/apis/resource.k8s.io/v1/", "deviceclasses"), "",
                  {{"metadata", {{"name", "neuron.aws.com"}}},
                   {"spec",
                    {{"selectors",
                      {{{"cel", {{"expression", "device.driver == \"neuron.aws.com\""}}}}}}}}})
          .code,
      201);
  SlicePublisher publisher(*client_, options_);  // resync 60 s: none due within the test
  plugin_->SetPool(Partitionable(/*ultraserver=*/false, /*cores=*/false));
  ASSERT_TRUE(publisher.SyncOnce().ok());
  ASSERT_TRUE(publisher.SyncOnce().ok());
  EXPECT_EQ(publisher.class_check().verdict(), ClassVerdict::kNotChecked);
  EXPECT_EQ(publisher.class_check().gets(), 0u);

  plugin_->SetPool(Partitionable(/*ultraserver=*/false, /*cores=*/true));
  ASSERT_TRUE(publisher.SyncOnce().ok());
  EXPECT_EQ(publisher.class_check().verdict(), ClassVerdict::kSelectsCores);
  // New generations of the same kinds (health changes) do not read it again.
  for (int round = 0; round < 3; ++round) {
    plugin_->SetPool(Partitionable(/*ultraserver=*/false, /*cores=*/true));
    ASSERT_TRUE(publisher.SyncOnce().ok());
  }
  EXPECT_EQ(publisher.class_check().gets(), 1u);
  EXPECT_EQ(log.Count("DeviceClass neuron.aws.com selects NeuronCores (its selectors: "
                      "`device.driver == \"neuron.aws.com\"`"),
            1);
}

// Every resync reads the class again; an unchanged outcome is not said again.
TEST_F(DraApiTest, TheClassIsReadAgainAtEveryResync) {
  neuron::testing::CapturedLog log("dra-api.class");
  options_.resync = std::chrono::milliseconds(0);  // every round re-checks
  SlicePublisher publisher(*client_, options_);
  plugin_->SetPool(Partitionable(/*ultraserver=*/false, /*cores=*/true));
  for (int round = 0; round < 3; ++round) ASSERT_TRUE(publisher.SyncOnce().ok());
  EXPECT_EQ(publisher.class_check().gets(), 3u);
  EXPECT_EQ(publisher.class_check().verdict(), ClassVerdict::kAbsent);
  EXPECT_EQ(log.Count("no DeviceClass neuron.aws.com in the cluster"), 1);
}

TEST_F(DraApiTest, ClaimsAreServedPruned) {
  const auto& claims = K("/apis/resource.k8s.io/v1/", "resourceclaims");
  json claim = {{"metadata", {{"name", "train-neurons"}, {"labels", {{"a", "b"}}}}},
                {"spec", {{"devices", {{"requests", json::array()}}}}}};
  const auto made = api_->store().Create(claims, "ml", claim);
  ASSERT_EQ(made.code, 201);
  json with_status = made.body;
  with_status["status"] = {
      {"allocation",
       {{"devices",
         {{"results",
           {{{"request", "neurons"},
             {"driver", "neuron.aws.com"},
             {"pool", "node-1"},
             {"device", "neuron-0"},
             {"adminAccess", true}}}},
          {"config",
           {{{"source", "FromClaim"},
             {"requests", {"neurons"}},
             {"opaque",
              {{"driver", "neuron.aws.com"},
               {"parameters", {{"kind", "NeuronConfig"}, {"logicalNeuronCore", 2}}}}}}}}}},
        {"nodeSelector", json::object()}}}};
  ASSERT_EQ(api_->store().Update(claims, "ml", "train-neurons", with_status, true).code, 200);

  HttpServer::Options o;
  const std::string socket = (dir_.path() / "dra-api.sock").string();
  o.listen_address = "unix:" + socket;
  o.fallback = [this](const HttpRequest& r) { return ServeClaim(*client_, r); };
  auto server = *HttpServer::Start(std::move(o));
  const std::string address = "unix:" + socket;

  absl::StatusOr<LocalResponse> r = LocalGet(address, "/claims/ml/train-neurons");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->status, 200) << r->body;
  const json want = {
      {"metadata",
       {{"namespace", "ml"}, {"name", "train-neurons"}, {"uid", made.body["metadata"]["uid"]}}},
      {"status",
       {{"allocation",
         {{"devices",
           {{"results",
             {{{"request", "neurons"},
               {"driver", "neuron.aws.com"},
               {"pool", "node-1"},
               {"device", "neuron-0"},
               {"adminAccess", true}}}},
            {"config", with_status["status"]["allocation"]["devices"]["config"]}}}}}}}};
  EXPECT_EQ(json::parse(r->body), want);

  EXPECT_EQ(LocalGet(address, "/claims/ml/missing")->status, 404);
  EXPECT_EQ(LocalGet(address, "/claims/ML/x")->status, 404);
  ASSERT_TRUE(api_->SetReachable(false).ok());
  r = LocalGet(address, "/claims/ml/train-neurons", {.timeout = std::chrono::seconds(5)});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(std::count(r->body.begin(), r->body.end(), '\n'), 1) << r->body;
}

TEST(DraApiBackoff, DoublesUpToTheCapWithJitter) {
  using std::chrono::milliseconds;
  EXPECT_EQ(Backoff(1, milliseconds(500), milliseconds(30000), 0.0), milliseconds(500));
  EXPECT_EQ(Backoff(3, milliseconds(500), milliseconds(30000), 0.0), milliseconds(2000));
  EXPECT_EQ(Backoff(40, milliseconds(500), milliseconds(30000), 0.0), milliseconds(30000));
  EXPECT_EQ(Backoff(40, milliseconds(500), milliseconds(30000), 0.999), milliseconds(15015));
}

}  // namespace
}  // namespace neuron::kubeapi
