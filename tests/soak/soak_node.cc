#include "tests/soak/soak_node.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/model/catalog.h"
#include "tests/support/http_client.h"
#include "tests/support/subprocess.h"

namespace neuron::soak {

using namespace std::chrono_literals;
using neuron::testing::ListeningPort;
using neuron::testing::ReadFile;
using neuron::testing::StartProcess;
using neuron::testing::WaitUntil;
using neuron::testing::WriteFile;

namespace {

// NeuronLink neighbours from each device's connected_devices ("12, 3, 4, 1\n").
Topology ReadTopology(const RootPaths& paths, int devices) {
  std::vector<std::vector<int>> neighbours(devices);
  for (int d = 0; d < devices; ++d) {
    const std::string text = ReadFile(paths.NeuronDevice(d) / "connected_devices");
    const char* p = text.data();
    const char* end = p + text.size();
    while (p < end) {
      int v = 0;
      const auto [next, ec] = std::from_chars(p, end, v);
      if (ec == std::errc()) {
        neighbours[d].push_back(v);
        p = next;
      } else {
        ++p;
      }
    }
  }
  return Topology(neighbours);
}

}  // namespace

SoakNode::SoakNode(Options options) : options_(std::move(options)) {
  // Short names: Unix socket paths under the root and the kubelet dir stay well below 108 bytes.
  root_ = dir_.path() / "r";
  kubelet_dir_ = dir_.path() / "k";
  logs_ = options_.logs.empty() ? dir_.path() / "logs" : options_.logs;
  paths_ = RootPaths(root_);
  fs::create_directories(root_);
  fs::create_directories(logs_);
  sim_.name = "neuron-sim up";
  plugin_.name = "neuron-device-plugin";
  exporter_.name = "neuron-exporter";
  prom_.name = "prometheus";
}

SoakNode::~SoakNode() { Stop(); }

absl::Status SoakNode::CopyBinaries() {
  // Copies, so that a rebuild in the shared build tree during a long soak (another build
  // relinking neuron-sim) neither fails a workload's start nor changes the code under test.
  const fs::path bin = dir_.path() / "bin";
  std::error_code ec;
  fs::create_directories(bin, ec);
  const fs::path sim(NEURON_SIM_BIN);
  const fs::path lib = sim.parent_path() / "libneuron-sim-driver.so";
  for (const auto& [from, to] :
       std::vector<std::pair<fs::path, fs::path*>>{{sim, &sim_bin_},
                                                   {fs::path(NEURON_PLUGIN_BIN), &plugin_bin_},
                                                   {fs::path(NEURON_EXPORTER_BIN), &exporter_bin_},
                                                   {lib, nullptr}}) {
    const fs::path copy = bin / from.filename();
    if (!fs::copy_file(from, copy, fs::copy_options::overwrite_existing, ec)) {
      return absl::InternalError("copying " + from.string() + ": " + ec.message());
    }
    if (to != nullptr) *to = copy;
  }
  // The interposer neuron-sim exec preloads (driver-sim/driver/exec.cc); children inherit it.
  setenv("NEURON_SIM_DRIVER_LIB", (bin / lib.filename()).c_str(), 1);
  return absl::OkStatus();
}

absl::Status SoakNode::Start() {
  if (absl::Status s = CopyBinaries(); !s.ok()) return s;
  absl::StatusOr<const InstanceSpec*> spec = FindInstance(options_.instance);
  if (!spec.ok()) return spec.status();
  absl::StatusOr<int> lnc = ResolveLnc(**spec, 0);
  if (!lnc.ok()) return lnc.status();
  devices_ = (*spec)->devices;
  cores_per_device_ = LogicalCoresPerDevice(**spec, *lnc);
  for (const EfaPlacement& e : (*spec)->efas) efa_names_.push_back(e.name);

  sim_node_ = std::make_unique<neuron::testing::SimNode>(
      neuron::testing::SimNodeOptions{.sim_bin = sim_bin_.string(),
                                      .root = root_,
                                      .logs = logs_,
                                      .log_name = "sim",
                                      .ready_ceiling = 90s});
  const bool up = sim_node_->Up(options_.instance);
  {
    std::lock_guard<std::mutex> lock(mu_);
    sim_.pid = sim_node_->pid();
    sim_.exit_code = sim_node_->Poll();
  }
  if (!up) {
    const std::string log = sim_node_->Log();
    return absl::UnavailableError("neuron-sim up is not ready: " + log.substr(0, 3000));
  }
  topology_ = ReadTopology(paths_, devices_);

  absl::StatusOr<std::unique_ptr<sim::KubeletEmulator>> kubelet =
      sim::KubeletEmulator::Start({.kubelet_dir = kubelet_dir_.string(),
                                   .root = root_.string(),
                                   .rpc_deadline = std::chrono::milliseconds(30s),
                                   .seed = options_.seed});
  if (!kubelet.ok()) return kubelet.status();
  kubelet_ = *std::move(kubelet);

  if (absl::Status s = StartPlugin(); !s.ok()) return s;
  if (absl::Status s = StartExporter(); !s.ok()) return s;
  return StartPrometheus();
}

absl::Status SoakNode::StartPlugin() {
  // Pods live seconds here, far shorter than real ones: PodResources is polled often and an
  // Allocate never seen there is dropped after 2 s (defaults 1 s and 30 s), so the mask follows.
  const fs::path config = dir_.path() / "plugin.yaml";
  WriteFile(config, "podresources_period: 200ms\nallocation_grace: 2s\n");
  plugin_.pid = StartProcess(
      sim_node_->UnderDriver({plugin_bin_.string(), "--root", root_.string(), "--kubelet-dir",
                              kubelet_dir_.string(), "--listen", "127.0.0.1:0"}),
      logs_ / "plugin.out", logs_ / "plugin.err",
      {"ASAN_OPTIONS=quarantine_size_mb=4:detect_leaks=1", "NEURON_DP_CONFIG=" + config.string()});
  if (plugin_.pid <= 0) return absl::InternalError("cannot spawn the plugin");
  if (!WaitUntil([&] { return (plugin_port_ = ListeningPort(ReadFile(logs_ / "plugin.out"))) > 0; },
                 60s)) {
    return absl::DeadlineExceededError("plugin: no port:\n" + Tail("plugin.err"));
  }
  if (!WaitUntil([&] { return Registered(); }, 60s)) {
    return absl::DeadlineExceededError("plugin did not register:\n" + Tail("plugin.err"));
  }
  return absl::OkStatus();
}

absl::Status SoakNode::StartExporter() {
  // Both under the simulated driver (neuron-sim exec), as the agent reaches a real node's devices.
  exporter_.pid = StartProcess(
      sim_node_->UnderDriver({exporter_bin_.string(), "--root", root_.string(), "--kubelet-dir",
                              kubelet_dir_.string(), "--web.listen-address", "127.0.0.1:0"}),
      logs_ / "exporter.out", logs_ / "exporter.err",
      {"ASAN_OPTIONS=quarantine_size_mb=4:detect_leaks=1"});
  if (exporter_.pid <= 0) return absl::InternalError("cannot spawn the exporter");
  if (!WaitUntil(
          [&] {
            exporter_port_ =
                ListeningPort(ReadFile(logs_ / "exporter.out") + ReadFile(logs_ / "exporter.err"));
            return exporter_port_ > 0;
          },
          60s)) {
    return absl::DeadlineExceededError("exporter: no port:\n" + Tail("exporter.err"));
  }
  return absl::OkStatus();
}

absl::Status SoakNode::StartPrometheus() {
  prom_port_ = neuron::testing::FreePort();
  const std::string interval = std::to_string(options_.scrape_interval_s) + "s";
  const fs::path config = dir_.path() / "prometheus.yml";
  WriteFile(config, "global:\n  scrape_interval: " + interval + "\n  scrape_timeout: " + interval +
                        "\nscrape_configs:\n" +
                        "  - job_name: exporter\n    static_configs:\n"
                        "      - targets: ['127.0.0.1:" +
                        std::to_string(exporter_port_) + "']\n" +
                        "  - job_name: plugin\n    static_configs:\n" +
                        "      - targets: ['127.0.0.1:" + std::to_string(plugin_port_) + "']\n");
  prom_.pid = StartProcess({"prometheus", "--config.file=" + config.string(),
                            "--storage.tsdb.path=" + (dir_.path() / "tsdb").string(),
                            "--web.listen-address=127.0.0.1:" + std::to_string(prom_port_)},
                           logs_ / "prom.out", logs_ / "prom.err");
  if (prom_.pid <= 0) return absl::InternalError("cannot spawn prometheus");
  if (!WaitUntil([&] { return neuron::testing::HttpGet(prom_port_, "/-/ready").status == 200; },
                 60s)) {
    return absl::DeadlineExceededError("prometheus not ready:\n" + Tail("prom.err"));
  }
  return absl::OkStatus();
}

bool SoakNode::Registered() const {
  const std::vector<std::pair<std::string, int>> want = {
      {kNeuron, devices_}, {kCore, cores()}, {kEfa, static_cast<int>(efa_names_.size())}};
  for (const auto& [name, count] : want) {
    std::optional<sim::ResourceState> r = kubelet_->Resource(name);
    if (!r || !r->connected || r->capacity != count) return false;
  }
  return true;
}

std::optional<double> SoakNode::PromScalar(const std::string& promql) const {
  const neuron::testing::HttpResult r = neuron::testing::HttpGet(
      prom_port_, "/api/v1/query?query=" + neuron::testing::UrlEncode(promql));
  if (r.status != 200) return std::nullopt;
  const nlohmann::json j = nlohmann::json::parse(r.body, nullptr, false);
  if (j.is_discarded() || j.value("status", "") != "success") return std::nullopt;
  const nlohmann::json& result = j["data"]["result"];
  if (!result.is_array() || result.size() != 1) return std::nullopt;
  return std::stod(result[0]["value"][1].get<std::string>());
}

std::vector<std::string> SoakNode::Poll() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> ended;
  for (Child* c : {&sim_, &plugin_, &exporter_, &prom_}) {
    if (c->pid <= 0 || c->exit_code) continue;
    if (c == &sim_) {
      c->exit_code = sim_node_->Poll();  // the node reaps its daemon
    } else if (int status = 0; waitpid(c->pid, &status, WNOHANG) == c->pid) {
      c->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    if (c->exit_code) ended.push_back(c->name);
  }
  return ended;
}

std::vector<Child> SoakNode::children() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {sim_, plugin_, exporter_, prom_};
}

void SoakNode::StopChild(Child& c, std::chrono::seconds ceiling) {
  std::lock_guard<std::mutex> lock(mu_);
  if (c.pid <= 0 || c.exit_code) return;
  c.stopped_by_us = true;
  // The simulated node stops its daemon itself, with its own ceiling.
  c.exit_code = &c == &sim_ ? sim_node_->Stop() : neuron::testing::Stop(c.pid, ceiling);
  if (!c.exit_code) c.exit_code = -1;  // needed SIGKILL
}

void SoakNode::Stop() {
  StopChild(prom_, 30s);
  StopChild(exporter_, 30s);
  StopChild(plugin_, 30s);
  kubelet_.reset();
  StopChild(sim_, 90s);
}

std::string SoakNode::Tail(const std::string& file, size_t bytes) const {
  const std::string text = ReadFile(logs_ / file);
  return text.size() <= bytes ? text : text.substr(text.size() - bytes);
}

}  // namespace neuron::soak
