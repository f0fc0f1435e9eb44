// `neuron-sim kubelet` and `neuron-sim pod`: the emulator's process and the clients of its
// control service.
#include <fcntl.h>
#include <fmt/format.h>
#include <grpcpp/grpcpp.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <optional>
#include <system_error>
#include <thread>

#include "absl/status/statusor.h"
#include "core/base/unique_fd.h"
#include "driver-sim/kubelet/control.grpc.pb.h"
#include "driver-sim/kubelet/kubelet_control.h"
#include "nlohmann/json.hpp"

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

// The message a command prints for a failed call: the kubelet's own, or who did not answer.
std::string Describe(const std::string& kubelet_dir, const grpc::Status& s) {
  if (s.error_code() == grpc::StatusCode::UNAVAILABLE) {
    return fmt::format("no kubelet emulator answers on {}: {}", KubeletControlSocket(kubelet_dir),
                       s.error_message());
  }
  return s.error_message();
}

int Fail(std::ostream& err, std::string_view command, const std::string& kubelet_dir,
         const grpc::Status& s) {
  err << fmt::format("neuron-sim {}: {}\n", command, Describe(kubelet_dir, s));
  return kExitFailure;
}

absl::Status ToStatus(const std::string& kubelet_dir, const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  // grpc::StatusCode and absl::StatusCode share their numbering (both are gRPC's codes).
  return {static_cast<absl::StatusCode>(s.error_code()), Describe(kubelet_dir, s)};
}

// ListPods with the commands' deadline.
grpc::Status ListAll(const std::string& kubelet_dir, ctl::PodList* list) {
  grpc::ClientContext context;
  Deadline(context, std::chrono::seconds(10));
  return Connect(kubelet_dir)->ListPods(&context, ctl::Empty(), list);
}

ctl::PodSpec SpecOf(const PodRunArgs& args) {
  ctl::PodSpec spec;
  spec.set_namespace_(args.namespace_name);
  spec.set_name(args.name);
  ctl::ContainerSpec* c = spec.add_containers();
  c->set_name(args.container);
  for (const auto& [resource, count] : args.requests) (*c->mutable_requests())[resource] = count;
  const auto fill = [](const ClaimRef& claim, ctl::ClaimRef* r) {
    r->set_namespace_(claim.namespace_name);
    r->set_name(claim.name);
    r->set_uid(claim.uid);
    for (const std::string& d : claim.drivers) r->add_drivers(d);
  };
  for (const ClaimRef& claim : args.claims) fill(claim, spec.add_claims());
  if (args.extended_resource_claim) {
    fill(*args.extended_resource_claim, spec.mutable_extended_resource_claim());
    for (const std::string& r : args.extended_resources) spec.add_extended_resources(r);
  }
  return spec;
}

PodAllocation AllocationOf(const ctl::AdmittedPod& pod, const std::string& container) {
  PodAllocation a;
  for (const ctl::ContainerAllocation& ca : pod.containers()) {
    if (ca.name() != container) continue;
    for (const auto& [resource, ids] : ca.ids()) {
      a.ids[resource].assign(ids.ids().begin(), ids.ids().end());
    }
    a.envs.insert(ca.envs().begin(), ca.envs().end());
  }
  return a;
}

// The signals `pod run` takes with sigwait while it supervises its command. They are blocked
// before the first gRPC thread exists, so every thread inherits the mask and only sigwait takes
// them: a stop request needs an RPC, which a signal handler cannot make.
sigset_t SupervisedSignals() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGTERM, SIGINT, SIGCHLD, SIGUSR1}) sigaddset(&set, sig);
  return set;
}

// Before any gRPC thread exists: the signals `pod run` supervises with are blocked, and as a
// container shim is, the process becomes the reaper of CMD's group's orphans.
void PrepareToSupervise() {
  const sigset_t signals = SupervisedSignals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  prctl(PR_SET_CHILD_SUBREAPER, 1);
}

int ExitCodeOf(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return kExitFailure;
}

