// SPDX-License-Identifier: MIT
/*
 * See control.h. terminate_client has a two-sided race to close: the daemon's
 * request is handled on the main thread while the client's worker may be
 * finishing its teardown. The client's term_req word settles it: the main
 * thread puts the request number there with a compare-and-swap from 0, the
 * worker swaps in -1 when it reports the client down and answers whatever
 * request it found. So exactly one side answers: the worker (the client was
 * torn down after the request) or the main thread (the client was already
 * down, or already being terminated).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/atomics.h"
#include "common/log.h"
#include "common/sock.h"
#include "common/visible.h"
#include "server/control.h"
#include "server/fault.h"
#include "server/metrics.h"
#include "server/server.h"
#include "server/smshare.h"
#include "server/vdevice.h"

static pthread_mutex_t send_lock = PTHREAD_MUTEX_INITIALIZER;

static void send_with(struct mps_chan *m, int fd)
{
	ssize_t n;

	if (mps_srv.channel < 0)
		return;
	m->magic = MPS_CHAN_MAGIC;
	pthread_mutex_lock(&send_lock);
	n = mps_sock_send(mps_srv.channel, m, sizeof(*m), fd);
	pthread_mutex_unlock(&send_lock);
	if (n != (ssize_t)sizeof(*m))
		mps_log_warn("cannot tell the control daemon (message %u): %s", m->op,
			     n < 0 ? strerror((int)-n) : "short send");
}

void mps_control_send(struct mps_chan *m)
{
	send_with(m, -1);
}

/* get_metrics: the samples in a memfd, with the REPLY. */
static void metrics(const struct mps_chan *q)
{
	struct mps_chan m = { .op = MPS_CHAN_REPLY, .req = q->req };
	int fd = memfd_create("openmps-metrics", MFD_CLOEXEC);

	if (fd < 0 || mps_metrics_write(fd) < 0 || lseek(fd, 0, SEEK_SET) < 0) {
		m.value = -EIO;
		snprintf(m.text, sizeof(m.text), "the server could not write its metrics");
		send_with(&m, -1);
	} else {
		send_with(&m, fd);
	}
	if (fd >= 0)
		close(fd);
}

static void send_reply(uint32_t req, pid_t pid, int value, const char *text)
{
	struct mps_chan m;

	memset(&m, 0, sizeof(m));
	m.op = MPS_CHAN_REPLY;
	m.req = req;
	m.pid = (int32_t)pid;
	m.value = value;
	snprintf(m.text, sizeof(m.text), "%s", text);
	mps_control_send(&m);
}

void mps_control_client_event(struct mps_client *c, enum mps_chan_op op, int value)
{
	struct mps_chan m;
	int req = 0;

	memset(&m, 0, sizeof(m));
	m.op = op;
	m.pid = (int32_t)c->pid;
	m.uid = (uint32_t)c->uid;
	m.value = value;
	m.arg = c->id;
	memcpy(m.comm, c->comm, sizeof(m.comm));
	if (op == MPS_CHAN_CLIENT_DOWN)
		req = mps_xchg(&c->term_req, -1);
	mps_control_send(&m);
	/* After CLIENT_DOWN, so the daemon's lists no longer show the client
	 * when it answers terminate_client. */
	if (req > 0)
		send_reply((uint32_t)req, c->pid, 0, "terminated");
}

void mps_control_client_device(struct mps_client *c, int dev)
{
	struct mps_chan m;

	if (dev < 0 || dev >= 32 || (c->devmask & (1u << dev)))
		return;
	c->devmask |= 1u << dev;
	memset(&m, 0, sizeof(m));
	m.op = MPS_CHAN_CLIENT_DEVICES;
	m.pid = (int32_t)c->pid;
	m.uid = (uint32_t)c->uid;
	m.arg = c->devmask;
	mps_control_send(&m);
}

