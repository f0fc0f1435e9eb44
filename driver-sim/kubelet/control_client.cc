// `neuron-sim kubelet` and `neuron-sim pod`: the emulator's process and the clients of its
// control service.
#include <fmt/format.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/status/statusor.h"
#include "driver-sim/kubelet/control.grpc.pb.h"
#include "driver-sim/kubelet/kubelet_control.h"

namespace neuron::sim {

namespace {

namespace ctl = neuronsim::kubelet;
constexpr int kExitFailure = 1;

std::unique_ptr<ctl::KubeletControl::Stub> Connect(const std::string& kubelet_dir) {
  return ctl::KubeletControl::NewStub(grpc::CreateChannel(
      "unix:" + KubeletControlSocket(kubelet_dir), grpc::InsecureChannelCredentials()));
}

void Deadline(grpc::ClientContext& context, std::chrono::seconds timeout) {
  context.set_deadline(std::chrono::system_clock::now() + timeout);
}

int Fail(std::ostream& err, std::string_view command, const std::string& kubelet_dir,
         const grpc::Status& s) {
  if (s.error_code() == grpc::StatusCode::UNAVAILABLE) {
    err << fmt::format("neuron-sim {}: no kubelet emulator answers on {}: {}\n", command,
                       KubeletControlSocket(kubelet_dir), s.error_message());
  } else {
    err << fmt::format("neuron-sim {}: {}\n", command, s.error_message());
  }
  return kExitFailure;
}

// The pod run's child, for the signal handler; 0 before fork.
volatile sig_atomic_t g_child = 0;
volatile sig_atomic_t g_pending_signal = 0;

void Forward(int sig) {
  g_pending_signal = sig;
  if (g_child > 0) kill(g_child, sig);
}

int RunChild(const std::vector<std::string>& command,
             const std::map<std::string, std::string>& envs, std::ostream& err) {
  struct sigaction sa {};
  sa.sa_handler = Forward;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view entry(*e);
    const std::string key(entry.substr(0, entry.find('=')));
    if (!envs.contains(key)) env_strings.emplace_back(entry);
  }
  for (const auto& [k, v] : envs) env_strings.push_back(k + "=" + v);
  std::vector<char*> argv;
  for (const std::string& a : command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);

  const pid_t pid = fork();
  if (pid < 0) {
    err << fmt::format("neuron-sim pod run: fork: {}\n", std::strerror(errno));
    return kExitFailure;
  }
  if (pid == 0) {
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    execvpe(argv[0], argv.data(), envp.data());
    std::fprintf(stderr, "neuron-sim pod run: cannot run %s: %s\n", argv[0], std::strerror(errno));
    _exit(127);
  }
  g_child = pid;
  if (g_pending_signal != 0) kill(pid, g_pending_signal);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  g_child = 0;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return kExitFailure;
}

// The command line that runs CMD under the simulated driver (docs/architecture.md#device-abi): this
// very binary's `neuron-sim exec --root ROOT -- CMD...`, ROOT being the pod's NEURON_ROOT, so that
// the driver interposer serves ROOT/dev/neuronN to CMD as the real driver serves /dev/neuronN in a
// container. `exec` replaces itself with CMD, so CMD's exit code and signals pass through.
absl::StatusOr<std::vector<std::string>> UnderSimulatedDriver(
    const std::vector<std::string>& command, const std::map<std::string, std::string>& envs) {
  const auto root = envs.find("NEURON_ROOT");
  if (root == envs.end()) {
    return absl::FailedPreconditionError("the pod's environment has no NEURON_ROOT");
  }
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return absl::InternalError(fmt::format("readlink /proc/self/exe: {}", ec.message()));
  std::vector<std::string> argv{self.string(), "exec", "--root", root->second, "--"};
  argv.insert(argv.end(), command.begin(), command.end());
  return argv;
}

}  // namespace

std::string KubeletControlSocket(const std::string& kubelet_dir) {
  return (std::filesystem::path(kubelet_dir) / "neuron-sim-kubelet.sock").string();
}

int RunKubelet(const KubeletEmulator::Options& options) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);  // before any gRPC thread exists
  absl::StatusOr<std::unique_ptr<KubeletEmulator>> emulator = KubeletEmulator::Start(options);
  if (!emulator.ok()) {
    std::fprintf(stderr, "neuron-sim kubelet: %s\n",
                 std::string(emulator.status().message()).c_str());
    return kExitFailure;
  }
  int sig = 0;
  sigwait(&set, &sig);
  emulator->reset();  // stops serving and removes the sockets
  return 0;
}

int KubeletRestartCommand(const std::string& kubelet_dir, std::ostream& out, std::ostream& err) {
  grpc::ClientContext context;
  Deadline(context, std::chrono::seconds(60));
  ctl::Empty reply;
  grpc::Status s = Connect(kubelet_dir)->Restart(&context, ctl::Empty(), &reply);
  if (!s.ok()) return Fail(err, "kubelet restart", kubelet_dir, s);
  out << "restarted\n";
  return 0;
}

