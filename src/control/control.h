// SPDX-License-Identifier: MIT
/*
 * openmps-control's shared declarations: the daemon's state (its sockets,
 * the servers it started, the settings it hands to new servers) and the
 * functions its files provide each other.
 *
 * Files: main.c (command line and modes), daemon.c (set-up, the event loop,
 * connections), servers.c (one server per user: start, hand clients over,
 * follow their state), commands.c (the control language), ui.c (the
 * stdin-to-daemon client that `openmps-control` with no flag is).
 */
#ifndef MPS_CONTROL_CONTROL_H
#define MPS_CONTROL_CONTROL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "common/channel.h"
#include "common/wire.h"

#define MPS_CMD_MAX      1024   /* longest command line */

enum mps_server_state {
	MPS_SERVER_INITIALIZING = 0,
	MPS_SERVER_ACTIVE,
	MPS_SERVER_FAULT,
	MPS_SERVER_STOPPING,
};

struct mps_pending_client {
	struct mps_pending_client *next;
	int fd;
	pid_t pid;
	char comm[64];
};

struct mps_server_client {
	struct mps_server_client *next;
	pid_t pid;
	uid_t uid;
	char comm[64];
};

/* What an epoll tag points at: each struct so tagged starts with its kind. */
enum { MPS_TAG_CONN = 1, MPS_TAG_SERVER };

struct mps_server_rec {
	int tag;                    /* MPS_TAG_SERVER */
	struct mps_server_rec *next;
	pid_t pid;
	uid_t uid;
	int chan;                   /* our end of its channel; -1 once it is gone */
	enum mps_server_state state;
	bool force_quit;            /* shutdown_server -f, or quit */
	bool chan_full;             /* the channel's buffer is full: clients wait in pending */
	struct mps_pending_client *pending, **pending_tail;
	struct mps_server_client *clients;
	char devices[256];
};

struct mps_daemon {
	const char *pipe_dir;
	const char *log_dir;
	char sock_path[4096];
	char pid_path[4096];
	char lock_path[4096];
	int lock_fd;
	int listen_fd;
	int epfd;
	bool foreground;
	bool quitting;
	struct mps_server_rec *servers;
	char server_exe[4096];
	int server_log_fd;          /* server.log, inherited as the servers' stderr */
};

extern struct mps_daemon mps_daemon;

/* daemon.c */
int mps_daemon_run(bool foreground);
void mps_daemon_watch(int fd, void *tag);
void mps_daemon_watch_out(int fd, void *tag, bool out);   /* also wait for writability */
void mps_daemon_unwatch(int fd);

/* servers.c */
struct mps_server_rec *mps_server_for_uid(uid_t uid);
struct mps_server_rec *mps_server_by_pid(pid_t pid);
int mps_server_start(uid_t uid, struct mps_server_rec **out);
/* Takes a CUDA client's connection to its user's server, starting the
 * server if there is none; refuses the client if that cannot be done. */
void mps_server_route_client(int fd, const struct ucred *cred, const struct mps_hello *h);
void mps_server_channel_event(struct mps_server_rec *s, uint32_t events);
void mps_server_reaped(pid_t pid, int status);
void mps_server_quit(struct mps_server_rec *s);
void mps_servers_quit_all(void);
int mps_servers_running(void);
const char *mps_server_state_name(enum mps_server_state st);

/* commands.c: runs one command line from a user of the given uid; writes the
 * reply (possibly empty) into out. */
void mps_command(const char *line, uid_t uid, char *out, size_t outlen);

/* ui.c */
int mps_ui_run(void);

#endif