void mps_control_apply_settings(struct mps_client *c)
{
	c->thread_pct = mps_srv.thread_pct;
	c->priority = mps_srv.priority;
	c->priority_applied = c->priority;
	for (int i = 0; i < MPS_MAX_DEVICES; i++)
		c->mem.limit[i] = mps_srv.mem_limit[i];
	c->mem.host_limit = mps_srv.host_limit;
	c->mem.pool = &mps_srv.host_pool;
}

void mps_control_device_uuid(int dev, char *buf, size_t len)
{
	char t[MPS_UUID_TEXT];

	mps_uuid_text(t, mps_srv.dev[dev].info.uuid);
	snprintf(buf, len, "GPU-%s", t);
}

void mps_control_report_ready(void)
{
	struct mps_chan m;
	size_t len = 0;
	unsigned int groups = 0;

	for (int i = 0; i < mps_srv.ndev; i++) {
		memset(&m, 0, sizeof(m));
		m.op = MPS_CHAN_DEVICE;
		m.value = i;
		m.arg = mps_srv.dev[i].info.total_mem;
		m.uid = mps_sm_group_sms(i, &groups);
		m.pid = (int32_t)groups;
		mps_control_device_uuid(i, m.comm, sizeof(m.comm));
		snprintf(m.text, sizeof(m.text), "%s", mps_srv.dev[i].info.name);
		mps_control_send(&m);
	}
	memset(&m, 0, sizeof(m));
	m.op = MPS_CHAN_READY;
	m.value = mps_srv.ndev;
	for (int i = 0; i < mps_srv.ndev && len < sizeof(m.text) - 1; i++)
		len += (size_t)snprintf(m.text + len, sizeof(m.text) - len, "%s%d: %s", i ? "; " : "", i,
					mps_srv.dev[i].info.name);
	mps_control_send(&m);
}

