// SPDX-License-Identifier: MIT
/*
 * The servers the daemon runs: one per user id, started when that user's
 * first client arrives, running as that user (when the daemon is root), and
 * talking to the daemon over a socketpair channel (common/channel.h).
 *
 * A server starts INITIALIZING; clients that arrive meanwhile wait in its
 * pending list and are handed over when it reports READY (so a client is
 * never refused for arriving early). Servers of different users run side by
 * side. When a server exits, its pending clients are refused with the reason.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cuda.h>

#include "common/log.h"
#include "common/sock.h"
#include "control/control.h"

const char *mps_server_state_name(enum mps_server_state st)
{
	switch (st) {
	case MPS_SERVER_INITIALIZING:
		return "INITIALIZING";
	case MPS_SERVER_ACTIVE:
		return "ACTIVE";
	case MPS_SERVER_FAULT:
		return "FAULT";
	default:
		return "STOPPING";
	}
}

struct mps_server_rec *mps_server_for_uid(uid_t uid)
{
	for (struct mps_server_rec *s = mps_daemon.servers; s; s = s->next)
		if (s->uid == uid && s->state != MPS_SERVER_STOPPING && s->state != MPS_SERVER_FAULT)
			return s;
	return NULL;
}

struct mps_server_rec *mps_server_by_pid(pid_t pid)
{
	for (struct mps_server_rec *s = mps_daemon.servers; s; s = s->next)
		if (s->pid == pid)
			return s;
	return NULL;
}

static void refuse(int fd, CUresult r, const char *text)
{
	struct mps_refuse rf = { .magic = MPS_REFUSE_MAGIC, .result = (int32_t)r };

	snprintf(rf.text, sizeof(rf.text), "%s", text);
	mps_sock_send(fd, &rf, sizeof(rf), -1);
	close(fd);
}

/* In the child: become the user, wire up the channel and log, run the server. */
static void exec_server(uid_t uid, int chan)
{
	if (dup2(chan, 3) < 0 || dup2(mps_daemon.server_log_fd, 2) < 0)
		_exit(126);
	int devnull = open("/dev/null", O_RDWR);

	if (devnull >= 0) {
		dup2(devnull, 0);
		dup2(devnull, 1);
	}
	if (getuid() == 0 && uid != 0) {
		struct passwd *pw = getpwuid(uid);
		gid_t gid = pw ? pw->pw_gid : (gid_t)uid;

		if ((pw ? initgroups(pw->pw_name, gid) : setgroups(0, NULL)) < 0 || setgid(gid) < 0 ||
		    setuid(uid) < 0) {
			fprintf(stderr, "openmps-control: cannot become user %u to run its server: %s\n",
				(unsigned)uid, strerror(errno));
			_exit(126);
		}
	}
	execl(mps_daemon.server_exe, "openmps-server", "--channel", "3", (char *)NULL);
	fprintf(stderr, "openmps-control: cannot run %s: %s\n", mps_daemon.server_exe, strerror(errno));
	_exit(127);
}

