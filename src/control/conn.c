// SPDX-License-Identifier: MIT
/*
 * Connections to the daemon's sockets. A connection says what it is with
 * its first packet: a CUDA client sends a struct mps_hello and is handed to
 * its user's server (routing.c); anything else is a control UI, which sends
 * one command line per packet and gets one reply per command: the text in
 * packets (common/reply.h), one NUL byte for an empty reply (a packet of no
 * bytes would read as the end of the connection). Errors start with
 * "Error".
 *
 * Nothing waits on a peer. Sockets are non-blocking; a UI that does not read
 * its replies has one reply parked (what of it was not sent) and is not read
 * from until it takes it;
 * a command that needs a server's answer (terminate_client, device_query
 * before any server ran, start_server) parks the UI the same way until the answer, the
 * server's end, or the command's time limit. A UI that says nothing costs an
 * fd and nothing else. When the process runs out of fds, a connection is
 * accepted and closed at once (a spare fd is given up for it) rather than
 * left to make the listening socket ready forever.
 *
 * The log shows what NVIDIA's shows: "Accepting connection...", "NEW UI",
 * "Cmd:<line>", the reply's lines, "UI closed".
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "common/sock.h"
#include "control/control.h"

#define REPLY_LOG_LINES 32   /* reply lines copied to control.log */

struct conn {
	int tag;                    /* MPS_TAG_CONN */
	int fd;                     /* -1 once closed */
	bool is_ui;
	bool privileged;            /* accepted on the privileged socket, from root */
	bool foreign;               /* from another PID namespace than the daemon's */
	struct ucred cred;
	struct conn *next, **pprev; /* all live connections */
	char *out;                  /* a reply the peer has not taken whole yet */
	size_t out_len, out_off;    /* its length, and the bytes sent (reply.h's packets) */
	bool waiting;               /* cmd waits for a server */
	uint64_t deadline;          /* when the wait fails (ms, monotonic) */
	struct mps_cmd cmd;
};

static struct conn *conns;
static struct conn *graveyard;   /* closed this turn of the event loop */

static void unlink_conn(struct conn *c)
{
	*c->pprev = c->next;
	if (c->next)
		c->next->pprev = c->pprev;
	c->next = graveyard;
	graveyard = c;
}

void mps_conn_collect(void)
{
	struct conn *c;

	while ((c = graveyard)) {
		graveyard = c->next;
		free(c->out);
		free(c->cmd.out);
		free(c->cmd.acc);
		free(c);
	}
}

static void conn_close(struct conn *c)
{
	if (c->fd < 0)
		return;
	if (c->is_ui)
		mps_log_info("UI closed");
	mps_daemon_unwatch(c->fd);
	close(c->fd);
	c->fd = -1;
	unlink_conn(c);
}

void mps_conn_close_all(void)
{
	while (conns)
		conn_close(conns);
	mps_conn_collect();
}

static void interest(struct conn *c)
{
	uint32_t ev = EPOLLRDHUP;

	if (c->out)
		ev |= EPOLLOUT;
	else if (!c->waiting)
		ev |= EPOLLIN;
	mps_daemon_watch(c->fd, c, ev);
}

/* Out of fds: take the connection with the spare fd and drop it, so the
 * listening socket does not stay ready. */
static void shed(int lfd)
{
	int fd;

	mps_log_warn("out of file descriptors: dropping a connection");
	if (mps_daemon.spare_fd >= 0) {
		close(mps_daemon.spare_fd);
		mps_daemon.spare_fd = -1;
	}
	fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	if (fd >= 0)
		close(fd);
	mps_daemon.spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

/* How deep process pid ("self" for the daemon) is in PID namespaces, as
 * the NSpid line of its status counts them (one pid per level); 0 when it
 * cannot be read. Unlike /proc/PID/ns/pid, anyone may read it. */
static int pid_ns_depth(const char *pid)
{
	char path[64], line[256];
	int depth = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%s/status", pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "NSpid:", 6))
			continue;
		for (char *t = strtok(line + 6, " \t\n"); t; t = strtok(NULL, " \t\n"))
			depth++;
		break;
	}
	fclose(f);
	return depth;
}

/* Whether process pid shares the daemon's PID namespace (one that cannot
 * be read does not): see admin() in commands.c. A peer the daemon sees
 * lives in its namespace or one below, which adds a level; one of a
 * namespace beside it has no pid here (0). */
static bool own_pid_ns(pid_t pid)
{
	char p[16];
	int self = pid_ns_depth("self");

	if (pid <= 0)
		return false;
	snprintf(p, sizeof(p), "%d", (int)pid);
	return self > 0 && pid_ns_depth(p) == self;
}

