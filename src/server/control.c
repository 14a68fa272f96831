// SPDX-License-Identifier: MIT
/*
 * See control.h.
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/sock.h"
#include "server/control.h"
#include "server/server.h"

static pthread_mutex_t send_lock = PTHREAD_MUTEX_INITIALIZER;

void mps_control_send(struct mps_chan *m)
{
	if (mps_srv.channel < 0)
		return;
	m->magic = MPS_CHAN_MAGIC;
	pthread_mutex_lock(&send_lock);
	mps_sock_send(mps_srv.channel, m, sizeof(*m), -1);
	pthread_mutex_unlock(&send_lock);
}

void mps_control_client_event(struct mps_client *c, enum mps_chan_op op, int value)
{
	struct mps_chan m;

	memset(&m, 0, sizeof(m));
	m.op = op;
	m.pid = (int32_t)c->pid;
	m.uid = (uint32_t)c->uid;
	m.value = value;
	memcpy(m.comm, c->comm, sizeof(m.comm));
	mps_control_send(&m);
}

int mps_control_handle(int fd)
{
	struct mps_chan m;
	struct ucred cred;
	int cfd = -1;
	ssize_t n;

	n = mps_sock_recv(fd, &m, sizeof(m), &cfd);
	if (n == -EAGAIN || n == -EINTR)
		return 0;
	if (n <= 0) {
		if (n < 0)
			mps_log_error("lost the control daemon: %s", strerror((int)-n));
		else
			mps_log_info("the control daemon closed its channel");
		return -1;
	}
	if ((size_t)n != sizeof(m) || m.magic != MPS_CHAN_MAGIC) {
		mps_log_error("bad packet from the control daemon (%zd bytes)", n);
		if (cfd >= 0)
			close(cfd);
		return 0;
	}
	switch (m.op) {
	case MPS_CHAN_NEW_CLIENT:
		if (cfd < 0) {
			mps_log_error("the control daemon sent a client without its connection");
			return 0;
		}
		/* Trust the kernel's word on who the peer is, not the daemon's. */
		if (mps_sock_peercred(cfd, &cred) < 0) {
			close(cfd);
			return 0;
		}
		m.comm[sizeof(m.comm) - 1] = 0;
		if (!mps_client_start(cfd, cred.pid, cred.uid, m.comm))
			close(cfd);
		return 0;
	case MPS_CHAN_QUIT:
		if (cfd >= 0)
			close(cfd);
		mps_log_info("asked to quit by the control daemon");
		return -1;
	default:
		if (cfd >= 0)
			close(cfd);
		mps_log_warn("unknown request %u from the control daemon", m.op);
		return 0;
	}
}
