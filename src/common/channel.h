// SPDX-License-Identifier: MIT
/*
 * The channel between the control daemon and a server it started: a
 * SOCK_SEQPACKET socketpair, the server's end passed as an inherited fd.
 * The daemon hands each new client's connection to the server over it (the
 * client's socket rides along as SCM_RIGHTS), and tells it to quit; the server
 * reports that it is ready and when clients come and go, which the daemon
 * logs and lists. Each packet is one struct mps_chan.
 */
#ifndef MPS_COMMON_CHANNEL_H
#define MPS_COMMON_CHANNEL_H

#include <stdint.h>

#define MPS_CHAN_MAGIC 0x4e414843u /* "CHAN" */

enum mps_chan_op {
	MPS_CHAN_READY = 1,      /* server -> daemon: serving; text = device list */
	MPS_CHAN_FAILED,         /* server -> daemon: could not start; text = why */
	MPS_CHAN_NEW_CLIENT,     /* daemon -> server: a client's socket is attached */
	MPS_CHAN_CLIENT_UP,      /* server -> daemon: client pid connected */
	MPS_CHAN_CLIENT_DOWN,    /* server -> daemon: client pid left; value = how */
	MPS_CHAN_QUIT,           /* daemon -> server: disconnect everyone and exit */
};

struct mps_chan {
	uint32_t magic;
	uint32_t op;
	int32_t pid;             /* the client concerned */
	int32_t value;
	uint32_t uid;
	uint32_t pad;
	char comm[64];
	char text[256];
};

_Static_assert(sizeof(struct mps_chan) == 344, "channel packet size");

#endif
