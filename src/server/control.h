// SPDX-License-Identifier: MIT
/*
 * The server's end of the channel to the control daemon (common/channel.h):
 * receiving client connections, settings and commands (quit, drain,
 * terminate a client), reporting the devices, readiness, and clients coming,
 * going and using devices. Messages to the daemon may come from any thread;
 * a mutex keeps each packet whole. Packets from the daemon are handled on
 * the main thread only.
 */
#ifndef MPS_SERVER_CONTROL_H
#define MPS_SERVER_CONTROL_H

#include "common/channel.h"

struct mps_client;

void mps_control_send(struct mps_chan *m);

/* CLIENT_UP or CLIENT_DOWN for c. CLIENT_DOWN also answers a pending
 * terminate_client for c. Worker thread of c. */
void mps_control_client_event(struct mps_client *c, enum mps_chan_op op, int value);

/* c made a context on device dev: tells the daemon the first time. Worker
 * thread of c. */
void mps_control_client_device(struct mps_client *c, int dev);

/* Copies the settings in force (active thread percentage, priority, pinned
 * memory limits) into a client being started, before its worker runs. Main
 * thread. */
void mps_control_apply_settings(struct mps_client *c);

/* Reports each device, then READY. */
void mps_control_report_ready(void);

/* Device dev's UUID as the daemon knows it: "GPU-" and the 36 characters. */
void mps_control_device_uuid(int dev, char *buf, size_t len);

/* Reads and acts on one packet from the daemon. Returns 0, or -EPIPE when
 * the daemon is gone, -ECANCELED when it told us to quit. (DRAIN only sets mps_srv.draining: the
 * main loop ends when the last client has gone.) */
int mps_control_handle(int fd);

#endif
