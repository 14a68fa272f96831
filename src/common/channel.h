// SPDX-License-Identifier: MIT
/*
 * The channel between the control daemon and a server it started: a
 * SOCK_SEQPACKET socketpair, the server's end passed as an inherited fd.
 * Each packet is one struct mps_chan; packets are handled in the order sent,
 * which the protocol relies on (settings sent before a client's hand-over
 * apply to that client; a DRAIN sent after hand-overs waits for those
 * clients).
 *
 * Daemon -> server:
 *   NEW_CLIENT      a client's socket rides along (SCM_RIGHTS); pid and comm
 *                   are the daemon's word, the server checks the socket's peer
 *                   credentials itself.
 *   QUIT            disconnect every client now and exit.
 *   DRAIN           take no more clients; exit once the last one has left.
 *   TERMINATE       end client `pid`: its connection is closed and everything
 *                   it held is freed. The server answers with REPLY `req`:
 *                   value 0 once the client is torn down, -ESRCH if it has no
 *                   such client, -EALREADY if one is already being ended.
 *   SET_THREADS     active thread percentage for clients that connect later,
 *                   in hundredths of a percent (value, 1..10000).
 *   SET_PRIORITY    client priority for later clients (value: 0 normal,
 *                   1 below normal).
 *   SET_CLIENT      a running client's setting, changed: client `pid`, value
 *                   what (MPS_SET_CLIENT_*), arg the new value (priority,
 *                   hundredths of a percent, or bytes), text the device
 *                   (memory limits) or SM partition's name. Applies to its
 *                   next work.
 *   METRICS         the server's and its clients' metrics (get_metrics): the
 *                   REPLY numbered req carries a memfd with the samples
 *                   (server/metrics.h).
 *   LOG             the log file, reopened (SIGHUP): its fd rides along; the
 *                   server writes there from now on.
 *   SET_MEMLIMIT    pinned device memory limit for later clients: text names
 *                   the device (ordinal, or a UUID "GPU-…"/"MIG-…"), arg is
 *                   the limit in bytes (0: none).
 *   SM_PARTITION    an SM partition defined (value = its SMs, arg = 1 if idle
 *                   SMs may be lent) or removed (value 0): comm is its name,
 *                   text the device as SET_MEMLIMIT names it.
 *   VDEVICE         a virtual device defined (value = its SMs, or -N for a
 *                   1/N slice of SMs and memory; arg = its memory in bytes)
 *                   or removed (value 0): comm its name, text its GPU.
 *   All settings are sent right after the server starts (before any client)
 *   and again whenever they change.
 *
 * Server -> daemon:
 *   DEVICE          one per device, before READY: value = ordinal,
 *                   arg = total memory in bytes, comm = UUID, text = name.
 *   READY           serving; value = number of devices, text = summary.
 *   FAILED          could not start; text = why.
 *   CLIENT_UP       client pid connected; arg = its id on the server (the
 *                   "Context ID" of the logs), uid and comm describe it.
 *   CLIENT_DEVICES  client pid has made a context on more devices: arg is
 *                   the bit set of every device it has used (bit N: ordinal N).
 *   CLIENT_DOWN     client pid left and everything it held is freed.
 *   REPLY           the answer to the request numbered req: value = 0 or
 *                   -errno, text = detail.
 *   FAULT           a GPU fault ended the server's context: value = the
 *                   driver's error, text = the device and the culprit or
 *                   suspects, comm = the device's UUID. The server exits
 *                   right after.
 */
#ifndef MPS_COMMON_CHANNEL_H
#define MPS_COMMON_CHANNEL_H

#include <stdint.h>

#define MPS_CHAN_MAGIC 0x4e414843u /* "CHAN" */

enum mps_chan_op {
	MPS_CHAN_READY = 1,      /* server -> daemon */
	MPS_CHAN_FAILED,         /* server -> daemon */
	MPS_CHAN_NEW_CLIENT,     /* daemon -> server */
	MPS_CHAN_CLIENT_UP,      /* server -> daemon */
	MPS_CHAN_CLIENT_DOWN,    /* server -> daemon */
	MPS_CHAN_QUIT,           /* daemon -> server */
	MPS_CHAN_DRAIN,          /* daemon -> server */
	MPS_CHAN_TERMINATE,      /* daemon -> server, answered by REPLY */
	MPS_CHAN_SET_THREADS,    /* daemon -> server */
	MPS_CHAN_SET_PRIORITY,   /* daemon -> server */
	MPS_CHAN_SET_MEMLIMIT,   /* daemon -> server */
	MPS_CHAN_DEVICE,         /* server -> daemon: value its ordinal, arg its memory, comm its UUID,
				  * text its name, pid its SM groups for shares (0: none), uid SMs a group */
	MPS_CHAN_CLIENT_DEVICES, /* server -> daemon */
	MPS_CHAN_REPLY,          /* server -> daemon */
	MPS_CHAN_FAULT,          /* server -> daemon */
	MPS_CHAN_LOG,            /* daemon -> server */
	MPS_CHAN_SET_CLIENT,     /* daemon -> server */
	MPS_CHAN_METRICS,        /* daemon -> server, answered by REPLY */
	MPS_CHAN_SM_PARTITION,   /* daemon -> server */
	MPS_CHAN_VDEVICE,        /* daemon -> server */
};

enum mps_set_client {
	MPS_SET_CLIENT_PRIORITY = 1,
	MPS_SET_CLIENT_THREADS,
	MPS_SET_CLIENT_MEMLIMIT,
	MPS_SET_CLIENT_PARTITION,  /* text: the partition's name, "" for none */
};

struct mps_chan {
	uint32_t magic;
	uint32_t op;
	int32_t pid;             /* the client concerned */
	int32_t value;
	uint32_t uid;
	uint32_t req;            /* request number (TERMINATE, REPLY); never 0 */
	uint64_t arg;
	char comm[64];
	char text[256];
};

_Static_assert(sizeof(struct mps_chan) == 352, "channel packet size");
_Static_assert(__builtin_offsetof(struct mps_chan, arg) == 24, "channel packet layout");
_Static_assert(__builtin_offsetof(struct mps_chan, comm) == 32, "channel packet layout");
_Static_assert(__builtin_offsetof(struct mps_chan, text) == 96, "channel packet layout");

#endif
