// SPDX-License-Identifier: MIT
/*
 * libFuzzer harness for the server's message handling: every input is one
 * client's whole life on the server — set-up, a sequence of submission-queue
 * messages, teardown — run through the same seams the worker thread uses
 * (mps__client_setup, mps__dispatch, mps__client_teardown), on the software
 * stand-in driver (built next to this program: standin/libcuda.so.1, or
 * OPENMPS_DRIVER).
 *
 * Input: two option bytes, then messages, each a 2-byte little-endian length
 * L and L bytes (fewer if the input ends first).
 *   byte 0 bit 0: a device memory limit on device 0 of (byte 1 + 1) MiB;
 *          bit 1: hand completions to the waiter thread after every message
 *                 (as an idle worker does) instead of polling them;
 *          bit 2: the ring's framing is fuzzed too. Then come two 4-byte
 *                 numbers, where in the ring the client starts (as if it had
 *                 been used: so wraps and pads are reachable) and how many
 *                 bytes it publishes (0: all it wrote), and then the
 *                 submission queue's contents as they are, taken off by
 *                 mps_sq_pop() as the worker does until it finds the ring
 *                 empty or broken.
 * A message is copied into a buffer of exactly its length rounded up to 16
 * bytes, as the ring would deliver it, so reading past the message is an
 * ASan report; hdr.len is set to that length and every other header field
 * stays as fuzzed: dispatch must cope with bad ops, slots, contexts, handles
 * and sizes.
 *
 * Device addresses. The stand-in never hands out the same address twice, so
 * no fixed input could name a live allocation. Words of a message body whose
 * top byte is 0xdd name one instead: 0xdd, 16 bits of k, 40 bits of offset
 * mean "offset bytes into the k-th range the server gave this client"
 * (device allocations, module globals, pinned host memory, in the order they
 * were made). Only the body is rewritten, and only such words.
 *
 * What is checked, beyond the sanitizers (crash, leak, undefined behaviour):
 *   - every message with a valid reply slot gets its reply, and every staged
 *     copy hands its staging chunk back, by the end of teardown (a client
 *     would otherwise wait forever);
 *   - teardown gives back every byte of device memory the client held;
 *   - no file descriptor outlives the client.
 * Work the stand-in would take long over is skipped: launches of more than
 * 2^22 threads or of a spin kernel for more than a millisecond, copies and
 * memsets of more than 64 MiB (pinned host memory can be that large). It is
 * slow, not wrong. Each input ends with the devices' primary contexts reset, so
 * the next starts clean (no sticky error, no raised limit).
 *
 * FUZZ_WIRE_TRACE=1 prints each message and its answer.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/atomics.h"
#include "common/log.h"
#include "common/sock.h"
#include "common/wire.h"
#include "server/control.h"
#include "server/device.h"
#include "server/driver.h"
#include "server/main.h"
#include "server/server.h"

#define OPT_MEM_LIMIT   0x1
#define OPT_HANDOFF     0x2
#define OPT_RING        0x4

#define FAKE_TAG        0xddull
#define RANGES_MAX      256
#define SPIN_MAX        64
#define THREADS_MAX     (1ull << 22)
#define BYTES_MAX       (64ull << 20)  /* OPENMPS_STANDIN_MEMORY */
#define SPIN_CYCLES_MAX 2000000ll   /* 1 ms at the stand-in's 2 GHz */

/* What openmps-server's main.c provides. */
struct mps_server mps_srv = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.channel = -1,
	.thread_pct = 10000,
};

int mps_main_watch(struct mps_client *c)
{
	(void)c;
	return 0;
}

void mps_main_unwatch(struct mps_client *c)
{
	mps_client_put(c);
}

/* One input's client, and what the harness remembers of it. */
struct run {
	struct mps_client *c;
	int peer;                       /* the client's end of the socket */
	struct mps_region *view;        /* the client's mapping of the region */
	uint64_t range[RANGES_MAX];     /* bases of the ranges the server gave */
	unsigned int nrange;
	uint32_t spin[SPIN_MAX];        /* function handles of spinning kernels */
	unsigned int nspin;
	uint32_t slots_asked;           /* slots that must be answered */
	uint32_t stages_asked;          /* staging chunks that must come back */
};

static uint64_t free_mem[MPS_MAX_DEVICES];
static int baseline_fds;
static bool trace;   /* FUZZ_WIRE_TRACE set: each message and its answer on stderr */

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void fail(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "fuzz_wire: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	abort();
}

/* Open file descriptors, pipes left out: the server and the stand-in never
 * make one, while libFuzzer's symbolizer (started the first time it names a
 * newly covered function) keeps two open from then on. */