int mps_server_start(uid_t uid, struct mps_server_rec **out)
{
	struct mps_server_rec *s;
	int sv[2];
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	s = calloc(1, sizeof(*s));
	if (!s) {
		close(sv[0]);
		close(sv[1]);
		return -ENOMEM;
	}
	pid = fork();
	if (pid < 0) {
		int err = -errno;

		close(sv[0]);
		close(sv[1]);
		free(s);
		return err;
	}
	if (pid == 0)
		exec_server(uid, sv[1]);
	close(sv[1]);
	s->tag = MPS_TAG_SERVER;
	s->pid = pid;
	s->uid = uid;
	s->chan = sv[0];
	s->state = MPS_SERVER_INITIALIZING;
	s->pending_tail = &s->pending;
	s->next = mps_daemon.servers;
	mps_daemon.servers = s;
	fcntl(s->chan, F_SETFL, fcntl(s->chan, F_GETFL) | O_NONBLOCK);
	{
		int big = 4 << 20;   /* room for a burst of clients arriving at once */

		setsockopt(s->chan, SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
	}
	mps_daemon_watch(s->chan, s);
	mps_log_info("Starting new server %d for user %u", (int)pid, (unsigned)uid);
	*out = s;
	return 0;
}

/* Passes a client's connection to the server. Returns 0, or -EAGAIN when the
 * channel's buffer is full (a burst of clients): the caller keeps the client
 * pending until the channel drains. Any other failure refuses the client. */
static int hand_over(struct mps_server_rec *s, int fd, pid_t pid, const char *comm)
{
	struct mps_chan m;
	ssize_t n;

	memset(&m, 0, sizeof(m));
	m.magic = MPS_CHAN_MAGIC;
	m.op = MPS_CHAN_NEW_CLIENT;
	m.pid = (int32_t)pid;
	snprintf(m.comm, sizeof(m.comm), "%s", comm);
	n = mps_sock_send(s->chan, &m, sizeof(m), fd);
	if (n == -EAGAIN || n == -ENOBUFS)
		return -EAGAIN;
	if (n < 0) {
		refuse(fd, CUDA_ERROR_MPS_SERVER_NOT_READY, "the server is not answering");
		return 0;
	}
	close(fd);
	return 0;
}

static void flush_pending(struct mps_server_rec *s, bool ok, const char *why);

void mps_server_route_client(int fd, const struct ucred *cred, const struct mps_hello *h)
{
	struct mps_server_rec *s = mps_server_for_uid(cred->uid);
	struct mps_pending_client *p;
	int r;

	mps_log_info("NEW CLIENT %d from user %u: %s", (int)cred->pid, (unsigned)cred->uid,
		     s && s->state == MPS_SERVER_ACTIVE ? "Server already exists"
							: "Server is not ready, push client to pending list");
	if (mps_daemon.quitting) {
		refuse(fd, CUDA_ERROR_MPS_SERVER_NOT_READY, "the control daemon is shutting down");
		return;
	}
	if (!s) {
		if (getuid() != 0 && cred->uid != getuid()) {
			mps_log_warn("refusing client %d: user %u is not the daemon's user %u", (int)cred->pid,
				     (unsigned)cred->uid, (unsigned)getuid());
			refuse(fd, CUDA_ERROR_MPS_CONNECTION_FAILED,
			       "this openmps daemon serves only its own user; start it as root to serve every user");
			return;
		}
		r = mps_server_start(cred->uid, &s);
		if (r < 0) {
			mps_log_error("cannot start a server for user %u: %s", (unsigned)cred->uid, strerror(-r));
			refuse(fd, CUDA_ERROR_MPS_SERVER_NOT_READY, "the control daemon cannot start a server");
			return;
		}
	}
	if (s->state == MPS_SERVER_ACTIVE && !s->chan_full && hand_over(s, fd, cred->pid, h->comm) == 0)
		return;
	p = calloc(1, sizeof(*p));
	if (!p) {
		refuse(fd, CUDA_ERROR_MPS_SERVER_NOT_READY, "the control daemon is out of memory");
		return;
	}
	p->fd = fd;
	p->pid = cred->pid;
	snprintf(p->comm, sizeof(p->comm), "%s", h->comm);
	*s->pending_tail = p;
	s->pending_tail = &p->next;
	/* An active server whose channel was full: wait for it to drain. */
	if (s->state == MPS_SERVER_ACTIVE && !s->chan_full)
		flush_pending(s, true, NULL);
}

/* Hands the pending clients over (ok) or refuses them with why. When the
 * channel fills up, the rest stay pending and the daemon waits for it to
 * drain (EPOLLOUT), then comes back here. */
static void flush_pending(struct mps_server_rec *s, bool ok, const char *why)
{
	struct mps_pending_client *p;

	while ((p = s->pending)) {
		if (ok && hand_over(s, p->fd, p->pid, p->comm) == -EAGAIN) {
			if (!s->chan_full) {
				s->chan_full = true;
				mps_daemon_watch_out(s->chan, s, true);
			}
			return;
		}
		if (!ok)
			refuse(p->fd, CUDA_ERROR_MPS_SERVER_NOT_READY, why);
		s->pending = p->next;
		free(p);
	}
	s->pending_tail = &s->pending;
	if (s->chan_full && s->chan >= 0) {
		s->chan_full = false;
		mps_daemon_watch_out(s->chan, s, false);
	}
}

static void client_up(struct mps_server_rec *s, const struct mps_chan *m)
{
	struct mps_server_client *c = calloc(1, sizeof(*c));

	if (!c)
		return;
	c->pid = m->pid;
	c->uid = m->uid;
	memcpy(c->comm, m->comm, sizeof(c->comm));
	c->comm[sizeof(c->comm) - 1] = 0;
	c->next = s->clients;
	s->clients = c;
}

static void client_down(struct mps_server_rec *s, const struct mps_chan *m)
{
	for (struct mps_server_client **pp = &s->clients; *pp; pp = &(*pp)->next) {
		if ((*pp)->pid == m->pid) {
			struct mps_server_client *c = *pp;

			*pp = c->next;
			free(c);
			return;
		}
	}
}

static void channel_closed(struct mps_server_rec *s)
{
	mps_daemon_unwatch(s->chan);
	close(s->chan);
	s->chan = -1;
	if (s->state != MPS_SERVER_STOPPING)
		s->state = MPS_SERVER_FAULT;
	flush_pending(s, false, "the server exited");
}

void mps_server_channel_event(struct mps_server_rec *s, uint32_t events)
{
	struct mps_chan m;
	ssize_t n;

	if ((events & EPOLLOUT) && s->chan_full && s->state == MPS_SERVER_ACTIVE)
		flush_pending(s, true, NULL);
	if (!(events & (EPOLLIN | EPOLLHUP | EPOLLRDHUP | EPOLLERR)))
		return;

	for (;;) {
		n = mps_sock_recv(s->chan, &m, sizeof(m), NULL);
		if (n == -EAGAIN || n == -EINTR)
			return;
		if (n <= 0) {
			channel_closed(s);
			return;
		}
		if ((size_t)n != sizeof(m) || m.magic != MPS_CHAN_MAGIC) {
			mps_log_warn("server %d sent a malformed message; ignored", (int)s->pid);
			continue;
		}
		m.text[sizeof(m.text) - 1] = 0;
		switch (m.op) {
		case MPS_CHAN_READY:
			if (s->state == MPS_SERVER_INITIALIZING)
				s->state = MPS_SERVER_ACTIVE;
			snprintf(s->devices, sizeof(s->devices), "%s", m.text);
			mps_log_info("Server %d is ACTIVE for user %u (%s)", (int)s->pid, (unsigned)s->uid, m.text);
			flush_pending(s, s->state == MPS_SERVER_ACTIVE, "the server is stopping");
			break;
		case MPS_CHAN_FAILED:
			mps_log_error("Server %d failed to start: %s", (int)s->pid, m.text);
			s->state = MPS_SERVER_FAULT;
			flush_pending(s, false, m.text);
			break;
		case MPS_CHAN_CLIENT_UP:
			client_up(s, &m);
			break;
		case MPS_CHAN_CLIENT_DOWN:
			client_down(s, &m);
			break;
		default:
			mps_log_warn("server %d sent unknown message %u", (int)s->pid, m.op);
			break;
		}
	}
}

void mps_server_reaped(pid_t pid, int status)
{
	for (struct mps_server_rec **pp = &mps_daemon.servers; *pp; pp = &(*pp)->next) {
		struct mps_server_rec *s = *pp;

		if (s->pid != pid)
			continue;
		if (WIFEXITED(status))
			mps_log_info("Server %d exited with status %d", (int)pid, WEXITSTATUS(status));
		else
			mps_log_info("Server %d was killed by signal %d", (int)pid, WTERMSIG(status));
		if (s->chan >= 0)
			channel_closed(s);
		flush_pending(s, false, "the server exited");
		while (s->clients) {
			struct mps_server_client *c = s->clients;

			s->clients = c->next;
			free(c);
		}
		*pp = s->next;
		free(s);
		return;
	}
}

void mps_server_quit(struct mps_server_rec *s)
{
	struct mps_chan m;

	s->state = MPS_SERVER_STOPPING;
	flush_pending(s, false, "the server is stopping");
	if (s->chan < 0)
		return;
	memset(&m, 0, sizeof(m));
	m.magic = MPS_CHAN_MAGIC;
	m.op = MPS_CHAN_QUIT;
	if (mps_sock_send(s->chan, &m, sizeof(m), -1) < 0)
		kill(s->pid, SIGTERM);
}

void mps_servers_quit_all(void)
{
	for (struct mps_server_rec *s = mps_daemon.servers; s; s = s->next)
		mps_server_quit(s);
}

int mps_servers_running(void)
{
	int n = 0;

	for (struct mps_server_rec *s = mps_daemon.servers; s; s = s->next)
		n++;
	return n;
}
