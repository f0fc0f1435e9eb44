// The Node's NeuronHealth condition (plugin/kubeapi/node_condition.h) against the API stand-in,
// from a stand-in for the plugin's `GET /health` on a Unix socket, on a fake clock: set and
// cleared with an Event each, a message change without one, the heartbeat refreshed while
// unchanged, Unknown when the plugin is unreachable or its evidence stale (and nothing written
// while it starts), an earlier instance's condition taken over, and AWS's node-problem-detector's
// left alone (stand-down, said once, taken back once nobody refreshes it).

#include "plugin/kubeapi/node_condition.h"

#include <gtest/gtest.h>

#include <mutex>

#include "absl/time/time.h"
#include "driver-sim/controlplane/api_server.h"
#include "http/http_server.h"
#include "tests/http/captured_log.h"
#include "tests/support/api_stand_in.h"
#include "tests/support/temp_dir.h"

namespace neuron::kubeapi {
namespace {

using nlohmann::json;
using sim::apiserver::FindKind;
using std::chrono::minutes;
using std::chrono::seconds;
using Time = std::chrono::system_clock::time_point;

std::string Rfc3339(Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::FromChrono(t), absl::UTCTimeZone());
}

// The plugin's socket serving `GET /health` as its contract says: 200 with the document, or 304
// without a body for `?unless=<generation>` while it is current. Set() is a new generation;
// Read() moves evidence_time alone, as each reading of the plugin does.
class FakeHealth {
 public:
  explicit FakeHealth(std::string socket) : socket_(std::move(socket)) { Up(); }
  void Up() {
    HttpServer::Options o;
    o.listen_address = "unix:" + socket_;
    o.handlers["/health"] = [this](const HttpRequest& r) { return Answer(r); };
    server_ = *HttpServer::Start(std::move(o));
  }
  void Down() { server_.reset(); }
  void Set(const std::string& status, const std::string& reason, Time evidence,
           const std::string& message = "neuron3: uncorrected ECC errors (hbm)") {
    std::lock_guard<std::mutex> lock(mu_);
    ++generation_;
    condition_ = {{"status", status}, {"reason", reason}, {"message", message}};
    evidence_ = evidence;
  }
  void Read(Time evidence) {
    std::lock_guard<std::mutex> lock(mu_);
    evidence_ = evidence;
  }
  // The devices' entries of a new generation (their action, reasons and remediation).
  void SetDevices(json devices) {
    std::lock_guard<std::mutex> lock(mu_);
    ++generation_;
    devices_ = std::move(devices);
  }
  int not_modified() const {
    std::lock_guard<std::mutex> lock(mu_);
    return not_modified_;
  }

 private:
  HttpResponse Answer(const HttpRequest& r) {
    std::lock_guard<std::mutex> lock(mu_);
    HttpResponse out;
    if (r.query == "unless=" + std::to_string(generation_)) {
      ++not_modified_;
      out.status = 304;
      return out;
    }
    json doc = {{"generation", generation_},
                {"devices", devices_},
                {"efas", json::array()},
                {"node_condition", condition_}};
    if (evidence_) doc["evidence_time"] = Rfc3339(*evidence_);
    out.content_type = "application/json";
    out.body = doc.dump();
    return out;
  }

