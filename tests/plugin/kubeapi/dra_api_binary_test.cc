// The binaries end to end: `neuron-sim apiserver` (the API stand-in as a process) and
// `neuron-dra-api` with the flags the DaemonSet gives it, against a stand-in for the plugin's
// socket. The slice appears, follows a change, survives the API server going away and coming
// back (SIGUSR1/SIGUSR2), and a claim is answered on dra-api.sock. With the stand-in's
// DRAPartitionableDevices gate off, no NeuronCore is published. Two instances of one node (a
// rolling update) write one at a time. Beside the device-plugin API (--slices=false) it keeps the
// Node's NeuronHealth condition from the plugin's /health, with a token bound to its node under
// the admission policy deploy/ ships: set, cleared, Unknown when the plugin goes, an Event at
// each transition; refused another node's; standing down for another writer's condition.

#include <gtest/gtest.h>
#include <signal.h>

#include <map>
#include <mutex>
#include <thread>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "http/http_server.h"
#include "http/local_client.h"
#include "plugin/kubeapi/client.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace neuron::kubeapi {
namespace {

using neuron::testing::ReadFile;
using neuron::testing::WaitUntil;
using nlohmann::json;

json SliceSpec(const std::vector<std::string>& devices) {
  json list = json::array();
  for (const std::string& d : devices) list.push_back({{"name", d}});
  return {{"driver", "neuron.aws.com"},
          {"pool", {{"name", "node-1"}, {"generation", 1}, {"resourceSliceCount", 1}}},
          {"nodeName", "node-1"},
          {"devices", std::move(list)}};
}

// `neuron-sim apiserver` in `d` with token "t" and one unallocated claim, ml/c1; ready when
// d/apiserver.json exists.
pid_t StartStandIn(const std::filesystem::path& d, const std::vector<std::string>& extra = {}) {
  neuron::testing::WriteFile(d / "token", "t\n");
  neuron::testing::WriteFile(d / "objects.json",
                             R"([{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim",
           "metadata":{"name":"c1","namespace":"ml"},"spec":{}}])");
  std::vector<std::string> argv = {
      NEURON_SIM_BIN,         "apiserver", "--dir",  d.string(), "--token-file",
      (d / "token").string(), "--node",    "node-1", "--load",   (d / "objects.json").string()};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return neuron::testing::StartProcess(argv, d / "api.out", d / "api.err");
}

// The stand-in's apiserver.json under `d` once it is written (its URL and CA); null when it never
// is.
json WaitForStandIn(const std::filesystem::path& d) {
  if (!WaitUntil([&] { return std::filesystem::exists(d / "apiserver.json"); },
                 std::chrono::seconds(20))) {
    return json();
  }
  return json::parse(ReadFile(d / "apiserver.json"));
}

