// SPDX-License-Identifier: MIT
/*
 * The client's connection to its server: the handshake on the daemon's
 * socket, then the shared region — submitting messages to the ring (many
 * threads, one producer at a time under sq_lock) and waiting for replies in
 * the reply slots (one slot per synchronous call in flight, from a bitmap).
 *
 * Waiting spins for as long as the server advises in the region (long while
 * CPUs are free: a reply to a launch-then-synchronize arrives within
 * microseconds, and a wake-up costs more than that; nothing while runnable
 * threads or clients with work outnumber the CPUs, where spinning would
 * steal the CPU the server needs and leave threads that wake waiting for a
 * scheduler tick). A reply the server has handed to the GPU (the GPU stores
 * it) needs no server thread: it is watched without system calls for up to
 * OPENMPS_CLIENT_GPU_SPIN_US (2 ms), as CUDA's own waits spin, except that
 * while no spin is advised the wait first naps on a timer for most of as
 * long as its kind of wait lately took (napwait.c; OPENMPS_CLIENT_GPU_NAP=0
 * turns this off), then gives the CPU away every
 * OPENMPS_CLIENT_GPU_YIELD_US (50 µs) and sleeps after
 * OPENMPS_CLIENT_GPU_BUSY_SPIN_US (800 µs): with more runnable threads than
 * CPUs, waiters that spin through long GPU waits take turns with the
 * server's threads, and whoever shares a CPU with one is served late; a
 * sleeper flags its word, and a service thread that sees the GPU's store
 * wakes it (server/gpuwake.c). One the server has yet to answer is
 * looked for giving the CPU away every OPENMPS_CLIENT_BUSY_YIELD_US (10 µs;
 * for up to OPENMPS_CLIENT_YIELD_US), so the server's threads get the CPU.
 * Giving the CPU away is a yield, or with OPENMPS_CLIENT_NAP_US a nap that
 * long.
 * Then the wait sleeps on a futex — for a reply or a staging chunk the GPU
 * stores itself (region.h), once it has asked the server to wake it. Every
 * sleep is bounded so the waiter notices a server that died without
 * answering, and then every call returns CUDA_ERROR_MPS_CONNECTION_FAILED.
 *
 * A child made by fork() shares the parent's mapping of the ring but is not
 * the process the server knows; it must never write there, so after a fork
 * the child's calls fail as CUDA's do in a forked child.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "client/client.h"
#include "common/atomics.h"
#include "common/clock.h"
#include "common/env.h"
#include "common/futex.h"
#include "common/log.h"
#include "common/paths.h"
#include "common/shm.h"
#include "common/slice.h"
#include "common/sock.h"

#define FAULT_HANGUP_MS 2000   /* how long a GPU fault's error waits for the server to end */
#define SLEEP_NS (100ull * 1000 * 1000)  /* longest sleep between liveness checks */
#define NAP_SLACK_NS 1000                /* how late a nap may end */
#define NAP_MIN_NS (50ull * 1000)        /* a GPU wait's nap shorter than this is not taken */

struct mps_conn mps_conn = {
	.sock = -1,
	.sq_lock = PTHREAD_MUTEX_INITIALIZER,
	.fd_lock = PTHREAD_MUTEX_INITIALIZER,
};

static void after_fork_child(void)
{
	mps_conn.forked = 1;
}

static void own_comm(char *buf, size_t len)
{
	FILE *f = fopen("/proc/self/comm", "r");

	buf[0] = 0;
	if (f) {
		if (fgets(buf, (int)len, f))
			buf[strcspn(buf, "\n")] = 0;
		fclose(f);
	}
}

/* Every virtual device names a GPU of the welcome, and no GPU is one. */
static bool virtual_ok(const struct mps_welcome *w)
{
	for (int i = 0; i < w->ndev + w->nvirt; i++)
		if (i < w->ndev ? w->dev[i].base != 0 : (w->dev[i].base < 1 || w->dev[i].base > w->ndev))
			return false;
	return true;
}

