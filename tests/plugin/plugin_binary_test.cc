// The real neuron-device-plugin binary: its HTTP endpoints, SIGTERM removing its sockets, a bad
// config file's exit code and message, and stale-socket cleanup at start; its HTTP on a Unix
// socket and `--probe`, the DaemonSet's exec probes (docs/architecture.md#privilege-split).

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <charconv>

#include "core/base/unique_fd.h"
#include "core/model/device_id.h"
#include "driver-sim/kubelet/kubelet_emulator.h"
#include "tests/plugin/plugin_client.h"
#include "tests/support/process.h"
#include "tests/support/sim_node.h"
#include "tests/support/sim_testing.h"
#include "tests/support/temp_dir.h"

namespace neuron::plugin {
namespace {

using ::neuron::plugin::testing::Allocate;
using ::neuron::plugin::testing::kCeiling;
using ::neuron::plugin::testing::PluginStub;
namespace fs = std::filesystem;
using ::neuron::testing::ReadFile;
using ::neuron::testing::SimNode;
using ::neuron::testing::Spawn;
using ::neuron::testing::Stop;
using ::neuron::testing::TempDir;
using ::neuron::testing::WaitExit;
using ::neuron::testing::WaitUntil;
using ::neuron::testing::WriteFile;

// The kubelet emulator on `kdir`, failing the test when it cannot start.
std::unique_ptr<sim::KubeletEmulator> StartKubelet(const fs::path& kdir, const fs::path& root) {
  absl::StatusOr<std::unique_ptr<sim::KubeletEmulator>> k = sim::KubeletEmulator::Start(
      {.kubelet_dir = kdir.string(), .root = root.string(), .rpc_deadline = kCeiling});
  EXPECT_TRUE(k.ok()) << k.status();
  return k.ok() ? *std::move(k) : nullptr;
}

// The socket the kubelet knows `resource` by, once it is registered and listed.
fs::path WaitSocket(const sim::KubeletEmulator& kubelet, const fs::path& kdir,
                    std::string_view resource) {
  std::string endpoint;
  WaitUntil(
      [&] {
        const std::optional<sim::ResourceState> r = kubelet.Resource(resource);
        if (r && r->connected) endpoint = r->endpoint;
        return !endpoint.empty();
      },
      kCeiling);
  return endpoint.empty() ? fs::path() : kdir / "device-plugins" / endpoint;
}

// GET on 127.0.0.1:port; returns "<status line>\r\n...body", "" on failure.
std::string HttpGet(int port, const std::string& path) {
  const UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string out;
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    const std::string req = "GET " + path + " HTTP/1.0\r\nHost: localhost\r\n\r\n";
    if (::write(fd.get(), req.data(), req.size()) == static_cast<ssize_t>(req.size())) {
      char buf[4096];
      ssize_t n;
      while ((n = ::read(fd.get(), buf, sizeof(buf))) > 0) out.append(buf, n);
    }
  }
  return out;
}

int PortFrom(const std::string& stdout_text) {
  const std::string key = "listening on port ";
  const size_t at = stdout_text.find(key);
  if (at == std::string::npos) return 0;
  int port = 0;
  const char* p = stdout_text.data() + at + key.size();
  std::from_chars(p, stdout_text.data() + stdout_text.size(), port);
  return port;
}

TEST(PluginBinaryTest, ServesEndpointsRegistersAndRemovesSocketsOnSigterm) {
  TempDir tmp("plb");
  const fs::path root = tmp.path() / "root", kdir = tmp.path() / "k";
  SimNode sim({.sim_bin = NEURON_SIM_BIN,
               .root = root,
               .logs = tmp.path(),
               .on_stop = ::neuron::testing::ExpectCleanExit});
  ASSERT_TRUE(sim.Up("trn1.32xlarge")) << sim.Log();
  // A stale socket file of ours from an earlier run, and someone else's that must survive. Plain
  // files, which the kubelet's own cleanup (of sockets, at its start) leaves to the plugin.
  const std::string iid = "i-0123456789abcdef0";
  WriteFile(kdir / "device-plugins" / ("neuron-" + iid + ".sock"), "");
  WriteFile(kdir / "device-plugins/nvidia-gpu.sock", "");
  const std::unique_ptr<sim::KubeletEmulator> kubelet = StartKubelet(kdir, root);
  ASSERT_NE(kubelet, nullptr);
  const pid_t pid = Spawn({NEURON_PLUGIN_BIN, "--root", root.string(), "--kubelet-dir",
                           kdir.string(), "--listen", "127.0.0.1:0", "--socket-suffix", iid},
                          tmp.path() / "p.out", tmp.path() / "p.err");
  int port = 0;
  ASSERT_TRUE(
      WaitUntil([&] { return (port = PortFrom(ReadFile(tmp.path() / "p.out"))) > 0; }, kCeiling))
      << ReadFile(tmp.path() / "p.err");
  const fs::path neuron_socket = WaitSocket(*kubelet, kdir, kResourceNeuron);
  ASSERT_FALSE(neuron_socket.empty()) << ReadFile(tmp.path() / "p.err");
  ASSERT_FALSE(WaitSocket(*kubelet, kdir, kResourceEfa).empty());
  EXPECT_EQ(neuron_socket.filename(), "neuron-" + iid + ".sock");
  EXPECT_TRUE(fs::exists(kdir / "device-plugins/nvidia-gpu.sock")) << "not ours: left alone";

  EXPECT_NE(HttpGet(port, "/healthz").find(" 200 "), std::string::npos);
  EXPECT_TRUE(WaitUntil([&] { return HttpGet(port, "/readyz").find(" 200 ") != std::string::npos; },
                        kCeiling))
      << HttpGet(port, "/readyz");
  {
    auto stub = PluginStub(neuron_socket);
    v1beta1::AllocateResponse r;
    ASSERT_TRUE(Allocate(stub.get(), {{"0"}}, &r).ok());
    ASSERT_FALSE(Allocate(stub.get(), {{"77"}}, &r).ok());
  }
  const std::string metrics = HttpGet(port, "/metrics");
  EXPECT_NE(metrics.find("neuron_plugin_registrations_total{resource=\"aws.amazon.com/neuron\","
                         "result=\"ok\"} 1"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("neuron_plugin_rpcs_total{code=\"INVALID_ARGUMENT\",resource=\"aws."
                         "amazon.com/neuron\",rpc=\"Allocate\"} 1"),
            std::string::npos);
  EXPECT_NE(metrics.find("neuron_plugin_rpc_duration_seconds_count{resource=\"aws.amazon.com/"
                         "neuron\",rpc=\"Allocate\"} 2"),
            std::string::npos);
  EXPECT_NE(metrics.find("neuron_plugin_devices_masked{resource=\"aws.amazon.com/neuroncore\"} 2"),
            std::string::npos)
      << "device 0's two cores are masked";

  EXPECT_EQ(Stop(pid, kCeiling), 0) << ReadFile(tmp.path() / "p.err");
  for (const char* name : {"neuron-", "neuroncore-", "efa-"}) {
    EXPECT_FALSE(fs::exists(kdir / "device-plugins" / (name + iid + ".sock"))) << name;
  }
  EXPECT_TRUE(fs::exists(kdir / "device-plugins/kubelet.sock")) << "the kubelet's stays";
}

// `--probe PATH` with the plugin's own config layers: exit 0 on 200, non-zero and quickly when
// nothing answers (the kubelet's exec probe has a timeout of its own).
TEST(PluginBinaryTest, ServesOnAUnixSocketAndProbesIt) {
  TempDir tmp("plu");
  const fs::path root = tmp.path() / "root", kdir = tmp.path() / "k";
  SimNode sim({.sim_bin = NEURON_SIM_BIN,
               .root = root,
               .logs = tmp.path(),
               .on_stop = ::neuron::testing::ExpectCleanExit});
  ASSERT_TRUE(sim.Up("trn1.2xlarge")) << sim.Log();
  const std::unique_ptr<sim::KubeletEmulator> kubelet = StartKubelet(kdir, root);
  ASSERT_NE(kubelet, nullptr);
  const fs::path sock = tmp.path() / "plugin.sock";
  // The listen address through the environment, as the DaemonSet gives it to both the plugin
  // and its probes.
  const std::vector<std::string> env{"NEURON_DP_LISTEN=unix:" + sock.string()};
  const pid_t pid = Spawn({NEURON_PLUGIN_BIN, "--root", root.string(), "--kubelet-dir",
                           kdir.string(), "--socket-suffix", "i-probe"},
                          tmp.path() / "p.out", tmp.path() / "p.err", env);
  ASSERT_TRUE(WaitUntil(
      [&] {
        return ReadFile(tmp.path() / "p.out").find("listening on unix:") != std::string::npos;
      },
      kCeiling))
      << ReadFile(tmp.path() / "p.err");
  EXPECT_TRUE(fs::is_socket(sock));
  EXPECT_EQ(fs::status(sock).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                fs::perms::group_write);
  auto probe = [&](const std::string& path) {
    const pid_t p = Spawn({NEURON_PLUGIN_BIN, "--root", root.string(), "--probe", path}, "",
                          tmp.path() / "probe.err", env);
    return WaitExit(p, kCeiling);
  };
  EXPECT_EQ(probe("/healthz"), 0) << ReadFile(tmp.path() / "probe.err");
  EXPECT_TRUE(WaitUntil([&] { return probe("/readyz") == 0; }, kCeiling))
      << ReadFile(tmp.path() / "probe.err");
  EXPECT_EQ(probe("/nope"), 1);
  EXPECT_NE(ReadFile(tmp.path() / "probe.err").find("status 404"), std::string::npos);

  EXPECT_EQ(Stop(pid, kCeiling), 0) << ReadFile(tmp.path() / "p.err");
  EXPECT_FALSE(fs::exists(sock)) << "the socket goes with the plugin";
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(probe("/healthz"), 1);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(1500));
  EXPECT_NE(ReadFile(tmp.path() / "probe.err").find("connect unix:"), std::string::npos)
      << ReadFile(tmp.path() / "probe.err");
}

TEST(PluginBinaryTest, BadConfigFileExitsTwoNamingTheLine) {
  TempDir tmp("plc");
  WriteFile(tmp.path() / "p.yaml", "cdi: true\nhealth:\n  poll_period: soon\n");
  const pid_t pid = Spawn({NEURON_PLUGIN_BIN, "--root", tmp.str(), "--kubelet-dir", tmp.str(),
                           "--config", (tmp.path() / "p.yaml").string()},
                          "", tmp.path() / "err");
  EXPECT_EQ(WaitExit(pid, kCeiling), 2);
  EXPECT_NE(ReadFile(tmp.path() / "err").find("p.yaml:3:"), std::string::npos)
      << ReadFile(tmp.path() / "err");
}

TEST(PluginBinaryTest, BadDeviceNumberingExitsTwoNamingItsSource) {
  TempDir tmp("pln");
  const std::vector<std::string> base{NEURON_PLUGIN_BIN, "--root", tmp.str(), "--kubelet-dir",
                                      tmp.str()};
  auto run = [&](std::vector<std::string> extra, const std::vector<std::string>& env) {
    std::vector<std::string> argv = base;
    argv.insert(argv.end(), extra.begin(), extra.end());
    const pid_t pid = Spawn(argv, "", tmp.path() / "err", env);
    const std::optional<int> code = WaitExit(pid, kCeiling);
    return std::make_pair(code, ReadFile(tmp.path() / "err"));
  };
  auto [code, err] = run({"--device-numbering", "pod"}, {});
  EXPECT_EQ(code, 2);
  EXPECT_NE(err.find("--device-numbering: 'pod' is not host or container"), std::string::npos)
      << err;
  std::tie(code, err) = run({}, {"NEURON_DP_DEVICE_NUMBERING=hosts"});
  EXPECT_EQ(code, 2);
  EXPECT_NE(err.find("NEURON_DP_DEVICE_NUMBERING: 'hosts' is not host or container"),
            std::string::npos)
      << err;
}

}  // namespace
}  // namespace neuron::plugin
