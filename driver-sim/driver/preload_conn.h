#ifndef NEURON_SIM_PRELOAD_CONN_H_
#define NEURON_SIM_PRELOAD_CONN_H_
/* The daemon connection of libneuron-sim-driver.so: one per root, shared by its opens. */
#include "driver-sim/driver/preload_state.h"
#include "driver-sim/driver/sim_driver_proto.h"

/* One request, one reply. A lost daemon reads as a vanished device (ENODEV), and so does any
 * later request on an open made under it: a restarted daemon is a reloaded driver that never
 * saw that open (`generation` 0: any connection, for a new open). */
int call(struct conn* c, unsigned generation, const struct nsim_request* rq, struct nsim_reply* rp,
         int* fd_out);
/* The connection to `root`'s driver, with one more user reserved (release_conn gives it back). */
struct conn* conn_for(const char* root);
/* One user fewer; the last one closes the connection, which tells the driver this process has
 * nothing of it open any more. */
void release_conn(struct conn* c);

#endif /* NEURON_SIM_PRELOAD_CONN_H_ */