static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d))) {
		char path[64], target[64];
		ssize_t len;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
		len = readlink(path, target, sizeof(target) - 1);
		if (len > 0) {
			target[len] = 0;
			if (!strncmp(target, "pipe:", 5))
				continue;
		}
		n++;
	}
	closedir(d);
	return n - 1;   /* the directory's own */
}

/* Rewrites the fake addresses in a message body (see the top of the file). */
static void translate(const struct run *r, struct mps_msg *m)
{
	uint8_t *p = (uint8_t *)m;

	for (uint32_t off = sizeof(*m); off + 8 <= m->len; off += 8) {
		uint64_t w, k;

		memcpy(&w, p + off, 8);
		if (w >> 56 != FAKE_TAG)
			continue;
		k = (w >> 40) & 0xffff;
		if (k >= r->nrange)
			continue;
		w = r->range[k] + (w & ((1ull << 40) - 1));
		memcpy(p + off, &w, 8);
	}
}

static bool is_spin(const struct run *r, uint32_t func)
{
	for (unsigned int i = 0; i < r->nspin; i++)
		if (r->spin[i] == func)
			return true;
	return false;
}

/* Work the stand-in would spend long on or need much memory for: a launch of
 * more than 2^22 threads or of a spin kernel for more than a millisecond, a
 * copy or memset of more than a device holds (only pinned host memory, up to
 * a terabyte, can be that large). */
static bool too_slow(const struct run *r, const struct mps_msg *m)
{
	const struct mps_msg_launch *q = (const void *)m;
	const struct mps_msg_copy *cp = (const void *)m;
	const struct mps_msg_memset *ms = (const void *)m;
	unsigned __int128 threads = 1;
	uint64_t args;
	long long cycles;

	if (m->op == MPS_OP_COPY && m->len >= sizeof(*cp))
		return cp->size > BYTES_MAX;
	if (m->op == MPS_OP_MEMSET && m->len >= sizeof(*ms))
		return (unsigned __int128)ms->count * (ms->elem <= 4 ? ms->elem : 1) > BYTES_MAX;
	if (m->op != MPS_OP_LAUNCH || m->len < sizeof(*q))
		return false;
	for (int i = 0; i < 3; i++)
		threads *= (unsigned __int128)q->grid[i] * q->block[i];
	if (threads > THREADS_MAX)
		return true;
	if (!is_spin(r, q->func) || q->nattrs > MPS_LAUNCH_ATTRS_MAX)
		return false;
	args = sizeof(*q) + (uint64_t)q->nattrs * sizeof(struct mps_launch_attr);
	if (args + sizeof(cycles) > m->len)
		return false;
	memcpy(&cycles, (const uint8_t *)m + args, sizeof(cycles));
	return cycles > SPIN_CYCLES_MAX;
}

static struct mps_slot *view_slot(const struct run *r, uint32_t slot)
{
	return mps_region_slot(r->view, slot);
}

/* What the client does before sending: mark the reply slot and the staging
 * chunk as waited for. */
static void before(struct run *r, const struct mps_msg *m)
{
	const struct mps_msg_copy *q = (const void *)m;

	if (m->slot < MPS_SLOT_COUNT) {
		mps_store_release(&view_slot(r, m->slot)->state, MPS_SLOT_BUSY);
		r->slots_asked |= 1u << m->slot;
	}
	if (m->op == MPS_OP_COPY && m->len >= sizeof(*q) && (m->flags & MPS_COPY_STAGE) &&
	    q->stage < MPS_STAGE_MAX && (m->slot == MPS_NO_SLOT || m->slot < MPS_SLOT_COUNT)) {
		mps_store_release(&r->view->stage_state[q->stage], MPS_STAGE_INFLIGHT);
		r->stages_asked |= 1u << q->stage;
	}
}

static void add_range(struct run *r, uint64_t base)
{
	if (r->nrange < RANGES_MAX)
		r->range[r->nrange++] = base;
}

/* Remembers what a synchronous call that the server answered at once gave:
 * ranges for the address translation, handles of spinning kernels. */