/* The text of the last refusal the daemon or a server sent. */
static char refused_text[sizeof(((struct mps_refuse *)0)->text)];

const char *mps__refusal_text(void)
{
	return refused_text;
}

int mps__connect(CUresult *refusal)
{
	size_t max = sizeof(struct mps_welcome) + (MPS_MAX_DEVICES + MPS_MAX_VDEVICES) * sizeof(struct mps_wire_device);
	struct mps_hello hello;
	struct mps_welcome *w = NULL;
	struct mps_region *reg;
	char path[4096];
	int fd, rfd = -1, wfd = -1, err;
	long long size;
	long slice_us;
	ssize_t n;

	*refusal = CUDA_ERROR_MPS_CONNECTION_FAILED;
	if (mps_path_join(path, sizeof(path), mps_pipe_dir(), MPS_DAEMON_SOCKET) < 0)
		return -ENAMETOOLONG;
	fd = mps_sock_connect(path);
	/* With no directory named, a daemon run under NVIDIA's name listens
	 * in NVIDIA's default (paths.h): scripts written for NVIDIA's MPS name
	 * none on either side. Our socket's name is not NVIDIA's, so NVIDIA's
	 * own daemon there is never taken for ours. */
	if (fd < 0 && !getenv("CUDA_MPS_PIPE_DIRECTORY") &&
	    mps_path_join(path, sizeof(path), MPS_NVIDIA_PIPE_DIR, MPS_DAEMON_SOCKET) == 0)
		fd = mps_sock_connect(path);
	if (fd < 0)
		return fd;   /* no daemon: the caller passes calls through */

	memset(&hello, 0, sizeof(hello));
	hello.magic = MPS_HELLO_MAGIC;
	hello.version = MPS_WIRE_VERSION;
	hello.kind = MPS_HELLO_CLIENT;
	hello.pid = (uint32_t)getpid();
	own_comm(hello.comm, sizeof(hello.comm));
	if (getenv("OPENMPS_FAULT_DOMAIN"))
		strncpy(hello.domain, getenv("OPENMPS_FAULT_DOMAIN"), sizeof(hello.domain) - 1);
	n = mps_sock_send(fd, &hello, sizeof(hello), -1);
	if (n < 0) {
		err = (int)n;
		goto err_close;
	}
	/* The daemon may be starting our server: wait for it, but not forever. */
	mps_sock_set_timeout(fd, (int)mps_env_long("OPENMPS_CONNECT_TIMEOUT_MS", 60000, 0, 1000000000));
	w = malloc(max);
	if (!w) {
		err = -ENOMEM;
		goto err_close;
	}
	n = mps_sock_recv(fd, w, max, &rfd);
	while (n == sizeof(struct mps_refuse) && w->magic == MPS_WAIT_MAGIC) {
		/* Queued behind another user (exclusive mode): no time limit. */
		struct mps_refuse *wt = (struct mps_refuse *)w;

		wt->text[sizeof(wt->text) - 1] = 0;
		mps_log_info("openmps: %s", wt->text);
		mps_sock_set_timeout(fd, 0);
		n = mps_sock_recv(fd, w, max, &rfd);
	}
	if (n < (ssize_t)sizeof(uint32_t)) {
		mps_log_warn("openmps: the daemon at %s did not answer (%s)", path,
			     n < 0 ? strerror((int)-n) : "connection closed");
		err = -EPROTO;
		goto err_free;
	}
	if (w->magic == MPS_REFUSE_MAGIC && n == sizeof(struct mps_refuse)) {
		struct mps_refuse *rf = (struct mps_refuse *)w;

		rf->text[sizeof(rf->text) - 1] = 0;
		snprintf(refused_text, sizeof(refused_text), "%s", rf->text);
		*refusal = (CUresult)rf->result;
		/* Not ready: the caller tries again, and says so if that fails. */
		if (*refusal != CUDA_ERROR_MPS_SERVER_NOT_READY)
			mps_log_warn("openmps: refused by the server: %s", rf->text);
		err = -EACCES;
		goto err_free;
	}
	if (w->magic != MPS_WELCOME_MAGIC || w->version != MPS_WIRE_VERSION || rfd < 0 ||
	    w->ndev > MPS_MAX_DEVICES || w->nvirt > MPS_MAX_VDEVICES ||
	    (size_t)n != sizeof(*w) + (size_t)(w->ndev + w->nvirt) * sizeof(struct mps_wire_device) ||
	    w->region_size != MPS_REGION_SIZE || !virtual_ok(w)) {
		mps_log_warn("openmps: unexpected handshake from the server (version %u)", (unsigned)w->version);
		err = -EPROTO;
		goto err_free;
	}
	size = mps_shm_sealed_size(rfd);
	if (size != MPS_REGION_SIZE) {
		err = -EPROTO;
		goto err_free;
	}
	reg = mps_shm_map(rfd, MPS_REGION_SIZE, NULL);
	if (!reg || reg->magic != MPS_REGION_MAGIC || reg->version != MPS_REGION_VERSION) {
		if (reg)
			munmap(reg, MPS_REGION_SIZE);
		err = -EPROTO;
		goto err_free;
	}
	close(rfd);
	rfd = -1;
	/* The eventfd that wakes the server follows the welcome. */
	{
		struct mps_fdmsg fm;

		n = mps_sock_recv(fd, &fm, sizeof(fm), &wfd);
		if (n != sizeof(fm) || fm.magic != MPS_FDMSG_MAGIC || fm.region != MPS_FD_WAKE || wfd < 0) {
			munmap(reg, MPS_REGION_SIZE);
			err = -EPROTO;
			goto err_free;
		}
	}
	mps_sock_set_timeout(fd, 0);
	mps_conn.sock = fd;
	mps_conn.region = reg;
	mps_sq_producer_init(&mps_conn.sq, reg);
	mps_conn.sq.wake_fd = wfd;
	mps_conn.slots_free = MPS_SLOT_COUNT >= 32 ? 0xffffffffu : (1u << MPS_SLOT_COUNT) - 1;
	mps_conn.welcome = w;
	mps_conn.ndev = w->ndev;
	mps_conn.spin_fixed = getenv("OPENMPS_CLIENT_SPIN_US") && *getenv("OPENMPS_CLIENT_SPIN_US");
	mps_conn.spin_ns = (uint64_t)mps_env_long("OPENMPS_CLIENT_SPIN_US", 50, 0, 1000000000) * 1000;
	mps_conn.yield_ns = (uint64_t)mps_env_long("OPENMPS_CLIENT_YIELD_US", 1000, 0, 1000000000) * 1000;
	mps_conn.gpu_spin_ns = (uint64_t)mps_env_long("OPENMPS_CLIENT_GPU_SPIN_US", 2000, 0, 1000000000) * 1000;
	mps_conn.gpu_yield_ns = (uint64_t)mps_env_long("OPENMPS_CLIENT_GPU_YIELD_US", 50, 0, 1000000000) * 1000;
	mps_conn.gpu_busy_spin_ns = (uint64_t)mps_env_long("OPENMPS_CLIENT_GPU_BUSY_SPIN_US", 800, 0, 1000000000) * 1000;
	if (mps_conn.gpu_busy_spin_ns > mps_conn.gpu_spin_ns)
		mps_conn.gpu_busy_spin_ns = mps_conn.gpu_spin_ns;
	mps_conn.nap_ns = (uint64_t)mps_env_long("OPENMPS_CLIENT_NAP_US", 0, 0, 1000000000) * 1000;
	mps_conn.gpu_nap = mps_env_long("OPENMPS_CLIENT_GPU_NAP", 1, 0, 1) != 0;
	mps_conn.busy_yield_ns = (uint64_t)mps_env_long("OPENMPS_CLIENT_BUSY_YIELD_US", 10, 0, 1000000) * 1000;
	mps_conn.trace_wait_ns = (uint64_t)mps_env_long("OPENMPS_CLIENT_TRACE_WAITS_US", 0, 0, 1000000000) * 1000;
	slice_us = mps_env_long("OPENMPS_CLIENT_SLICE_US", 0, 0, 1000000000);
	if (slice_us > 0 && mps_set_slice((uint64_t)slice_us * 1000) < 0)
		mps_log_warn("openmps: the kernel takes no scheduler slice of its own");
	pthread_atfork(NULL, NULL, after_fork_child);
	return 0;

err_free:
	free(w);
	if (rfd >= 0)
		close(rfd);
	if (wfd >= 0)
		close(wfd);
err_close:
	close(fd);
	return err;
}