  const std::string socket_;
  mutable std::mutex mu_;
  uint64_t generation_ = 1;
  json condition_ = {{"status", "False"}, {"reason", "NeuronHasNoError"}, {"message", ""}};
  std::optional<Time> evidence_;
  json devices_ = json::array();
  int not_modified_ = 0;
  std::unique_ptr<HttpServer> server_;
};

class NodeConditionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    api_ = *neuron::testing::StartApiStandIn(dir_.path());
    ASSERT_EQ(api_->store()
                  .Create(*FindKind("/api/v1/", "nodes"), "", {{"metadata", {{"name", "node-1"}}}})
                  .code,
              201);
    client_ = std::make_unique<Client>(neuron::testing::StandInClient(*api_, dir_.path()));
    plugin_ = std::make_unique<FakeHealth>((dir_.path() / "plugin.sock").string());
    options_.plugin_address = "unix:" + (dir_.path() / "plugin.sock").string();
    options_.node_name = "node-1";
    options_.plugin_timeout = std::chrono::milliseconds(500);
    options_.now = [this] {
      std::lock_guard<std::mutex> lock(clock_mu_);
      return now_;
    };
  }
  void Advance(std::chrono::seconds d) {
    std::lock_guard<std::mutex> lock(clock_mu_);
    now_ += d;
  }
  Time Now() { return options_.now(); }
  json Node() { return api_->store().Get(*FindKind("/api/v1/", "nodes"), "", "node-1").body; }
  // The Node's NeuronHealth condition (null when none).
  json Health() {
    for (const json& c : Node().value("/status/conditions"_json_pointer, json::array())) {
      if (c["type"] == "NeuronHealth") return c;
    }
    return json();
  }
  std::vector<json> Events() {
    return api_->store()
        .List(*FindKind("/api/v1/", "events"), "default", "", "")
        .body["items"]
        .get<std::vector<json>>();
  }
  // Writes the condition as another writer (node-problem-detector) would.
  void WriteAsNpd(const std::string& status, const std::string& reason, Time heartbeat) {
    json node = Node();
    node["status"]["conditions"] = {{{"type", "NeuronHealth"},
                                     {"status", status},
                                     {"reason", reason},
                                     {"message", "written by NPD"},
                                     {"lastHeartbeatTime", Rfc3339(heartbeat)},
                                     {"lastTransitionTime", Rfc3339(heartbeat)}}};
    node["metadata"].erase("resourceVersion");
    ASSERT_EQ(api_->store().Update(*FindKind("/api/v1/", "nodes"), "", "node-1", node, true).code,
              200);
  }

  neuron::testing::TempDir dir_;
  std::unique_ptr<sim::apiserver::ApiServer> api_;
  std::unique_ptr<Client> client_;
  std::unique_ptr<FakeHealth> plugin_;
  ConditionOptions options_;
  std::mutex clock_mu_;
  Time now_ = std::chrono::time_point_cast<std::chrono::seconds>(std::chrono::system_clock::now());
};

TEST_F(NodeConditionTest, SetAndClearedWithAnEventEach) {
  neuron::testing::CapturedLog log("dra-api.condition");
  ConditionWriter writer(*client_, options_);
  plugin_->Set("True", "NeuronHasError_HBM_UNCORRECTABLE_ERROR", Now());
  ASSERT_TRUE(writer.SyncOnce().ok());
  const json set = Health();
  ASSERT_FALSE(set.is_null()) << Node().dump();
  EXPECT_EQ(set["status"], "True");
  EXPECT_EQ(set["reason"], "NeuronHasError_HBM_UNCORRECTABLE_ERROR");
  EXPECT_EQ(set["message"], "neuron3: uncorrected ECC errors (hbm)");
  EXPECT_EQ(set["lastTransitionTime"], Rfc3339(Now()));
  EXPECT_EQ(set["lastHeartbeatTime"], Rfc3339(Now()));
  ASSERT_EQ(Events().size(), 1u);
  const json event = Events()[0];
  EXPECT_EQ(event["type"], "Warning");
  EXPECT_EQ(event["reason"], "NeuronHasError_HBM_UNCORRECTABLE_ERROR");
  EXPECT_EQ(event["involvedObject"]["kind"], "Node");
  EXPECT_EQ(event["involvedObject"]["name"], "node-1");
  EXPECT_EQ(event["involvedObject"]["uid"], Node()["metadata"]["uid"]);
  EXPECT_EQ(event["source"], (json{{"component", "neuron-dra-api"}, {"host", "node-1"}}));
  EXPECT_TRUE(
      log.Contains("node node-1: NeuronHealth True (NeuronHasError_HBM_UNCORRECTABLE_ERROR)"));

  // Unchanged: the plugin answers 304 and nothing is written.
  Advance(seconds(1));
  ASSERT_TRUE(writer.SyncOnce().ok());
  EXPECT_GE(plugin_->not_modified(), 1);
  EXPECT_EQ(writer.stats().patches, 1u);

  // Health returns: False, a new transition time, a Normal Event.
  Advance(seconds(1));
  plugin_->Set("False", "NeuronHasNoError", Now(), "");
  ASSERT_TRUE(writer.SyncOnce().ok());
  EXPECT_EQ(Health()["status"], "False");
  EXPECT_EQ(Health()["reason"], "NeuronHasNoError");
  EXPECT_EQ(Health()["lastTransitionTime"], Rfc3339(Now()));
  ASSERT_EQ(Events().size(), 2u);
  EXPECT_EQ(writer.stats().events, 2u);
  EXPECT_EQ(writer.condition()->status, "False");
}