void mps_conn_accept(int lfd, bool privileged)
{
	for (;;) {
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		struct conn *c;

		if (fd < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EMFILE || errno == ENFILE)
				shed(lfd);
			return;
		}
		c = calloc(1, sizeof(*c));
		if (!c || mps_sock_peercred(fd, &c->cred) < 0) {
			free(c);
			close(fd);
			continue;
		}
		mps_log_info("Accepting connection...");
		c->tag = MPS_TAG_CONN;
		c->fd = fd;
		c->privileged = privileged && c->cred.uid == 0;
		c->foreign = !own_pid_ns(c->cred.pid);
		c->next = conns;
		if (conns)
			conns->pprev = &c->next;
		c->pprev = &conns;
		conns = c;
		interest(c);
	}
}

static void log_reply(const char *text)
{
	int lines = 0;

	while (*text) {
		size_t n = strcspn(text, "\n");

		if (++lines <= REPLY_LOG_LINES)
			mps_log_info("%.*s", (int)n, text);
		text += n;
		if (*text == '\n')
			text++;
	}
	if (lines > REPLY_LOG_LINES)
		mps_log_info("(%d more lines)", lines - REPLY_LOG_LINES);
}

/* Sends what is left of the reply in c->out, packet by packet, until the
 * peer's socket is full (the rest goes when it can take more, EPOLLOUT). */
static void flush_out(struct conn *c)
{
	const char *pkt;
	size_t plen;
	ssize_t n;

	do {
		mps_reply_packet(c->out, c->out_len, c->out_off, &pkt, &plen);
		n = mps_sock_send(c->fd, pkt, plen, -1);
		if (n == -EAGAIN || n == -ENOBUFS) {
			interest(c);
			return;
		}
		if (n < 0) {
			conn_close(c);
			return;
		}
		c->out_off += plen;
	} while (plen == MPS_REPLY_CHUNK);   /* a shorter packet ends the reply */
	free(c->out);
	c->out = NULL;
	interest(c);
}

/* Sends the command's reply, or what the peer can take of it now. */
static void reply(struct conn *c)
{
	log_reply(c->cmd.out);
	c->out = c->cmd.out;
	c->out_len = c->cmd.outused;
	c->out_off = 0;
	c->cmd.out = NULL;
	free(c->cmd.acc);
	memset(&c->cmd, 0, sizeof(c->cmd));
	flush_out(c);
}

/* Is the line fit to log and parse: printable ASCII and tabs only? */
static bool printable(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 0x20 && s[i] < 0x7f) || s[i] == '\t'))
			return false;
	return true;
}

static void run_command(struct conn *c, char *line, size_t n)
{
	memset(&c->cmd, 0, sizeof(c->cmd));
	c->cmd.uid = c->cred.uid;
	c->cmd.privileged = c->privileged;
	c->cmd.foreign = c->foreign;
	mps_pidview_init(&c->cmd, c->cred.pid);
	c->cmd.outlen = 4096;   /* grows (commands.c) */
	c->cmd.out = malloc(c->cmd.outlen);
	if (!c->cmd.out) {
		conn_close(c);
		return;
	}
	c->cmd.out[0] = 0;
	if (n > 0 && line[n - 1] == '\n')
		line[--n] = 0;
	if (n > 0 && line[n - 1] == '\r')
		line[--n] = 0;
	if (n > MPS_CMD_MAX) {
		mps_log_info("Cmd:<%zu characters>", n);
		mps_err(&c->cmd, "Error: command too long (at most %d characters)\n", MPS_CMD_MAX);
	} else if (!printable(line, n)) {
		mps_log_info("Cmd:<%zu bytes, not printable>", n);
		mps_err(&c->cmd, "Error: the command has characters that are not printable\n");
	} else {
		mps_log_info("Cmd:%s", line);
		mps_command(line, &c->cmd);
	}
	if (c->cmd.wait != MPS_WAIT_NONE) {
		c->waiting = true;
		c->deadline = mps_now_ms() + c->cmd.wait_ms;
		interest(c);
		return;
	}
	reply(c);
}