// neuron-dra-api with the DaemonSet's flags, against the stand-in `info` (its apiserver.json) and
// the plugin's socket d/plugin.sock, polling every 100 ms with a back-off cap of 500 ms, with the
// token in d/<token>. Its output goes to d/<name>.out and d/<name>.err, its claims socket is
// d/<name>-api.sock.
pid_t StartDraApi(const std::filesystem::path& d, const json& info, const std::string& name = "dra",
                  const std::vector<std::string>& extra = {},
                  const std::vector<std::string>& env = {}, const std::string& token = "token") {
  std::vector<std::string> argv = {NEURON_DRA_API_BIN,
                                   "--api-server",
                                   info["url"],
                                   "--token-file",
                                   (d / token).string(),
                                   "--ca-file",
                                   info["caFile"],
                                   "--plugin",
                                   "unix:" + (d / "plugin.sock").string(),
                                   "--listen",
                                   "unix:" + (d / (name + "-api.sock")).string(),
                                   "--poll",
                                   "100",
                                   "--backoff-max",
                                   "500"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  std::vector<std::string> environment = {"NODE_NAME=node-1"};
  environment.insert(environment.end(), env.begin(), env.end());
  return neuron::testing::StartProcess(argv, d / (name + ".out"), d / (name + ".err"), environment);
}

size_t Count(const std::string& text, std::string_view what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(DraApiBinary, PublishesThroughTheStandInAndServesClaims) {
  neuron::testing::TempDir dir;
  const auto& d = dir.path();
  const pid_t api = StartStandIn(d);
  const json info = WaitForStandIn(d);
  ASSERT_FALSE(info.is_null()) << ReadFile(d / "api.err");

  std::mutex mu;
  json spec = SliceSpec({"neuron-0", "neuron-1"});
  uint64_t generation = 1;
  HttpServer::Options o;
  o.listen_address = "unix:" + (d / "plugin.sock").string();
  o.handlers["/dra/resourceslice"] = [&](const HttpRequest&) {
    std::lock_guard<std::mutex> lock(mu);
    HttpResponse r;
    r.content_type = "application/json";
    r.body = json{{"generation", generation}, {"nodeName", "node-1"}, {"slices", {spec}}}.dump();
    return r;
  };
  auto plugin = *HttpServer::Start(std::move(o));

  const pid_t dra = StartDraApi(d, info);
  const Client client(ClientConfig{info["url"], (d / "token").string(), info["caFile"]});
  const auto devices = [&] {
    std::vector<std::string> out;
    absl::StatusOr<json> s =
        client.Get("/apis/resource.k8s.io/v1/resourceslices/node-1-neuron.aws.com");
    if (s.ok()) {
      for (const json& dev : (*s)["spec"]["devices"]) out.push_back(dev["name"]);
    }
    return out;
  };
  EXPECT_TRUE(WaitUntil([&] { return devices().size() == 2; }, std::chrono::seconds(20)))
      << ReadFile(d / "dra.err");

  ASSERT_EQ(kill(api, SIGUSR1), 0);  // the API server goes away
  ASSERT_TRUE(
      WaitUntil([&] { return ReadFile(d / "api.out").find("unreachable") != std::string::npos; },
                std::chrono::seconds(10)));
  {
    std::lock_guard<std::mutex> lock(mu);
    spec = SliceSpec({"neuron-1"});
    spec["pool"]["generation"] = ++generation;
  }
  // It has tried and failed (said once, when the state changed) before the server comes back.
  ASSERT_TRUE(WaitUntil(
      [&] {
        return ReadFile(d / "dra.err").find("the API server cannot be reached") !=
               std::string::npos;
      },
      std::chrono::seconds(10)))
      << ReadFile(d / "dra.err");
  ASSERT_EQ(kill(api, SIGUSR2), 0);  // and comes back
  EXPECT_TRUE(WaitUntil([&] { return devices() == std::vector<std::string>{"neuron-1"}; },
                        std::chrono::seconds(10)))
      << ReadFile(d / "dra.err");
  // Said once the round that wrote the slice ends, which can be after a reader sees the slice.
  EXPECT_TRUE(WaitUntil(
      [&] {
        return ReadFile(d / "dra.err").find("the API server is reachable again") !=
               std::string::npos;
      },
      std::chrono::seconds(10)))
      << ReadFile(d / "dra.err");

  absl::StatusOr<LocalResponse> claim =
      LocalGet("unix:" + (d / "dra-api.sock").string(), "/claims/ml/c1");
  ASSERT_TRUE(claim.ok()) << claim.status();
  EXPECT_EQ(claim->status, 200) << claim->body;
  const json c = json::parse(claim->body);
  EXPECT_EQ(c["metadata"]["name"], "c1");
  EXPECT_FALSE(c["status"].contains("allocation")) << claim->body;

  EXPECT_EQ(neuron::testing::Stop(dra, std::chrono::seconds(10)), 0);
  EXPECT_EQ(neuron::testing::Stop(api, std::chrono::seconds(10)), 0);
}

// The stand-in with --feature-gates DRAPartitionableDevices=false drops the counters, and
// neuron-dra-api publishes the whole devices alone, saying so once.
TEST(DraApiBinary, WithTheGateOffTheCoresAreNotPublished) {
  neuron::testing::TempDir dir;
  const auto& d = dir.path();
  const pid_t api = StartStandIn(d, {"--feature-gates", "DRAPartitionableDevices=false"});
  const json info = WaitForStandIn(d);
  ASSERT_FALSE(info.is_null()) << ReadFile(d / "api.err");
  json devices = SliceSpec({"neuron-0", "neuroncore-0"});
  json counters = SliceSpec({});
  counters.erase("devices");
  counters["sharedCounters"] = {
      {{"name", "neuron-devices"}, {"counters", {{"neuron-0", {{"value", "2"}}}}}}};
  devices["devices"][0]["attributes"]["resourceType"]["string"] = "neuron_device";
  for (const auto& [i, value] : {std::pair{0, "2"}, std::pair{1, "1"}}) {
    devices["devices"][i]["consumesCounters"] = {
        {{"counterSet", "neuron-devices"}, {"counters", {{"neuron-0", {{"value", value}}}}}}};
  }
  const json pool = {devices, counters};
  HttpServer::Options o;
  o.listen_address = "unix:" + (d / "plugin.sock").string();
  o.handlers["/dra/resourceslice"] = [&](const HttpRequest&) {
    HttpResponse r;
    r.content_type = "application/json";
    r.body = json{{"generation", 1}, {"nodeName", "node-1"}, {"slices", pool}}.dump();
    return r;
  };
  auto plugin = *HttpServer::Start(std::move(o));
  const pid_t dra = StartDraApi(d, info);
  const Client client(ClientConfig{info["url"], (d / "token").string(), info["caFile"]});
  const auto names = [&] {
    std::vector<std::string> out;
    absl::StatusOr<json> list =
        client.Get("/apis/resource.k8s.io/v1/resourceslices?fieldSelector=spec.nodeName%3Dnode-1");
    for (const json& s : list.ok() ? (*list)["items"] : json::array()) {
      for (const json& dev : s["spec"].value("devices", json::array())) out.push_back(dev["name"]);
    }
    return out;
  };
  EXPECT_TRUE(WaitUntil([&] { return names() == std::vector<std::string>{"neuron-0"}; },
                        std::chrono::seconds(20)))
      << ReadFile(d / "dra.err");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // several polls
  const std::string log = ReadFile(d / "dra.err");
  EXPECT_EQ(Count(log, "DRAPartitionableDevices is off"), 1u) << log;
  EXPECT_EQ(neuron::testing::Stop(dra, std::chrono::seconds(10)), 0);
  EXPECT_EQ(neuron::testing::Stop(api, std::chrono::seconds(10)), 0);

  // An unknown gate is refused, as kube-apiserver refuses it.
  std::filesystem::create_directories(d / "bad");
  const pid_t bad = StartStandIn(d / "bad", {"--feature-gates", "DRAPartitionable=true"});
  EXPECT_EQ(neuron::testing::WaitExit(bad, std::chrono::seconds(10)), 2);
  EXPECT_NE(ReadFile(d / "bad" / "api.err").find("unrecognized feature gate: DRAPartitionable"),
            std::string::npos);
}

// The plugin's socket d/plugin.sock serving one document of one slice; Serve replaces it with
// the next generation.
class PluginDocument {
 public:
  explicit PluginDocument(const std::filesystem::path& d) {
    HttpServer::Options o;
    o.listen_address = "unix:" + (d / "plugin.sock").string();
    o.handlers["/dra/resourceslice"] = [this](const HttpRequest&) {
      std::lock_guard<std::mutex> lock(mu_);
      HttpResponse r;
      r.content_type = "application/json";
      r.body =
          json{{"generation", generation_}, {"nodeName", "node-1"}, {"slices", {spec_}}}.dump();
      return r;
    };
    server_ = *HttpServer::Start(std::move(o));
  }
  void Serve(const std::vector<std::string>& devices) {
    std::lock_guard<std::mutex> lock(mu_);
    spec_ = SliceSpec(devices);
    spec_["pool"]["generation"] = ++generation_;
  }

 private:
  std::mutex mu_;
  json spec_ = SliceSpec({"neuron-0"});
  uint64_t generation_ = 1;
  std::unique_ptr<HttpServer> server_;
};

// The devices of node-1's slice as the API server holds it (none when there is no slice).
std::vector<std::string> PublishedDevices(const Client& client) {
  std::vector<std::string> out;
  absl::StatusOr<json> s =
      client.Get("/apis/resource.k8s.io/v1/resourceslices/node-1-neuron.aws.com");
  if (s.ok()) {
    for (const json& dev : (*s)["spec"]["devices"]) out.push_back(dev["name"]);
  }
  return out;
}

// Every write of a ResourceSlice after resourceVersion `since`, by watch event type (ADDED,
// MODIFIED, DELETED), from the stand-in's watch history.
std::map<std::string, int> SliceWrites(const Client& client, const std::string& since) {
  std::map<std::string, int> writes;
  absl::StatusOr<std::vector<json>> events = client.Watch(
      "/apis/resource.k8s.io/v1/resourceslices?watch=1&timeoutSeconds=0&resourceVersion=" + since);
  EXPECT_TRUE(events.ok()) << events.status();
  for (const json& e : events.ok() ? *events : std::vector<json>{}) {
    ++writes[e["type"].get<std::string>()];
  }
  return writes;
}

// The two pods of a rolling update on one node (the DaemonSet surges): two neuron-dra-api
// processes and one plugin document. Only the lease's holder writes slices; the other serves
// claims and waits, naming the holder. SIGTERM of the holder releases the lease, and the other
// publishes the next document well before the lease would have expired; no slice is deleted on
// the way. The stand-in's watch history counts every write of a slice.
TEST(DraApiBinary, TwoInstancesOfOneNodeWriteOneAtATime) {
  neuron::testing::TempDir dir;
  const auto& d = dir.path();
  const pid_t api = StartStandIn(d);
  const json info = WaitForStandIn(d);
  ASSERT_FALSE(info.is_null()) << ReadFile(d / "api.err");
  const Client client(ClientConfig{info["url"], (d / "token").string(), info["caFile"]});
  const std::string since =
      (*client.Get("/apis/resource.k8s.io/v1/resourceslices"))["metadata"]["resourceVersion"];

  PluginDocument plugin(d);
  const auto devices = [&client] { return PublishedDevices(client); };
  // A lease of 3 s renewed every 200 ms: a takeover by expiry would take seconds, by release
  // about one retry.
  const std::vector<std::string> lease = {
      "--lease-duration", "3s", "--lease-renew-deadline", "1s", "--lease-retry", "200ms"};
  const pid_t a = StartDraApi(d, info, "a", lease,
                              {"POD_NAME=pod-a", "POD_UID=uid-a", "POD_NAMESPACE=neuron-system"});
  ASSERT_TRUE(WaitUntil([&] { return devices() == std::vector<std::string>{"neuron-0"}; },
                        std::chrono::seconds(20)))
      << ReadFile(d / "a.err");
  const pid_t b = StartDraApi(d, info, "b", lease,
                              {"POD_NAME=pod-b", "POD_UID=uid-b", "POD_NAMESPACE=neuron-system"});
  ASSERT_TRUE(WaitUntil(
      [&] { return ReadFile(d / "b.err").find("held by pod-a_uid-a") != std::string::npos; },
      std::chrono::seconds(10)))
      << ReadFile(d / "b.err");

  // While both run, each new document is written by the holder alone.
  for (const std::vector<std::string>& next :
       {std::vector<std::string>{"neuron-1"}, {"neuron-0", "neuron-1"}, {"neuron-2"}}) {
    plugin.Serve(next);
    ASSERT_TRUE(WaitUntil([&] { return devices() == next; }, std::chrono::seconds(10)))
        << ReadFile(d / "a.err");
  }
  EXPECT_EQ(Count(ReadFile(d / "b.err"), "published"), 0u) << ReadFile(d / "b.err");
  // The waiting instance still answers claims: they are reads.
  absl::StatusOr<LocalResponse> claim =
      LocalGet("unix:" + (d / "b-api.sock").string(), "/claims/ml/c1");
  ASSERT_TRUE(claim.ok()) << claim.status();
  EXPECT_EQ(claim->status, 200) << claim->body;

  // The old pod goes: its lease is released, and the new one writes within about a retry.
  EXPECT_EQ(neuron::testing::Stop(a, std::chrono::seconds(10)), 0);
  const auto gone = std::chrono::steady_clock::now();
  plugin.Serve({"neuron-3"});
  ASSERT_TRUE(WaitUntil([&] { return devices() == std::vector<std::string>{"neuron-3"}; },
                        std::chrono::seconds(10)))
      << ReadFile(d / "b.err");
  EXPECT_LT(std::chrono::steady_clock::now() - gone, std::chrono::milliseconds(1500));
  EXPECT_NE(ReadFile(d / "a.err").find("released lease"), std::string::npos)
      << ReadFile(d / "a.err");
  EXPECT_EQ(Count(ReadFile(d / "b.err"), "acquired lease"), 1u) << ReadFile(d / "b.err");

  // Every write of a slice since the start: one create and four updates, nothing deleted.
  const std::map<std::string, int> writes = SliceWrites(client, since);
  EXPECT_EQ(writes, (std::map<std::string, int>{{"ADDED", 1}, {"MODIFIED", 4}}))
      << ReadFile(d / "a.err") << ReadFile(d / "b.err");
  EXPECT_EQ(neuron::testing::Stop(b, std::chrono::seconds(10)), 0);
  EXPECT_EQ(neuron::testing::Stop(api, std::chrono::seconds(10)), 0);
}

// The plugin's `GET /health` on d/plugin.sock: the condition Set() gives, evidence read at each
// request (its time now, as the plugin's node watcher reads it every poll), 304 for `?unless=`
// the current generation.
class PluginHealth {
 public:
  explicit PluginHealth(const std::filesystem::path& d) {
    HttpServer::Options o;
    o.listen_address = "unix:" + (d / "plugin.sock").string();
    o.handlers["/health"] = [this](const HttpRequest& r) {
      std::lock_guard<std::mutex> lock(mu_);
      HttpResponse out;
      if (r.query == "unless=" + std::to_string(generation_)) {
        out.status = 304;
        return out;
      }
      out.content_type = "application/json";
      out.body = json{{"generation", generation_},
                      {"evidence_time",
                       absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::Now(), absl::UTCTimeZone())},
                      {"devices", json::array()},
                      {"efas", json::array()},
                      {"node_condition", condition_}}
                     .dump();
      return out;
    };
    server_ = *HttpServer::Start(std::move(o));
  }
  void Set(const std::string& status, const std::string& reason, const std::string& message) {
    std::lock_guard<std::mutex> lock(mu_);
    ++generation_;
    condition_ = {{"status", status}, {"reason", reason}, {"message", message}};
  }
  void Stop() { server_.reset(); }

 private:
  std::mutex mu_;
  uint64_t generation_ = 1;
  json condition_ = {{"status", "False"}, {"reason", "NeuronHasNoError"}, {"message", ""}};
  std::unique_ptr<HttpServer> server_;
};

// `neuron-sim apiserver` with the shipped admission policy, nodes node-1 and node-2, and
// neuron-dra-api's service-account token bound to node-1 in d/sa-token.
pid_t StartStandInWithPolicy(const std::filesystem::path& d) {
  neuron::testing::WriteFile(d / "sa-token", "sa-node-1\n");
  return StartStandIn(
      d, {"--node", "node-2", "--service-account-token",
          "neuron-system/neuron-dra-api@node-1=" + (d / "sa-token").string(), "--admission",
          std::string(NEURON_SOURCE_DIR) + "/deploy/components/node-condition/admission.yaml"});
}

// node's NeuronHealth condition as the API server holds it (null when none).
json Health(const Client& client, const std::string& node = "node-1") {
  absl::StatusOr<json> n = client.Get("/api/v1/nodes/" + node);
  if (!n.ok()) return json();
  for (const json& c : n->value("/status/conditions"_json_pointer, json::array())) {
    if (c["type"] == "NeuronHealth") return c;
  }
  return json();
}

// The reasons of the Events about Nodes, in the order they were made.
std::vector<std::string> EventReasons(const Client& client) {
  std::vector<std::string> out;
  absl::StatusOr<json> list = client.Get("/api/v1/namespaces/default/events");
  for (const json& e : list.ok() ? (*list)["items"] : json::array()) {
    out.push_back(e["reason"]);
  }
  return out;
}

const std::vector<std::string> kConditionFlags = {"--slices=false", "--node-condition-stale", "3s",
                                                  "--lease=false"};

TEST(DraApiBinary, KeepsTheNodeConditionUnderTheShippedPolicy) {
  neuron::testing::TempDir dir;
  const auto& d = dir.path();
  const pid_t api = StartStandInWithPolicy(d);
  const json info = WaitForStandIn(d);
  ASSERT_FALSE(info.is_null()) << ReadFile(d / "api.err");
  const Client client(ClientConfig{info["url"], (d / "token").string(), info["caFile"]});
  PluginHealth plugin(d);
  plugin.Set("True", "NeuronHasError_HBM_UNCORRECTABLE_ERROR", "neuron3: uncorrected ECC errors");
  const pid_t dra = StartDraApi(d, info, "dra", kConditionFlags, {}, "sa-token");
  const auto status = [&] {
    const json c = Health(client);
    return c.is_object() ? c.value("status", "") : "";
  };
  ASSERT_TRUE(WaitUntil([&] { return status() == "True"; }, std::chrono::seconds(20)))
      << ReadFile(d / "dra.err");
  EXPECT_EQ(Health(client)["reason"], "NeuronHasError_HBM_UNCORRECTABLE_ERROR");

  plugin.Set("False", "NeuronHasNoError", "");  // health returns
  ASSERT_TRUE(WaitUntil([&] { return status() == "False"; }, std::chrono::seconds(10)))
      << ReadFile(d / "dra.err");
  plugin.Stop();  // the plugin goes: Unknown after the stale bound, not a stale False
  ASSERT_TRUE(WaitUntil([&] { return status() == "Unknown"; }, std::chrono::seconds(15)))
      << ReadFile(d / "dra.err");
  EXPECT_EQ(Health(client)["reason"], "NeuronHealthUnknown");
  EXPECT_EQ(EventReasons(client),
            (std::vector<std::string>{"NeuronHasError_HBM_UNCORRECTABLE_ERROR", "NeuronHasNoError",
                                      "NeuronHealthUnknown"}));
  const std::string log = ReadFile(d / "dra.err");
  EXPECT_EQ(Count(log, "resourceslice"), 0u) << "--slices=false asks for no slice: " << log;
  EXPECT_EQ(neuron::testing::Stop(dra, std::chrono::seconds(10)), 0);
  EXPECT_EQ(neuron::testing::Stop(api, std::chrono::seconds(10)), 0);
}

// With node-1's token, node-2's condition is refused by the policy, as the API server words it;
// and a condition another writer keeps (a reason neuron-dra-api never writes) is left alone.
TEST(DraApiBinary, TheConditionOfAnotherNodeOrWriterIsNotWritten) {
  neuron::testing::TempDir dir;
  const auto& d = dir.path();
  const pid_t api = StartStandInWithPolicy(d);
  const json info = WaitForStandIn(d);
  ASSERT_FALSE(info.is_null()) << ReadFile(d / "api.err");
  const Client client(ClientConfig{info["url"], (d / "token").string(), info["caFile"]});
  const json npd = {{"status",
                     {{"conditions",
                       {{{"type", "NeuronHealth"},
                         {"status", "False"},
                         {"reason", "NeuronIsHealthy"},
                         {"lastHeartbeatTime", "2026-12-07T03:00:00Z"}}}}}}};
  ASSERT_TRUE(client.Patch("/api/v1/nodes/node-1/status", npd, kStrategicMergePatch).ok());
  PluginHealth plugin(d);
  plugin.Set("True", "NeuronHasError_DMA_ERROR", "neuron0: DMA abort");
  const pid_t own = StartDraApi(d, info, "own", kConditionFlags, {}, "sa-token");
  std::vector<std::string> node_2 = kConditionFlags;
  node_2.insert(node_2.end(), {"--node-name", "node-2"});
  const pid_t other = StartDraApi(d, info, "other", node_2, {}, "sa-token");
  ASSERT_TRUE(WaitUntil(
      [&] {
        return ReadFile(d / "other.err")
                   .find(
                       "ValidatingAdmissionPolicy 'neuron-dra-api-own-node' with binding "
                       "'neuron-dra-api-own-node' denied request: neuron-dra-api may write "
                       "only the status of the Node its token is bound to") != std::string::npos;
      },
      std::chrono::seconds(20)))
      << ReadFile(d / "other.err");
  ASSERT_TRUE(
      WaitUntil([&] { return ReadFile(d / "own.err").find("standing down") != std::string::npos; },
                std::chrono::seconds(20)))
      << ReadFile(d / "own.err");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // several polls
  EXPECT_TRUE(Health(client, "node-2").is_null());
  EXPECT_EQ(Health(client)["reason"], "NeuronIsHealthy");
  EXPECT_TRUE(EventReasons(client).empty());
  EXPECT_EQ(Count(ReadFile(d / "own.err"), "standing down"), 1u);
  EXPECT_EQ(neuron::testing::Stop(own, std::chrono::seconds(10)), 0);
  EXPECT_EQ(neuron::testing::Stop(other, std::chrono::seconds(10)), 0);
  EXPECT_EQ(neuron::testing::Stop(api, std::chrono::seconds(10)), 0);
}

// Nothing to write, or a stale bound out of range, is refused at start.
TEST(DraApiBinary, ItsWriteFlagsAreChecked) {
  neuron::testing::TempDir dir;
  const json info = {{"url", "http://127.0.0.1:1"}, {"caFile", ""}};
  neuron::testing::WriteFile(dir.path() / "token", "t\n");
  for (const auto& [flags, says] :
       {std::pair{std::vector<std::string>{"--slices=false", "--node-condition=false"},
                  "leaves nothing to write"},
        std::pair{std::vector<std::string>{"--node-condition-stale", "1s"},
                  "--node-condition-stale"}}) {
    const pid_t p = StartDraApi(dir.path(), info, "bad", flags);
    EXPECT_EQ(neuron::testing::WaitExit(p, std::chrono::seconds(10)), 2);
    EXPECT_NE(ReadFile(dir.path() / "bad.err").find(says), std::string::npos)
        << ReadFile(dir.path() / "bad.err");
  }
}

}  // namespace
}  // namespace neuron::kubeapi