static void after(struct run *r, const struct mps_msg *m)
{
	const struct mps_msg_get_symbol *g = (const void *)m;
	struct mps_slot *s;

	if (m->slot >= MPS_SLOT_COUNT)
		return;
	s = view_slot(r, m->slot);
	if (mps_load_acquire(&s->state) != MPS_SLOT_DONE || s->result != CUDA_SUCCESS)
		return;
	switch (m->op) {
	case MPS_OP_MEM_ALLOC:
	case MPS_OP_MEM_ALLOC_ASYNC:
	case MPS_OP_GET_GLOBAL:
	case MPS_OP_VMM_RESERVE:
		add_range(r, s->val[0]);
		break;
	case MPS_OP_HOST_ALLOC:
		add_range(r, s->val[3]);
		break;
	case MPS_OP_GET_FUNCTION:
		if (m->len < sizeof(*g) || r->nspin == SPIN_MAX)
			break;
		if ((g->kind == MPS_FUNC_OF_KERNEL && is_spin(r, g->parent)) ||
		    (g->kind != MPS_FUNC_OF_KERNEL && g->name_len >= 4 && m->len >= sizeof(*g) + 4 &&
		     !memcmp(g->name, "spin", 4)))
			r->spin[r->nspin++] = (uint32_t)s->val[0];
		break;
	default:
		break;
	}
}

/* Takes what the server sent on the socket (host regions' fds). */
static void drain(struct run *r)
{
	char buf[256];
	int fd;

	while (mps_sock_recv(r->peer, buf, sizeof(buf), &fd) > 0)
		if (fd >= 0)
			close(fd);
}

static void one_message(struct run *r, const uint8_t *data, size_t n, unsigned int opts)
{
	uint32_t len = mps_msg_size(n < sizeof(struct mps_msg) ? sizeof(struct mps_msg) : n);
	struct mps_msg *m = aligned_alloc(MPS_MSG_ALIGN, len);

	if (!m)
		fail("out of memory");
	memset(m, 0, len);
	memcpy(m, data, n);
	m->len = len;
	translate(r, m);
	if (too_slow(r, m)) {
		if (trace)
			fprintf(stderr, "fuzz_wire: op %u: skipped, too slow\n", m->op);
	} else {
		before(r, m);
		mps__dispatch(r->c, m);
		if (trace)
			fprintf(stderr, "fuzz_wire: op %u flags %#x len %u slot %d ctx %#x: %d\n", m->op, m->flags,
				m->len, (int)m->slot, m->ctx,
				m->slot < MPS_SLOT_COUNT ? (int)view_slot(r, m->slot)->result : (int)r->c->deferred);
		after(r, m);
		drain(r);
		if (opts & OPT_HANDOFF)
			mps_comp_handoff(r->c);
		else if (r->c->comp.head)
			mps_comp_poll(r->c);
	}
	free(m);
}

/* The client's side of the ring: the bytes as they are, from the ring
 * position the input names, published at once; then the worker's side, as
 * serve() takes messages. A broken ring ends the client, as the worker kills
 * a client that breaks the protocol. */
static void ring_messages(struct run *r, const uint8_t *data, size_t n, unsigned int opts)
{
	struct mps_client *c = r->c;
	uint8_t *ring = mps_region_sq(r->view);
	uint32_t start = 0, published = 0;
	int len;

	if (n >= 8) {
		memcpy(&start, data, 4);
		memcpy(&published, data + 4, 4);
		data += 8;
		n -= 8;
	}
	start &= ~(MPS_MSG_ALIGN - 1);
	if (n > MPS_SQ_SIZE)
		n = MPS_SQ_SIZE;
	for (size_t i = 0; i < n; i++)
		ring[(start + i) & (MPS_SQ_SIZE - 1)] = data[i];
	/* Where the ring would be after `start` bytes: both sides agree. */
	c->sq.head = start;
	mps_store_release(&r->view->sq_head.v, start);
	mps_store_release(&r->view->sq_tail.v, start + (published ? published : mps_msg_size(n)));
	while ((len = mps_sq_pop(&c->sq, c->msg)) > 0)
		one_message(r, c->msg, (size_t)len, opts);
	if (trace && len < 0)
		fprintf(stderr, "fuzz_wire: the ring is broken: %s\n", strerror(-len));
}

