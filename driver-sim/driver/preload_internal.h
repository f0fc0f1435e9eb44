#ifndef NEURON_SIM_PRELOAD_INTERNAL_H_
#define NEURON_SIM_PRELOAD_INTERNAL_H_
/*
 * What preload.c and preload_stat.c, the two halves of libneuron-sim-driver.so, share. The
 * library's symbols are hidden by default, so these stay inside it; EXPORT marks the entries
 * that interpose on libc's.
 */
#include <stddef.h>
#include <sys/types.h>

#define EXPORT __attribute__((visibility("default")))

/* Whether this process is the node daemon, where the interposer does nothing. */
int nsim_inert(void);
/* The path the kernel prints for `fd` (absolute, symlinks resolved) into path[size]; 0 when it
 * has none. */
int nsim_fd_path(int fd, char* path, size_t size);
/* Whether `path` (as nsim_fd_path gives it) is ROOT/dev/neuronN of a root with a live driver
 * socket; `root` and `device` say which. Cuts `path` at the root. */
int nsim_device_of_path(char* path, char* root, size_t root_size, int* device);
/* Whether a file may be a device node's placeholder: the daemon makes them empty regular files,
 * which keeps the readlink off every other file. */
int nsim_may_be_placeholder(mode_t mode, long long size);

#endif /* NEURON_SIM_PRELOAD_INTERNAL_H_ */