// Every step of the health policy on a device is an Event on the Node: the action, a refused
// reset, each failed try and the return. Where things stood at start is not one.
TEST_F(NodeConditionTest, EachRemediationStepIsAnEvent) {
  ConditionWriter writer(*client_, options_);
  auto device = [](const std::string& action, const std::string& phase, int tries,
                   const std::string& message) {
    json d = {{"device", 3}, {"action", action}, {"reasons", {"state INVALID"}}};
    if (!phase.empty()) {
      d["remediation"] = {{"phase", phase}, {"tries", tries}, {"message", message}};
    }
    return json::array({d, {{"device", 4}, {"action", "taint"}, {"reasons", {"absent"}}}});
  };
  auto device_events = [&] {
    std::vector<json> out;
    for (const json& e : Events()) {
      if (e["reason"].get<std::string>().starts_with("NeuronDevice")) out.push_back(e);
    }
    return out;
  };
  plugin_->Read(Now());
  plugin_->SetDevices(device("ignore", "", 0, ""));
  ASSERT_TRUE(writer.SyncOnce().ok());
  ASSERT_TRUE(writer.SyncOnce().ok());  // the Node is known from the first round on
  EXPECT_TRUE(device_events().empty()) << "neuron4's taint was there before this writer";
  const std::vector<std::pair<json, std::string>> steps{
      {device("reset", "", 0, ""), "NeuronDeviceReset"},
      {device("reset", "refused", 0, "reset refused: in a pod's allocation or prepared claim"),
       "NeuronDeviceResetRefused"},
      {device("reset", "failed", 1, "the active check failed (exit 1)"), "NeuronDeviceResetFailed"},
      {device("reset", "failed", 2, "the active check failed (exit 1)"), "NeuronDeviceResetFailed"},
      {device("ignore", "returned", 0, "reset and the active check passed"),
       "NeuronDeviceReturned"}};
  for (const auto& [devices, reason] : steps) {
    Advance(seconds(1));
    plugin_->SetDevices(devices);
    ASSERT_TRUE(writer.SyncOnce().ok());
    ASSERT_FALSE(device_events().empty());
    EXPECT_EQ(device_events().back()["reason"], reason) << devices.dump();
  }
  const std::vector<json> events = device_events();
  ASSERT_EQ(events.size(), steps.size());
  EXPECT_EQ(events[0]["message"], "neuron3: reset (state INVALID)");
  EXPECT_EQ(events.back()["type"], "Normal");
  EXPECT_EQ(events[2]["type"], "Warning");
}

// Another message of the same status and reason: written, its transition time kept, no Event.
// Unchanged, the heartbeat is refreshed every heartbeat period, and the Node read at each resync.
TEST_F(NodeConditionTest, MessagesAndHeartbeatsAreWrittenWithoutATransition) {
  ConditionWriter writer(*client_, options_);
  const Time t0 = Now();
  plugin_->Set("True", "NeuronHasError_DMA_ERROR", t0, "neuron0: DMA abort");
  ASSERT_TRUE(writer.SyncOnce().ok());
  Advance(seconds(2));
  plugin_->Set("True", "NeuronHasError_DMA_ERROR", Now(), "neuron0, neuron1: DMA abort");
  ASSERT_TRUE(writer.SyncOnce().ok());
  EXPECT_EQ(Health()["message"], "neuron0, neuron1: DMA abort");
  EXPECT_EQ(Health()["lastTransitionTime"], Rfc3339(t0));
  EXPECT_EQ(Events().size(), 1u);

  const Time written = Now();
  for (int i = 0; i < 9; ++i) {  // four and a half minutes, readings every 30 s
    Advance(seconds(30));
    plugin_->Read(Now());
    ASSERT_TRUE(writer.SyncOnce().ok());
  }
  EXPECT_EQ(writer.stats().patches, 2u) << "no heartbeat before its period";
  EXPECT_EQ(Health()["lastHeartbeatTime"], Rfc3339(written));
  Advance(seconds(31));
  plugin_->Read(Now());
  ASSERT_TRUE(writer.SyncOnce().ok());
  EXPECT_EQ(writer.stats().patches, 3u);
  EXPECT_EQ(Health()["lastHeartbeatTime"], Rfc3339(Now()));
  EXPECT_EQ(Health()["lastTransitionTime"], Rfc3339(t0));
  EXPECT_EQ(Events().size(), 1u);
}