static void client_start(struct run *r, unsigned int opts, unsigned int limit_mib)
{
	struct mps_client *c = calloc(1, sizeof(*c));
	const char *why;
	int sv[2];

	if (!c || socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		fail("cannot make a client: %s", strerror(errno));
	fcntl(sv[1], F_SETFL, O_NONBLOCK);
	/* As mps_client_start() makes it. */
	c->sock = sv[0];
	c->pid = getpid();
	c->uid = getuid();
	snprintf(c->comm, sizeof(c->comm), "fuzz_wire");
	c->region_fd = -1;
	c->refs = 2;
	c->id = 1;
	mps_handles_init(&c->handles);
	mps_memacct_init(&c->mem);
	mps_control_apply_settings(c);
	if (opts & OPT_MEM_LIMIT)
		c->mem.limit[0] = ((uint64_t)limit_mib + 1) << 20;
	why = mps__client_setup(c);
	if (why)
		fail("client set-up failed: %s", why);
	r->c = c;
	r->peer = sv[1];
	r->view = mmap(NULL, MPS_REGION_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, c->region_fd, 0);
	if (r->view == MAP_FAILED)
		fail("cannot map the client's region: %s", strerror(errno));
}

/* Ends the client as its worker does, then checks what it left behind. */
static void client_end(struct run *r)
{
	struct mps_client *c = r->c;

	mps_comp_handoff(c);
	mps__client_teardown(c);
	for (uint32_t i = 0; i < MPS_SLOT_COUNT; i++)
		if ((r->slots_asked & (1u << i)) && mps_load_acquire(&view_slot(r, i)->state) != MPS_SLOT_DONE)
			fail("reply slot %u was never answered", i);
	for (uint32_t i = 0; i < MPS_STAGE_MAX; i++)
		if ((r->stages_asked & (1u << i)) && mps_load_acquire(&r->view->stage_state[i]) != MPS_STAGE_DONE)
			fail("staging chunk %u was never handed back", i);
	munmap(r->view, MPS_REGION_SIZE);
	close(c->sock);
	close(r->peer);
	free(c);

	for (int d = 0; d < mps_srv.ndev; d++) {
		size_t fr = 0, total = 0;

		/* A context the client's kernel killed (sticky error) cannot be
		 * asked; its reset below frees everything anyway. */
		if (mps_drv.cuCtxSetCurrent(mps_srv.dev[d].primary) == CUDA_SUCCESS &&
		    mps_drv.cuMemGetInfo(&fr, &total) == CUDA_SUCCESS && fr != free_mem[d])
			fail("teardown left %lld bytes of device memory on device %d",
			     (long long)free_mem[d] - (long long)fr, d);
		/* Start the next input on a fresh context: no sticky error, no
		 * limit raised by this one. */
		mps_drv.cuDevicePrimaryCtxRelease(mps_srv.dev[d].dev);
		if (mps_drv.cuDevicePrimaryCtxRetain(&mps_srv.dev[d].primary, mps_srv.dev[d].dev) != CUDA_SUCCESS)
			fail("cannot retain device %d's context again", d);
	}
	if (count_fds() != baseline_fds)
		fail("%d file descriptors open after teardown, %d before", count_fds(), baseline_fds);
}

/* The stand-in next to this program, unless OPENMPS_DRIVER names one. */
static void find_driver(void)
{
	char exe[PATH_MAX], path[PATH_MAX + 32];
	ssize_t n;

	if (getenv("OPENMPS_DRIVER"))
		return;
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		fail("cannot find this program: %s", strerror(errno));
	exe[n] = 0;
	snprintf(path, sizeof(path), "%s/standin/libcuda.so.1", dirname(exe));
	setenv("OPENMPS_DRIVER", path, 1);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char why[160];

	(void)argc;
	(void)argv;
	find_driver();
	trace = getenv("FUZZ_WIRE_TRACE") != NULL;
	setenv("OPENMPS_STANDIN_DEVICES", "2", 0);
	setenv("OPENMPS_STANDIN_MEMORY", "64M", 0);
	setenv("OPENMPS_LOG_LEVEL", "error", 0);
	mps_log_init("Server", 2);
	mps_srv.spin_ns = 0;
	mps_srv.max_clients = 1024;
	if (mps_driver_load() < 0 || mps_devices_init(why, sizeof(why)) < 0)
		fail("cannot start the driver %s", getenv("OPENMPS_DRIVER"));
	for (int d = 0; d < mps_srv.ndev; d++) {
		size_t total = 0;

		if (mps_drv.cuCtxSetCurrent(mps_srv.dev[d].primary) != CUDA_SUCCESS ||
		    mps_drv.cuMemGetInfo(&free_mem[d], &total) != CUDA_SUCCESS)
			fail("cannot read device %d's memory", d);
	}
	baseline_fds = count_fds();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct run r;
	unsigned int opts = size > 0 ? data[0] : 0, limit = size > 1 ? data[1] : 0;

	memset(&r, 0, sizeof(r));
	client_start(&r, opts, limit);
	if (opts & OPT_RING) {
		ring_messages(&r, data + 2, size > 2 ? size - 2 : 0, opts);
		client_end(&r);
		return 0;
	}
	for (size_t at = 2; at + 2 <= size;) {
		size_t n = (size_t)data[at] | (size_t)data[at + 1] << 8;

		at += 2;
		if (n > size - at)
			n = size - at;
		one_message(&r, data + at, n, opts);
		at += n;
	}
	client_end(&r);
	return 0;
}
