// SPDX-License-Identifier: MIT
/*
 * The control daemon's replies on its socket (SOCK_SEQPACKET): one text,
 * sent as packets of MPS_REPLY_CHUNK bytes and a last packet shorter than
 * that, which ends it. A reply whose length is a multiple of the chunk
 * (an empty one too) ends with a packet of one NUL byte: a packet of no
 * bytes would read as the end of the connection. A reply under a chunk is
 * one packet, as every reply was before replies could be longer. Replies
 * are at most MPS_REPLY_CAP bytes (get_metrics with hundreds of clients
 * is a few MiB).
 */
#ifndef MPS_COMMON_REPLY_H
#define MPS_COMMON_REPLY_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define MPS_REPLY_CHUNK (64u * 1024u)
#define MPS_REPLY_CAP   (16u * 1024u * 1024u)

/* The packet of a reply of len bytes that starts at off (at most len):
 * *pkt and *plen. The next starts at off + *plen; a packet shorter than
 * MPS_REPLY_CHUNK is the last. */
void mps_reply_packet(const char *text, size_t len, size_t off, const char **pkt, size_t *plen);

/* Receives one whole reply into *out (malloc'ed, NUL-terminated; the
 * caller frees it). Returns its length, 0 if the peer closed the
 * connection before it, or -errno (-EMSGSIZE past MPS_REPLY_CAP). */
ssize_t mps_reply_recv(int fd, char **out);

#endif