static int hexval(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

/* The device a limit names: an ordinal, or a UUID whose 32 hex digits (after
 * a "GPU-" or "MIG-" style prefix, dashes ignored) match a device's.
 * Returns the ordinal or -1. */
static int find_device(const char *spec)
{
	const char *p = spec;
	char *end;
	long n;

	n = strtol(spec, &end, 10);
	if (end != spec && !*end)
		return n >= 0 && n < mps_srv.ndev ? (int)n : -1;
	if (strlen(spec) > 4 && spec[3] == '-')
		p = spec + 4;
	for (int i = 0; i < mps_srv.ndev; i++) {
		const uint8_t *u = mps_srv.dev[i].info.uuid;
		const char *q = p;
		int k = 0;

		for (; *q && k < 32; q++) {
			if (*q == '-')
				continue;
			if (hexval(*q) != ((u[k / 2] >> (k % 2 ? 0 : 4)) & 0xf))
				break;
			k++;
		}
		if (k == 32 && !*q)
			return i;
	}
	return -1;
}

/* set_client_*: the client's setting from its next work on. Under the
 * list lock, so the client is not freed meanwhile. */
static void set_client(const struct mps_chan *m)
{
	char spec[sizeof(m->text)];
	int dev = -1, part = 0;

	memcpy(spec, m->text, sizeof(spec));   /* a device, or a partition's name */
	spec[sizeof(spec) - 1] = 0;
	if (m->value == MPS_SET_CLIENT_PARTITION)
		part = mps_sm_name_id(spec, true);   /* 0 for "" (none) */
	if (m->value == MPS_SET_CLIENT_MEMLIMIT) {
		if ((dev = find_device(spec)) < 0) {
			mps_log_warn("pinned memory limit for device %s ignored: no such device", spec);
			return;
		}
	}
	if ((m->value == MPS_SET_CLIENT_PRIORITY && m->arg > 1) || (m->value == MPS_SET_CLIENT_THREADS &&
								     (m->arg < 1 || m->arg > 10000))) {
		mps_log_warn("client %d: setting %d = %llu ignored", (int)m->pid, m->value, (unsigned long long)m->arg);
		return;
	}
	pthread_mutex_lock(&mps_srv.lock);
	for (struct mps_client *c = mps_srv.clients; c; c = c->next) {
		if (c->pid != m->pid)
			continue;
		switch (m->value) {
		case MPS_SET_CLIENT_PRIORITY:
			mps_store_release(&c->priority, (int)m->arg);
			mps_log_info("client %d: priority %s from now on", (int)c->pid, m->arg ? "below normal" : "normal");
			break;
		case MPS_SET_CLIENT_THREADS:
			mps_store_relaxed(&c->thread_pct, (int)m->arg);
			mps_sm_publish(c);   /* its streams move at their next work */
			mps_log_info("client %d: active thread percentage %d.%d from now on", (int)c->pid,
				     (int)m->arg / 100, (int)m->arg % 100 / 10);
			break;
		case MPS_SET_CLIENT_MEMLIMIT:
			mps_store_relaxed(&c->mem.limit[dev], m->arg);
			mps_log_info("client %d: device %d pinned memory limit %llu MiB from now on", (int)c->pid, dev,
				     (unsigned long long)(m->arg >> 20));
			break;
		case MPS_SET_CLIENT_PARTITION:
			mps_store_relaxed(&c->sm_part, part);
			mps_sm_publish(c);
			mps_log_info("client %d: SM partition %s from now on", (int)c->pid, part ? spec : "none");
			break;
		default:
			break;
		}
	}
	pthread_mutex_unlock(&mps_srv.lock);
}

static void set_memlimit(const struct mps_chan *m)
{
	char spec[sizeof(m->text)];
	int dev;

	memcpy(spec, m->text, sizeof(spec));
	spec[sizeof(spec) - 1] = 0;
	dev = find_device(spec);
	if (dev < 0) {
		mps_log_warn("pinned memory limit for device %s ignored: no such device", spec);
		return;
	}
	mps_srv.mem_limit[dev] = m->arg;
	if (m->arg)
		mps_log_info("Device %d pinned memory limit for new clients: %llu MiB", dev,
			     (unsigned long long)(m->arg >> 20));
	else
		mps_log_info("Device %d pinned memory limit for new clients: none", dev);
}

/* The name (comm) and device (text) a partition or virtual device packet
 * carries, terminated. */
static void named_device(const struct mps_chan *m, char *name, char *spec)
{
	memcpy(name, m->comm, sizeof(m->comm));
	name[sizeof(m->comm) - 1] = 0;
	memcpy(spec, m->text, sizeof(m->text));
	spec[sizeof(m->text) - 1] = 0;
}

/* An SM partition defined, moved or removed (smshare.h). */
static void sm_partition(const struct mps_chan *m)
{
	char name[sizeof(m->comm)], spec[sizeof(m->text)];
	int dev;

	named_device(m, name, spec);
	mps_sm_partition_remove(name);
	if (m->value <= 0)
		return;
	dev = find_device(spec);
	if (dev < 0) {
		mps_log_warn("SM partition %s ignored: no device %s", name, spec);
		return;
	}
	mps_sm_partition_set(dev, name, (unsigned int)m->value, m->arg != 0);
}

/* A virtual device defined, changed or removed (vdevice.h). */
static void vdevice(const struct mps_chan *m)
{
	char name[sizeof(m->comm)], spec[sizeof(m->text)];
	int dev;

	named_device(m, name, spec);
	if (m->value == 0) {
		mps_vdev_remove(name);
		return;
	}
	dev = find_device(spec);
	if (dev < 0 || m->value < -MPS_MAX_VDEVICES) {
		mps_log_warn("virtual device %s ignored: no device %s", name, spec);
		return;
	}
	if (m->value < 0)
		mps_vdev_set(name, dev, 0, 0, (unsigned int)-m->value);
	else
		mps_vdev_set(name, dev, (unsigned int)m->value, m->arg, 0);
}

/* terminate_client: see the comment at the top of this file. */
static void terminate(const struct mps_chan *m)
{
	static const char note[] = "terminated by the control daemon (terminate_client)";
	struct mps_refuse rf = { .magic = MPS_REFUSE_MAGIC, .result = CUDA_ERROR_MPS_CLIENT_TERMINATED };
	int answer = -ESRCH;

	if (m->req == 0 || m->req > 0x7fffffffu)
		return;
	snprintf(rf.text, sizeof(rf.text), "%s", note);
	mps_fault_look();   /* what mps_client_kill would, before the list lock */
	/* Under the list lock the client cannot be freed (its last reference
	 * is dropped under this lock), so its socket is still open. */
	pthread_mutex_lock(&mps_srv.lock);
	for (struct mps_client *c = mps_srv.clients; c; c = c->next) {
		int none = 0;

		if (c->pid != m->pid)
			continue;
		if (mps_cas(&c->term_req, &none, (int)m->req)) {
			/* Tell the client why before it sees the hangup; never
			 * wait for a client that does not read. */
			if (send(c->sock, &rf, sizeof(rf), MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
				/* The hangup says enough. */
			}
			mps_client_end(c, note);
			answer = 1;   /* answered by its worker when torn down */
		} else {
			answer = none < 0 ? 0 : -EALREADY;
		}
		break;
	}
	pthread_mutex_unlock(&mps_srv.lock);
	if (answer == -ESRCH)
		mps_log_warn("terminate_client: no client with PID %d", (int)m->pid);
	if (answer != 1)
		send_reply(m->req, m->pid, answer, answer == 0 ? "already gone" : "");
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
		return -EPIPE;
	}
	if ((size_t)n != sizeof(m) || m.magic != MPS_CHAN_MAGIC) {
		mps_log_error("bad packet from the control daemon (%zd bytes)", n);
		if (cfd >= 0)
			close(cfd);
		return 0;
	}
	m.comm[sizeof(m.comm) - 1] = 0;
	m.text[sizeof(m.text) - 1] = 0;
	if (m.op != MPS_CHAN_NEW_CLIENT && m.op != MPS_CHAN_LOG && cfd >= 0) {
		close(cfd);
		cfd = -1;
	}
	switch (m.op) {
	case MPS_CHAN_LOG:
		/* Onto the fd every thread logs to: no moment without a log. */
		if (cfd >= 0 && dup2(cfd, mps_log_fd()) >= 0)
			mps_log_info("log reopened");
		if (cfd >= 0)
			close(cfd);
		return 0;
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
		if (mps_srv.draining) {
			mps__refuse(cfd, CUDA_ERROR_MPS_SERVER_NOT_READY, "the server is shutting down");
			close(cfd);
			return 0;
		}
		if (!mps_client_start(cfd, cred.pid, cred.uid, m.comm))
			close(cfd);
		return 0;
	case MPS_CHAN_QUIT:
		mps_log_info("asked to quit by the control daemon");
		return -ECANCELED;
	case MPS_CHAN_DRAIN:
		if (!mps_srv.draining)
			mps_log_info("asked to shut down once its clients have left");
		mps_srv.draining = true;
		return 0;
	case MPS_CHAN_TERMINATE:
		terminate(&m);
		return 0;
	case MPS_CHAN_SET_THREADS:
		if (m.value < 1 || m.value > 10000) {
			mps_log_warn("active thread percentage %d/100 ignored", m.value);
			return 0;
		}
		mps_srv.thread_pct = m.value;
		mps_log_info("Active thread percentage for new clients: %d.%d", m.value / 100, m.value % 100 / 10);
		return 0;
	case MPS_CHAN_SET_PRIORITY:
		if (m.value < 0 || m.value > 1) {
			mps_log_warn("client priority %d ignored", m.value);
			return 0;
		}
		mps_srv.priority = m.value;
		mps_log_info("Client priority for new clients: %d", m.value);
		return 0;
	case MPS_CHAN_SET_MEMLIMIT:
		set_memlimit(&m);
		return 0;
	case MPS_CHAN_SET_CLIENT:
		set_client(&m);
		return 0;
	case MPS_CHAN_SM_PARTITION:
		sm_partition(&m);
		return 0;
	case MPS_CHAN_VDEVICE:
		vdevice(&m);
		return 0;
	case MPS_CHAN_METRICS:
		if (m.req != 0)
			metrics(&m);
		return 0;
	default:
		mps_log_warn("unknown request %u from the control daemon", m.op);
		return 0;
	}
}
