// SPDX-License-Identifier: MIT
/*
 * Which server a CUDA client goes to, and what happens while it cannot go
 * yet. Never refuse a client for arriving early: one that comes while its
 * server starts waits in that server's pending list and is handed over when
 * the server reports READY.
 *
 * Users. By default each user has its own server and the servers of
 * different users run side by side (NVIDIA's daemon makes a second user wait
 * until the first user's clients have all left, which users take for a
 * hang). A stopping server takes no new clients: its user's next client
 * gets a new server at once.
 *
 * Exclusive mode (--exclusive-users, OPENMPS_EXCLUSIVE_USERS=1) behaves as
 * NVIDIA's daemon: one server at a time. A client for whom no server runs
 * while another server does waits, in arrival order, in the daemon's waiting
 * list; the running server is asked to exit once its clients have left; then
 * the server of the longest-waiting user starts and takes every waiting
 * client of that user. If others still wait, that server too is asked to
 * exit when its clients are done, so every user gets a turn.
 *
 * Multi-user mode (-multiuser-server): one server, running as root, takes
 * the clients of every user.
 *
 * A client's connection is passed to its server over the channel
 * (SCM_RIGHTS); when the channel's buffer is full (a burst of clients) the
 * rest stay pending until it drains.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <cuda.h>

#include "common/log.h"
#include "common/sock.h"
#include "control/control.h"
#include "control/routing.h"

static void refuse(int fd, CUresult r, const char *text)
{
	struct mps_refuse rf = { .magic = MPS_REFUSE_MAGIC, .result = (int32_t)r };

	snprintf(rf.text, sizeof(rf.text), "%s", text);
	mps_sock_send(fd, &rf, sizeof(rf), -1);
	close(fd);
}

struct mps_server_rec *mps_server_for(uid_t uid, const char *domain)
{
	for (struct mps_server_rec *s = mps_daemon.servers; s; s = s->next) {
		if (s->state == MPS_SERVER_STOPPING || s->state == MPS_SERVER_FAULT)
			continue;
		if ((mps_daemon.multiuser || s->uid == uid) && !strcmp(s->domain, domain))
			return s;
	}
	return NULL;
}

struct mps_server_rec *mps_server_for_uid(uid_t uid)
{
	return mps_server_for(uid, "");
}

/* The network namespace of process pid ("self" for the daemon) as /proc
 * names it ("net:[4026531833]"), or "" if it cannot be read. */
static void netns_of(const char *pid, char *out, size_t size)
{
	char path[64];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%s/ns/net", pid);
	n = readlink(path, out, size - 1);
	out[n > 0 ? n : 0] = 0;
}

/* The trust scope a client's server must be of, as a key suffix: "" for
 * the daemon's own network namespace (or when sharing across namespaces is
 * allowed), "@net:[N]" for another. A pod's containers share a network
 * namespace and pods do not, where cgroups would also split one user's
 * terminals and one job's steps; all are one uid in containers, so the uid
 * alone would put every pod in one server. A namespace that cannot be read
 * fails safe: a scope of the client's own ("@pid:N", a server that goes
 * when the client does: route_client); so it is also for a client that
 * has died since it connected, which route_client drops first. Returns
 * whether the namespace could not be read. */
static bool scope_of(pid_t pid, char *out, size_t size)
{
	char ns[64], p[16];

	*out = 0;
	if (mps_daemon.share_namespaces)
		return false;
	if (!*mps_daemon.own_netns)
		netns_of("self", mps_daemon.own_netns, sizeof(mps_daemon.own_netns));
	snprintf(p, sizeof(p), "%d", (int)pid);
	netns_of(p, ns, sizeof(ns));
	if (!*ns) {
		snprintf(out, size, "@pid:%d", (int)pid);
		return true;
	}
	if (strcmp(ns, mps_daemon.own_netns))
		snprintf(out, size, "@%s", ns);
	return false;
}

/* The server key a client goes to besides its user: the fault domain it
 * asked for ("own" is a domain of its own, named after its pid; anything
 * else as it is, cut to what fits), then its trust scope (scope_of, whose
 * answer it returns). */
static bool domain_of(const struct mps_hello *h, pid_t pid, char *out, size_t size)
{
	char d[sizeof(h->domain) + 1], scope[72];
	bool unreadable;

	memcpy(d, h->domain, sizeof(h->domain));
	d[sizeof(h->domain)] = 0;
	if (!*d)
		snprintf(d, sizeof(d), "%s", mps_daemon.default_domain);
	if (!strcmp(d, "shared"))
		*d = 0;
	if (!strcmp(d, "own")) {
		snprintf(out, size, "own-%d", (int)pid);
		return false;
	}
	unreadable = scope_of(pid, scope, sizeof(scope));
	snprintf(out, size, "%s%s", d, scope);
	return unreadable;
}


