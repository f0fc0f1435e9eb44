#pragma once
// Exclusive core reservation across processes (docs/architecture.md#core-reservation,
// docs/runtime.md#reservation-and-indices): one lock file per global logical core,
// ROOT/run/neuron/cores/<core>, held with flock(LOCK_EX) for the life of the reservation, so the
// kernel frees a dead process's cores at once (SIGKILL included). Reservations are all-or-nothing;
// searches are serialised by an flock on the cores/ directory itself, so two processes never race
// for the same window.
//
// Thread-safety: CoreReservation is immutable after Acquire; Release and destruction must not
// race with each other.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/base/unique_fd.h"
#include "core/driver/sysfs_names.h"
#include "core/model/visible_cores.h"

namespace neuron::nrt {

struct ReservationRequest {
  CoreRange window;  // cores searched (VISIBLE_CORES: exactly these)
  int count = 0;     // consecutive cores wanted inside the window
  std::string what;  // "NEURON_RT_VISIBLE_CORES=3-6", "NEURON_RT_NUM_CORES=4", "all cores"
};

// From NEURON_RT_VISIBLE_CORES (takes precedence) or NEURON_RT_NUM_CORES (0 or unset: all).
// InvalidArgument for a malformed value or cores outside 0 .. total_cores - 1.
absl::StatusOr<ReservationRequest> RequestFromEnv(int total_cores);

class CoreReservation {
 public:
  // First fit: the lowest `count` consecutive free cores of the window. ResourceExhausted with
  // "NeuronCore(s) not available - Requested:nc<A>-nc<B> Available:<K>", A-B being the window
  // and K the longest free run in it.
  static absl::StatusOr<std::unique_ptr<CoreReservation>> Acquire(const RootPaths& root,
                                                                  const ReservationRequest& req);
  ~CoreReservation();
  CoreReservation(const CoreReservation&) = delete;
  CoreReservation& operator=(const CoreReservation&) = delete;

  const CoreRange& range() const { return range_; }
  // Unlocks the cores (idempotent).
  void Release();

 private:
  CoreReservation(CoreRange range, std::vector<UniqueFd> fds)
      : range_(range), fds_(std::move(fds)) {}
  CoreRange range_;
  std::vector<UniqueFd> fds_;  // one flock'ed lock file per reserved core
};

}  // namespace neuron::nrt