/* What every call returns once the server is gone: the connection failed,
 * or the server said why it ended us (terminate_client). */
static CUresult dead_result(void)
{
	int r = mps_load_acquire(&mps_conn.dead_result);

	return r ? (CUresult)r : CUDA_ERROR_MPS_CONNECTION_FAILED;
}

static CUresult conn_state(void)
{
	if (mps_conn.forked)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (mps_load_acquire(&mps_conn.dead))
		return dead_result();
	return CUDA_SUCCESS;
}

static bool server_gone(void);

CUresult mps__ended_or(CUresult otherwise)
{
	if (mps_load_acquire(&mps_conn.dead) || (mps_conn.sock >= 0 && server_gone()))
		return dead_result();
	return otherwise;
}

/* Is this the message a server that ends us on purpose sends before it
 * hangs up? Then every call returns what it says from now on. */
static bool take_refusal(struct mps_refuse *why, ssize_t n)
{
	if (n != (ssize_t)sizeof(*why) || why->magic != MPS_REFUSE_MAGIC || !why->result)
		return false;
	why->text[sizeof(why->text) - 1] = 0;
	mps_store_release(&mps_conn.dead_result, why->result);
	mps_store_release(&mps_conn.dead, 1);
	mps_log_warn("openmps: the server ended this client: %s", why->text);
	return true;
}

