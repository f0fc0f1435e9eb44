// Device-plugin scenario benchmark: the real neuron-device-plugin binary against `neuron-sim up`
// (trn2.48xlarge, LNC 2) and a minimal in-process kubelet (Registration with dial-back), over
// real gRPC on Unix sockets. Prints medians and p99s:
//   - Allocate and GetPreferredAllocation round trips over the socket (target p99 <= 1 ms);
//   - kubelet.sock re-creation -> every resource registered again (target <= 1 s);
//   - `neuron-sim ctl unplug` -> ListAndWatch shows the device Unhealthy (p99 <= 1 s, aim 100 ms);
//   - plugin RSS, fds and threads, before and after the restarts (RSS target <= 16 MiB).
// Usage: plugin_bench [--rounds N] [--calls N]

#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "bench/stats.h"
#include "deviceplugin/v1beta1/api.grpc.pb.h"

namespace {

using neuron::bench::Ms;
using neuron::bench::Percentile;

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

pid_t Spawn(const std::vector<std::string>& args, const std::string& out) {
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, (out + ".err").c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  pid_t pid = -1;
  posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  return pid;
}

int Wait(pid_t pid) {
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

bool WaitFor(const std::function<bool()>& pred, std::chrono::milliseconds ceiling) {
  const Clock::time_point end = Clock::now() + ceiling;
  while (Clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(2ms);
  }
  return pred();
}

std::string Read(const fs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// VmRSS in KiB, open fds, threads.
void ProcFigures(pid_t pid, int64_t* rss_kib, size_t* fds, size_t* threads) {
  const std::string status = Read(fs::path("/proc") / std::to_string(pid) / "status");
  const size_t at = status.find("VmRSS:");
  *rss_kib = at == std::string::npos ? 0 : std::stol(status.substr(at + 6));
  *fds = 0;
  for ([[maybe_unused]] const auto& e :
       fs::directory_iterator(fs::path("/proc") / std::to_string(pid) / "fd")) {
    ++*fds;
  }
  *threads = 0;
  for ([[maybe_unused]] const auto& e :
       fs::directory_iterator(fs::path("/proc") / std::to_string(pid) / "task")) {
    ++*threads;
  }
}

// smaps_rollup's split of the resident set, in KiB: anonymous pages (heap, stacks, relocated
// data) and file pages (code and read-only data of the binary and its shared libraries).
void RssSplit(pid_t pid, int64_t* anon_kib, int64_t* file_kib) {
  const std::string rollup = Read(fs::path("/proc") / std::to_string(pid) / "smaps_rollup");
  auto field = [&](const std::string& name) -> int64_t {
    const size_t at = rollup.find("\n" + name + ":");
    return at == std::string::npos ? 0 : std::stol(rollup.substr(at + name.size() + 2));
  };
  *anon_kib = field("Anonymous");
  *file_kib = field("Rss") - *anon_kib;
}

class Kubelet final : public v1beta1::Registration::Service {
 public:
  explicit Kubelet(fs::path dir) : dir_(std::move(dir)) { fs::create_directories(dir_); }
  void Start() {
    grpc::ServerBuilder b;
    b.AddListeningPort("unix:" + (dir_ / "kubelet.sock").string(),
                       grpc::InsecureServerCredentials());
    b.RegisterService(this);
    server_ = b.BuildAndStart();
  }
  void Restart() {
    server_->Shutdown(std::chrono::system_clock::now() + 1s);
    server_.reset();
    for (const auto& e : fs::directory_iterator(dir_)) {
      if (e.is_socket()) fs::remove(e.path());
    }
    Start();
  }
  void Stop() {
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + 1s);
    server_.reset();
  }
  grpc::Status Register(grpc::ServerContext*, const v1beta1::RegisterRequest* req,
                        v1beta1::Empty*) override {
    auto stub = v1beta1::DevicePlugin::NewStub(grpc::CreateChannel(
        "unix:" + (dir_ / req->endpoint()).string(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 10s);
    v1beta1::DevicePluginOptions o;
    grpc::Status s = stub->GetDevicePluginOptions(&ctx, v1beta1::Empty(), &o);
    std::lock_guard<std::mutex> lock(mu_);
    endpoints_[req->resource_name()] = req->endpoint();
    ++count_[req->resource_name()];
    return s;
  }
  int count(const std::string& r) {
    std::lock_guard<std::mutex> lock(mu_);
    return count_[r];
  }
  fs::path Socket(const std::string& r) {
    std::lock_guard<std::mutex> lock(mu_);
    return dir_ / endpoints_[r];
  }

 private:
  fs::path dir_;
  std::unique_ptr<grpc::Server> server_;
  std::mutex mu_;
  std::map<std::string, int> count_;
  std::map<std::string, std::string> endpoints_;
};

const std::vector<std::string>& Resources() {
  static const std::vector<std::string> kResources{
      "aws.amazon.com/neuron", "aws.amazon.com/neuroncore", "vpc.amazonaws.com/efa"};
  return kResources;
}

bool AllRegistered(Kubelet& kubelet, int n) {
  return std::all_of(Resources().begin(), Resources().end(),
                     [&](const std::string& r) { return kubelet.count(r) >= n; });
}

// 1. Allocate and GetPreferredAllocation over the socket. False if a call fails.
bool BenchAllocate(Kubelet& kubelet, int calls) {
  auto core = v1beta1::DevicePlugin::NewStub(
      grpc::CreateChannel("unix:" + kubelet.Socket("aws.amazon.com/neuroncore").string(),
                          grpc::InsecureChannelCredentials()));
  std::vector<double> alloc, gpa;
  for (int i = 0; i < calls; ++i) {
    v1beta1::AllocateRequest req;
    auto* c = req.add_container_requests();
    const int first = (i % 16) * 4;  // one device's four logical cores
    for (int k = 0; k < 4; ++k) c->add_devices_ids(std::to_string(first + k));
    v1beta1::AllocateResponse resp;
    grpc::ClientContext ctx;
    const Clock::time_point t = Clock::now();
    if (!core->Allocate(&ctx, req, &resp).ok()) return false;
    alloc.push_back(Ms(Clock::now() - t));

    v1beta1::PreferredAllocationRequest preq;
    auto* pc = preq.add_container_requests();
    for (int k = 0; k < 64; ++k) pc->add_available_deviceids(std::to_string(k));
    pc->set_allocation_size(1 + i % 16);
    v1beta1::PreferredAllocationResponse presp;
    grpc::ClientContext pctx;
    const Clock::time_point t2 = Clock::now();
    if (!core->GetPreferredAllocation(&pctx, preq, &presp).ok()) return false;
    gpa.push_back(Ms(Clock::now() - t2));
  }
  std::printf("  Allocate (neuroncore, 4 cores)        p50 %.3f ms  p99 %.3f ms  (%d calls)\n",
              Percentile(alloc, 0.5), Percentile(alloc, 0.99), calls);
  std::printf("  GetPreferredAllocation (64 cores, 1-16) p50 %.3f ms  p99 %.3f ms\n",
              Percentile(gpa, 0.5), Percentile(gpa, 0.99));
  return true;
}

// 2. kubelet.sock re-created -> every resource registered again.
void BenchReregistration(Kubelet& kubelet, int rounds) {
  std::vector<double> rereg;
  for (int i = 0; i < rounds; ++i) {
    const int want = kubelet.count(Resources()[0]) + 1;
    kubelet.Restart();
    const Clock::time_point t = Clock::now();
    WaitFor([&] { return AllRegistered(kubelet, want); }, 10s);
    rereg.push_back(Ms(Clock::now() - t));
  }
  std::printf(
      "  kubelet restart -> all 3 re-registered p50 %.1f ms  p99 %.1f ms  max %.1f ms (%d)\n",
      Percentile(rereg, 0.5), Percentile(rereg, 0.99), Percentile(rereg, 1.0), rounds);
}

// 3. unplug -> ListAndWatch shows it Unhealthy. Watched on neuroncore (the device's first
// core): the whole-device list is masked by the Allocates above, which no PodResources
// releases here.
void BenchUnplug(Kubelet& kubelet, const fs::path& root, const fs::path& tmp, int rounds) {
  auto neuron = v1beta1::DevicePlugin::NewStub(
      grpc::CreateChannel("unix:" + kubelet.Socket("aws.amazon.com/neuroncore").string(),
                          grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  auto reader = neuron->ListAndWatch(&ctx, v1beta1::Empty());
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::string, std::string> health;
  std::map<std::string, Clock::time_point> changed;
  std::thread t([&] {
    v1beta1::ListAndWatchResponse msg;
    while (reader->Read(&msg)) {
      std::lock_guard<std::mutex> lock(mu);
      for (const auto& d : msg.devices()) {
        if (health[d.id()] != d.health()) changed[d.id()] = Clock::now();
        health[d.id()] = d.health();
      }
      cv.notify_all();
    }
  });
  std::vector<double> lat;
  for (int i = 0; i < rounds; ++i) {
    const std::string dev = std::to_string(i % 16);
    const std::string core = std::to_string((i % 16) * 4);
    const Clock::time_point start = Clock::now();
    Wait(Spawn({NEURON_SIM_BIN, "ctl", "--root", root.string(), "unplug", "--device", dev},
               (tmp / "ctl.log").string()));
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait_for(lock, 10s, [&] { return health[core] == "Unhealthy"; });
      lat.push_back(Ms(changed[core] - start));
    }
    Wait(Spawn({NEURON_SIM_BIN, "ctl", "--root", root.string(), "plug", "--device", dev},
               (tmp / "ctl.log").string()));
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, 10s, [&] { return health[core] == "Healthy"; });
  }
  ctx.TryCancel();
  t.join();
  std::printf(
      "  ctl unplug -> ListAndWatch Unhealthy  p50 %.1f ms  p99 %.1f ms (%d; includes "
      "spawning ctl)\n",
      Percentile(lat, 0.5), Percentile(lat, 0.99), rounds);
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 20, calls = 2000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::string(argv[i]) == "--rounds") rounds = std::stoi(argv[i + 1]);
    if (std::string(argv[i]) == "--calls") calls = std::stoi(argv[i + 1]);
  }
  const fs::path tmp = fs::path(fs::exists("/dev/shm") ? "/dev/shm" : "/tmp") /
                       ("plugin_bench." + std::to_string(getpid()));
  const fs::path root = tmp / "root", kdir = tmp / "k";
  fs::create_directories(root);
  const pid_t sim = Spawn(
      {NEURON_SIM_BIN, "up", "--instance", "trn2.48xlarge", "--lnc", "2", "--root", root.string()},
      (tmp / "sim.log").string());
  if (!WaitFor([&] { return fs::exists(root / "run/neuron/sim.ready"); }, 120s)) {
    std::fprintf(stderr, "neuron-sim up did not become ready\n");
    return 1;
  }
  Kubelet kubelet(kdir / "device-plugins");
  kubelet.Start();
  // Under the simulated driver, as on a real node, the plugin learns PCI addresses (and so each
  // device's NUMA node) by ioctl on /dev/neuronN; exec keeps the PID the plugin's.
  const pid_t plugin =
      Spawn({NEURON_SIM_BIN, "exec", "--root", root.string(), "--", NEURON_PLUGIN_BIN, "--root",
             root.string(), "--kubelet-dir", kdir.string(), "--listen", "127.0.0.1:0"},
            (tmp / "plugin.log").string());
  if (!WaitFor([&] { return AllRegistered(kubelet, 1); }, 30s)) {
    std::fprintf(stderr, "plugin never registered:\n%s\n", Read(tmp / "plugin.log.err").c_str());
    return 1;
  }
  std::printf(
      "plugin_bench: neuron-device-plugin (real binary) on a simulated trn2.48xlarge, LNC 2\n");

  if (!BenchAllocate(kubelet, calls)) return 1;

  int64_t rss0 = 0, anon0 = 0, file0 = 0;
  size_t fds0 = 0, threads0 = 0;
  ProcFigures(plugin, &rss0, &fds0, &threads0);
  RssSplit(plugin, &anon0, &file0);

  BenchReregistration(kubelet, rounds);
  std::this_thread::sleep_for(1s);
  int64_t rss1 = 0;
  size_t fds1 = 0, threads1 = 0;
  ProcFigures(plugin, &rss1, &fds1, &threads1);

  BenchUnplug(kubelet, root, tmp, rounds);
  std::printf(
      "  plugin RSS %.1f MiB (after %d restarts: %.1f MiB); fds %zu -> %zu; threads %zu "
      "-> %zu\n",
      rss0 / 1024.0, rounds, rss1 / 1024.0, fds0, fds1, threads0, threads1);
  std::printf(
      "  plugin RSS split: anonymous %.1f MiB, file-backed (code, read-only data) %.1f "
      "MiB\n",
      anon0 / 1024.0, file0 / 1024.0);

  kill(plugin, SIGTERM);
  const int code = Wait(plugin);
  kubelet.Stop();
  kill(sim, SIGTERM);
  Wait(sim);
  std::error_code ec;
  fs::remove_all(tmp, ec);
  return code;
}
