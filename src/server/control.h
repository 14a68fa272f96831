// SPDX-License-Identifier: MIT
/*
 * The server's end of the channel to the control daemon (common/channel.h):
 * receiving client connections and commands, reporting readiness and client
 * arrivals and departures. Messages to the daemon may come from any thread;
 * a mutex keeps each packet whole.
 */
#ifndef MPS_SERVER_CONTROL_H
#define MPS_SERVER_CONTROL_H

#include "common/channel.h"

struct mps_client;

void mps_control_send(struct mps_chan *m);
void mps_control_client_event(struct mps_client *c, enum mps_chan_op op, int value);

/* Reads and acts on one packet from the daemon. Returns 0, or -1 when the
 * daemon is gone or told us to quit. */
int mps_control_handle(int fd);

#endif
