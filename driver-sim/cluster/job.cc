// The job's record, gang admission, deletion and listing, and the job-wide step lines
// (job.h, job_internal.h).

#include "driver-sim/cluster/job.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/base/unique_fd.h"
#include "driver-sim/cluster/job_internal.h"
#include "driver-sim/driver/sim_tree.h"
#include "driver-sim/kubelet/kubelet_control.h"

namespace neuron::sim {
namespace job_internal {

using json = nlohmann::json;

fs::path JobDir(const fs::path& cluster_dir, const std::string& name) {
  return cluster_dir / "jobs" / name;
}

absl::Status WriteJobRecord(const fs::path& cluster_dir, const JobRecord& record) {
  json pods = json::array();
  for (const PodRecord& p : record.pods) {
    pods.push_back({{"name", p.name},
                    {"namespace", p.namespace_name},
                    {"node", p.node},
                    {"kubelet_dir", p.kubelet_dir.string()},
                    {"first_rank", p.first_rank},
                    {"ranks", p.ranks}});
  }
  const json j{{"name", record.name}, {"recipe", record.recipe}, {"pods", pods}};
  return WriteFileAtomic(JobDir(cluster_dir, record.name) / "job.json", j.dump(2) + "\n", 0644);
}

absl::StatusOr<JobRecord> ReadJobRecord(const fs::path& cluster_dir, const std::string& name) {
  const fs::path file = JobDir(cluster_dir, name) / "job.json";
  std::ifstream f(file);
  if (!f) {
    return absl::NotFoundError(fmt::format("no job \"{}\" ({} is missing)", name, file.string()));
  }
  try {
    const json j = json::parse(f);
    JobRecord r;
    r.name = j.at("name").get<std::string>();
    r.recipe = j.at("recipe").get<std::string>();
    for (const json& p : j.at("pods")) {
      r.pods.push_back({p.at("name").get<std::string>(), p.at("namespace").get<std::string>(),
                        p.at("node").get<std::string>(), p.at("kubelet_dir").get<std::string>(),
                        p.at("first_rank").get<int>(), p.at("ranks").get<int>()});
    }
    return r;
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(fmt::format("{}: {}", file.string(), e.what()));
  }
}

JobRecord RecordOf(const JobPlan& plan, const ClusterSpec& cluster) {
  JobRecord r{plan.name, plan.recipe, {}};
  for (const PodPlan& p : plan.pods) {
    const ClusterNode& node = cluster.nodes[p.node];
    r.pods.push_back(
        {p.name, p.namespace_name, node.name, node.kubelet_dir, p.first_rank, p.ranks});
  }
  return r;
}

absl::StatusOr<int> PickPort(const std::string& address) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  if (inet_pton(AF_INET, address.c_str(), &addr.sin_addr) != 1) {
    return absl::InvalidArgumentError(fmt::format("\"{}\" is not an IPv4 address", address));
  }
  const UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  socklen_t len = sizeof(addr);
  if (!fd.valid() || bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return absl::UnavailableError(
        fmt::format("no free port on {}: {}", address, std::strerror(errno)));
  }
  return static_cast<int>(ntohs(addr.sin_port));
}

namespace {

PodRunArgs ArgsOf(const PodRecord& p, int grace_period_seconds) {
  PodRunArgs a;
  a.kubelet_dir = p.kubelet_dir.string();
  a.namespace_name = p.namespace_name;
  a.name = p.name;
  a.grace_period_seconds = grace_period_seconds;
  return a;
}

}  // namespace

absl::Status AdmitAll(const JobRecord& record, const JobPlan& plan, std::ostream& out) {
  std::vector<const PodRecord*> admitted;
  for (size_t i = 0; i < record.pods.size(); ++i) {
    const PodRecord& p = record.pods[i];
    PodRunArgs args = ArgsOf(p, 30);
    args.requests = plan.pods[i].requests;
    absl::StatusOr<PodAllocation> a = AdmitPod(args);
    if (!a.ok()) {
      for (const PodRecord* done : admitted) {
        // The pods never ran: nothing to wait for.
        (void)DeletePod(done->kubelet_dir.string(), done->namespace_name, done->name, 0);
      }
      return absl::FailedPreconditionError(
          fmt::format("node {} refused pod {}/{}: {}; deleted the {} pod{} admitted, started none",
                      p.node, p.namespace_name, p.name, std::string{a.status().message()},
                      admitted.size(), admitted.size() == 1 ? "" : "s"));
    }
    admitted.push_back(&p);
    out << fmt::format("admitted {}/{} on {}:", p.namespace_name, p.name, p.node);
    for (const auto& [resource, ids] : a->ids) {
      out << fmt::format(" {} {}", resource, ids.size());
    }
    out << '\n';
  }
  return absl::OkStatus();
}

absl::Status DeleteAll(const JobRecord& record, int grace_period_seconds) {
  absl::Status first;
  for (const PodRecord& p : record.pods) {
    absl::Status s =
        DeletePod(p.kubelet_dir.string(), p.namespace_name, p.name, grace_period_seconds);
    if (!s.ok() && first.ok()) {
      first = absl::Status(s.code(), fmt::format("pod {}/{} on {}: {}", p.namespace_name, p.name,
                                                 p.node, std::string{s.message()}));
    }
  }
  return first;
}

}  // namespace job_internal