/* After a bounded wait: is the server still there? */
static bool server_gone(void)
{
	static struct mps_devout_piece pieces;   /* once, as the connection ends */
	struct mps_devout_piece *piece = &pieces;
	struct mps_refuse why;

	if (mps_load_acquire(&mps_conn.dead))
		return true;
	if (!mps_sock_peer_gone(mps_conn.sock))
		return false;
	if (mps_xchg(&mps_conn.dead, 1))
		return true;
	/* At a GPU fault, what this process's kernels printed (an assert's
	 * message) comes first, for its stdout and stderr. */
	for (;;) {
		ssize_t n = mps_sock_recv(mps_conn.sock, piece, sizeof(*piece), NULL);

		if (n >= (ssize_t)offsetof(struct mps_devout_piece, data) && piece->magic == MPS_DEVOUT_MAGIC &&
		    piece->len == (size_t)n - offsetof(struct mps_devout_piece, data)) {
			mps__devout_write(piece->stream, piece->data, piece->len);
			continue;
		}
		memcpy(&why, piece, sizeof(why));
		if (!take_refusal(&why, n > (ssize_t)sizeof(why) ? -1 : n))
			mps_log_warn("openmps: lost the connection to the server");
		return true;
	}
}

/* How long a wait spins before it sleeps: what the server advises (long
 * while CPUs are free, short when they are not), unless
 * OPENMPS_CLIENT_SPIN_US fixed it. */
static uint64_t spin_budget(void)
{
	if (mps_conn.spin_fixed)
		return mps_conn.spin_ns;
	return mps_load_relaxed(&mps_conn.region->spin_hint_ns);
}

/* A nap's timer slack: the thread's (50 µs by default) would stretch a
 * nap, so it is narrowed for the nap only — slack_narrow() before, with
 * what it returned slack_restore() after. */