int KubeletStatusCommand(const std::string& kubelet_dir, std::ostream& out, std::ostream& err) {
  grpc::ClientContext context;
  Deadline(context, std::chrono::seconds(10));
  ctl::StatusReply reply;
  grpc::Status s = Connect(kubelet_dir)->Status(&context, ctl::Empty(), &reply);
  if (!s.ok()) return Fail(err, "kubelet status", kubelet_dir, s);
  out << fmt::format("registrations {} restarts {} pods {}\n", reply.registrations(),
                     reply.restarts(), reply.pods());
  for (const ctl::Resource& r : reply.resources()) {
    out << fmt::format("{} capacity={} allocatable={} in_use={} endpoint={} connected={}\n",
                       r.name(), r.capacity(), r.allocatable(), r.in_use(),
                       r.endpoint().empty() ? "-" : r.endpoint(), r.connected() ? "yes" : "no");
  }
  return 0;
}

int PodRunCommand(const PodRunArgs& args, std::ostream& out, std::ostream& err) {
  ctl::PodSpec spec;
  spec.set_namespace_(args.namespace_name);
  spec.set_name(args.name);
  ctl::ContainerSpec* c = spec.add_containers();
  c->set_name(args.container);
  for (const auto& [resource, count] : args.requests) (*c->mutable_requests())[resource] = count;
  std::unique_ptr<ctl::KubeletControl::Stub> stub = Connect(args.kubelet_dir);
  ctl::AdmittedPod pod;
  {
    grpc::ClientContext context;
    Deadline(context, std::chrono::seconds(120));
    grpc::Status s = stub->AdmitPod(&context, spec, &pod);
    if (!s.ok()) return Fail(err, "pod run", args.kubelet_dir, s);
  }
  std::map<std::string, std::string> envs;
  std::ostream& report = args.command.empty() ? out : err;
  for (const ctl::ContainerAllocation& ca : pod.containers()) {
    if (ca.name() != args.container) continue;
    const std::map<std::string, ctl::DeviceIds> sorted(ca.ids().begin(), ca.ids().end());
    for (const auto& [resource, ids] : sorted) {
      report << resource;
      for (const std::string& id : ids.ids()) report << ' ' << id;
      report << '\n';
    }
    envs.insert(ca.envs().begin(), ca.envs().end());
  }
  for (const auto& [k, v] : envs) report << k << '=' << v << '\n';
  report.flush();
  if (args.command.empty()) return 0;

  int code = kExitFailure;
  if (absl::StatusOr<std::vector<std::string>> command = UnderSimulatedDriver(args.command, envs);
      command.ok()) {
    code = RunChild(*command, envs, err);
  } else {
    err << fmt::format("neuron-sim pod run: {}\n", std::string(command.status().message()));
  }
  grpc::ClientContext context;
  Deadline(context, std::chrono::seconds(10));
  ctl::PodRef ref;
  ref.set_namespace_(args.namespace_name);
  ref.set_name(args.name);
  ctl::Empty reply;
  grpc::Status s = stub->DeletePod(&context, ref, &reply);
  if (!s.ok()) Fail(err, "pod run", args.kubelet_dir, s);
  return code;
}

int PodDeleteCommand(const std::string& kubelet_dir, const std::string& namespace_name,
                     const std::string& name, std::ostream& out, std::ostream& err) {
  grpc::ClientContext context;
  Deadline(context, std::chrono::seconds(10));
  ctl::PodRef ref;
  ref.set_namespace_(namespace_name);
  ref.set_name(name);
  ctl::Empty reply;
  grpc::Status s = Connect(kubelet_dir)->DeletePod(&context, ref, &reply);
  if (!s.ok()) return Fail(err, "pod delete", kubelet_dir, s);
  out << fmt::format("pod {}/{} deleted\n", namespace_name, name);
  return 0;
}

int PodListCommand(const std::string& kubelet_dir, std::ostream& out, std::ostream& err) {
  grpc::ClientContext context;
  Deadline(context, std::chrono::seconds(10));
  ctl::PodList list;
  grpc::Status s = Connect(kubelet_dir)->ListPods(&context, ctl::Empty(), &list);
  if (!s.ok()) return Fail(err, "pod list", kubelet_dir, s);
  for (const ctl::AdmittedPod& pod : list.pods()) {
    for (const ctl::ContainerAllocation& c : pod.containers()) {
      const std::map<std::string, ctl::DeviceIds> sorted(c.ids().begin(), c.ids().end());
      for (const auto& [resource, ids] : sorted) {
        out << fmt::format("{}/{} {} {}", pod.namespace_(), pod.name(), c.name(), resource);
        for (const std::string& id : ids.ids()) out << ' ' << id;
        out << '\n';
      }
    }
  }
  return 0;
}

}  // namespace neuron::sim