/* Passes a client's connection to the server. Returns 0, or -EAGAIN when the
 * channel's buffer is full: the caller keeps the client pending until the
 * channel drains. Any other failure refuses the client. */
static int hand_over(struct mps_server_rec *s, const struct mps_pending_client *p)
{
	struct mps_chan m;
	ssize_t n;

	memset(&m, 0, sizeof(m));
	m.magic = MPS_CHAN_MAGIC;
	m.op = MPS_CHAN_NEW_CLIENT;
	m.pid = (int32_t)p->pid;
	m.uid = (uint32_t)p->uid;
	snprintf(m.comm, sizeof(m.comm), "%s", p->comm);
	n = mps_sock_send(s->chan, &m, sizeof(m), p->fd);
	if (n == -EAGAIN || n == -ENOBUFS)
		return -EAGAIN;
	if (n < 0) {
		refuse(p->fd, CUDA_ERROR_MPS_SERVER_NOT_READY, "the server is not answering");
		return 0;
	}
	close(p->fd);
	return 0;
}

/* Can s take clients now? */
static bool can_take(const struct mps_server_rec *s)
{
	return s->ready && s->chan >= 0 && s->stop != MPS_STOP_FORCE && s->state != MPS_SERVER_FAULT;
}

void mps__flush_pending(struct mps_server_rec *s, const char *why)
{
	struct mps_pending_client *p;

	while ((p = s->pending)) {
		if (!why) {
			if (!can_take(s))
				return;
			if (hand_over(s, p) == -EAGAIN) {
				if (!s->chan_full) {
					s->chan_full = true;
					mps_daemon_watch(s->chan, s, EPOLLIN | EPOLLRDHUP | EPOLLOUT);
				}
				return;
			}
		} else {
			refuse(p->fd, CUDA_ERROR_MPS_SERVER_NOT_READY, why);
		}
		s->pending = p->next;
		free(p);
	}
	s->pending_tail = &s->pending;
	if (s->chan_full && s->chan >= 0) {
		s->chan_full = false;
		mps_daemon_watch(s->chan, s, EPOLLIN | EPOLLRDHUP);
	}
	mps__server_maybe_drain(s);
}

static struct mps_pending_client *new_pending(int fd, const struct ucred *cred, const struct mps_hello *h,
					      const char *domain)
{
	struct mps_pending_client *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->fd = fd;
	p->pid = cred->pid;
	p->uid = cred->uid;
	snprintf(p->comm, sizeof(p->comm), "%s", h->comm);
	snprintf(p->domain, sizeof(p->domain), "%s", domain);
	return p;
}

