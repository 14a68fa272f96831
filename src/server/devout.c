// SPDX-License-Identifier: MIT
/*
 * What kernels print. Device printf and the messages of failed device
 * asserts are written by the driver to its process's stdout and stderr
 * when it empties the context's printf buffer: at a launch, a synchronize,
 * a blocking copy, a module's unload (CUDA C Programming Guide, "Formatted
 * Output"). Here that process is the server and the context every
 * client's, so the server's stdout and stderr are pipes that a thread
 * drains into two queues. A client whose modules print says so
 * (MPS_DEVOUT_ENABLE, client/devout.c); after each of its synchronizing
 * calls it asks for the output (MPS_DEVOUT_TAKE): a synchronize of its
 * stream, finished by then, has the driver empty its buffer, and the
 * queues' bytes go back a slot at a time, to be written to the client's
 * own stdout and stderr in order with its own output, as the driver
 * would have written them there. (The client looks for vprintf in its
 * modules' images.)
 *
 * The driver's buffer does not say whose kernel printed: with several
 * clients printing at once, each synchronize takes what is there. While no
 * connected client prints, whatever arrives (the driver's own complaints
 * too) goes to the server's log, and so does everything at a GPU fault
 * (a failed assert's message: the fault ends every client, fault.h);
 * the clients whose work was running get it first, with the refusal that
 * ends them, so that a program's assert message reaches its stderr as it
 * would natively. The server's log stays what it was: its descriptor
 * moves off fd 2 before the pipe takes its place.
 * OPENMPS_DEVICE_OUTPUT=0 leaves stdout and stderr alone.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/env.h"
#include "common/log.h"
#include "server/crash.h"
#include "server/devout.h"
#include "server/driver.h"
#include "server/server.h"
#include "server/streams.h"

/* stdout and stderr; a sanitizer's report goes to stderr just before the
 * process ends, too late for the thread: in such a build stderr stays the
 * log. */
#define STREAMS (SANITIZED ? 1 : 2)

#define PIPE_BYTES (1 << 20)   /* asked of each pipe, so the driver rarely waits for the thread */
#define KEEP_BYTES (8u << 20)  /* kept per queue for the clients; more is dropped and counted */
#define FAULT_BYTES (64u << 10) /* sent per queue to a client at a fault */
#define TAIL_NS (1000ull * 1000 * 1000)

struct queue {
	uint8_t *buf;
	size_t len, cap;
	uint64_t dropped;
};

/* The latest burst that went to the log: what a fault's clients get if it
 * came just before the fault (an assert's message, logged by the thread
 * while no client took output). */
