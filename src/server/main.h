// SPDX-License-Identifier: MIT
/*
 * The main thread's watch over client sockets (see main.c).
 */
#ifndef MPS_SERVER_MAIN_H
#define MPS_SERVER_MAIN_H

struct mps_client;

/* Watches c's socket for hangup; holds one reference until the hangup has
 * been handled. Returns 0 or -errno. */
int mps_main_watch(struct mps_client *c);

/* Stops watching (when the client could not be started) and drops the
 * watch's reference. */
void mps_main_unwatch(struct mps_client *c);

#endif
