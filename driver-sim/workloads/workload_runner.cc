// The workload runner: nrt_init, one thread per visible core stepping together, progress lines,
// signals, nrt_close (workload.h, workload_runner.h).

#include "driver-sim/workloads/workload_runner.h"

#include <fmt/format.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cerrno>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <map>
#include <thread>

namespace neuron::workloads {
namespace {

using Clock = std::chrono::steady_clock;

// The training workloads, named for their model (transformer.h); the single-kernel ones are the
// rows of kernels.cc.
constexpr std::string_view kTrainingWorkloads[] = {"llama2-7b", "llama2-13b", "llama3.1-8b",
                                                   "gpt3-6.7b", "bert-large"};

std::unique_ptr<Workload> MakeWorkload(const WorkloadOptions& o) {
  if (std::unique_ptr<Workload> k = MakeKernelWorkload(o.name, o)) return k;
  if (std::ranges::find(kTrainingWorkloads, o.name) != std::end(kTrainingWorkloads)) {
    return MakeTraining(o);
  }
  return nullptr;
}

// SIGTERM and SIGINT are blocked in every thread (the runtime's included: they inherit the mask
// from nrt_init's caller), so no runtime call is interrupted; one thread waits for them.
class SignalWatch {
 public:
  SignalWatch() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGTERM);
    sigaddset(&set_, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set_, &old_);
    thread_ = std::thread([this] {
      const timespec tick{0, 50'000'000};
      while (!done_) {
        const int sig = sigtimedwait(&set_, nullptr, &tick);
        if (sig > 0) signal_ = sig;
      }
    });
  }
  ~SignalWatch() {
    done_ = true;
    thread_.join();
    // A signal that arrived after the watcher stopped still counts; consume it before unblocking.
    const timespec zero{0, 0};
    while (sigtimedwait(&set_, nullptr, &zero) > 0) {
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  int signal() const { return signal_; }

 private:
  sigset_t set_{}, old_{};
  std::atomic<bool> done_{false};
  std::atomic<int> signal_{0};
  std::thread thread_;
};

bool HasEfa(const nrt_instance_info_t& i) {
  return (i.family == NRT_INSTANCE_TRN1 && i.size == NRT_INSTANCE_SIZE_32XL) ||
         i.family == NRT_INSTANCE_TRN1N || i.family == NRT_INSTANCE_TRN2;
}

// The shared state of one run: what the barrier's completion step decides for every core.
struct RunState {
  Workload* workload = nullptr;
  std::vector<CoreContext>* cores = nullptr;
  const SignalWatch* signals = nullptr;
  std::FILE* out = nullptr;
  std::FILE* err = nullptr;
  int steps = 0;   // 0: until a signal
  int phases = 1;  // barrier crossings per step
  // Advanced by the completion step only.
  bool setup_done = false;
  int step = 1;
  int phase = 0;
  bool stop = false;
  int exit_code = 0;
  int stopped_by = 0;
  Clock::time_point step_start;

  void Complete() noexcept {
    const Clock::time_point now = Clock::now();
    if (!setup_done) {
      setup_done = true;
      for (CoreContext& c : *cores) {
        if (!c.failure.empty()) {
          fmt::print(err, "neuron-sim run: core {}: {}\n", c.vnc, c.failure);
          stop = true;
          exit_code = 1;
        }
      }
      step_start = now;
    } else {
      bool failed = false;
      for (CoreContext& c : *cores) {
        if (c.status != NRT_SUCCESS) {
          fmt::print(err, "neuron-sim run: step {}: core {} (nd{} nc{}): {}: {}\n", step, c.vnc,
                     c.info.device, c.info.device_core, c.failure, StatusText(c.status));
          failed = true;
        } else if (c.nan) {
          fmt::print(out,
                     "step {}: core {} (nd{} nc{}): results contain NaN "
                     "(NRT_EXEC_COMPLETED_WITH_NUM_ERR, 1003); step skipped\n",
                     step, c.vnc, c.info.device, c.info.device_core);
          c.nan = false;
        }
      }
      if (failed) {
        stop = true;
        exit_code = 1;
      } else if (++phase == phases) {
        const double seconds = std::chrono::duration<double>(now - step_start).count();
        fmt::print(out, "{}\n", workload->Report(step, steps, seconds, *cores));
        for (CoreContext& c : *cores) {
          c.kernel_seconds.clear();
          c.units = 0;
          c.sync_seconds = 0;
        }
        phase = 0;
        step_start = now;
        if (steps > 0 && step >= steps) stop = true;
        ++step;
      }
    }
    std::fflush(out);
    std::fflush(err);
    if (!stop && signals->signal() != 0) {
      stop = true;
      stopped_by = signals->signal();
    }
  }
};

}  // namespace

std::string StatusText(NRT_STATUS s) {
  return fmt::format("{} ({})", nrt_get_status_as_str(s), static_cast<int>(s));
}

double EstimateSeconds(const nrt_model_t* model) {
  nrtsim_model_estimate_t e{};
  if (nrtsim_get_model_estimate(model, &e) != NRT_SUCCESS) return 0;
  return static_cast<double>(e.duration_ns) * 1e-9;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  return v[mid];
}

absl::StatusOr<nrt_model_t*> LoadOpList(CoreContext& core, const std::string& op_list,
                                        const std::string& name, uint32_t world) {
  void* neff = nullptr;
  size_t size = 0;
  nrtsim_neff_options_t options{};
  options.name = name.c_str();
  NRT_STATUS s = nrtsim_build_neff(op_list.c_str(), &options, &neff, &size);
  if (s != NRT_SUCCESS) {
    return absl::InternalError(
        fmt::format("building the {} NEFF: {}: {}", name, StatusText(s), nrtsim_last_error()));
  }
  nrt_model_t* model = nullptr;
  s = world > 0 ? nrt_load_collectives(neff, size, static_cast<int32_t>(core.vnc), -1, core.rank,
                                       world, &model)
                : nrt_load(neff, size, static_cast<int32_t>(core.vnc), -1, &model);
  nrtsim_free_neff(neff);
  if (s != NRT_SUCCESS) {
    return absl::InternalError(
        fmt::format("loading {}: {} {}", name, StatusText(s), nrtsim_last_error()));
  }
  core.models.push_back(model);
  return model;
}

absl::Status PrepareCore(CoreContext& core, size_t bytes) {
  if (nrt_allocate_tensor_set(&core.inputs) != NRT_SUCCESS ||
      nrt_allocate_tensor_set(&core.outputs) != NRT_SUCCESS) {
    return absl::InternalError("cannot allocate tensor sets");
  }
  nrt_tensor_t* state = nullptr;
  if (NRT_STATUS s = nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, static_cast<int>(core.vnc),
                                         bytes, "state", &state);
      s != NRT_SUCCESS) {
    return absl::InternalError(
        fmt::format("allocating {} bytes of device memory: {}", bytes, StatusText(s)));
  }
  core.tensors.push_back(state);
  return absl::OkStatus();
}