// Forks CMD (envs added to ours) as the leader of a process group of its own: the group is what
// the emulator stops, as a container's processes are stopped together. The child gets back the
// signal mask and SIGPIPE disposition a container's process starts with. It waits to exec until
// `go` is closed, so that CMD never runs before the emulator knows its group (a delete in between
// would free the devices under it).
absl::StatusOr<pid_t> SpawnGroup(const std::vector<std::string>& command,
                                 const std::map<std::string, std::string>& envs,
                                 const sigset_t& child_mask, int go, int go_writer) {
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view entry(*e);
    const std::string key(entry.substr(0, entry.find('=')));
    if (!envs.contains(key)) env_strings.emplace_back(entry);
  }
  for (const auto& [k, v] : envs) env_strings.push_back(fmt::format("{}={}", k, v));
  std::vector<char*> argv;
  argv.reserve(command.size() + 1);
  for (const std::string& a : command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  envp.reserve(env_strings.size() + 1);
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  static constexpr char kExecFailed[] = "neuron-sim pod run: cannot run the command\n";

  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError(fmt::format("fork: {}", std::strerror(errno)));
  if (pid == 0) {  // only async-signal-safe calls: the parent has threads
    setpgid(0, 0);
    close(go_writer);  // else our own copy would keep the read below from ever seeing EOF
    char byte;
    while (read(go, &byte, 1) < 0 && errno == EINTR) {
    }
    signal(SIGPIPE, SIG_DFL);
    pthread_sigmask(SIG_SETMASK, &child_mask, nullptr);
    execvpe(argv[0], argv.data(), envp.data());
    (void)!write(STDERR_FILENO, kExecFailed, sizeof(kExecFailed) - 1);
    _exit(127);
  }
  setpgid(pid, pid);  // as the child does: whichever runs first, the group exists before use
  return pid;
}

// DeletePod for `pod run`: NOT_FOUND is success, a `pod delete` got there first. The deadline
// leaves the grace period and SIGKILL's aftermath to the emulator.
grpc::Status DeleteForRun(ctl::KubeletControl::Stub& stub, const ctl::PodRef& ref) {
  grpc::ClientContext context;
  Deadline(context, std::chrono::seconds(ref.grace_period_seconds() + 30));
  ctl::Empty reply;
  grpc::Status s = stub.DeletePod(&context, ref, &reply);
  return s.error_code() == grpc::StatusCode::NOT_FOUND ? grpc::Status::OK : s;
}