static int slack_narrow(void)
{
	int slack = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);

	if (slack > NAP_SLACK_NS)
		prctl(PR_SET_TIMERSLACK, (unsigned long)NAP_SLACK_NS, 0, 0, 0);
	return slack;
}

static void slack_restore(int slack)
{
	if (slack > NAP_SLACK_NS)
		prctl(PR_SET_TIMERSLACK, (unsigned long)slack, 0, 0, 0);
}

/* Lets other threads have the CPU for a moment: a nap of
 * OPENMPS_CLIENT_NAP_US (0: a yield). A yield keeps the thread runnable,
 * so a thread that wakes may still find every CPU taken and wait for a
 * scheduler tick; a nap leaves the CPU free and ends on a timer, with no one
 * to wake it. */
static void give_cpu(void)
{
	int slack;

	if (!mps_conn.nap_ns) {
		sched_yield();
		return;
	}
	slack = slack_narrow();
	nanosleep(&(struct timespec){ .tv_nsec = (long)mps_conn.nap_ns }, NULL);
	slack_restore(slack);
}

/* The wait on word `wake` is over: its bit in gpu_sleepers, if this
 * thread set it, goes (the server may have taken it already, waking us). */
static void unflag(uint32_t wake, bool flagged)
{
	if (flagged)
		mps_fetch_and(&mps_conn.region->gpu_sleepers, ~(1ull << wake));
}

/* Sleeps while *word says the GPU is to store it, until `ns` have passed:
 * a nap through most of a GPU wait (napwait.c), on a timer, since nothing
 * wakes a word the GPU stores. */
static void nap_gpu(uint32_t *word, uint64_t ns)
{
	int slack = slack_narrow();

	(void)mps_futex_wait(word, MPS_SLOT_GPU, ns);
	slack_restore(slack);
}

/* The thread's message count when its last wait for a reply ended. */
static __thread uint32_t posted_at_wait;