std::optional<double> Execute(CoreContext& core, nrt_model_t* model, std::string_view what) {
  const Clock::time_point start = Clock::now();
  const NRT_STATUS s = nrt_execute(model, core.inputs, core.outputs);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (s == NRT_SUCCESS) return seconds;
  if (s == NRT_EXEC_COMPLETED_WITH_NUM_ERR) {
    core.nan = true;
    return seconds;
  }
  if (core.status == NRT_SUCCESS) {
    core.status = s;
    core.failure = fmt::format("{}: nrt_execute", what);
  }
  return std::nullopt;
}

std::vector<std::string_view> WorkloadNames() {
  std::vector<std::string_view> names = KernelWorkloadNames();
  names.insert(names.end(), std::begin(kTrainingWorkloads), std::end(kTrainingWorkloads));
  return names;
}

std::string WorkloadHelp() {
  return "workloads (each uses every visible core, one thread per logical core):\n" +
         KernelWorkloadHelp() +
         R"(  llama2-7b   Llama-2-7B pre-training as the published job runs it, generated from the model's
              architecture: TP groups of --tp (8) cores, DP = cores / tp here times --nodes (2;
              ZeRO-1's gradient reduce-scatter and parameter all-gather cross EFA to the
              modelled peers on the other nodes), micro-batch 1, --seq (4096), --micro-steps
              (32) accumulation micro-steps, then the optimizer phase. Prints tokens/s. Shrink
              it for tests with --micro-steps, --seq or --scale
  llama2-13b, llama3.1-8b, gpt3-6.7b
              the same job for those models
  bert-large  BERT-Large phase 1, data parallel on every core: --micro-batch (16), --seq
              (128), gradient all-reduce and AdamW every --micro-steps (32) micro-steps; a step
              is one micro-step. Prints seq/s
  The training workloads take the job shape `neuron-sim predict` takes (--tp, --pp, --nodes,
  --seq, --micro-batch, --global-batch, --precision, --optimizer, --zero1/--no-zero1, the model
  shape flags); with --pp each core runs its stage. Step times come from the runtime's engine
  and collective models; `neuron-sim predict` costs the same op lists without running them.
--scale F multiplies the work of every op (compute, memory traffic, collective bytes) and the
memory the training workloads hold. --steps 0 runs until SIGTERM or SIGINT; either signal
finishes the step (llama2-7b: the micro-step) under way, closes the runtime and exits 0.
--node-rank R (or a launcher's GROUP_RANK/NODE_RANK with WORLD_SIZE and LOCAL_WORLD_SIZE, or
OMPI_COMM_WORLD_RANK with OMPI_COMM_WORLD_SIZE) makes this process node R of a --nodes job whose
every node runs `neuron-sim run`: its cores are world ranks R*cores+vnc, the peers real
processes meeting at NEURON_RT_ROOT_COMM_ID (required); `neuron-sim job run` launches such jobs.
)";
}

