#pragma once
// Internal to driver-sim/cluster's jobs: the job's record (DIR/jobs/NAME/job.json), gang
// admission and the rendezvous port, shared by job.cc and job_runner.cc. Thread-safe (no shared
// state).

#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "driver-sim/cluster/cluster.h"
#include "driver-sim/cluster/recipes.h"

namespace neuron::sim::job_internal {

namespace fs = std::filesystem;

struct PodRecord {
  std::string name;
  std::string namespace_name;
  std::string node;
  fs::path kubelet_dir;
  int first_rank = 0;
  int ranks = 0;
};
struct JobRecord {
  std::string name;
  std::string recipe;
  std::vector<PodRecord> pods;
};

fs::path JobDir(const fs::path& cluster_dir, const std::string& name);
absl::Status WriteJobRecord(const fs::path& cluster_dir, const JobRecord& record);
// NotFound when the job has no record; InvalidArgument naming the file when it is malformed.
absl::StatusOr<JobRecord> ReadJobRecord(const fs::path& cluster_dir, const std::string& name);
JobRecord RecordOf(const JobPlan& plan, const ClusterSpec& cluster);

// A free TCP port on `address` (bound to port 0, read, closed) for rank 0's process to listen on.
absl::StatusOr<int> PickPort(const std::string& address);

// Admits every pod or none: on the first refusal, deletes the pods admitted so far and returns
// FailedPrecondition naming the node, the pod and the kubelet's message.
absl::Status AdmitAll(const JobRecord& record, const JobPlan& plan, std::ostream& out);
// Deletes every pod of the record (a pod already gone is fine); returns the first error.
absl::Status DeleteAll(const JobRecord& record, int grace_period_seconds);

}  // namespace neuron::sim::job_internal
