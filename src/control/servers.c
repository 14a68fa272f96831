// SPDX-License-Identifier: MIT
/*
 * The servers the daemon runs: started for a user (on that user's first
 * client, or by start_server), running as that user when the daemon is root,
 * and talking to the daemon over a socketpair channel (common/channel.h).
 * This file is their lifecycle; routing.c decides which server a client goes
 * to.
 *
 * States: INITIALIZING until the server reports READY (with its devices),
 * then ACTIVE; STOPPING once asked to stop; FAULT if it failed to start or
 * its channel broke while it was serving. A server leaves the list when the
 * daemon reaps its process. Stopping comes in two kinds: DRAIN (take no new
 * clients, exit when the last one has left: shutdown_server, quit -t, the
 * exclusive mode) and FORCE (disconnect everyone now: quit,
 * shutdown_server -f). A DRAIN is sent only once the server is ready and
 * every client routed to it has been handed over, so the channel's order
 * guarantees those clients are served before the server counts its clients.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
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
#include "control/routing.h"

#define KILL_AFTER_MS 30000   /* from QUIT to SIGKILL: its clients' GPU work had time to end */

static struct mps_server_rec *graveyard;

void mps_servers_collect(void)
{
	struct mps_server_rec *s;

	while ((s = graveyard)) {
		graveyard = s->next;
		free(s);
	}
}

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

struct mps_server_rec *mps_server_by_pid(pid_t pid)
{
	for (struct mps_server_rec *s = mps_daemon.servers; s; s = s->next)
		if (s->pid == pid)
			return s;
	return NULL;
}

int mps_server_send(struct mps_server_rec *s, struct mps_chan *m)
{
	ssize_t n;

	if (s->chan < 0)
		return -EPIPE;
	m->magic = MPS_CHAN_MAGIC;
	n = mps_sock_send(s->chan, m, sizeof(*m), -1);
	if (n < 0) {
		mps_log_warn("cannot send to server %d: %s", (int)s->pid, strerror((int)-n));
		return (int)n;
	}
	return 0;
}

void mps_servers_send_log(void)
{
	struct mps_chan m;

	for (struct mps_server_rec *s = mps_daemon.servers; s; s = s->next) {
		if (s->chan < 0)
			continue;
		memset(&m, 0, sizeof(m));
		m.magic = MPS_CHAN_MAGIC;
		m.op = MPS_CHAN_LOG;
		if (mps_sock_send(s->chan, &m, sizeof(m), mps_daemon.server_log_fd) < 0)
			mps_log_warn("cannot give server %d its reopened log", (int)s->pid);
	}
}

/* In the child: become the user, wire up the channel and log, run the server. */
static void exec_server(uid_t uid, int chan)
{
	/* The log first, in case it is fd 3. dup2() onto itself keeps
	 * FD_CLOEXEC: the channel would vanish at exec whenever the
	 * socketpair happened to land on fd 3. */
	if (dup2(mps_daemon.server_log_fd, 2) < 0 ||
	    (chan == 3 ? fcntl(3, F_SETFD, 0) : dup2(chan, 3)) < 0)
		_exit(126);
	int devnull = open("/dev/null", O_RDWR);

	if (devnull >= 0) {
		dup2(devnull, 0);
		dup2(devnull, 1);
	}
	/* The daemon blocks these for its signalfd; the server wants them. */
	sigset_t none;

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
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
	/* Every user's clients share this server, users whom NVIDIA's MPS
	 * keeps in address spaces of their own: their memory is placed at
	 * random unless the daemon was told where (docs/CONTROL.md). */
	if (mps_daemon.multiuser && !getenv("OPENMPS_PLACEMENT"))
		setenv("OPENMPS_PLACEMENT", "random", 1);
	execl(mps_daemon.server_exe, "openmps-server", "--channel", "3", (char *)NULL);
	fprintf(stderr, "openmps-control: cannot run %s: %s\n", mps_daemon.server_exe, strerror(errno));
	_exit(127);
}