CUresult mps__wait_reply(uint32_t *word, uint32_t wake, uint32_t kind)
{
	uint64_t start = mps_now_ns(), from = start, seen = start, yielded = 0, busy_yielded = 0;
	unsigned int spins = 0;
	bool asked = false, flagged = false, napped = false;
	uint32_t since = mps__posted() - posted_at_wait;
	struct mps_wait_trace tr = { .start = start };
	CUresult r = CUDA_SUCCESS;

	/* Waits of one kind are one call after as many messages since the
	 * last wait: in a loop that copies two results back, the copy after
	 * the whole request's work and the one after its last kernel are two
	 * kinds, however alike the calls. */
	kind ^= (since < 255 ? since : 255) << 20;
	if (mps_conn.trace_wait_ns) {
		tr.st0 = mps_load_acquire(word);
		tr.hint_ns = (uint32_t)spin_budget();
	}

	for (;;) {
		uint32_t st = mps_load_acquire(word);
		uint64_t now, waited;

		if (st == MPS_SLOT_DONE) {
			mps__nap_record(kind, seen - start);
			mps__stats_waited(start);
			break;
		}
		if (++spins < 64) {
			mps_cpu_relax();
			continue;
		}
		now = mps_now_ns();
		seen = now;
		waited = now - from;
		if (st == MPS_SLOT_GPU && !tr.gpu)
			tr.gpu = now;
		if (now - start < spin_budget()) {
			mps_cpu_relax();
			continue;
		}
		if (st == MPS_SLOT_GPU && !napped && mps_conn.gpu_nap && !spin_budget()) {
			/* CPUs are busy: sleep through most of the wait, as long
			 * as the GPU has lately taken for such a wait (no longer
			 * than any sleep here, so a server that died is noticed
			 * as soon); then look as below, from the nap's end. */
			uint64_t until = mps__nap_until(kind);

			napped = true;
			if (until > now - start + NAP_MIN_NS) {
				uint64_t nap = until - (now - start);

				tr.nap = now;
				nap_gpu(word, nap < SLEEP_NS ? nap : SLEEP_NS);
				from = mps_now_ns();
				tr.nap_end = from;
				yielded = 0;
				mps__stats_nap(from - now, mps_load_acquire(word) == MPS_SLOT_DONE);
				continue;
			}
		}
		if (st == MPS_SLOT_GPU && waited < (spin_budget() ? mps_conn.gpu_spin_ns : mps_conn.gpu_busy_spin_ns)) {
			/* The answer is the GPU's to store: no thread of the server's
			 * needs the CPU for it, so look without a system call, as
			 * CUDA's own waits spin; while the CPUs are busy (no spin
			 * advised), give the CPU away now and then. */
			if (!spin_budget() && waited - yielded >= mps_conn.gpu_yield_ns) {
				yielded = waited;
				tr.yields++;
				give_cpu();
			} else {
				mps_cpu_relax();
			}
			continue;
		}
		if (st == MPS_SLOT_BUSY || st == MPS_SLOT_GPU) {
			uint32_t exp = st, sleeping = st == MPS_SLOT_BUSY ? MPS_SLOT_SLEEPING : MPS_SLOT_GPU_SLEEPING;

			if (st == MPS_SLOT_BUSY && now - start < mps_conn.yield_ns) {
				/* The server's thread must run to answer: let it have
				 * the CPU, every few microseconds rather than at every
				 * look (a yield with nothing else to run returns at
				 * once: a system call a microsecond, 4-6% of sixteen
				 * CPUs' time in system calls at sixteen clients). */
				if (now - busy_yielded >= mps_conn.busy_yield_ns) {
					busy_yielded = now;
					tr.yields++;
					give_cpu();
				} else {
					mps_cpu_relax();
				}
				continue;
			}
			if (st == MPS_SLOT_GPU && !flagged) {
				/* Before the word says so: a server thread that sees
				 * the store and the bit wakes us (region.h). */
				mps_fetch_or(&mps_conn.region->gpu_sleepers, 1ull << wake);
				flagged = true;
				tr.flagged = now;
			}
			if (!mps_cas(word, &exp, sleeping))
				continue;   /* it changed: look again */
			st = sleeping;
		}
		if (st == MPS_SLOT_GPU_SLEEPING && !asked) {
			struct mps_msg_handle q = { .handle = wake };

			asked = true;
			tr.asked = now;
			if (mps__post(MPS_OP_SLOT_WAKE, 0, &q.hdr, sizeof(q), NULL, 0) != CUDA_SUCCESS && server_gone()) {
				r = dead_result();
				break;
			}
		}
		tr.sleeps++;
		if (mps_futex_wait(word, st, SLEEP_NS) == -ETIMEDOUT && server_gone()) {
			r = dead_result();
			break;
		}
		if (mps_conn.trace_wait_ns)
			tr.woken = mps_now_ns();
	}
	unflag(wake, flagged);
	posted_at_wait = mps__posted();
	if (mps_conn.trace_wait_ns) {
		uint64_t end = mps_now_ns();

		if (end - start >= mps_conn.trace_wait_ns)
			mps__wait_traced(&tr, kind, end);
	}
	return r;
}

/* A free reply slot's index, or -1 (none) once the server is gone. */
static int slot_get(void)
{
	for (;;) {
		uint32_t f = mps_load_acquire(&mps_conn.slots_free);

		while (f) {
			int i = __builtin_ctz(f);

			if (mps_cas(&mps_conn.slots_free, &f, f & ~(1u << i)))
				return i;
		}
		/* Every slot is in use by another thread: wait for one. */
		mps_futex_wait(&mps_conn.slots_free, 0, 10ull * 1000 * 1000);
		if (server_gone())
			return -1;
	}
}

static void slot_put(int i)
{
	if (mps_fetch_or(&mps_conn.slots_free, 1u << i) == 0)
		mps_futex_wake(&mps_conn.slots_free, 1);
}

static uint16_t ring_op;   /* the message between mps__ring_begin and _end (under sq_lock) */