/* The first or a later packet on a connection. */
static void readable(struct conn *c)
{
	char buf[MPS_CMD_MAX + 64];
	struct mps_hello h;
	ssize_t n;
	int fd;

	n = mps_sock_recv(c->fd, buf, sizeof(buf) - 1, NULL);
	if (n == -EAGAIN || n == -EINTR)
		return;
	if (n <= 0 && n != -EMSGSIZE) {
		conn_close(c);
		return;
	}
	if (!c->is_ui && n == (ssize_t)sizeof(h) && ((struct mps_hello *)buf)->magic == MPS_HELLO_MAGIC) {
		/* A CUDA client: its connection goes to its user's server, which
		 * uses it blocking. */
		memcpy(&h, buf, sizeof(h));
		h.comm[sizeof(h.comm) - 1] = 0;
		fd = c->fd;
		mps_daemon_unwatch(fd);
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
		c->fd = -1;
		unlink_conn(c);
		mps_server_route_client(fd, &c->cred, &h);
		return;
	}
	if (!c->is_ui) {
		c->is_ui = true;
		mps_log_info("NEW UI");
	}
	if (n == -EMSGSIZE)
		n = sizeof(buf) - 1;   /* truncated: reported as too long */
	buf[n] = 0;
	run_command(c, buf, (size_t)n);
}

void mps_conn_event(void *conn, uint32_t events)
{
	struct conn *c = conn;

	if (c->fd < 0)
		return;   /* closed earlier in this turn */
	if ((events & EPOLLOUT) && c->out)
		flush_out(c);
	if (c->fd < 0)
		return;
	if (c->out || c->waiting) {
		if (events & (EPOLLHUP | EPOLLRDHUP | EPOLLERR))
			conn_close(c);
		return;
	}
	if (events & EPOLLIN)
		readable(c);
	else if (events & (EPOLLHUP | EPOLLRDHUP | EPOLLERR))
		conn_close(c);
}

static void finish(struct conn *c, const struct mps_chan *answer, const char *failure)
{
	c->waiting = false;
	c->cmd.wait = MPS_WAIT_NONE;
	c->cmd.done(&c->cmd, answer, failure);
	reply(c);
}

/* Takes server off c's list of servers to answer: whether it was there. */
static bool unwait(struct conn *c, pid_t server)
{
	for (int i = 0; i < c->cmd.nwait; i++) {
		if (c->cmd.wait_pids[i] == server) {
			c->cmd.wait_pids[i] = c->cmd.wait_pids[--c->cmd.nwait];
			return true;
		}
	}
	return false;
}

void mps_conn_answer(pid_t server, const struct mps_chan *m, int fd)
{
	for (struct conn *c = conns, *next; c; c = next) {
		next = c->next;
		if (c->waiting && c->cmd.wait == MPS_WAIT_REPLY && c->cmd.wait_server == server &&
		    c->cmd.wait_req == m->req) {
			if (fd >= 0)
				close(fd);
			finish(c, m, NULL);
			return;
		}
		if (c->waiting && c->cmd.wait == MPS_WAIT_REPLIES && c->cmd.wait_req == m->req && unwait(c, server)) {
			c->cmd.partial(&c->cmd, m, fd, NULL);
			if (!c->cmd.nwait)
				finish(c, NULL, NULL);
			return;
		}
	}
	if (fd >= 0)
		close(fd);
}

void mps_conn_server_gone(pid_t server, const char *why)
{
	for (struct conn *c = conns, *next; c; c = next) {
		next = c->next;
		if (c->waiting && (c->cmd.wait == MPS_WAIT_REPLY || c->cmd.wait == MPS_WAIT_READY) &&
		    c->cmd.wait_server == server)
			finish(c, NULL, why);
		else if (c->waiting && c->cmd.wait == MPS_WAIT_REPLIES && unwait(c, server)) {
			c->cmd.partial(&c->cmd, NULL, -1, why);
			if (!c->cmd.nwait)
				finish(c, NULL, NULL);
		}
	}
}

void mps_conn_ready(pid_t server)
{
	for (struct conn *c = conns, *next; c; c = next) {
		next = c->next;
		if (c->waiting && c->cmd.wait == MPS_WAIT_READY && c->cmd.wait_server == server)
			finish(c, NULL, NULL);
	}
}

void mps_conn_devices(const char *why)
{
	for (struct conn *c = conns, *next; c; c = next) {
		next = c->next;
		if (c->waiting && c->cmd.wait == MPS_WAIT_DEVICES)
			finish(c, NULL, why);
	}
}

int mps_conn_tick(void)
{
	uint64_t now = mps_now_ms();
	int soonest = -1;

	for (struct conn *c = conns, *next; c; c = next) {
		next = c->next;
		if (!c->waiting)
			continue;
		if (c->deadline <= now) {
			finish(c, NULL, "no answer in time");
			continue;
		}
		if (soonest < 0 || c->deadline - now < (uint64_t)soonest)
			soonest = (int)(c->deadline - now);
	}
	return soonest;
}