// Until CMD has ended and the pod is deleted: reaps CMD (and, as a subreaper, the orphans of its
// group, whose zombies would keep the group alive); on SIGTERM/SIGINT, or when CMD ends, deletes
// the pod, the emulator stopping the group. The delete runs on a thread of its own, since it
// returns only once the group is gone, which needs this thread reaping. Returns CMD's exit code.
int Supervise(ctl::KubeletControl::Stub& stub, const ctl::PodRef& ref, pid_t pid,
              const std::string& kubelet_dir, std::ostream& err) {
  const sigset_t signals = SupervisedSignals();
  const pthread_t self = pthread_self();
  std::optional<int> code;
  std::thread deleter;
  std::atomic<bool> deleted = false;
  grpc::Status delete_status;
  auto start_delete = [&] {
    if (deleter.joinable()) return;
    deleter = std::thread([&] {
      delete_status = DeleteForRun(stub, ref);
      deleted = true;
      pthread_kill(self, SIGUSR1);
    });
  };
  while (!code || !deleted) {
    int sig = 0;
    if (sigwait(&signals, &sig) != 0) continue;
    if (sig == SIGTERM || sig == SIGINT) start_delete();
    if (sig == SIGCHLD) {
      int status = 0;
      for (pid_t w; (w = waitpid(-1, &status, WNOHANG)) > 0;) {
        if (w == pid) code = ExitCodeOf(status);
      }
      if (code) start_delete();
    }
    // A failed delete stopped nothing: stop CMD here rather than wait for it forever.
    if (deleted && !delete_status.ok() && !code) kill(-pid, SIGKILL);
  }
  deleter.join();
  if (!delete_status.ok()) Fail(err, "pod run", kubelet_dir, delete_status);
  return *code;
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

// The command part of `pod run`: CMD in its own process group, known to the emulator before it
// starts, supervised until it ends and the pod is deleted.
int RunInPod(ctl::KubeletControl::Stub& stub, const PodRunArgs& args,
             const std::map<std::string, std::string>& envs, const sigset_t& child_mask,
             std::ostream& err) {
  ctl::PodRef ref;
  ref.set_namespace_(args.namespace_name);
  ref.set_name(args.name);
  ref.set_grace_period_seconds(args.grace_period_seconds);
  absl::StatusOr<std::vector<std::string>> command = UnderSimulatedDriver(args.command, envs);
  int go[2];
  if (pipe2(go, O_CLOEXEC) < 0) {
    err << fmt::format("neuron-sim pod run: pipe: {}\n", std::strerror(errno));
    if (grpc::Status s = DeleteForRun(stub, ref); !s.ok()) {
      Fail(err, "pod run", args.kubelet_dir, s);
    }
    return kExitFailure;
  }
  UniqueFd go_read(go[0]);
  UniqueFd go_write(go[1]);
  const absl::StatusOr<pid_t> pid =
      command.ok() ? SpawnGroup(*command, envs, child_mask, go_read.get(), go_write.get())
                   : absl::StatusOr<pid_t>(command.status());
  if (!pid.ok()) {
    err << fmt::format("neuron-sim pod run: {}\n", std::string{pid.status().message()});
    if (grpc::Status s = DeleteForRun(stub, ref); !s.ok()) {
      Fail(err, "pod run", args.kubelet_dir, s);
    }
    return kExitFailure;
  }
  // The emulator stops this group when the pod is deleted (`pod delete` or ours below).
  ctl::PodProcess process;
  process.set_namespace_(args.namespace_name);
  process.set_name(args.name);
  process.set_pgid(*pid);
  grpc::ClientContext context;
  Deadline(context, std::chrono::seconds(10));
  ctl::Empty reply;
  const grpc::Status attached = stub.SetPodProcess(&context, process, &reply);
  if (!attached.ok()) {
    kill(-*pid, SIGKILL);  // a command nobody could stop must not run on the freed devices
    Fail(err, "pod run", args.kubelet_dir, attached);
  }
  go_write.Reset();  // CMD starts
  const int code = Supervise(stub, ref, *pid, args.kubelet_dir, err);
  return attached.ok() ? code : kExitFailure;
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
                 std::string{emulator.status().message()}.c_str());
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

absl::StatusOr<std::vector<ResourceState>> KubeletResources(const std::string& kubelet_dir) {
  grpc::ClientContext context;
  Deadline(context, std::chrono::seconds(10));
  ctl::StatusReply reply;
  grpc::Status s = Connect(kubelet_dir)->Status(&context, ctl::Empty(), &reply);
  if (!s.ok()) return ToStatus(kubelet_dir, s);
  std::vector<ResourceState> out;
  for (const ctl::Resource& r : reply.resources()) {
    ResourceState state;
    state.name = r.name();
    state.endpoint = r.endpoint();
    state.connected = r.connected();
    state.capacity = static_cast<int>(r.capacity());
    state.allocatable = static_cast<int>(r.allocatable());
    state.in_use = static_cast<int>(r.in_use());
    out.push_back(std::move(state));
  }
  return out;
}

int PodRunCommand(const PodRunArgs& args, std::ostream& out, std::ostream& err) {
  sigset_t child_mask;
  pthread_sigmask(SIG_SETMASK, nullptr, &child_mask);
  // A signal during admission waits; Supervise then stops the command at once.
  if (!args.command.empty()) PrepareToSupervise();
  const absl::StatusOr<PodAllocation> allocation = AdmitPod(args);
  if (!allocation.ok()) {
    err << fmt::format("neuron-sim pod run: {}\n", std::string{allocation.status().message()});
    return kExitFailure;
  }
  std::ostream& report = args.command.empty() ? out : err;
  for (const auto& [resource, ids] : allocation->ids) {
    report << resource;
    for (const std::string& id : ids) report << ' ' << id;
    report << '\n';
  }
  for (const auto& [k, v] : allocation->envs) report << k << '=' << v << '\n';
  report.flush();
  if (args.command.empty()) return 0;

  return RunInPod(*Connect(args.kubelet_dir), args, allocation->envs, child_mask, err);
}

absl::StatusOr<PodAllocation> AdmitPod(const PodRunArgs& args) {
  grpc::ClientContext context;
  Deadline(context, std::chrono::seconds(120));
  ctl::AdmittedPod pod;
  grpc::Status s = Connect(args.kubelet_dir)->AdmitPod(&context, SpecOf(args), &pod);
  if (!s.ok()) return ToStatus(args.kubelet_dir, s);
  return AllocationOf(pod, args.container);
}

absl::StatusOr<PodAllocation> FindPod(const PodRunArgs& args) {
  ctl::PodList list;
  grpc::Status s = ListAll(args.kubelet_dir, &list);
  if (!s.ok()) return ToStatus(args.kubelet_dir, s);
  for (const ctl::AdmittedPod& pod : list.pods()) {
    if (pod.namespace_() == args.namespace_name && pod.name() == args.name) {
      return AllocationOf(pod, args.container);
    }
  }
  return absl::NotFoundError(fmt::format("no pod {}/{} on the kubelet at {}", args.namespace_name,
                                         args.name, args.kubelet_dir));
}

absl::Status DeletePod(const std::string& kubelet_dir, const std::string& namespace_name,
                       const std::string& name, int grace_period_seconds) {
  ctl::PodRef ref;
  ref.set_namespace_(namespace_name);
  ref.set_name(name);
  ref.set_grace_period_seconds(grace_period_seconds);
  return ToStatus(kubelet_dir, DeleteForRun(*Connect(kubelet_dir), ref));
}

int RunInAdmittedPod(const PodRunArgs& args, std::ostream& err) {
  sigset_t child_mask;
  pthread_sigmask(SIG_SETMASK, nullptr, &child_mask);
  PrepareToSupervise();
  absl::StatusOr<PodAllocation> pod = FindPod(args);
  if (!pod.ok()) {
    err << fmt::format("neuron-sim job attach: {}\n", std::string{pod.status().message()});
    return kExitFailure;
  }
  return RunInPod(*Connect(args.kubelet_dir), args, pod->envs, child_mask, err);
}

absl::StatusOr<ClaimRef> ParseClaimArg(std::string_view arg,
                                       const std::vector<std::string>& drivers) {
  const size_t slash = arg.find('/');
  const size_t colon = arg.rfind(':');
  if (slash == std::string_view::npos || colon == std::string_view::npos || slash == 0 ||
      colon < slash + 2 || colon + 1 == arg.size()) {
    return absl::InvalidArgumentError(
        fmt::format("--claim {}: expected NAMESPACE/NAME:UID", std::string(arg)));
  }
  return ClaimRef{std::string(arg.substr(0, slash)),
                  std::string(arg.substr(slash + 1, colon - slash - 1)),
                  std::string(arg.substr(colon + 1)), drivers};
}

int PodDeleteCommand(const std::string& kubelet_dir, const std::string& namespace_name,
                     const std::string& name, int grace_period_seconds, std::ostream& out,
                     std::ostream& err) {
  grpc::ClientContext context;
  Deadline(context, std::chrono::seconds(grace_period_seconds + 30));
  ctl::PodRef ref;
  ref.set_namespace_(namespace_name);
  ref.set_name(name);
  ref.set_grace_period_seconds(grace_period_seconds);
  ctl::Empty reply;
  grpc::Status s = Connect(kubelet_dir)->DeletePod(&context, ref, &reply);
  if (!s.ok()) return Fail(err, "pod delete", kubelet_dir, s);
  out << fmt::format("pod {}/{} deleted\n", namespace_name, name);
  return 0;
}

int PodListCommand(const std::string& kubelet_dir, std::ostream& out, std::ostream& err) {
  ctl::PodList list;
  grpc::Status s = ListAll(kubelet_dir, &list);
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

namespace {

// The pod as the API server would show it, cut to what the emulator knows of its status: the
// core/v1 field names (allocatedResourcesStatus and message omitted when empty, as Go's omitempty).
nlohmann::ordered_json PodStatusJson(const ctl::AdmittedPod& pod) {
  using nlohmann::ordered_json;
  ordered_json containers = ordered_json::array();
  for (const ctl::ContainerAllocation& c : pod.containers()) {
    ordered_json status = {{"name", c.name()}};
    ordered_json statuses = ordered_json::array();
    for (const ctl::ResourceStatus& rs : c.allocated_resources_status()) {
      ordered_json resources = ordered_json::array();
      for (const ctl::ResourceHealth& h : rs.resources()) {
        ordered_json r = {{"resourceID", h.resource_id()}, {"health", h.health()}};
        if (!h.message().empty()) r["message"] = h.message();
        resources.push_back(std::move(r));
      }
      statuses.push_back({{"name", rs.name()}, {"resources", std::move(resources)}});
    }
    if (!statuses.empty()) status["allocatedResourcesStatus"] = std::move(statuses);
    containers.push_back(std::move(status));
  }
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"namespace", pod.namespace_()}, {"name", pod.name()}, {"uid", pod.uid()}}},
          {"status", {{"containerStatuses", std::move(containers)}}}};
}

}  // namespace

int PodStatusCommand(const std::string& kubelet_dir, const std::string& namespace_name,
                     const std::string& name, std::ostream& out, std::ostream& err) {
  ctl::PodList list;
  grpc::Status s = ListAll(kubelet_dir, &list);
  if (!s.ok()) return Fail(err, "pod status", kubelet_dir, s);
  for (const ctl::AdmittedPod& pod : list.pods()) {
    if (pod.namespace_() == namespace_name && pod.name() == name) {
      out << PodStatusJson(pod).dump(2) << '\n';
      return 0;
    }
  }
  err << fmt::format("neuron-sim pod status: no pod {}/{} on the kubelet at {}\n", namespace_name,
                     name, kubelet_dir);
  return kExitFailure;
}

}  // namespace neuron::sim
