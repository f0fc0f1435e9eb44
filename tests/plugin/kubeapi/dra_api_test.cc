// neuron-dra-api's two jobs against the API stand-in: publishing the slice a stand-in for the
// plugin's socket serves (created, updated, a removed device gone, stale slices deleted, the API
// server down and back), and answering claim look-ups on its own socket.

#include <gtest/gtest.h>

#include <mutex>

#include "driver-sim/apiserver/api_server.h"
#include "http/http_server.h"
#include "http/local_client.h"
#include "plugin/kubeapi/claim_server.h"
#include "plugin/kubeapi/client.h"
#include "plugin/kubeapi/slice_publisher.h"
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

// The plugin's HTTP socket, serving `GET /dra/resourceslice` as the contract says.
class FakePlugin {
 public:
  explicit FakePlugin(const std::string& socket) {
    HttpServer::Options o;
    o.listen_address = "unix:" + socket;
    o.handlers["/dra/resourceslice"] = [this](const HttpRequest&) {
      std::lock_guard<std::mutex> lock(mu_);
      HttpResponse r;
      if (spec_.is_null()) {
        r.status = 503;
        r.body = "no hardware scan yet\n";
        return r;
      }
      r.content_type = "application/json";
      r.body = json{{"generation", generation_}, {"nodeName", "node-1"}, {"spec", spec_}}.dump();
      return r;
    };
    server_ = *HttpServer::Start(std::move(o));
  }
  void Set(json spec) {
    std::lock_guard<std::mutex> lock(mu_);
    spec_ = std::move(spec);
    ++generation_;
  }

 private:
  std::mutex mu_;
  json spec_;
  uint64_t generation_ = 0;
  std::unique_ptr<HttpServer> server_;
};

class DraApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    neuron::testing::WriteFile(dir_.path() / "token", "t\n");
    ApiServer::Options o;
    o.cert_dir = dir_.str();
    o.tokens = {"t"};
    api_ = *ApiServer::Start(o);
    ASSERT_EQ(
        api_->store().Create(K("/api/v1/", "nodes"), "", {{"metadata", {{"name", "node-1"}}}}).code,
        201);
    client_ = std::make_unique<Client>(
        ClientConfig{api_->url(), (dir_.path() / "token").string(), api_->ca_file(),
                     std::chrono::milliseconds(2000), std::chrono::milliseconds(500)});
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
             {"adminAccess", false}}}},
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
               {"device", "neuron-0"}}}},
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