struct tail {
	uint8_t buf[FAULT_BYTES];
	size_t len;
	uint64_t ns;   /* when it was last added to */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct queue queues[2];   /* stdout, stderr */
static struct tail tails[2];
static int readers[2] = { -1, -1 };
static int listeners;            /* clients whose modules print; under the lock */
static bool on;

static void keep(struct queue *q, const uint8_t *p, size_t n)
{
	if (q->len + n > q->cap && q->cap < KEEP_BYTES) {
		size_t cap = q->cap ? q->cap : 65536;
		uint8_t *nb;

		while (cap < q->len + n && cap < KEEP_BYTES)
			cap *= 2;
		nb = realloc(q->buf, cap);
		if (nb) {
			q->buf = nb;
			q->cap = cap;
		}
	}
	if (n > q->cap - q->len) {
		q->dropped += n - (q->cap - q->len);
		n = q->cap - q->len;
	}
	if (n) {
		memcpy(q->buf + q->len, p, n);
		q->len += n;
	}
}

/* Under the lock: the end of q's bytes kept as the latest burst, which
 * starts afresh after a second without output. */
static void to_tail(struct tail *t, const struct queue *q)
{
	uint64_t now = mps_now_ns();
	size_t n = q->len < FAULT_BYTES ? q->len : FAULT_BYTES;

	if (!n)
		return;
	if (now - t->ns > TAIL_NS)
		t->len = 0;
	if (t->len + n > FAULT_BYTES) {
		size_t cut = t->len + n - FAULT_BYTES;

		memmove(t->buf, t->buf + cut, t->len - cut);
		t->len -= cut;
	}
	memcpy(t->buf + t->len, q->buf + q->len - n, n);
	t->len += n;
	t->ns = now;
}

/* Under the lock: everything the queues hold, to the log, line by line. */
static void to_log(void)
{
	for (int i = 0; i < 2; i++) {
		struct queue *q = &queues[i];
		size_t at = 0;

		to_tail(&tails[i], q);
		while (at < q->len) {
			const uint8_t *nl = memchr(q->buf + at, '\n', q->len - at);
			size_t n = nl ? (size_t)(nl - (q->buf + at)) : q->len - at;

			mps_log_info("device %s: %.*s", i ? "stderr" : "stdout", (int)n, (const char *)q->buf + at);
			at += n + (nl != NULL);
		}
		q->len = 0;
		if (q->dropped)
			mps_log_warn("device %s: %llu bytes dropped (none of the clients took them)",
				     i ? "stderr" : "stdout", (unsigned long long)q->dropped);
		q->dropped = 0;
	}
}

/* Under the lock: what the pipes hold, into the queues. */
static void drain(void)
{
	uint8_t buf[65536];

	for (int i = 0; i < 2; i++) {
		ssize_t n;

		while (readers[i] >= 0 && (n = read(readers[i], buf, sizeof(buf))) > 0)
			keep(&queues[i], buf, (size_t)n);
	}
	if (!listeners)
		to_log();
}

static void *reader(void *arg)
{
	struct pollfd p[2] = { { .fd = readers[0], .events = POLLIN }, { .fd = readers[1], .events = POLLIN } };

	(void)arg;
	pthread_setname_np(pthread_self(), "omps-devout");
	for (;;) {
		if (poll(p, STREAMS, -1) < 0 && errno != EINTR)
			break;
		pthread_mutex_lock(&lock);
		drain();
		pthread_mutex_unlock(&lock);
	}
	mps_log_warn("device output: the reader stopped (%s)", strerror(errno));
	return NULL;
}

int mps_devout_init(void)
{
	int p[2][2] = { { -1, -1 }, { -1, -1 } }, logfd = -1;
	pthread_attr_t attr;
	pthread_t t;
	int i;

	if (!mps_env_long("OPENMPS_DEVICE_OUTPUT", 1, 0, 1))
		return 0;
	for (i = 0; i < STREAMS; i++) {
		if (pipe2(p[i], O_CLOEXEC) < 0 || fcntl(p[i][0], F_SETFL, O_NONBLOCK) < 0)
			goto fail;
		(void)fcntl(p[i][1], F_SETPIPE_SZ, PIPE_BYTES);   /* best effort: the thread drains it anyway */
		readers[i] = p[i][0];
	}
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	i = pthread_create(&t, &attr, reader, NULL);
	pthread_attr_destroy(&attr);
	if (i != 0)
		goto fail;
	/* The log first leaves fd 2; then the pipes become stdout and stderr. */
	if (STREAMS > 1) {
		logfd = fcntl(mps_log_fd(), F_DUPFD_CLOEXEC, 3);
		if (logfd < 0)
			goto fail_running;
		mps_log_set_fd(logfd);
	}
	setvbuf(stdout, NULL, _IONBF, 0);
	for (i = 0; i < STREAMS; i++) {
		if (dup2(p[i][1], 1 + i) < 0)
			goto fail_running;
		if (p[i][1] != 1 + i)   /* a server started with stdout closed got it as the pipe */
			close(p[i][1]);
	}
	on = true;
	return 0;

fail_running:
	/* The thread keeps draining whatever was set up. */
	mps_log_warn("device output: stdout and stderr not taken over (%s); kernels' printf goes nowhere",
		     strerror(errno));
	return -1;
fail:
	mps_log_warn("device output: no pipes (%s); kernels' printf goes nowhere", strerror(errno));
	for (i = 0; i < 2; i++) {
		if (p[i][0] >= 0)
			close(p[i][0]);
		if (p[i][1] >= 0)
			close(p[i][1]);
		readers[i] = -1;
	}
	return -1;
}

void mps_devout_client_gone(struct mps_client *c)
{
	if (!c->devout)
		return;
	pthread_mutex_lock(&lock);
	c->devout = false;
	if (--listeners == 0)
		drain();   /* and, with no one left to take it, to the log */
	pthread_mutex_unlock(&lock);
}

void mps_devout_fault(void)
{
	if (!on)
		return;
	pthread_mutex_lock(&lock);
	drain();
	pthread_mutex_unlock(&lock);
}

/* bytes [0, len) to c's socket in pieces of stream (1, 2); false once one
 * cannot be sent at once. */
static bool send_pieces(struct mps_client *c, struct mps_devout_piece *p, uint32_t stream, const uint8_t *bytes,
			size_t len)
{
	for (size_t at = 0; at < len; at += p->len) {
		p->stream = stream;
		p->len = (uint32_t)(len - at < MPS_DEVOUT_PIECE ? len - at : MPS_DEVOUT_PIECE);
		memcpy(p->data, bytes + at, p->len);
		if (send(c->sock, p, offsetof(struct mps_devout_piece, data) + p->len, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
			return false;
	}
	return true;
}

void mps_devout_fault_send(struct mps_client *c, uint64_t since_ns)
{
	struct mps_devout_piece *p;

	if (!on || !(p = calloc(1, sizeof(*p))))
		return;
	p->magic = MPS_DEVOUT_MAGIC;
	pthread_mutex_lock(&lock);
	for (int i = 0; i < 2; i++) {
		const struct tail *t = &tails[i];
		const struct queue *q = &queues[i];
		size_t n = q->len < FAULT_BYTES ? q->len : FAULT_BYTES;

		/* The burst logged just before, then the end of what is
		 * queued: the fault's own message is last. */
		if (t->len && t->ns >= since_ns && !send_pieces(c, p, (uint32_t)i + 1, t->buf, t->len))
			break;
		if (!send_pieces(c, p, (uint32_t)i + 1, q->buf + q->len - n, n))
			break;
	}
	pthread_mutex_unlock(&lock);
	free(p);
}

void mps_devout_fault_log(void)
{
	if (!on)
		return;
	pthread_mutex_lock(&lock);
	to_log();
	pthread_mutex_unlock(&lock);
}

void mps_devout_crash(int fd)
{
	char buf[4096];
	ssize_t n;

	for (int i = 0; i < 2; i++)
		while (readers[i] >= 0 && (n = read(readers[i], buf, sizeof(buf))) > 0)
			if (write(fd, buf, (size_t)n) < 0)
				break;
}

/* Under the lock: up to the slot's room of each queue, stdout first. */
static void take(struct mps_slot *s)
{
	size_t room = MPS_SLOT_DATA, at = 0;

	for (int i = 0; i < 2; i++) {
		struct queue *q = &queues[i];
		size_t n = q->len < room ? q->len : room;

		if (n) {
			memcpy(s->data + at, q->buf, n);
			memmove(q->buf, q->buf + n, q->len - n);
			q->len -= n;
		}
		s->val[i] = n;
		at += n;
		room -= n;
		if (q->len)
			s->val[2] = 1;
	}
	s->len = (uint32_t)at;
}

void mps__op_devout(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_devout *q = (const void *)m;
	struct mps_slot *s = mps__slot(c, m->slot);
	struct mps_sstream *st;
	CUresult r = CUDA_SUCCESS;

	memset(s->val, 0, sizeof(s->val));
	s->len = 0;
	switch (m->flags) {
	case MPS_DEVOUT_ENABLE:
		pthread_mutex_lock(&lock);
		if (on && !c->devout) {
			c->devout = true;
			listeners++;
		}
		pthread_mutex_unlock(&lock);
		break;
	case MPS_DEVOUT_TAKE:
		if (!on || !c->devout)
			break;
		st = mps_stream_for_work(c, m, q->stream, &r);
		if (!st)
			break;
		/* The driver empties its printf buffer at a synchronize; the
		 * client's stream is done by now. Its error, if any, is the
		 * client's to learn from its own calls, not from this. */
		if (mps__bind_device(c, st->ctx->device) == CUDA_SUCCESS)
			(void)mps_drv.cuStreamSynchronize(st->s);
		pthread_mutex_lock(&lock);
		drain();
		take(s);
		pthread_mutex_unlock(&lock);
		break;
	default:
		r = CUDA_ERROR_INVALID_VALUE;
		break;
	}
	mps__reply(c, m->slot, r);
}
