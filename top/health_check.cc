// The active health check (top/health_check.h): which devices may be checked, the programs run
// on their cores and links, the verdicts against the expected outputs and the baseline.
#include "top/health_check.h"

#include <fmt/format.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "core/model/core_ids.h"
#include "core/node/withhold.h"
#include "core/proc/procinfo.h"
#include "core/sample/libnrt_exec.h"
#include "core/sample/runtime_records.h"
#include "http/local_client.h"
#include "top/health_check_internal.h"
#include "top/health_check_report.h"

namespace neuron::top {
namespace {

namespace fs = std::filesystem;
using check::ChildJob;
using check::ChildOutcome;

void CheckWarn(std::string_view text) { std::cerr << "neuron-ls: warning: " << text << "\n"; }

// Devices the agent says are allocated to a pod (its GET /health `in_use`), or why it could not
// be asked.
absl::StatusOr<std::set<int>> AgentInUse(const std::string& agent) {
  absl::StatusOr<LocalResponse> got =
      LocalGet(agent, "/health", {.timeout = kAgentTimeout, .max_response_bytes = 1 << 20});
  if (!got.ok()) return got.status();
  if (got->status != 200) {
    return absl::UnavailableError(fmt::format("GET /health answered {}", got->status));
  }
  const auto doc = nlohmann::json::parse(got->body, nullptr, false);
  if (doc.is_discarded() || !doc.contains("devices") || !doc["devices"].is_array()) {
    return absl::DataLossError("GET /health answered no devices list");
  }
  std::set<int> in_use;
  for (const auto& d : doc["devices"]) {
    if (d.is_object() && d.value("in_use", false) && d.value("device", -1) >= 0) {
      in_use.insert(d["device"].get<int>());
    }
  }
  return in_use;
}

void SkipDevice(check::DeviceResult* d, std::string why) {
  d->verdict = check::Verdict::kSkipped;
  d->detail = std::move(why);
}

// Why each of `devices` may not be used now: withheld by another holder, held open by a
// process, or allocated to a pod. The exclusive lock of each one in `lock` is taken first and
// kept in `locks` for the check's duration (the others the caller withholds itself).
std::map<int, std::string> Unavailable(const HealthCheckOptions& o, const std::vector<int>& devices,
                                       const std::set<int>& lock,
                                       std::vector<WithholdLock>* locks) {
  std::map<int, std::string> out;
  for (int d : devices) {
    if (!lock.contains(d)) continue;
    absl::StatusOr<WithholdLock> held =
        WithholdLock::Take(o.root, d, WithholdLock::Mode::kExclusive);
    if (held.ok()) {
      locks->push_back(*std::move(held));
    } else if (absl::IsUnavailable(held.status())) {
      out[d] = "withheld by another holder (a reset or another check in progress)";
    } else {
      out[d] = fmt::format("cannot withhold it: {}", std::string{held.status().message()});
    }
  }
  // Under the lock no allocation is committed any more; what was committed shows as an open
  // device (a running container) or in the agent's in_use.
  const RootPaths root(o.root);
  const ProcReader proc(root);
  std::vector<dev_t> numbers;
  std::vector<std::pair<int, dev_t>> asked;
  for (int d : devices) {
    if (out.contains(d)) continue;
    absl::StatusOr<dev_t> n = NeuronDeviceNumber(root, d);
    if (!n.ok()) continue;  // no device node: the programs will fail to open it and say so
    numbers.push_back(*n);
    asked.emplace_back(d, *n);
  }
  const ProcReader::DeviceHolders holders = proc.HoldersOf(numbers);
  for (const auto& [d, n] : asked) {
    const auto it = holders.pids.find(n);
    if (it == holders.pids.end() || it->second.empty()) continue;
    const int pid = it->second.front();
    absl::StatusOr<std::string> cmd = proc.CommandLine(pid, 256);
    out[d] = fmt::format("held open by PID {} ({})", pid,
                         cmd.ok() ? FormatCommandLine(*cmd) : std::string{"command unknown"});
  }
  if (holders.problems.processes > 0) {
    CheckWarn(
        fmt::format("{} processes' open files could not be seen ({}); a device they hold is "
                    "not known to be busy",
                    holders.problems.processes, holders.problems.first));
  }
  absl::StatusOr<std::set<int>> in_use = AgentInUse(o.agent);
  if (!in_use.ok()) {
    CheckWarn(
        fmt::format("allocation could not be checked (agent at {}: {}); only devices held open "
                    "by a process are skipped",
                    o.agent, std::string{in_use.status().message()}));
    return out;
  }
  for (int d : devices) {
    if (!out.contains(d) && in_use->contains(d)) {
      out[d] = "allocated to a pod (the agent says in_use)";
    }
  }
  return out;
}

// The NeuronLink neighbours of the requested devices that were not requested themselves: a
// device's check exchanges with each of them, so they are withheld for the check's duration too.
std::vector<int> Partners(const Inventory& inv, const std::set<int>& requested) {
  std::set<int> out;
  for (const NeuronDevice& d : inv.devices) {
    if (!requested.contains(d.index)) continue;
    for (int peer : d.connected) {
      if (!requested.contains(peer)) out.insert(peer);
    }
  }
  return {out.begin(), out.end()};
}

// Withholds the requested devices (unless the caller has) and their neighbours, and skips the
// requested ones that may not be used. Returns the neighbours that may take part in an exchange;
// a link to one that may not is said in the report's notes, not checked.
std::set<int> Select(const HealthCheckOptions& o, const Inventory& inv, check::Report* report,
                     std::vector<WithholdLock>* locks) {
  std::set<int> requested;
  for (const check::DeviceResult& d : report->devices) requested.insert(d.device);
  std::vector<int> devices(requested.begin(), requested.end());
  const std::vector<int> partners = Partners(inv, requested);
  devices.insert(devices.end(), partners.begin(), partners.end());
  std::set<int> lock(partners.begin(), partners.end());
  if (!o.withheld_by_caller) lock.insert(requested.begin(), requested.end());
  const std::map<int, std::string> why = Unavailable(o, devices, lock, locks);
  for (check::DeviceResult& d : report->devices) {
    if (const auto it = why.find(d.device); it != why.end()) SkipDevice(&d, it->second);
  }
  std::set<int> available;
  for (int p : partners) {
    if (const auto it = why.find(p); it == why.end()) {
      available.insert(p);
    } else {
      report->notes.push_back(fmt::format("links to neuron{} not checked: {}", p, it->second));
    }
  }
  return available;
}

// Children at once: kParallelChildren, and no more than the CPUs this process may run on. Each
// child starts a process, loads libnrt and runs its program; on a small node more would only queue
// and stretch every child towards its timeout.
size_t ParallelChildren() {
  cpu_set_t set;
  CPU_ZERO(&set);
  const int cpus =
      sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : kParallelChildren;
  return static_cast<size_t>(std::clamp(cpus, 1, kParallelChildren));
}

// The computation on every logical core of each checked device.
void RunCompute(const check::SpawnContext& ctx, const check::RefProgram& p, int cores,
                check::Report* report) {
  std::vector<ChildJob> jobs;
  std::vector<check::DeviceResult*> owner;
  for (check::DeviceResult& d : report->devices) {
    if (d.verdict == check::Verdict::kSkipped) continue;
    for (int c = 0; c < cores; ++c) {
      jobs.push_back({.program = p.name, .rank = 0, .core = GlobalCoreId(d.device, c, cores)});
      owner.push_back(&d);
    }
  }
  const std::vector<ChildOutcome> out = check::RunChildren(ctx, jobs, ParallelChildren());
  for (size_t i = 0; i < jobs.size(); ++i) {
    owner[i]->cores.push_back({.core = jobs[i].core, .program = p.name, .outcome = out[i]});
  }
}

// The links of the checked devices to each other and to the neighbours that may take part (each
// once), in rounds in which no device appears twice, so that the ranks of one round never meet on
// one core.
std::vector<std::vector<std::pair<int, int>>> LinkRounds(const Inventory& inv,
                                                         const std::set<int>& checked,
                                                         const std::set<int>& partners) {
  const auto usable = [&](int d) { return checked.contains(d) || partners.contains(d); };
  std::vector<std::pair<int, int>> links;
  for (const NeuronDevice& d : inv.devices) {
    for (int peer : d.connected) {
      const bool ours = checked.contains(d.index) || checked.contains(peer);
      if (d.index < peer && ours && usable(d.index) && usable(peer)) {
        links.emplace_back(d.index, peer);
      }
    }
  }
  std::vector<std::vector<std::pair<int, int>>> rounds;
  while (!links.empty()) {
    std::set<int> busy;
    std::vector<std::pair<int, int>> round;
    std::vector<std::pair<int, int>> rest;
    for (const auto& l : links) {
      if (busy.contains(l.first) || busy.contains(l.second)) {
        rest.push_back(l);
        continue;
      }
      busy.insert({l.first, l.second});
      round.push_back(l);
    }
    rounds.push_back(std::move(round));
    links = std::move(rest);
  }
  return rounds;
}

// The exchange over every link: rank 0 on the first core of one device, rank 1 on the other's.
void RunLinks(const check::SpawnContext& ctx, const check::RefProgram& p, const Inventory& inv,
              int cores, const std::set<int>& partners, check::Report* report) {
  std::set<int> checked;
  for (const check::DeviceResult& d : report->devices) {
    if (d.verdict != check::Verdict::kSkipped) checked.insert(d.device);
  }
  for (const auto& round : LinkRounds(inv, checked, partners)) {
    std::vector<ChildJob> jobs;
    for (const auto& [a, b] : round) {
      absl::StatusOr<std::string> comm = check::LocalCommId();
      const std::string id = comm.ok() ? *comm : "127.0.0.1:1";  // fails visibly in the child
      jobs.push_back(
          {.program = p.name, .rank = 0, .core = GlobalCoreId(a, 0, cores), .comm_id = id});
      jobs.push_back(
          {.program = p.name, .rank = 1, .core = GlobalCoreId(b, 0, cores), .comm_id = id});
    }
    const std::vector<ChildOutcome> out = check::RunChildren(ctx, jobs, ParallelChildren());
    for (size_t i = 0; i < round.size(); ++i) {
      report->links.push_back({.a = round[i].first,
                               .b = round[i].second,
                               .program = p.name,
                               .ranks = {out[2 * i], out[2 * i + 1]}});
    }
  }
}

// Exit 6's one line: what was looked at and what an operator should provide.
int NoPrograms(std::string_view what) {
  std::cerr << "neuron-ls: health check not run: " << what << "\n";
  return kExitNoPrograms;
}

}  // namespace

int RunHealthCheck(const HealthCheckOptions& o, const Inventory& inv) {
  const auto started = std::chrono::steady_clock::now();
  absl::StatusOr<check::Manifest> manifest = check::LoadManifest(o.programs);
  if (!manifest.ok()) {
    return NoPrograms(fmt::format(
        "no reference programs: {} (provide the compiled programs and their manifest.json in "
        "{} or name a directory with --programs DIR)",
        std::string{manifest.status().message()}, o.programs));
  }
  const std::string libnrt = LibnrtPath(o.libnrt);
  if (absl::Status s = ProbeLibnrt(libnrt); !s.ok()) {
    return NoPrograms(fmt::format(
        "no libnrt to run the programs: {} (install the Neuron runtime, aws-neuronx-runtime-lib, "
        "or name its libnrt.so.1 with --libnrt PATH or $NEURON_LIBNRT)",
        std::string{s.message()}));
  }
  check::Report report;
  report.programs = o.programs;
  report.libnrt = libnrt;
  for (const NeuronDevice& d : inv.devices) {
    if (o.devices.empty() ||
        std::find(o.devices.begin(), o.devices.end(), d.index) != o.devices.end()) {
      report.devices.push_back({.device = d.index});
    }
  }
  std::vector<WithholdLock> locks;
  const std::set<int> partners = Select(o, inv, &report, &locks);
  const bool any = std::any_of(report.devices.begin(), report.devices.end(),
                               [](const auto& d) { return d.verdict != check::Verdict::kSkipped; });
  if (any) {
    const check::SpawnContext ctx{
        .self_exe = o.self_exe, .programs = o.programs, .libnrt = libnrt, .timeout = o.timeout};
    const int cores = inv.LogicalCoresPerDevice();
    RunCompute(ctx, *manifest->FirstOf(false), cores, &report);
    if (const check::RefProgram* x = manifest->FirstOf(true); x != nullptr) {
      RunLinks(ctx, *x, inv, cores, partners, &report);
    } else {
      report.notes.push_back("no exchange program in the manifest: links not checked");
    }
    check::ApplyBaseline(check::BaselinePath(o.state_dir), &report);
  }
  check::Judge(&report);
  report.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  const std::string out = o.json ? check::RenderJson(report) : check::RenderText(report);
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fflush(stdout);
  if (!any) return kExitNothingChecked;
  return report.failed ? kExitCheckFailed : 0;
}

}  // namespace neuron::top
