// SPDX-License-Identifier: MIT
/*
 * See fault.h. What names the culprit: each client's last work (when, on
 * which device and stream, and the kernel if it was a launch), kept in
 * relaxed atomics by its service thread and read by the main thread at the
 * fault. A client counts as having had work running if it queued work in
 * the last RECENT_NS before the fault was seen and had not begun to leave
 * by then: a client that leaves after the fault (most often because the
 * fault's error ended it, before the main thread wrote the report) still
 * counts. Kernel names are interned (kept for the life of the server) so
 * the report never reads a freed name.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/atomics.h"
#include "common/clock.h"
#include "common/log.h"
#include "server/control.h"
#include "server/devout.h"
#include "server/driver.h"
#include "server/fault.h"
#include "server/server.h"

#define RECENT_NS (2ull * 1000 * 1000 * 1000)
#define TAIL_BEFORE_NS (200ull * 1000 * 1000)   /* device output this close before the fault is its message */

static int wake_fd = -1;
static int fault_err;          /* atomic: the sticky error, 0 until the fault */
static int fault_claimed;      /* atomic: a thread is recording the fault */
static int fault_dev = -1;     /* written by that thread, before fault_err */
static uint64_t fault_ns;

int mps_fault_init(void)
{
	wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	return wake_fd < 0 ? -1 : 0;
}

int mps_fault_init_fd(void)
{
	return wake_fd;
}

/* The device whose context holds a sticky error, or -1; the error in *err. */
static int dead_device(CUresult *err)
{
	CUcontext saved = NULL;
	int dead = -1;

	mps_drv.cuCtxGetCurrent(&saved);
	for (int d = 0; d < mps_srv.ndev && dead < 0; d++) {
		CUresult r;

		if (mps_drv.cuCtxSetCurrent(mps_srv.dev[d].primary) != CUDA_SUCCESS)
			continue;
		r = mps_drv.cuStreamQuery(NULL);   /* the server never uses the legacy stream: idle */
		if (mps_fault_sticky(r)) {
			dead = d;
			*err = r;
		}
	}
	mps_drv.cuCtxSetCurrent(saved);   /* the thread's binding cache stays true */
	return dead;
}

bool mps_fault_look(void)
{
	int none = 0, d;
	uint64_t one = 1;
	CUresult r;

	if (mps_load_acquire(&fault_claimed))
		return true;
	d = dead_device(&r);
	if (d < 0)
		return false;   /* the client's own error, the context fine */
	/* Threads that see the fault at once: one records it, and fault_err
	 * (released last) publishes the device and the time with it. */
	if (!mps_cas(&fault_claimed, &none, 1))
		return true;
	fault_dev = d;
	fault_ns = mps_now_ns();
	mps_store_release(&fault_err, (int)r);
	if (write(wake_fd, &one, sizeof(one)) < 0) {
		/* The counter is already non-zero: the main thread is woken. */
	}
	return true;
}

bool mps_fault_seen(void)
{
	return mps_load_acquire(&fault_claimed) != 0;
}

/* ---- culprits ----------------------------------------------------------- */

static pthread_mutex_t names_lock = PTHREAD_MUTEX_INITIALIZER;
static char **names;
static size_t nnames, names_cap;

const char *mps_fault_name(const char *name)
{
	const char *found = NULL;

	pthread_mutex_lock(&names_lock);
	for (size_t i = 0; i < nnames && !found; i++)
		if (!strcmp(names[i], name))
			found = names[i];
	if (!found && nnames < 65536) {
		if (nnames == names_cap) {
			size_t ncap = names_cap ? names_cap * 2 : 64;
			char **nn = realloc(names, ncap * sizeof(*nn));

			if (nn) {
				names = nn;
				names_cap = ncap;
			}
		}
		if (nnames < names_cap && (names[nnames] = strndup(name, 200)))
			found = names[nnames++];
	}
	pthread_mutex_unlock(&names_lock);
	return found;
}

void mps_fault_note_work(struct mps_client *c, int dev, uint32_t stream)
{
	mps_store_relaxed(&c->work.dev, dev);
	mps_store_relaxed(&c->work.stream, stream);
	mps_store_relaxed(&c->work.kernel, NULL);
	mps_store_release(&c->work.ns, mps_now_ns());
}

