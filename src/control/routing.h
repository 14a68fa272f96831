// SPDX-License-Identifier: MIT
/*
 * Between servers.c (server lifecycle) and routing.c (which server a client
 * goes to): the hooks each calls in the other.
 */
#ifndef MPS_CONTROL_ROUTING_H
#define MPS_CONTROL_ROUTING_H

#include "control/control.h"

/* routing.c */

/* With why NULL: hands s's pending clients over if s can take them now
 * (waiting for the channel to drain if it is full). With why: refuses them
 * all, saying why. Then lets a stop that waited for them go out. */
void mps__flush_pending(struct mps_server_rec *s, const char *why);

/* Exclusive mode: when no server runs any more, starts the server of the
 * user whose client has waited longest and hands it that user's waiting
 * clients. */
void mps__admit_waiting(void);

/* Refuses every client waiting for another user's server to end. */
void mps__refuse_waiting(const char *why);

/* servers.c */
void mps__server_maybe_drain(struct mps_server_rec *s);

#endif