void *mps__ring_begin(uint16_t op, uint32_t ctx, uint32_t len, uint16_t flags, CUresult *err)
{
	struct mps_msg *m;
	uint64_t start = 0;
	unsigned int tries = 0;

	*err = conn_state();
	if (*err != CUDA_SUCCESS)
		return NULL;
	len = mps_msg_size(len);
	if (len > MPS_MSG_MAX) {
		*err = CUDA_ERROR_INVALID_VALUE;
		return NULL;
	}
	pthread_mutex_lock(&mps_conn.sq_lock);
	while (!(m = mps_sq_reserve(&mps_conn.sq, len))) {
		/* The ring is full: the server is behind. Back off gently. */
		if (++tries < 256) {
			mps_cpu_relax();
			continue;
		}
		if (!start)
			start = mps_now_ns();
		if (tries < 1024) {
			sched_yield();
			continue;
		}
		nanosleep(&(struct timespec){ .tv_nsec = 20000 }, NULL);
		if (mps_now_ns() - start > SLEEP_NS) {
			start = mps_now_ns();
			if (server_gone()) {
				pthread_mutex_unlock(&mps_conn.sq_lock);
				*err = dead_result();
				return NULL;
			}
		}
	}
	m->op = op;
	m->flags = flags;
	m->len = len;
	m->slot = MPS_NO_SLOT;
	m->ctx = ctx;
	ring_op = op;
	return m;
}

static __thread uint32_t last_seq;   /* the number of this thread's last message */
static __thread uint32_t posted;     /* messages this thread sent */

void mps__ring_end(void)
{
	mps_sq_commit(&mps_conn.sq);
	/* A request to be woken queues no work: a stream known idle stays so
	 * (stream.c) although its waiter sent one. */
	if (ring_op != MPS_OP_SLOT_WAKE) {
		last_seq = mps_load_relaxed(&mps_conn.sent) + 1;
		mps_store_release(&mps_conn.sent, last_seq);
		posted++;
	}
	pthread_mutex_unlock(&mps_conn.sq_lock);
	mps__stats_message();
}

uint32_t mps__last_seq(void)
{
	return last_seq;
}

uint32_t mps__posted(void)
{
	return posted;
}

static CUresult send_msg(uint16_t op, uint32_t ctx, struct mps_msg *hdr, size_t len, const void *extra,
			 size_t extra_len, uint32_t slot)
{
	struct mps_msg *m;
	CUresult err;

	m = mps__ring_begin(op, ctx, (uint32_t)(len + extra_len), hdr->flags, &err);
	if (!m)
		return err;
	memcpy((uint8_t *)m + sizeof(*m), (uint8_t *)hdr + sizeof(*m), len - sizeof(*m));
	if (extra_len)
		memcpy((uint8_t *)m + len, extra, extra_len);
	m->slot = slot;
	mps__ring_end();
	return CUDA_SUCCESS;
}

/* A synchronous call; `in` (if any) is placed in the reply slot's data for
 * the server to read, `extra` after the message. */
static CUresult call(uint16_t op, uint32_t ctx, struct mps_msg *hdr, size_t len, const void *extra,
		     size_t extra_len, const void *in, size_t in_len, struct mps_call *c)
{
	CUresult r;

	c->slot = -1;
	c->s = NULL;
	r = conn_state();
	if (r != CUDA_SUCCESS)
		return r;
	if (len + extra_len > MPS_MSG_MAX || in_len > MPS_SLOT_DATA)
		return CUDA_ERROR_INVALID_VALUE;
	c->slot = slot_get();
	if (c->slot < 0)
		return CUDA_ERROR_MPS_CONNECTION_FAILED;
	c->s = mps_region_slot(mps_conn.region, (uint32_t)c->slot);
	c->s->len = 0;
	if (in_len)
		memcpy(c->s->data, in, in_len);
	mps_store_relaxed(&c->s->state, MPS_SLOT_BUSY);
	r = send_msg(op, ctx, hdr, len, extra, extra_len, (uint32_t)c->slot);
	if (r != CUDA_SUCCESS) {
		slot_put(c->slot);
		c->slot = -1;
		return r;
	}
	c->seq = last_seq;
	mps__stats_round_trip();
	r = mps__wait_reply(&c->s->state, (uint32_t)c->slot, op);
	if (r != CUDA_SUCCESS) {
		/* The server is gone; the slot stays taken. */
		c->slot = -1;
		return r;
	}
	r = (CUresult)c->s->result;
	/* A GPU fault's error ends the server: what the fault printed (an
	 * assert's message) comes ahead of its hangup, and is written out
	 * (server_gone) before the call returns, as the driver writes it
	 * during the synchronize. */
	if (mps_wire_fault_result(r))
		(void)mps_sock_peer_gone_within(mps_conn.sock, FAULT_HANGUP_MS);
	/* A call that failed because the server was ending this client (its
	 * answer could not be sent, say) fails as the client ends: with what
	 * the server said, not the failure it caused. */
	if (r != CUDA_SUCCESS && r != CUDA_ERROR_NOT_READY && server_gone())
		return dead_result();
	return r;
}

