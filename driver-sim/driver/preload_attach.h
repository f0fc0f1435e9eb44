#ifndef NEURON_SIM_PRELOAD_ATTACH_H_
#define NEURON_SIM_PRELOAD_ATTACH_H_
/* Opening and letting go of a simulated device in libneuron-sim-driver.so: the open file
 * descriptions (`struct desc`) the entries share. */
#include <stdint.h>

#include "driver-sim/driver/preload_state.h"
#include "driver-sim/driver/sim_driver_proto.h"

/* The connection an open's requests must go to: the one it was opened on. A forked child's
 * copies go to its own connection. */
unsigned gen_of(const struct desc* d);
void request_init(struct nsim_request* rq, uint32_t op, const struct desc* d);
/* After a successful real open of `fd`: attaches it when it is a simulated device. Returns 0
 * (a plain file, or attached) or an errno, the open then failing as the driver's would. */
int attach(int fd, int flags, int view);
/* Whether an open of `path` may be of a device node, so that it is checked at once: a name
 * starting with "neuron". Every other open (sysfs counters by the thousand) costs nothing more
 * than libc's; a device reached through another name (a symlink) is recognised by its identity
 * at its first ioctl or mmap, which attaches it then (adopt). */
int maybe_device(const char* path);
/* After a real open of `path` as `fd` (-1 when it failed): attaches a device; on the driver's
 * refusal closes the fd and returns -1 with errno set. */
int finish_open(int fd, int flags, int view, const char* path);
/* One reference of `d` is gone: an fd (`was_fd`) or a mapping. The driver's flush runs when the
 * process closes its last fd of the open (dup'ed fds share it); its release when nothing
 * refers to the open any more (a mapping keeps it). */
void let_go(struct desc* d, int was_fd);
/* An fd nobody tracked (inherited across exec) that turns out to be a device is attached on
 * first use, as the open it came from would have. */
struct desc* adopt(int fd);
/* `to`, a dup of `from`, is one more fd of `from`'s open. */
void dup_tracked(int from, int to);
/* dup2/dup3 onto one of our own fds: ours moves elsewhere first. */
void evacuate(int fd);

#endif /* NEURON_SIM_PRELOAD_ATTACH_H_ */