void mps_fault_note_kernel(struct mps_client *c, const struct mps_sfunc *f)
{
	mps_store_relaxed(&c->work.kernel, f->name);
}

/* Appends to buf what the report says of c. */
static void describe(char *buf, size_t size, struct mps_client *c, bool culprit)
{
	const char *k = mps_load_relaxed(&c->work.kernel);
	uint32_t st = mps_load_relaxed(&c->work.stream);
	size_t n = strlen(buf);

	if (n + 1 >= size)
		return;
	if (culprit && k)
		snprintf(buf + n, size - n, "PID %d (%s), kernel %s on stream %u", (int)c->pid, c->comm, k, st);
	else if (culprit)
		snprintf(buf + n, size - n, "PID %d (%s), a copy or memset on stream %u", (int)c->pid, c->comm, st);
	else
		snprintf(buf + n, size - n, "%sPID %d (%s%s%s)", buf[n - 1] == ' ' ? "" : ", ", (int)c->pid, c->comm,
			 k ? ", kernel " : "", k ? k : "");
}

void mps_fault_finish(void)
{
	CUresult err = (CUresult)mps_load_acquire(&fault_err);
	struct mps_refuse rf = { .magic = MPS_REFUSE_MAGIC, .result = (int32_t)err };
	struct mps_chan m = { .magic = MPS_CHAN_MAGIC, .op = MPS_CHAN_FAULT, .value = (int32_t)err };
	struct mps_client *running[64];
	char who[200] = "";
	int n = 0, all = 0;

	pthread_mutex_lock(&mps_srv.lock);
	for (struct mps_client *c = mps_srv.clients; c; c = c->next) {
		uint64_t t = mps_load_acquire(&c->work.ns);
		uint64_t gone = mps_load_acquire(&c->dead_ns);

		all++;
		/* A client already on its way out when the fault was seen (its
		 * last call answered) had nothing running; one leaving since, or
		 * leaving now (dead, its time not yet written), had. */
		if (t && !(mps_load_acquire(&c->dead) && gone && gone < fault_ns) && t + RECENT_NS >= fault_ns &&
		    mps_load_relaxed(&c->work.dev) == fault_dev &&
		    n < (int)(sizeof(running) / sizeof(running[0])))
			running[n++] = c;
	}
	if (n == 1) {
		snprintf(who, sizeof(who), "culprit: ");
		describe(who, sizeof(who), running[0], true);
	} else if (n > 1) {
		snprintf(who, sizeof(who), "suspects (%d clients had work running): ", n);
		for (int i = 0; i < n; i++)
			describe(who, sizeof(who), running[i], false);
	} else {
		snprintf(who, sizeof(who), "no client had work running");
	}
	snprintf(m.text, sizeof(m.text), "GPU fault on device %d (%s); %s", fault_dev, mps_driver_errname(err), who);
	mps_devout_fault();   /* a failed assert's message, and what was printed before it */
	/* Which GPU, for the daemon's count of failures by device. */
	if (fault_dev >= 0 && fault_dev < mps_srv.ndev)
		mps_control_device_uuid(fault_dev, m.comm, sizeof(m.comm));
	mps_log_error("%s. Every client of this server gets %s; the server exits and the next client gets a "
		      "fresh one", m.text, mps_driver_errname(err));
	memcpy(rf.text, m.text, sizeof(rf.text) - 1);   /* cut to fit; rf.text ends in 0 */
	/* What its kernels printed (an assert's message), then why, to each
	 * client before it sees the hangup; never wait for one that does not
	 * read. */
	for (int i = 0; i < n; i++)
		mps_devout_fault_send(running[i], fault_ns > TAIL_BEFORE_NS ? fault_ns - TAIL_BEFORE_NS : 0);
	for (struct mps_client *c = mps_srv.clients; c; c = c->next)
		if (send(c->sock, &rf, sizeof(rf), MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
			mps_log_debug("client %d: could not say why: %s", (int)c->pid, strerror(errno));
	pthread_mutex_unlock(&mps_srv.lock);
	mps_devout_fault_log();
	/* The daemon hears of it before any client sees the hangup (the exit
	 * below), with no lock held: a send to a daemon that is slow to read
	 * holds up no other thread. */
	mps_control_send(&m);
	mps_log_info("Server exited after a GPU fault (%d client(s) ended)", all);
	/* The driver frees the dead context with the process. */
	_exit(3);
}