namespace {

// The number after `key` in `line` (the first occurrence), if there is one.
std::optional<double> NumberAfter(std::string_view line, std::string_view key) {
  const size_t at = line.find(key);
  if (at == std::string_view::npos) return std::nullopt;
  const char* begin = line.data() + at + key.size();
  double v = 0;
  auto [ptr, ec] = std::from_chars(begin, line.data() + line.size(), v);
  if (ec != std::errc() || ptr == begin) return std::nullopt;
  return v;
}

}  // namespace

std::optional<StepFigures> ParseStepLine(std::string_view line) {
  if (!line.starts_with("step ")) return std::nullopt;
  StepFigures f;
  const char* begin = line.data() + 5;
  auto [ptr, ec] = std::from_chars(begin, line.data() + line.size(), f.step);
  if (ec != std::errc() || ptr == begin || f.step < 1) return std::nullopt;
  const std::optional<double> t = NumberAfter(line, "step_time ");
  if (!t) return std::nullopt;
  f.step_time = *t;
  f.seq_per_s = NumberAfter(line, "seq/s ");
  f.tokens_per_s = NumberAfter(line, "tokens/s ");
  return f;
}

std::optional<std::string> StepTally::Add(size_t pod, const StepFigures& f, int steps) {
  auto it = std::find_if(pending_.begin(), pending_.end(),
                         [&](const auto& p) { return p.first == f.step; });
  if (it == pending_.end()) {
    pending_.push_back({f.step, Pending{std::vector<std::optional<StepFigures>>(pods_), 0}});
    it = std::prev(pending_.end());
  }
  Pending& p = it->second;
  if (pod >= pods_ || p.pods[pod]) return std::nullopt;
  p.pods[pod] = f;
  if (++p.reported < pods_) return std::nullopt;
  double slowest = 0;
  std::optional<double> seqs = 0.0, tokens = 0.0;
  for (const std::optional<StepFigures>& x : p.pods) {
    slowest = std::max(slowest, x->step_time);
    // A figure one pod left out makes the sum unknown, not smaller.
    seqs = seqs && x->seq_per_s ? std::optional(*seqs + *x->seq_per_s) : std::nullopt;
    tokens = tokens && x->tokens_per_s ? std::optional(*tokens + *x->tokens_per_s) : std::nullopt;
  }
  std::string line = fmt::format(
      "job step {}  slowest step_time {:.3f} s",
      steps > 0 ? fmt::format("{}/{}", f.step, steps) : std::to_string(f.step), slowest);
  if (seqs) line += fmt::format("  seq/s {:.1f}", *seqs);
  if (tokens) line += fmt::format("  tokens/s {:.0f}", *tokens);
  line += fmt::format("  ({} pods)", pods_);
  pending_.erase(it);
  return line;
}

int DeleteJob(const std::filesystem::path& cluster_dir, const std::string& name,
              int grace_period_seconds, std::ostream& out, std::ostream& err) {
  absl::StatusOr<job_internal::JobRecord> r = job_internal::ReadJobRecord(cluster_dir, name);
  if (!r.ok()) {
    err << fmt::format("neuron-sim job delete: {}\n", std::string{r.status().message()});
    return 1;
  }
  if (absl::Status s = job_internal::DeleteAll(*r, grace_period_seconds); !s.ok()) {
    err << fmt::format("neuron-sim job delete: {}\n", std::string{s.message()});
    return 1;
  }
  out << fmt::format("job {}: {} pod{} deleted\n", name, r->pods.size(),
                     r->pods.size() == 1 ? "" : "s");
  return 0;
}

int ListJobs(const std::filesystem::path& cluster_dir, std::ostream& out, std::ostream& err) {
  std::error_code ec;
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(cluster_dir / "jobs", ec)) {
    if (std::filesystem::exists(e.path() / "job.json")) names.push_back(e.path().filename());
  }
  std::sort(names.begin(), names.end());
  int code = 0;
  for (const std::string& n : names) {
    absl::StatusOr<job_internal::JobRecord> r = job_internal::ReadJobRecord(cluster_dir, n);
    if (!r.ok()) {
      err << fmt::format("neuron-sim job list: {}\n", std::string{r.status().message()});
      code = 1;
      continue;
    }
    out << fmt::format("{} {}", r->name, r->recipe);
    for (const job_internal::PodRecord& p : r->pods) {
      out << fmt::format(" {}/{}@{}", p.namespace_name, p.name, p.node);
    }
    out << '\n';
  }
  return code;
}

}  // namespace neuron::sim
