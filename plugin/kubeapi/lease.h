#pragma once
// One slice writer per node: a coordination.k8s.io/v1 Lease that the neuron-dra-api instances of
// a node take turns holding, as client-go's leader election does with its Lease lock
// (k8s.io/client-go/tools/leaderelection). A rolling update of the DRA DaemonSet surges (maxSurge
// 1, maxUnavailable 0), so two pods run on a node side by side for a while; only the lease's
// holder publishes the node's ResourceSlices (plugin/kubeapi/README.md#one-writer).
//
// The record is the Lease `<namespace>/neuron-dra-api-<node>`:
//   spec.holderIdentity        who holds it ("" or absent: released)
//   spec.leaseDurationSeconds  how long a candidate waits after the last renewal to take it over
//   spec.acquireTime           when the current holder took it (MicroTime)
//   spec.renewTime             when the holder last wrote it (MicroTime)
//   spec.leaseTransitions      how often it changed hands
// A candidate takes it when it is absent (created), held by itself, released, or expired:
// renewTime + leaseDurationSeconds before now by this process's wall clock (both pods of a
// rolling update run on one node, so they read the same clock). Every write carries the
// resourceVersion read (optimistic concurrency): of two candidates writing at once the API
// server accepts one, the other gets 409 and reads again, so there is never more than one
// holder in the record.
//
// A holder renews every `retry`; one that could not renew for `renew_deadline` (shorter than the
// duration, so that it stops before anyone may take over) stops leading and says so; on Stop it
// writes holderIdentity "" (client-go's ReleaseOnCancel), so that the successor takes over at
// its next retry instead of after the duration.
//
// What a lease cannot promise (nor does client-go's): a write the old holder had in flight when
// it stopped leading may still land afterwards. Losing is decided `renew_deadline` after the last
// renewal, before anyone else may take over, which leaves duration - renew_deadline for it.
//
// Thread-safety: TryAcquireOrRenew and Release from one thread at a time (Start's thread while
// it runs); Start and Stop from one thread; leading() and holder() from any.

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "plugin/kubeapi/client.h"
#include "plugin/kubeapi/round_loop.h"

namespace spdlog {
class logger;
}

namespace neuron::kubeapi {

struct LeaseOptions {
  std::string lease_namespace = "neuron-system";
  std::string name;      // LeaseName(node)
  std::string identity;  // DefaultLeaseIdentity()
  // Whole seconds: the API's leaseDurationSeconds.
  std::chrono::milliseconds duration{15000};
  std::chrono::milliseconds renew_deadline{10000};
  std::chrono::milliseconds retry{2000};
};

// The durations' order, as client-go checks it: duration > renew_deadline > 1.2 * retry (a
// holder gets several tries before its deadline, and stops before a candidate may take over),
// each at least 100 ms, the duration whole seconds of at least 1 s. InvalidArgument naming the
// flags (--lease-duration, --lease-renew-deadline, --lease-retry) otherwise.
absl::Status CheckLeaseTimes(const LeaseOptions& options);

// `neuron-dra-api-<node>`. A Lease's name is a DNS subdomain of at most 253 characters; a node
// name longer than the 238 that leaves is cut and followed by 16 hex digits of a hash of the
// whole name, so that every node still has its own lease.
std::string LeaseName(const std::string& node_name);

// The holder's identity: env POD_NAME (else the hostname), then "_" and env POD_UID when set, so
// that a pod re-created under the same name is another holder.
std::string DefaultLeaseIdentity();

// The namespace the pod runs in when POD_NAMESPACE is not given: the service account's
// namespace file, else "neuron-system".
std::string DefaultLeaseNamespace();

// MicroTime as the API writes it: "2026-12-06T23:50:01.123456Z".
std::string FormatMicroTime(std::chrono::system_clock::time_point t);

class LeaderLease {
 public:
  LeaderLease(const Client& client, LeaseOptions options);
  ~LeaderLease();  // Stop()
  LeaderLease(const LeaderLease&) = delete;
  LeaderLease& operator=(const LeaderLease&) = delete;

  // One attempt: reads the lease and takes or renews it where the rules above allow. True when
  // this process holds it afterwards, false when another does (holder() names it); the API's
  // error otherwise (Aborted: another wrote between our read and our write).
  absl::StatusOr<bool> TryAcquireOrRenew();
  // Clears holderIdentity when we hold the lease (a no-op otherwise).
  absl::Status Release();

  // A thread that tries every `retry`; calls `on_started` when it takes the lease, `on_stopped`
  // when it loses it (the renew deadline passed), from that thread, each before the thread goes
  // on. After losing it tries again, as a candidate.
  void Start(std::function<void()> on_started, std::function<void()> on_stopped);
  // Ends Start's thread; when leading, calls `on_stopped` first (the caller's writes end), then
  // releases the lease. Without a thread (Start never called) it does nothing: a lease taken
  // with TryAcquireOrRenew alone is kept until it expires, as by a process that was killed.
  void Stop();

  bool leading() const;
  std::string holder() const;  // the holder last read ("" when none)

 private:
  // TryAcquireOrRenew and Release without their guard against JSON exceptions.
  absl::StatusOr<bool> AcquireOrRenew();
  absl::Status GiveUp();
  // Whether `lease` (as read at `now`) may be taken or renewed by us: absent holder, ours, or
  // expired.
  bool MayHold(const nlohmann::json& lease, std::chrono::system_clock::time_point now) const;
  // What we write: `current` (null: none yet) held by us, renewed at `now`.
  nlohmann::json Record(const nlohmann::json* current,
                        std::chrono::system_clock::time_point now) const;
  // The collection (for a create) or the lease itself.
  std::string Path(bool item) const;
  // One round of Start's thread: the wait until the next.
  std::chrono::milliseconds Round();
  void Lose(std::string_view why);
  void Observe(const std::string& holder);
  void SetLeading(bool leading);

  const Client& client_;
  const LeaseOptions options_;
  const std::shared_ptr<spdlog::logger> log_;

  // The loop's own (TryAcquireOrRenew's caller).
  std::chrono::steady_clock::time_point last_renewed_;
  std::string waiting_for_;  // the other holder last logged
  std::string last_error_;
  std::function<void()> on_started_;
  std::function<void()> on_stopped_;

  mutable std::mutex mu_;
  bool leading_ = false;
  std::string holder_;
  RoundLoop loop_;  // last: stopped before the rest goes
};

}  // namespace neuron::kubeapi