void mps_server_route_client(int fd, const struct ucred *cred, const struct mps_hello *h)
{
	struct mps_server_rec *s;
	struct mps_pending_client *p;
	uid_t uid = cred->uid;
	int r;

	if (mps_daemon.quitting) {
		mps_log_info("NEW CLIENT %d from user %u: the control daemon is shutting down", (int)cred->pid,
			     (unsigned)uid);
		refuse(fd, CUDA_ERROR_MPS_SERVER_NOT_READY, "the control daemon is shutting down");
		return;
	}
	if (!mps_daemon.multiuser && getuid() != 0 && uid != getuid()) {
		mps_log_warn("refusing client %d: user %u is not the daemon's user %u", (int)cred->pid, (unsigned)uid,
			     (unsigned)getuid());
		refuse(fd, CUDA_ERROR_MPS_CONNECTION_FAILED,
		       "this openmps daemon serves only its own user; start it as root to serve every user");
		return;
	}
	char domain[MPS_DOMAIN_KEY];
	bool unreadable = domain_of(h, cred->pid, domain, sizeof(domain));

	if (unreadable) {
		/* Its /proc entry unreadable: mostly a client that has died
		 * since it connected, which would leave a server behind. */
		if (mps_sock_peer_gone(fd)) {
			mps_log_info("NEW CLIENT %d from user %u: gone before it could be routed", (int)cred->pid,
				     (unsigned)uid);
			close(fd);
			return;
		}
		mps_log_warn("client %d: cannot read its network namespace; it gets a server of its own",
			     (int)cred->pid);
	}
	s = mps_server_for(uid, domain);
	if (!s && mps_daemon.exclusive && !mps_daemon.multiuser && (mps_daemon.servers || mps_daemon.waiting)) {
		/* Exclusive mode: another server runs; wait for our turn. */
		p = new_pending(fd, cred, h, domain);
		if (!p) {
			refuse(fd, CUDA_ERROR_MPS_SERVER_NOT_READY, "the control daemon is out of memory");
			return;
		}
		mps_log_info("NEW CLIENT %d from user %u: Server %d of user %u is running, push client to waiting list",
			     (int)cred->pid, (unsigned)uid, mps_daemon.servers ? (int)mps_daemon.servers->pid : 0,
			     mps_daemon.servers ? (unsigned)mps_daemon.servers->uid : 0u);
		{
			/* Tell the client it is queued, so it waits without a time limit. */
			struct mps_refuse wait = { .magic = MPS_WAIT_MAGIC };

			snprintf(wait.text, sizeof(wait.text), "another user has the GPU (exclusive mode); waiting");
			mps_sock_send(fd, &wait, sizeof(wait), -1);
		}
		*mps_daemon.waiting_tail = p;
		mps_daemon.waiting_tail = &p->next;
		for (struct mps_server_rec *o = mps_daemon.servers; o; o = o->next)
			if (o->stop == MPS_STOP_NONE)
				mps_server_stop(o, MPS_STOP_DRAIN);
		return;
	}
	mps_log_info("NEW CLIENT %d from user %u%s%s: %s", (int)cred->pid, (unsigned)uid, *domain ? ", fault domain " : "",
		     domain, s && s->state == MPS_SERVER_ACTIVE ? "Server already exists"
								: "Server is not ready, push client to pending list");
	if (!s) {
		r = mps_server_start(mps_daemon.multiuser ? 0 : uid, &s);
		if (r < 0) {
			mps_log_error("cannot start a server for user %u: %s", (unsigned)uid, strerror(-r));
			refuse(fd, CUDA_ERROR_MPS_SERVER_NOT_READY, "the control daemon cannot start a server");
			return;
		}
		snprintf(s->domain, sizeof(s->domain), "%s", domain);
	}
	s->probe = false;
	p = new_pending(fd, cred, h, domain);
	if (!p) {
		refuse(fd, CUDA_ERROR_MPS_SERVER_NOT_READY, "the control daemon is out of memory");
		return;
	}
	*s->pending_tail = p;
	s->pending_tail = &p->next;
	if (!s->chan_full)
		mps__flush_pending(s, NULL);
	/* A server of its own (a fault domain of its own, or a scope of its
	 * own): it goes when the client does. */
	if (unreadable || !strncmp(domain, "own-", 4))
		mps_server_stop(s, MPS_STOP_DRAIN);
}

void mps__refuse_waiting(const char *why)
{
	struct mps_pending_client *p;

	while ((p = mps_daemon.waiting)) {
		mps_daemon.waiting = p->next;
		refuse(p->fd, CUDA_ERROR_MPS_SERVER_NOT_READY, why);
		free(p);
	}
	mps_daemon.waiting_tail = &mps_daemon.waiting;
}

/* Takes every waiting client of uid out of the waiting list, in order. */
static struct mps_pending_client *take_waiting(uid_t uid)
{
	struct mps_pending_client *out = NULL, **out_tail = &out, **pp = &mps_daemon.waiting;

	while (*pp) {
		struct mps_pending_client *p = *pp;

		if (p->uid != uid) {
			pp = &p->next;
			continue;
		}
		*pp = p->next;
		p->next = NULL;
		*out_tail = p;
		out_tail = &p->next;
	}
	mps_daemon.waiting_tail = pp;
	return out;
}

void mps__admit_waiting(void)
{
	while (mps_daemon.waiting && !mps_daemon.servers && !mps_daemon.quitting) {
		uid_t uid = mps_daemon.waiting->uid;
		struct mps_pending_client *list = take_waiting(uid), *p;
		struct mps_server_rec *s;
		int r = mps_server_start(uid, &s);

		if (r < 0) {
			mps_log_error("cannot start a server for user %u: %s", (unsigned)uid, strerror(-r));
			while ((p = list)) {
				list = p->next;
				refuse(p->fd, CUDA_ERROR_MPS_SERVER_NOT_READY, "the control daemon cannot start a server");
				free(p);
			}
			continue;
		}
		mps_log_info("Server %d takes the waiting clients of user %u", (int)s->pid, (unsigned)uid);
		while ((p = list)) {
			list = p->next;
			p->next = NULL;
			*s->pending_tail = p;
			s->pending_tail = &p->next;
		}
		/* Others wait too: this user's turn ends when these clients leave. */
		if (mps_daemon.waiting)
			mps_server_stop(s, MPS_STOP_DRAIN);
	}
}
