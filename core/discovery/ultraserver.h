#pragma once
// The driver's UltraServer class attributes, ROOT/sys/class/neuron_device/{ultraserver_mode,
// node_id_4, server_id_4, node_id_2, server_id_2} (docs/driver-interface.md#device-nodes), as
// aws-neuron-driver 2.24.7 prints them (v3/neuron_pelect.c:1700-1768):
//   ultraserver_mode  the modes the node supports, "1,3,4" (enum neuron_ultraserver_mode: 1 X4,
//                     2 X2H, 3 X2V, 4 X1), "" outside an UltraServer, "busy" during the election;
//   node_id_<N>       the node's id in the N-node configuration, -1 when it is in none ("busy",
//                     "invalid" too);
//   server_id_<N>     that configuration's serial as 16 hex digits, all zeros when in none.
// For N = 2 the driver reports X2H when the node supports it, else X2V.

#include <optional>
#include <string>
#include <vector>

#include "core/discovery/inventory.h"
#include "core/driver/sysfs_names.h"

namespace neuron {

// enum neuron_ultraserver_mode: the values ultraserver_mode lists and the Neuron runtime's
// NEURON_RT_ULTRASERVER_MODE takes (aws-neuron-sdk src/k8/k8s-ultraserver-init-script.sh).
inline constexpr int kUltraServerModeX4 = 1;
inline constexpr int kUltraServerModeX2H = 2;
inline constexpr int kUltraServerModeX2V = 3;
inline constexpr int kUltraServerModeX1 = 4;

// Absent when ultraserver_mode does not exist (no driver, or one without the attributes) or reads
// "busy"; a value that cannot be read leaves its configuration out and adds a warning naming the
// file. Busy is a warning too: the node's place is unknown until the election ends.
std::optional<UltraServerInfo> ReadUltraServer(const RootPaths& root,
                                               std::vector<std::string>* warnings);

// "x4", "x2h", "x2v", "x1" for enum neuron_ultraserver_mode 1-4; "" otherwise.
std::string UltraServerModeName(int mode);

}  // namespace neuron
