#pragma once
// The runtime's device fds, opened as the Neuron runtime opens them: /dev/neuronN in the
// process's own numbering (a pod under container numbering sees /dev/neuron0 for host device
// 5). The simulated driver resolves that name (driver/preload_device.c); the runtime learns the
// host device each fd landed on from the fd itself (/proc/self/fd), and keys everything it shares
// with other processes (core reservations, datastores, faults) by host identity
// (docs/architecture.md#device-numbering).
//
// Thread-safety: immutable after Open except KeepOnly; both happen during nrt_init.

#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "core/base/unique_fd.h"
#include "core/model/visible_cores.h"

namespace neuron::nrt {

class DeviceNodes {
 public:
  // Opens /dev/neuron<first> .. /dev/neuron<last> read-write (a normal open: the process
  // attaches to each). ResourceExhausted when a device already has 16 processes (EBUSY);
  // FailedPrecondition when no driver serves the name.
  static absl::StatusOr<std::unique_ptr<DeviceNodes>> Open(int first, int last);
  ~DeviceNodes();  // closes every fd (the driver's release)
  DeviceNodes(const DeviceNodes&) = delete;
  DeviceNodes& operator=(const DeviceNodes&) = delete;

  // The window of global logical cores in the process's numbering, in host numbering.
  // InvalidArgument when its devices do not land on consecutive host devices in order.
  absl::StatusOr<CoreRange> ToHost(CoreRange view, int cores_per_device) const;
  // Closes the fds of host devices outside [first_host, last_host].
  void KeepOnly(int first_host, int last_host);
  // The fd open on a host device, still owned here; -1 when none is.
  int FdOfHost(int host_device) const;

 private:
  DeviceNodes() = default;
  std::map<int, int> host_of_view_;     // view index -> host index
  std::map<int, UniqueFd> fd_of_host_;  // host index -> fd
};

}  // namespace neuron::nrt
