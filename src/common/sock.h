// SPDX-License-Identifier: MIT
/*
 * Unix-domain SOCK_SEQPACKET sockets: message boundaries are kept, file
 * descriptors can ride along (SCM_RIGHTS), and the kernel tells us who the
 * peer is (SO_PEERCRED). All functions return >= 0 on success and -errno on
 * failure; sockets are created close-on-exec.
 */
#ifndef MPS_COMMON_SOCK_H
#define MPS_COMMON_SOCK_H

#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>

/* Binds and listens on path (a stale socket file there is replaced) and sets
 * the file's mode. Returns the listening fd. */
int mps_sock_listen(const char *path, mode_t mode);

/* Connects to the socket at path. Returns the fd. */
int mps_sock_connect(const char *path);

/* Accepts one connection (non-blocking listener: -EAGAIN when none). */
int mps_sock_accept(int lfd);

/* Sends one packet, with fd attached unless it is -1. Never raises SIGPIPE.
 * Returns the bytes sent. */
ssize_t mps_sock_send(int fd, const void *buf, size_t len, int pass_fd);

/* Receives one packet of at most len bytes; if fd_out is not NULL it gets the
 * attached fd or -1 (extra fds are closed). Returns the bytes received, 0 at
 * end of stream, -EMSGSIZE when the packet was longer than len. */
ssize_t mps_sock_recv(int fd, void *buf, size_t len, int *fd_out);

/* The same, but -EAGAIN at once when no packet is waiting. */
ssize_t mps_sock_recv_nowait(int fd, void *buf, size_t len, int *fd_out);

/* The peer's pid, uid and gid as the kernel saw them at connect time. */
int mps_sock_peercred(int fd, struct ucred *cred);

/* Receive timeout in milliseconds (0: none). */
int mps_sock_set_timeout(int fd, int ms);

/* True once the peer has closed its end. */
int mps_sock_peer_gone(int fd);
/* The same, waiting up to ms for the peer to hang up. */
int mps_sock_peer_gone_within(int fd, int ms);

#endif
