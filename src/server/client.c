// SPDX-License-Identifier: MIT
/*
 * Client lifetime on the server: creation when the daemon hands over a
 * connection, the list of live clients, and the two-phase end described in
 * server.h. References: one for the list (dropped by the teardown thread
 * when its work is done) and one for the main thread's watch on the socket
 * (dropped when the main thread has seen the hangup). The struct is freed by
 * whichever drops the last.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/atomics.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/sock.h"
#include "server/control.h"
#include "server/fault.h"
#include "server/main.h"
#include "server/sched.h"
#include "server/server.h"

void mps__refuse(int fd, CUresult r, const char *text)
{
	struct mps_refuse rf = { .magic = MPS_REFUSE_MAGIC, .result = (int32_t)r };

	snprintf(rf.text, sizeof(rf.text), "%s", text);
	mps_sock_send(fd, &rf, sizeof(rf), -1);
}

struct mps_client *mps_client_start(int sock, pid_t pid, uid_t uid, const char *comm)
{
	struct mps_client *c;

	if (uid != getuid() && getuid() != 0) {
		mps_log_warn("refused client %d of user %u: this server serves user %u", (int)pid, (unsigned)uid,
			     (unsigned)getuid());
		mps__refuse(sock, CUDA_ERROR_MPS_CONNECTION_FAILED, "this server belongs to another user");
		return NULL;
	}
	pthread_mutex_lock(&mps_srv.lock);
	if (mps_srv.nclients >= mps_srv.max_clients) {
		pthread_mutex_unlock(&mps_srv.lock);
		mps_log_warn("refused client %d: %d clients already connected", (int)pid, mps_srv.max_clients);
		mps__refuse(sock, CUDA_ERROR_MPS_MAX_CLIENTS_REACHED, "the server has reached its client limit");
		return NULL;
	}
	pthread_mutex_unlock(&mps_srv.lock);

	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->sock = sock;
	c->pid = pid;
	c->uid = uid;
	snprintf(c->comm, sizeof(c->comm), "%s", comm);
	/* Once, at the greeting: the kernel's word, not the client's. */
	mps_pod_of_pid(pid, c->pod_uid, sizeof(c->pod_uid), c->container_id, sizeof(c->container_id));
	c->region_fd = -1;
	c->refs = 2;
	c->run = MPS_RUN_OWNED;
	c->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (c->evfd < 0) {
		mps_log_error("cannot make an eventfd for client %d: %s", (int)pid, strerror(errno));
		free(c);
		return NULL;
	}
	if (mps_gputime_setup(c) != 0) {
		close(c->evfd);
		free(c);
		return NULL;
	}
	mps_handles_init(&c->handles);
	mps_memacct_init(&c->mem);
	for (int i = 0; i < mps_srv.ndev; i++)
		c->vis[i] = (uint8_t)i;
	c->nvis = mps_srv.ndev;
	mps_control_apply_settings(c);   /* before any thread can allocate for it */

	pthread_mutex_lock(&mps_srv.lock);
	c->id = mps_srv.next_client_id++;
	c->next = mps_srv.clients;
	mps_srv.clients = c;
	mps_srv.nclients++;
	pthread_mutex_unlock(&mps_srv.lock);

	if (mps_main_watch(c) < 0)
		goto err_unlist;
	mps_sched_add(c);
	return c;

err_unlist:
	pthread_mutex_lock(&mps_srv.lock);
	for (struct mps_client **pp = &mps_srv.clients; *pp; pp = &(*pp)->next) {
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	}
	mps_srv.nclients--;
	pthread_mutex_unlock(&mps_srv.lock);
	mps_handles_free(&c->handles);
	close(c->evfd);
	free(c);
	return NULL;
}

void mps_client_kill(struct mps_client *c, const char *why)
{
	if (mps_load_acquire(&c->dead))
		return;
	/* A client that leaves because a GPU fault ended it (a reply the GPU
	 * stored may tell it before any thread of ours has looked) must leave
	 * after the fault is raised: the report names every client that had
	 * work running and had not begun to leave by then (fault.c). */
	mps_fault_look();
	mps_client_end(c, why);
}

void mps_client_end(struct mps_client *c, const char *why)
{
	int alive = 0;

	if (!mps_cas(&c->dead, &alive, 1))
		return;
	mps_store_release(&c->dead_ns, mps_now_ns());
	if (why)
		mps_log_info("client %d: %s", (int)c->pid, why);
	/* The client sees its connection end; our watch sees the hangup. */
	shutdown(c->sock, SHUT_RDWR);
	mps_sched_kick(c);
}

void mps_client_put(struct mps_client *c)
{
	if (mps_fetch_sub(&c->refs, 1) != 1)
		return;
	/* After a GPU fault the client stays listed for the report, which
	 * names every client that had work running, even one the fault's
	 * error has ended meanwhile (its kill looked for the fault first);
	 * the server exits right after it. */
	if (mps_fault_seen())
		return;
	pthread_mutex_lock(&mps_srv.lock);
	for (struct mps_client **pp = &mps_srv.clients; *pp; pp = &(*pp)->next) {
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	}
	mps_srv.nclients--;
	mps_srv.gone_ops += mps_load_relaxed(&c->ops);
	mps_srv.gone_trips += mps_load_relaxed(&c->trips);
	mps_srv.gone_fences += mps_load_relaxed(&c->fences);
	pthread_mutex_unlock(&mps_srv.lock);
	close(c->sock);
	close(c->evfd);   /* kicks may come until the main thread's reference goes */
	mps_gputime_free(c);   /* out of the list: get_metrics no longer reads it */
	free(c);
}

void mps_client_kill_all(void)
{
	mps_fault_look();   /* once, and not under the list lock */
	pthread_mutex_lock(&mps_srv.lock);
	for (struct mps_client *c = mps_srv.clients; c; c = c->next)
		mps_client_end(c, NULL);
	pthread_mutex_unlock(&mps_srv.lock);
}

int mps__client_device(const struct mps_client *c, int64_t ordinal)
{
	return ordinal >= 0 && ordinal < c->nvis ? c->vis[ordinal] : -1;
}

int mps__client_ordinal(const struct mps_client *c, int index)
{
	for (int i = 0; i < c->nvis; i++)
		if (c->vis[i] == index)
			return i;
	return -1;
}
