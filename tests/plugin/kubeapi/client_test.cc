// The Kubernetes client (plugin/kubeapi/client.h) against the API stand-in over HTTPS with the
// CA it made: the statuses a caller acts on (404, 409, 401, 403, 422 with the API's message),
// timeouts, an unreachable server, and a rotated token.

#include "plugin/kubeapi/client.h"

#include <gtest/gtest.h>

#include "driver-sim/controlplane/api_server.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace neuron::kubeapi {
namespace {

using nlohmann::json;
using sim::apiserver::ApiServer;

constexpr char kSlices[] = "/apis/resource.k8s.io/v1/resourceslices";

json Slice(const std::string& name, const std::string& device) {
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "ResourceSlice"},
          {"metadata", {{"name", name}}},
          {"spec",
           {{"driver", "neuron.aws.com"},
            {"pool", {{"name", "node-1"}, {"generation", 1}, {"resourceSliceCount", 1}}},
            {"nodeName", "node-1"},
            {"devices", {{{"name", device}}}}}}};
}

class ClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    neuron::testing::WriteFile(dir_.path() / "token", "secret-1\n");
    neuron::testing::WriteFile(dir_.path() / "viewer", "viewer\n");
    ApiServer::Options o;
    o.cert_dir = dir_.str();
    o.tokens = {"secret-1"};
    o.read_only_tokens = {"viewer"};
    absl::StatusOr<std::unique_ptr<ApiServer>> s = ApiServer::Start(o);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = *std::move(s);
  }
  ClientConfig Config(const std::string& token = "token") const {
    return ClientConfig{server_->url(), (dir_.path() / token).string(), server_->ca_file(),
                        std::chrono::milliseconds(3000), std::chrono::milliseconds(1000)};
  }

  neuron::testing::TempDir dir_;
  std::unique_ptr<ApiServer> server_;
};

TEST_F(ClientTest, CreateGetUpdateDeleteWithTheApiStatuses) {
  const Client client(Config());
  const std::string path = std::string(kSlices) + "/s1";
  EXPECT_TRUE(absl::IsNotFound(client.Get(path).status()));
  absl::StatusOr<json> made = client.Post(kSlices, Slice("s1", "neuron-0"));
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_TRUE(absl::IsAlreadyExists(client.Post(kSlices, Slice("s1", "neuron-0")).status()));

  json update = Slice("s1", "neuron-1");
  update["metadata"]["resourceVersion"] = (*made)["metadata"]["resourceVersion"];
  ASSERT_TRUE(client.Put(path, update).ok());
  // The same resourceVersion again is stale now: 409 Conflict, which the caller re-reads on.
  const absl::Status stale = client.Put(path, update).status();
  EXPECT_TRUE(absl::IsAborted(stale)) << stale;
  EXPECT_NE(stale.message().find("the object has been modified"), absl::string_view::npos);

  const absl::Status invalid = client.Post(kSlices, Slice("s2", "Neuron_0")).status();
  EXPECT_TRUE(absl::IsInvalidArgument(invalid)) << invalid;
  EXPECT_NE(invalid.message().find("spec.devices[0].name"), absl::string_view::npos) << invalid;

  // A field of the wrong type cannot be decoded: 400, as the real server answers it.
  json number_name = Slice("s3", "neuron-0");
  number_name["metadata"]["name"] = 3;
  const absl::Status undecodable = client.Post(kSlices, number_name).status();
  EXPECT_TRUE(absl::IsInvalidArgument(undecodable)) << undecodable;

  ASSERT_TRUE(client.Delete(path).ok());
  EXPECT_TRUE(absl::IsNotFound(client.Delete(path).status()));
}

TEST_F(ClientTest, CredentialsAreChecked) {
  neuron::testing::WriteFile(dir_.path() / "wrong", "nope\n");
  EXPECT_TRUE(absl::IsUnauthenticated(Client(Config("wrong")).Get(kSlices).status()));
  const Client viewer(Config("viewer"));
  EXPECT_TRUE(viewer.Get(kSlices).ok());
  EXPECT_TRUE(absl::IsPermissionDenied(viewer.Post(kSlices, Slice("s1", "neuron-0")).status()));
  // A CA that did not sign the server's certificate: the connection is refused.
  ClientConfig other_ca = Config();
  other_ca.ca_file = "/etc/ssl/certs/ca-certificates.crt";
  EXPECT_TRUE(absl::IsUnavailable(Client(other_ca).Get(kSlices).status()));
}

