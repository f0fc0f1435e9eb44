#pragma once
// Withholding a device from allocation while the agent checks or resets it
// (docs/architecture.md#withholding). One lock file per device,
// ROOT/run/neuron-node-agent/withheld/neuronN.lock, shared by every process of the agent on the
// node: the active check (`neuron-ls --health-check`) and the plugin's reset remediation take it
// exclusively for their duration; the plugin takes it shared around each allocation it commits
// (Allocate, a DRA prepare), so a holder of the exclusive lock knows that every allocation it can
// see was committed before it and none is committed after it. (The exporter needs no lock: it
// opens only devices another process holds and lets go of them once that process has,
// core/sample/datastore_driver.cc, so an idle device stays resettable.)
//
// flock(2) locks: the kernel drops them when their holder dies, so a crashed check never leaves a
// device withheld. Thread-compatible; the locks are per open file description, so two
// WithholdLocks of one device conflict within a process too.

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/base/unique_fd.h"

namespace neuron {

// ROOT/run/neuron-node-agent/withheld/neuronN.lock
std::string WithholdLockPath(std::string_view root, int device);
// The devices that have a lock file, from one listing of the directory (empty when it cannot be
// read). Only they can be withheld: IsWithheld of any other is false without an open, and on most
// nodes most devices never had one.
std::set<int> DevicesWithLockFiles(std::string_view root);

class WithholdLock {
 public:
  enum class Mode { kExclusive, kShared };

  // Takes the device's lock without waiting: Unavailable while another holder's lock conflicts
  // ("neuron3 is withheld by another holder"); FailedPrecondition naming the path when the
  // directory cannot be made or the file opened (then nobody can hold the lock either).
  static absl::StatusOr<WithholdLock> Take(std::string_view root, int device, Mode mode);

  WithholdLock(WithholdLock&&) noexcept = default;
  WithholdLock& operator=(WithholdLock&&) noexcept = default;
  ~WithholdLock() = default;  // closing the file releases the lock

  int device() const { return device_; }

 private:
  WithholdLock(int device, UniqueFd fd) : device_(device), fd_(std::move(fd)) {}
  int device_ = -1;
  UniqueFd fd_;
};

// Shared holds of every device in `devices`, for the span of one allocation's commit: the first
// device withheld by another holder refuses the whole allocation ("neuron3 is withheld ...").
// A lock file that cannot be had at all (the directory not mounted writable) withholds nothing
// and refuses nothing: its path is in `*unusable`, for the caller to say once.
struct AllocationHolds {
  std::vector<WithholdLock> locks;
  std::string unusable;  // the first lock that could not be taken for want of its file
};
absl::StatusOr<AllocationHolds> HoldForAllocation(std::string_view root,
                                                  const std::set<int>& devices);

// Whether another holder has the device withheld right now (its exclusive lock is held). False when
// the lock file does not exist. An error only when the file exists and cannot be opened.
absl::StatusOr<bool> IsWithheld(std::string_view root, int device);

}  // namespace neuron