namespace {

// A TCP port on 127.0.0.1 that nobody uses now (0 if none can be had: rank 0 then says so).
int FreeLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = 0;
  if (fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  if (fd >= 0) ::close(fd);
  return port;
}

// The runtime's environment for a workload: a collective rendezvous key, and synchronous
// executions.
void PrepareEnvironment(std::FILE* out) {
  // The collective world of this process's cores needs an address for rank 0 to listen on
  // (driver-sim/README.md#collective-world); unless the caller names the job's rank 0, a port
  // of this machine that is free now (bound to port 0 and released).
  if (std::getenv("NEURON_RT_ROOT_COMM_ID") == nullptr) {
    setenv("NEURON_RT_ROOT_COMM_ID", fmt::format("127.0.0.1:{}", FreeLoopbackPort()).c_str(), 0);
  }
  // The workloads pace themselves step by step; executions are synchronous.
  if (const char* async = std::getenv("NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS");
      async != nullptr && std::string_view(async) != "0") {
    fmt::print(out,
               "note: NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS={} ignored: the workloads "
               "execute synchronously\n",
               async);
    setenv("NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS", "0", 1);
  }
}

// The options with the process's place in a multi-node job filled in (node_rank, nodes), or
// the usage error's message. A node of such a job meets its peers at the launcher's
// NEURON_RT_ROOT_COMM_ID: without it each process would make up a world of its own.
absl::StatusOr<WorkloadOptions> PlaceProcess(const WorkloadOptions& options,
                                             std::optional<int>* ranks_per_node) {
  absl::StatusOr<std::optional<NodePlacement>> p =
      ResolvePlacement(options, [](const char* name) { return std::getenv(name); });
  if (!p.ok()) return p.status();
  WorkloadOptions placed = options;
  if (!*p) return placed;
  if (std::getenv("NEURON_RT_ROOT_COMM_ID") == nullptr) {
    return absl::InvalidArgumentError(fmt::format(
        "node {} of {} ({}) needs NEURON_RT_ROOT_COMM_ID=host:port, the address of rank 0's "
        "process, set alike on every node by the job's launcher",
        (*p)->node_rank, (*p)->nodes, (*p)->source));
  }
  placed.node_rank = (*p)->node_rank;
  placed.shape.nodes = (*p)->nodes;
  *ranks_per_node = (*p)->ranks_per_node;
  return placed;
}

// The workload's own checks, then the launcher's: torchrun's ranks per node are this process's
// cores, one rank each.
absl::Status Configure(Workload& workload, const RunInfo& info, std::optional<int> ranks_per_node) {
  if (absl::Status s = workload.Configure(info); !s.ok()) return s;
  if (ranks_per_node && *ranks_per_node != static_cast<int>(info.cores)) {
    return absl::InvalidArgumentError(fmt::format(
        "LOCAL_WORLD_SIZE={} ranks per node, and this process has {} visible cores (one rank "
        "each)",
        *ranks_per_node, info.cores));
  }
  return absl::OkStatus();
}

// After nrt_init: the job's shape, and one context per visible core.
std::vector<CoreContext> DescribeCores(RunInfo* info) {
  nrt_get_visible_vnc_count(&info->cores);
  nrt_instance_info_t instance{};
  if (nrt_get_instance_info(&instance, sizeof(instance)) == NRT_SUCCESS) {
    info->has_efa = HasEfa(instance);
    info->instance = instance.arch_name;
  }
  std::vector<CoreContext> cores(info->cores);
  const uint32_t base =
      info->node_rank >= 0 ? static_cast<uint32_t>(info->node_rank) * info->cores : 0;
  for (uint32_t v = 0; v < info->cores; ++v) {
    cores[v].vnc = v;
    cores[v].rank = base + v;
    nrtsim_get_core_info(v, &cores[v].info);
    info->lnc = std::max<uint32_t>(cores[v].info.lnc, 1);
  }
  return cores;
}

// One thread per core: set up, then step together (the barrier's completion step decides, in
// `state`, when to stop) until the run ends.
void RunCores(Workload& workload, std::vector<CoreContext>& cores, RunState& state) {
  auto complete = [&state]() noexcept { state.Complete(); };
  std::barrier sync(static_cast<std::ptrdiff_t>(cores.size()), complete);
  auto run_core = [&](CoreContext& core) {
    if (absl::Status s = workload.Setup(core); !s.ok()) core.failure = std::string{s.message()};
    sync.arrive_and_wait();
    while (!state.stop) {
      workload.Step(core, state.step, state.phase);
      sync.arrive_and_wait();
    }
  };
  std::vector<std::thread> threads;
  threads.reserve(cores.size());
  for (CoreContext& c : cores) threads.emplace_back(run_core, std::ref(c));
  for (std::thread& t : threads) t.join();
}

void FreeCores(std::vector<CoreContext>& cores) {
  for (CoreContext& c : cores) {
    for (nrt_model_t* m : c.models) nrt_unload(m);
    for (nrt_tensor_t*& t : c.tensors) nrt_tensor_free(&t);
    if (c.inputs != nullptr) nrt_destroy_tensor_set(&c.inputs);
    if (c.outputs != nullptr) nrt_destroy_tensor_set(&c.outputs);
  }
}

}  // namespace