TEST_F(ClientTest, ARotatedTokenIsReadAgain) {
  const Client client(Config());
  ASSERT_TRUE(client.Get(kSlices).ok());
  // The kubelet rotates a projected token by replacing the file; the old one stops working.
  neuron::testing::WriteFile(dir_.path() / "token.new", "secret-2\n");
  std::filesystem::rename(dir_.path() / "token.new", dir_.path() / "token");
  // The server accepts only secret-1, so a 401 shows that the client sent the new token.
  EXPECT_TRUE(absl::IsUnauthenticated(client.Get(kSlices).status()));
}

TEST_F(ClientTest, TimeoutsAndAnUnreachableServer) {
  ClientConfig quick = Config();
  quick.timeout = std::chrono::milliseconds(300);
  // A watch with nothing to report holds the answer back for timeoutSeconds.
  const absl::Status late =
      Client(quick)
          .Get(std::string(kSlices) + "?watch=1&resourceVersion=1&timeoutSeconds=1")
          .status();
  EXPECT_TRUE(absl::IsDeadlineExceeded(late)) << late;

  const Client client(Config());
  ASSERT_TRUE(server_->SetReachable(false).ok());
  const absl::Status down = client.Get(kSlices).status();
  EXPECT_TRUE(absl::IsUnavailable(down)) << down;
  ASSERT_TRUE(server_->SetReachable(true).ok());
  EXPECT_TRUE(client.Get(kSlices).ok());
}

TEST_F(ClientTest, WatchReturnsTheEventsSinceAResourceVersion) {
  const Client client(Config());
  absl::StatusOr<json> list = client.Get(kSlices);
  ASSERT_TRUE(list.ok()) << list.status();
  const std::string from = (*list)["metadata"]["resourceVersion"];
  absl::StatusOr<json> made = client.Post(kSlices, Slice("s1", "neuron-0"));
  ASSERT_TRUE(made.ok());
  json update = Slice("s1", "neuron-1");
  update["metadata"]["resourceVersion"] = (*made)["metadata"]["resourceVersion"];
  ASSERT_TRUE(client.Put(std::string(kSlices) + "/s1", update).ok());
  ASSERT_TRUE(client.Delete(std::string(kSlices) + "/s1").ok());
  absl::StatusOr<std::vector<json>> events =
      client.Watch(std::string(kSlices) + "?watch=1&timeoutSeconds=1&resourceVersion=" + from);
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_EQ(events->size(), 3u);
  EXPECT_EQ((*events)[0]["type"], "ADDED");
  EXPECT_EQ((*events)[1]["type"], "MODIFIED");
  EXPECT_EQ((*events)[1]["object"]["spec"]["devices"][0]["name"], "neuron-1");
  EXPECT_EQ((*events)[2]["type"], "DELETED");
  // Nothing after the last event: the watch ends empty at timeoutSeconds.
  const std::string last = (*events)[2]["object"]["metadata"]["resourceVersion"];
  events = client.Watch(std::string(kSlices) + "?watch=1&timeoutSeconds=1&resourceVersion=" + last);
  ASSERT_TRUE(events.ok()) << events.status();
  EXPECT_TRUE(events->empty());
}

TEST(InClusterConfig, FromTheServiceEnvironment) {
  unsetenv("KUBERNETES_SERVICE_HOST");
  EXPECT_TRUE(absl::IsFailedPrecondition(InClusterConfig().status()));
  setenv("KUBERNETES_SERVICE_HOST", "fd00:10:96::1", 1);
  setenv("KUBERNETES_SERVICE_PORT", "443", 1);
  absl::StatusOr<ClientConfig> c = InClusterConfig();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->server, "https://[fd00:10:96::1]:443");
  EXPECT_EQ(c->token_file, "/var/run/secrets/kubernetes.io/serviceaccount/token");
  EXPECT_EQ(c->ca_file, "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt");
  unsetenv("KUBERNETES_SERVICE_HOST");
  unsetenv("KUBERNETES_SERVICE_PORT");
}

TEST(StatusFromHttp, MapsTheApiStatusObject) {
  const absl::Status s = StatusFromHttp(
      409, R"({"kind":"Status","reason":"Conflict","message":"the object has been modified"})");
  EXPECT_TRUE(absl::IsAborted(s));
  EXPECT_EQ(s.message(), "HTTP 409: the object has been modified");
  EXPECT_TRUE(absl::IsUnavailable(StatusFromHttp(503, "overloaded\n")));
  EXPECT_TRUE(absl::IsUnavailable(StatusFromHttp(429, "")));
  EXPECT_TRUE(StatusFromHttp(201, "").ok());
}

}  // namespace
}  // namespace neuron::kubeapi
