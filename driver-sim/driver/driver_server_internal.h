#pragma once
// DriverServer's private state, shared by driver_server.cc (connections, requests, ioctls) and
// driver_server_open.cc (opens, flushes and the attach table). Nothing else includes it.

#include <sys/types.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>

#include "core/base/unique_fd.h"
#include "driver-sim/driver/driver_server.h"
#include "driver-sim/driver/printk_levels.h"
#include "driver-sim/driver/sim_driver_proto.h"

namespace neuron::sim {
namespace driver_server_internal {

inline constexpr int kSlots = NEURON_ABI_MAX_PROCESSES;  // datastore slots per device
inline constexpr size_t kSlotSize = NEURON_ABI_DS_SIZE;
// The flush that detaches a process sleeps this long before it releases the process's state
// (docs/driver-interface.md#abi-open-semantics: msleep(10) in ncdev_flush).
inline constexpr auto kFlushSleep = std::chrono::milliseconds(10);

}  // namespace driver_server_internal

struct DriverServer::Device {
  UniqueFd memfd;     // read-write: the runtime's
  UniqueFd memfd_ro;  // a read-only reopen: monitors'
  uint8_t* base = nullptr;
  struct Slot {
    pid_t pid = 0;
    uint64_t cleared = 0;  // reuse order: least recently cleared first
  };
  std::array<Slot, driver_server_internal::kSlots> slots{};
  struct Attached {
    int fds = 0;   // its normal fds on the device (the driver's per-process open_count)
    int slot = 0;  // its entry in the driver's table of 16 attached processes
  };
  std::map<pid_t, Attached> attached;
  int open_count = 0;
};

struct DriverServer::Client {
  UniqueFd fd;
  pid_t pid = 0;
  std::map<int, int> fds;               // device -> normal fds of this process
  std::map<int, int> opens;             // device -> normal opens alive (fds or mappings)
  std::optional<nsim_request> waiting;  // an open or READY waiting out a reset
  struct Closing {
    int device = -1;
    std::chrono::steady_clock::time_point due;
  };
  std::optional<Closing> closing;  // a flush sleeping in the driver: its reply waits
};

}  // namespace neuron::sim
