#pragma once
// printk levels of the lines the simulated driver writes to the kernel log (pr_err, pr_info;
// <linux/kern_levels.h>), for the daemon and the driver server alike.

namespace neuron::sim {

inline constexpr int kKernErr = 3;
inline constexpr int kKernInfo = 6;

}  // namespace neuron::sim