int RunWorkload(const WorkloadOptions& options, std::FILE* out, std::FILE* err) {
  const std::vector<std::string_view> names = WorkloadNames();
  if (std::ranges::find(names, options.name) == names.end()) {
    fmt::print(err, "neuron-sim run: unknown workload '{}'; known: {}\n", options.name,
               fmt::join(names, ", "));
    return 2;
  }
  if (options.steps < 0) {
    fmt::print(err, "neuron-sim run: --steps must be >= 0 (0: until SIGTERM)\n");
    return 2;
  }
  std::optional<int> ranks_per_node;
  absl::StatusOr<WorkloadOptions> placed = PlaceProcess(options, &ranks_per_node);
  if (!placed.ok()) {
    fmt::print(err, "neuron-sim run: {}\n", std::string{placed.status().message()});
    return 2;
  }
  std::unique_ptr<Workload> workload = MakeWorkload(*placed);
  PrepareEnvironment(out);

  // Executions end on timed sleeps; the default 50 us timer slack would lengthen every one of
  // them. Threads created from here on (the runtime's, the cores') inherit the setting.
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  SignalWatch signals;
  if (NRT_STATUS s = nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""); s != NRT_SUCCESS) {
    fmt::print(err, "neuron-sim run: nrt_init failed: {}\n", StatusText(s));
    return 1;
  }
  RunInfo info;
  info.node_rank = placed->node_rank;
  info.nodes = placed->node_rank >= 0 ? placed->shape.nodes.value_or(1) : 1;
  std::vector<CoreContext> cores = DescribeCores(&info);
  if (const absl::Status s = Configure(*workload, info, ranks_per_node); !s.ok()) {
    fmt::print(err, "neuron-sim run: {}\n", std::string{s.message()});
    nrt_close();
    return absl::IsInvalidArgument(s) ? 2 : 1;
  }
  fmt::print(out, "{}\n", workload->Banner());
  std::fflush(out);

  RunState state;
  state.workload = workload.get();
  state.cores = &cores;
  state.signals = &signals;
  state.out = out;
  state.err = err;
  state.steps = options.steps;
  state.phases = std::max(workload->Phases(), 1);
  if (options.estimate) state.stop = true;  // set up, then leave without a step
  RunCores(*workload, cores, state);

  if (options.estimate && state.exit_code == 0 && !cores.empty()) {
    fmt::print(out, "estimate: {}\n", workload->Estimate(cores.front()));
  }
  FreeCores(cores);
  nrt_close();
  if (state.stopped_by != 0) {
    fmt::print(out, "stopped by {} after {} step{}; runtime closed\n",
               state.stopped_by == SIGINT ? "SIGINT" : "SIGTERM", state.step - 1,
               state.step == 2 ? "" : "s");
  } else if (state.exit_code == 0 && !options.estimate) {
    fmt::print(out, "done: {} step{}; runtime closed\n", state.step - 1,
               state.step == 2 ? "" : "s");
  }
  std::fflush(out);
  return state.exit_code;
}

}  // namespace neuron::workloads
