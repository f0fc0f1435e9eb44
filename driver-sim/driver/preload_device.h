#ifndef NEURON_SIM_PRELOAD_DEVICE_H_
#define NEURON_SIM_PRELOAD_DEVICE_H_
/* Which files are simulated devices, for libneuron-sim-driver.so's opens and stats. */
#include <stddef.h>
#include <sys/types.h>

/* The path the kernel prints for `fd` (absolute, symlinks resolved) into path[size]; 0 when it
 * has none. */
int nsim_fd_path(int fd, char* path, size_t size);
/* Whether `path` (as nsim_fd_path gives it) is ROOT/dev/neuronN of a root with a live driver
 * socket; `root` and `device` say which. Cuts `path` at the root. */
int nsim_device_of_path(char* path, char* root, size_t root_size, int* device);
/* Whether a file may be a device node's placeholder: the daemon makes them empty regular files,
 * which keeps the readlink off every other file. */
int nsim_may_be_placeholder(mode_t mode, long long size);
/* True when `fd` is ROOT/dev/neuronN of a root with a live driver socket. */
int classify(int fd, char* root, size_t root_size, int* device);
/* NEURON_SIM_DEVICE_MAP "C=H,..." (the container runtime's device mapping): the host index of
 * container device `view`, -1 when the container has no such device; `view` itself without
 * a map. */
int host_index(int view);
/* A pod's runtime opens /dev/neuronK, which on the simulated node is NEURON_ROOT/dev/neuronH
 * (H from the container's device map). Returns `path` unchanged otherwise; NULL with errno
 * ENOENT when the container has no device K. */
const char* translate(const char* path, char* buf, size_t size, int* view);

#endif /* NEURON_SIM_PRELOAD_DEVICE_H_ */