CUresult mps__call(uint16_t op, uint32_t ctx, struct mps_msg *hdr, size_t len, const void *extra,
		   size_t extra_len, struct mps_call *c)
{
	return call(op, ctx, hdr, len, extra, extra_len, NULL, 0, c);
}

CUresult mps__call_slot_in(uint16_t op, uint32_t ctx, struct mps_msg *hdr, size_t len, const void *in,
			   size_t in_len, struct mps_call *c)
{
	return call(op, ctx, hdr, len, NULL, 0, in, in_len, c);
}

void mps__call_end(struct mps_call *call)
{
	if (call->slot >= 0)
		slot_put(call->slot);
	call->slot = -1;
}

CUresult mps__post(uint16_t op, uint32_t ctx, struct mps_msg *hdr, size_t len, const void *extra,
		   size_t extra_len)
{
	if (len + extra_len > MPS_MSG_MAX)
		return CUDA_ERROR_INVALID_VALUE;
	return send_msg(op, ctx, hdr, len, extra, extra_len, MPS_NO_SLOT);
}

CUresult mps__call_handle(uint16_t op, uint32_t ctx, uint32_t handle)
{
	struct mps_msg_handle q = { .handle = handle };
	struct mps_call c;
	CUresult r;

	r = mps__call(op, ctx, &q.hdr, sizeof(q), NULL, 0, &c);
	mps__call_end(&c);
	return r;
}

CUresult mps__post_handle(uint16_t op, uint32_t ctx, uint32_t handle)
{
	struct mps_msg_handle q = { .handle = handle };

	return mps__post(op, ctx, &q.hdr, sizeof(q), NULL, 0);
}

int mps__recv_fd(uint32_t region, uint64_t *size)
{
	/* What comes may instead be why the server is ending this client
	 * (terminate_client while the descriptor was on its way). */
	union {
		struct mps_fdmsg fm;
		struct mps_refuse why;
	} u = { 0 };
	int fd = -1;
	ssize_t n;

	mps_sock_set_timeout(mps_conn.sock, 10000);
	n = mps_sock_recv(mps_conn.sock, &u, sizeof(u), &fd);
	mps_sock_set_timeout(mps_conn.sock, 0);
	if (n != sizeof(u.fm) || u.fm.magic != MPS_FDMSG_MAGIC || u.fm.region != region || fd < 0) {
		int e = n < 0 ? (int)-n : 0;

		if (fd >= 0)
			close(fd);
		if (!take_refusal(&u.why, n) && !server_gone())
			mps_log_warn("openmps: expected the descriptor of region %u from the server, got %zd bytes "
				     "(magic %#x, region %u, descriptor %d%s%s)", region, n, u.fm.magic,
				     n == (ssize_t)sizeof(u.fm) ? u.fm.region : 0, fd, e ? ": " : "", e ? strerror(e) : "");
		return -EPROTO;
	}
	*size = u.fm.size;
	return fd;
}