int mps_server_start(uid_t uid, struct mps_server_rec **out)
{
	struct mps_server_rec *s, **tail;
	int sv[2], big = 4 << 20;   /* room for a burst of clients arriving at once */
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
	s->settings = mps_daemon.defaults;
	for (tail = &mps_daemon.servers; *tail; tail = &(*tail)->next)
		;
	*tail = s;
	fcntl(s->chan, F_SETFL, fcntl(s->chan, F_GETFL) | O_NONBLOCK);
	setsockopt(s->chan, SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
	mps_daemon_watch(s->chan, s, EPOLLIN | EPOLLRDHUP);
	mps_log_info("Starting new server %d for user %u", (int)pid, (unsigned)uid);
	/* Queued ahead of every client, so the first client gets them too. */
	mps_settings_send_all(s);
	*out = s;
	return 0;
}

/* Sends the DRAIN once it can no longer overtake a client's hand-over. */
void mps__server_maybe_drain(struct mps_server_rec *s)
{
	struct mps_chan m = { .op = MPS_CHAN_DRAIN };

	if (s->stop != MPS_STOP_DRAIN || s->stop_sent || !s->ready || s->pending || s->chan < 0)
		return;
	if (mps_server_send(s, &m) == 0)
		s->stop_sent = true;
	else
		kill(s->pid, SIGTERM);
}

void mps_server_stop(struct mps_server_rec *s, enum mps_stop how)
{
	struct mps_chan m = { .op = MPS_CHAN_QUIT };

	if (s->stop == MPS_STOP_FORCE || (s->stop == how && how == MPS_STOP_DRAIN))
		return;
	if (s->state != MPS_SERVER_FAULT)
		s->state = MPS_SERVER_STOPPING;
	s->stop = how;
	if (how == MPS_STOP_DRAIN) {
		mps_log_info("Server %d will exit when its clients have left", (int)s->pid);
		mps__server_maybe_drain(s);
		return;
	}
	mps__flush_pending(s, "the server is stopping");
	if (s->chan < 0 || mps_server_send(s, &m) < 0)
		kill(s->pid, SIGTERM);
	s->stop_sent = true;
	s->kill_at = mps_now_ms() + KILL_AFTER_MS;
}

void mps_servers_stop_all(enum mps_stop how)
{
	for (struct mps_server_rec *s = mps_daemon.servers; s; s = s->next)
		mps_server_stop(s, how);
	mps__refuse_waiting("the control daemon is shutting down");
}

int mps_servers_running(void)
{
	int n = 0;

	for (struct mps_server_rec *s = mps_daemon.servers; s; s = s->next)
		n++;
	return n;
}

int mps_servers_tick(void)
{
	uint64_t now = mps_now_ms();
	int soonest = -1;

	if (mps_daemon.quitting && mps_daemon.quit_deadline && now >= mps_daemon.quit_deadline) {
		mps_daemon.quit_deadline = 0;
		if (mps_daemon.servers)
			mps_log_info("quit: the time is up, stopping the servers now");
		mps_servers_stop_all(MPS_STOP_FORCE);
	}
	if (mps_daemon.quit_deadline)
		soonest = (int)(mps_daemon.quit_deadline - now);
	/* A server told to quit that does not is stuck (in the driver, say). */
	for (struct mps_server_rec *s = mps_daemon.servers; s; s = s->next) {
		if (!s->kill_at)
			continue;
		if (now >= s->kill_at) {
			mps_log_warn("Server %d did not quit in %d s: killing it", (int)s->pid, KILL_AFTER_MS / 1000);
			kill(s->pid, SIGKILL);
			s->kill_at = 0;
		} else if (soonest < 0 || s->kill_at - now < (uint64_t)soonest) {
			soonest = (int)(s->kill_at - now);
		}
	}
	return soonest;
}

int mps_servers_probe_devices(void)
{
	struct mps_server_rec *s;
	int r;

	if (mps_daemon.devices_known)
		return 0;
	/* A server on its way will report the devices. */
	for (s = mps_daemon.servers; s; s = s->next)
		if (!s->ready && s->state != MPS_SERVER_FAULT && s->chan >= 0)
			return 0;
	if (mps_daemon.quitting)
		return -ESHUTDOWN;
	r = mps_server_start(mps_daemon.multiuser ? 0 : getuid(), &s);
	if (r < 0)
		return r;
	s->probe = true;
	return 0;
}

static void client_up(struct mps_server_rec *s, const struct mps_chan *m)
{
	struct mps_server_client *c = calloc(1, sizeof(*c));

	if (!c)
		return;
	c->pid = m->pid;
	c->uid = m->uid;
	c->id = (uint32_t)m->arg;
	memcpy(c->comm, m->comm, sizeof(c->comm));
	c->comm[sizeof(c->comm) - 1] = 0;
	c->next = s->clients;
	s->clients = c;
}

static struct mps_server_client *find_client(struct mps_server_rec *s, pid_t pid)
{
	for (struct mps_server_client *c = s->clients; c; c = c->next)
		if (c->pid == pid)
			return c;
	return NULL;
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

/* exited: the process has been reaped (its pid may already be reused, so
 * it must not be signalled); otherwise a server without its channel can
 * serve nobody and is told to go. */
static void channel_closed(struct mps_server_rec *s, bool exited)
{
	mps_daemon_unwatch(s->chan);
	close(s->chan);
	s->chan = -1;
	if (!exited && !s->reaped)
		kill(s->pid, SIGTERM);
	if (s->state != MPS_SERVER_STOPPING)
		s->state = MPS_SERVER_FAULT;
	mps__flush_pending(s, "the server exited");
	mps_conn_server_gone(s->pid, "the server exited");
}

static void ready(struct mps_server_rec *s, const struct mps_chan *m)
{
	if (s->state == MPS_SERVER_INITIALIZING)
		s->state = MPS_SERVER_ACTIVE;
	s->ready = true;
	mps_log_info("Server %d is ACTIVE for user %u (%s)", (int)s->pid, (unsigned)s->uid, m->text);
	if (!mps_daemon.devices_known && m->value >= 0 && m->value <= MPS_MAX_DEVICES) {
		mps_daemon.ndev = m->value;
		mps_daemon.devices_known = true;
		mps_conn_devices(NULL);
		mps_cdi_refresh();
	}
	mps__flush_pending(s, NULL);
	mps_conn_ready(s->pid);
	if (s->probe && !s->clients && !s->pending && s->stop == MPS_STOP_NONE) {
		mps_log_info("Server %d was started to learn the devices: stopping it", (int)s->pid);
		mps_server_stop(s, MPS_STOP_DRAIN);
	}
	mps__server_maybe_drain(s);
}

/* Counts s in the daemon's failed servers, once, and in the failures of
 * each device it took down: the GPU its fault was on (uuid), or, for a
 * server that crashed or was killed (uuid NULL) or named no GPU the daemon
 * knows, every device (a server serves them all). */
static void count_failure(struct mps_server_rec *s, const char *uuid)
{
	int hit = -1;

	if (s->failed)
		return;
	s->failed = true;
	mps_daemon.server_failures++;
	for (int d = 0; uuid && *uuid && d < mps_daemon.ndev; d++)
		if (!strcmp(mps_daemon.dev[d].uuid, uuid))
			hit = d;
	for (int d = 0; d < mps_daemon.ndev; d++)
		if (hit < 0 || d == hit)
			mps_daemon.dev[d].failures++;
}

void mps_server_channel_event(struct mps_server_rec *s, uint32_t events)
{
	struct mps_server_client *c;
	bool reset = false;
	struct mps_chan m;
	int rfd;
	ssize_t n;

	if ((events & EPOLLOUT) && s->chan_full)
		mps__flush_pending(s, NULL);
	if (!(events & (EPOLLIN | EPOLLHUP | EPOLLRDHUP | EPOLLERR)))
		return;

	for (;;) {
		if (s->chan < 0)
			return;
		rfd = -1;
		n = mps_sock_recv(s->chan, &m, sizeof(m), &rfd);
		/* Only a REPLY may carry an fd (get_metrics's samples). */
		if (rfd >= 0 && (n != (ssize_t)sizeof(m) || m.op != MPS_CHAN_REPLY)) {
			close(rfd);
			rfd = -1;
		}
		if (n == -EAGAIN || n == -EINTR)
			return;
		/* A server that exits with messages of ours unread resets the
		 * channel, and the reset is reported before what it sent last
		 * (a FAILED, say): reading the error clears it, so read on. */
		if (n == -ECONNRESET && !reset) {
			reset = true;
			continue;
		}
		if (n <= 0) {
			channel_closed(s, false);
			return;
		}
		if ((size_t)n != sizeof(m) || m.magic != MPS_CHAN_MAGIC) {
			mps_log_warn("server %d sent a malformed message; ignored", (int)s->pid);
			if (rfd >= 0)
				close(rfd);
			continue;
		}
		m.comm[sizeof(m.comm) - 1] = 0;
		m.text[sizeof(m.text) - 1] = 0;
		switch (m.op) {
		case MPS_CHAN_DEVICE:
			if (!mps_daemon.devices_known && m.value >= 0 && m.value < MPS_MAX_DEVICES) {
				struct mps_device_info *d = &mps_daemon.dev[m.value];

				snprintf(d->uuid, sizeof(d->uuid), "%s", m.comm);
				snprintf(d->name, sizeof(d->name), "%s", m.text);
				d->total_mem = m.arg;
				d->sm_groups = m.pid > 0 && m.pid <= 64 ? m.pid : 0;
				d->group_sms = d->sm_groups ? (int)m.uid : 0;
			}
			break;
		case MPS_CHAN_READY:
			ready(s, &m);
			break;
		case MPS_CHAN_FAILED:
			mps_log_error("Server %d failed to start: %s", (int)s->pid, m.text);
			s->state = MPS_SERVER_FAULT;
			mps__flush_pending(s, m.text);
			mps_conn_server_gone(s->pid, m.text);
			if (!mps_daemon.devices_known)
				mps_conn_devices(m.text);
			break;
		case MPS_CHAN_CLIENT_UP:
			client_up(s, &m);
			break;
		case MPS_CHAN_CLIENT_DEVICES:
			c = find_client(s, m.pid);
			if (c)
				c->devmask = m.arg;
			break;
		case MPS_CHAN_CLIENT_DOWN:
			client_down(s, &m);
			break;
		case MPS_CHAN_REPLY:
			mps_conn_answer(s->pid, &m, rfd);
			break;
		case MPS_CHAN_FAULT:
			/* New clients go to a fresh server from now on (routing.c
			 * passes a server in FAULT by). */
			mps_log_error("Server %d: %s", (int)s->pid, m.text);
			s->state = MPS_SERVER_FAULT;
			count_failure(s, m.comm);
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
		/* What it said before it went (READY, FAILED, a client leaving)
		 * may still wait in the channel: hear it out first. */
		s->reaped = true;
		if (s->chan >= 0)
			mps_server_channel_event(s, EPOLLIN);
		if (WIFEXITED(status))
			mps_log_info("Server %d exited with status %d", (int)pid, WEXITSTATUS(status));
		else
			mps_log_info("Server %d was killed by signal %d", (int)pid, WTERMSIG(status));
		/* Ended while serving, unasked: a crash, a kill, a GPU fault. */
		if (s->stop == MPS_STOP_NONE && (!WIFEXITED(status) || WEXITSTATUS(status) != 0))
			count_failure(s, NULL);
		if (s->chan >= 0)
			channel_closed(s, true);
		mps__flush_pending(s, "the server exited");
		mps_conn_server_gone(pid, "the server exited");
		if (!s->ready && !mps_daemon.devices_known)
			mps_conn_devices("the server exited before it could report the devices");
		while (s->clients) {
			struct mps_server_client *c = s->clients;

			s->clients = c->next;
			free(c);
		}
		/* Freed after this turn of the event loop: a later event of the
		 * same batch may still point at it (its channel is closed, so
		 * the event does nothing). */
		*pp = s->next;
		s->next = graveyard;
		graveyard = s;
		mps__admit_waiting();
		return;
	}
}