// Unknown is not healthy: no answer from the plugin, or evidence it has not read again, for
// longer than the stale bound, makes the condition Unknown; within it right after start,
// nothing is written.
TEST_F(NodeConditionTest, UnknownWhenThePluginIsUnreachableOrItsEvidenceStale) {
  plugin_->Down();
  ConditionWriter writer(*client_, options_);
  ASSERT_TRUE(writer.SyncOnce().ok());
  Advance(seconds(59));
  ASSERT_TRUE(writer.SyncOnce().ok());
  EXPECT_TRUE(Health().is_null()) << "written before the stale bound";
  Advance(seconds(2));
  ASSERT_TRUE(writer.SyncOnce().ok());
  EXPECT_EQ(Health()["status"], "Unknown");
  EXPECT_EQ(Health()["reason"], "NeuronHealthUnknown");
  EXPECT_NE(Health()["message"].get<std::string>().find("no answer from the plugin"),
            std::string::npos)
      << Health();
  EXPECT_EQ(Events().back()["type"], "Normal");

  plugin_->Up();
  const Time last_read = Now();
  plugin_->Set("False", "NeuronHasNoError", last_read, "");
  Advance(seconds(1));
  ASSERT_TRUE(writer.SyncOnce().ok());
  EXPECT_EQ(Health()["status"], "False");

  // The plugin answers, but its evidence is not read again.
  for (int i = 0; i < 4; ++i) {
    Advance(seconds(20));
    ASSERT_TRUE(writer.SyncOnce().ok());
  }
  EXPECT_EQ(Health()["status"], "Unknown");
  EXPECT_NE(Health()["message"].get<std::string>().find(Rfc3339(last_read)), std::string::npos)
      << Health();
  // A plugin that goes away briefly changes nothing within the bound.
  plugin_->Read(Now());
  Advance(seconds(1));
  ASSERT_TRUE(writer.SyncOnce().ok());
  EXPECT_EQ(Health()["status"], "False");
  plugin_->Down();
  Advance(seconds(30));
  ASSERT_TRUE(writer.SyncOnce().ok());
  EXPECT_EQ(Health()["status"], "False");
  EXPECT_EQ(Events().size(), 4u);  // Unknown, False, Unknown, False
}

// A condition written before this writer started, as it would write it (an earlier instance's),
// is taken over without a write or an Event.
TEST_F(NodeConditionTest, AnEarlierInstancesConditionIsTakenOver) {
  WriteAsNpd("False", "NeuronHasNoError", Now() - minutes(1));
  plugin_->Set("False", "NeuronHasNoError", Now(), "written by NPD");
  ConditionWriter writer(*client_, options_);
  ASSERT_TRUE(writer.SyncOnce().ok());
  EXPECT_EQ(writer.stats().patches, 0u);
  EXPECT_FALSE(writer.stats().stood_down);
  EXPECT_TRUE(Events().empty());
}

// AWS's node-problem-detector keeps the condition: a heartbeat written while this writer runs,
// or a change after its own write, makes it stand down (once said, nothing written, checked at
// each resync) until nobody has refreshed the condition for two heartbeat periods. A reason it
// never writes is never overwritten.
TEST_F(NodeConditionTest, StandsDownForNodeProblemDetector) {
  neuron::testing::CapturedLog log("dra-api.condition");
  ConditionWriter writer(*client_, options_);
  plugin_->Set("False", "NeuronHasNoError", Now(), "");
  ASSERT_TRUE(writer.SyncOnce().ok());
  ASSERT_EQ(writer.stats().patches, 1u);
  Advance(seconds(10));
  WriteAsNpd("True", "NeuronHasError_SRAM_UNCORRECTABLE_ERROR", Now());
  for (int i = 0; i < 6; ++i) {  // three resyncs
    Advance(seconds(30));
    plugin_->Read(Now());
    ASSERT_TRUE(writer.SyncOnce().ok());
  }
  EXPECT_TRUE(writer.stats().stood_down);
  EXPECT_EQ(writer.stats().patches, 1u);
  EXPECT_EQ(Health()["reason"], "NeuronHasError_SRAM_UNCORRECTABLE_ERROR");
  EXPECT_EQ(log.Count("standing down"), 1);
  EXPECT_TRUE(log.Contains("it changed since neuron-dra-api wrote it"));

  // Ten minutes without NPD's heartbeat: its writer is gone, the condition is ours again.
  for (int i = 0; i < 18; ++i) {
    Advance(seconds(30));
    plugin_->Read(Now());
    ASSERT_TRUE(writer.SyncOnce().ok());
  }
  EXPECT_FALSE(writer.stats().stood_down);
  EXPECT_EQ(Health()["status"], "False");
  EXPECT_TRUE(log.Contains("no longer kept by another writer"));

  // Another kind of reason is somebody else's condition, however old.
  WriteAsNpd("False", "NeuronIsFine", Now() - minutes(60));
  ConditionWriter second(*client_, options_);
  ASSERT_TRUE(second.SyncOnce().ok());
  EXPECT_TRUE(second.stats().stood_down);
  EXPECT_TRUE(log.Contains("its reason NeuronIsFine is not one neuron-dra-api writes"));
  EXPECT_EQ(Health()["reason"], "NeuronIsFine");
}

// A heartbeat since this writer started, before its first write, is another writer's.
TEST_F(NodeConditionTest, AHeartbeatSinceStartIsAnotherWriters) {
  ConditionWriter writer(*client_, options_);
  Advance(seconds(5));
  WriteAsNpd("False", "NeuronHasNoError", Now());
  plugin_->Set("True", "NeuronHasError_NC_UNCORRECTABLE_ERROR", Now());
  ASSERT_TRUE(writer.SyncOnce().ok());
  EXPECT_TRUE(writer.stats().stood_down);
  EXPECT_EQ(writer.stats().patches, 0u);
  EXPECT_EQ(Health()["status"], "False");
}

// The API server down: the round fails (the caller backs off), and the next one writes.
TEST_F(NodeConditionTest, TheApiServerDownFailsTheRoundAndTheNextWrites) {
  ConditionWriter writer(*client_, options_);
  plugin_->Set("True", "NeuronHasError_DMA_ERROR", Now());
  ASSERT_TRUE(api_->SetReachable(false).ok());
  EXPECT_TRUE(absl::IsUnavailable(writer.SyncOnce()));
  ASSERT_TRUE(api_->SetReachable(true).ok());
  Advance(seconds(1));
  ASSERT_TRUE(writer.SyncOnce().ok());
  EXPECT_EQ(Health()["status"], "True");
}

TEST(HealthDocument, ReadsWhatTheWriterNeedsAndRefusesTheRest) {
  absl::StatusOr<HealthDocument> d = ParseHealthDocument(R"json({"generation": 12,
    "evidence_time": "2026-12-07T03:20:00Z",
    "devices": [{"device": 3, "state": "unhealthy", "components": ["hbm"],
                 "reasons": ["uncorrected ECC errors (hbm)"], "degraded": false}],
    "efas": [{"name": "rdmap16s27", "state": "healthy", "components": [], "reasons": []}],
    "node_condition": {"status": "True", "reason": "NeuronHasError_HBM_UNCORRECTABLE_ERROR",
                       "message": "neuron3: uncorrected ECC errors (hbm)"}})json");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->generation, 12u);
  EXPECT_EQ(Rfc3339(*d->evidence_time), "2026-12-07T03:20:00Z");
  EXPECT_EQ(d->condition, (NodeCondition{"True", "NeuronHasError_HBM_UNCORRECTABLE_ERROR",
                                         "neuron3: uncorrected ECC errors (hbm)"}));
  d = ParseHealthDocument(
      R"({"generation": 1, "node_condition": {"status": "False", "reason": "NeuronHasNoError"}})");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_FALSE(d->evidence_time.has_value());
  for (const char* bad :
       {R"({"node_condition": {"status": "False", "reason": "NeuronHasNoError"}})",
        R"({"generation": 1, "evidence_time": "yesterday",
            "node_condition": {"status": "False", "reason": "NeuronHasNoError"}})",
        R"({"generation": 1, "node_condition": {"status": "True", "reason": "NeuronHasNoError"}})",
        R"({"generation": 1, "node_condition": {"status": "Maybe", "reason": "NeuronHasNoError"}})",
        R"({"generation": 1})", "not json"}) {
    EXPECT_TRUE(absl::IsDataLoss(ParseHealthDocument(bad).status())) << bad;
  }
  EXPECT_TRUE(IsOurReason("NeuronHasError_HANG_ON_COLLECTIVES"));
  EXPECT_FALSE(IsOurReason("NeuronHasError_"));
  EXPECT_FALSE(IsOurReason("NeuronHasError_hbm"));
}

}  // namespace
}  // namespace neuron::kubeapi
