// SPDX-License-Identifier: MIT
/*
 * Registered host memory: cuMemHostRegister and cuMemHostUnregister.
 *
 * The driver pins the program's own pages where they are; the server can
 * only pin memory it can map. So registration moves the pages in place
 * into shared memory: their contents are copied into a memfd (by several
 * threads at once, pcopy.c; sealed against shrinking and growing), which
 * is then mapped over the same
 * addresses (MAP_FIXED), so the program's pointers and data are unchanged.
 * The memfd goes to the server, which maps it — at the same address where
 * that is free in the server, so the device address is the program's — and
 * registers it with the driver; from then on the range is pinned memory of
 * the client's like cuMemAllocHost's (zero-copy copies, mapped kernel
 * access, cuMemHostGetDevicePointer), charged to its pinned-memory limit.
 * Unregistering unpins it in the server and leaves the pages where they are,
 * still the program's to free.
 *
 * Managed memory (managed.c) is pinned the same way, from shared memory of
 * the client's own making (adopted: to the program it is not registered
 * memory). Moved pages are shared memory: a child the program forks shares
 * them rather than getting a copy. (A graph's copy of pageable memory does
 * not move pages: it is staged, gstage.c.)
 *
 * The range is taken whole pages at a time, and only private read-write
 * memory (heap, stack, anonymous or private file mappings) is moved: a
 * shared mapping would lose what it shares. The calling thread's own
 * stack, which the functions running on it write while it moves, is moved
 * by stackmove.c with nothing written between the copy and the mapping,
 * and moved back into private memory when it is unregistered. A write by
 * another thread into the range while it is being moved may be lost; the
 * driver's own registration has no such window.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "client/api.h"
#include "client/capture.h"
#include "client/client.h"
#include "common/log.h"
#include "common/shm.h"
#include "common/sock.h"
#include "common/wire.h"

#define PARALLEL_MIN (1u << 20)   /* pages worth writing by several threads */
#define KNOWN_FLAGS (CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP | CU_MEMHOSTREGISTER_IOMEMORY | \
		     CU_MEMHOSTREGISTER_READ_ONLY)

/* Whether [start, end) is all mapped read-write, private ('p') or shared
 * ('s'). */
static bool mapped_rw(uintptr_t start, uintptr_t end, char kind)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[512], perms[8];
	unsigned long lo, hi;
	uintptr_t at = start;

	if (!f)
		return false;
	while (at < end && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) != 3 || hi <= at)
			continue;
		if (lo > at || perms[0] != 'r' || perms[1] != 'w' || perms[3] != kind)
			break;   /* a hole, or memory that cannot move */
		at = hi;
	}
	fclose(f);
	return at >= end;
}

/* Whether [start, end) meets the calling thread's own stack: its pages
 * cannot be moved by copies and a mapping from C while the functions
 * running on them write there (the move would put back what they held when
 * it began): stackmove.c moves them. */
static bool own_stack(uintptr_t start, uintptr_t end)
{
	pthread_attr_t a;
	void *lo = NULL;
	size_t size = 0;
	bool meets = false;

	if (pthread_getattr_np(pthread_self(), &a) != 0)
		return false;
	if (pthread_attr_getstack(&a, &lo, &size) == 0 && lo)
		meets = start < (uintptr_t)lo + size && end > (uintptr_t)lo;
	pthread_attr_destroy(&a);
	return meets;
}

/* Bytes [from, to) of the pages at start into fd at the same offsets, by
 * the kernel: it reads the whole pages, beyond what the program allocated
 * (a plain pwrite would look, to a memory checker in the program, like a
 * read past its buffer). 0, or -errno. */
static int write_pages(int fd, const uint8_t *start, size_t from, size_t to)
{
	while (from < to) {
		ssize_t n = syscall(SYS_pwrite64, fd, start + from, to - from, (off_t)from);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		from += (size_t)n;
	}
	return 0;
}

/* The pages [start, start + len) moved into a new sealed memfd mapped over
 * them; its fd, or -1. The kernel fills the memfd's new pages from the
 * program's: those wholly inside the program's buffer [user, user + ulen)
 * by several threads at once (pcopy.c; written whole, a new page is neither
 * faulted in nor zeroed first, which made a copy through a mapping twice
 * as slow), the partial pages at either end from the calling thread
 * (write_pages). */
static int move_pages(uint8_t *start, size_t len, const uint8_t *user, size_t ulen)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	size_t lo = (((uintptr_t)user + page - 1) & ~(page - 1)) - (uintptr_t)start;
	size_t hi = (((uintptr_t)user + ulen) & ~(page - 1)) - (uintptr_t)start;
	int fd = mps_shm_create("openmps-registered", len);

	if (fd < 0)
		return -1;
	if (hi > lo && hi - lo >= PARALLEL_MIN) {
		if (mps__pwrite_parallel(fd, start + lo, (off_t)lo, hi - lo) < 0)
			goto fail;
	} else {
		lo = hi = 0;
	}
	if (write_pages(fd, start, 0, lo) < 0 || write_pages(fd, start, hi > lo ? hi : 0, len) < 0)
		goto fail;
	if (mmap(start, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) != start)
		goto fail;   /* MAP_FIXED fails before it unmaps anything */
	return fd;
fail:
	close(fd);
	return -1;
}

/* The sealed memfd fd, mapped here over [start, start + len), pinned in the
 * server and entered in the table (user: the program's pointer, NULL if
 * adopted: managed memory); the server's device address of start in
 * *devptr. */
static CUresult send_pinned(uintptr_t start, size_t len, int fd, unsigned int flags, void *user, uint64_t *devptr)
{
	struct mps_fdmsg fm = { .magic = MPS_FDMSG_MAGIC, .region = MPS_FD_IMPORT };
	struct mps_msg_host_register q;
	struct mps_call call;
	uint32_t cur = 0;
	CUresult r;

	memset(&q, 0, sizeof(q));
	q.addr = start;
	q.size = len;
	mps__cur_handle(&cur);
	/* The memfd goes ahead of the message that takes it. */
	pthread_mutex_lock(&mps_conn.fd_lock);
	if (mps_sock_send(mps_conn.sock, &fm, sizeof(fm), fd) < 0) {
		r = CUDA_ERROR_OPERATING_SYSTEM;
	} else {
		r = mps__call(MPS_OP_HOST_REGISTER, cur, &q.hdr, sizeof(q), NULL, 0, &call);
		if (r == CUDA_SUCCESS) {
			*devptr = call.s->val[3];
			r = mps__hostmem_add_registered((void *)start, len, (uint32_t)call.s->val[0], flags,
							call.s->val[3], user);
		}
		mps__call_end(&call);
	}
	pthread_mutex_unlock(&mps_conn.fd_lock);
	return r;
}

CUresult mps__host_pin_shared(void *start, size_t len, int fd, uint64_t *devptr)
{
	return send_pinned((uintptr_t)start, len, fd, 0, NULL, devptr);
}

/* Registrations on the registering thread's own stack: moved back into
 * private memory when unregistered. */
#define STACK_MOVES 64

static struct {
	pthread_mutex_t lock;
	struct stack_move {
		const void *user;
		void *start;
		size_t len;
	} v[STACK_MOVES];
	unsigned n;
} stacks = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* The pages [start, start + len) of the calling thread's own stack moved
 * into a new sealed memfd mapped over them and noted for their
 * unregistering; its fd, or -1 (and *r). */
static int move_stack(uint8_t *start, size_t len, const void *user, CUresult *r)
{
	int fd = mps_shm_create("openmps-registered", len), e;

	*r = CUDA_ERROR_OUT_OF_MEMORY;
	if (fd < 0)
		return -1;
	pthread_mutex_lock(&stacks.lock);
	if (stacks.n == STACK_MOVES) {
		pthread_mutex_unlock(&stacks.lock);
		mps_log_warn("openmps: more than %d registrations on threads' own stacks at once: not registered",
			     STACK_MOVES);
		*r = CUDA_ERROR_NOT_SUPPORTED;
		goto fail;
	}
	e = mps__stack_move(fd, start, len);
	if (e == 0)
		stacks.v[stacks.n++] = (struct stack_move){ user, start, len };
	pthread_mutex_unlock(&stacks.lock);
	if (e == 0)
		return fd;
	mps_log_warn("openmps: host memory at %p (%zu bytes) is on the calling thread's stack, which could not be "
		     "moved in place (%s): not registered",
		     user, len, strerror(-e));
	*r = CUDA_ERROR_NOT_SUPPORTED;
fail:
	close(fd);
	return -1;
}

/* A registration on a thread's own stack ends: its pages back in private
 * memory (a fork then copies them, as any stack). */
static void unmove_stack(const void *user)
{
	struct stack_move m = { 0 };
	int e;

	pthread_mutex_lock(&stacks.lock);
	for (unsigned i = 0; i < stacks.n; i++)
		if (stacks.v[i].user == user) {
			m = stacks.v[i];
			stacks.v[i] = stacks.v[--stacks.n];
			break;
		}
	pthread_mutex_unlock(&stacks.lock);
	if (!m.start)
		return;
	/* Still there (a thread that ended took its stack with it). */
	if (!mapped_rw((uintptr_t)m.start, (uintptr_t)m.start + m.len, 's'))
		return;
	e = mps__stack_restore(m.start, m.len);
	if (e < 0)
		mps_log_warn("openmps: stack pages at %p left in shared memory: %s", m.start, strerror(-e));
}

/* The pages holding [p, p + bytesize) moved and pinned in the server, and
 * entered in the table (user: the program's pointer, NULL if adopted). */
static CUresult pin_pages(const void *p, size_t bytesize, unsigned int flags, void *user)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), start, end;
	uint64_t devptr;
	CUresult r;
	int fd;

	start = (uintptr_t)p & ~(page - 1);
	end = ((uintptr_t)p + bytesize + page - 1) & ~(page - 1);
	if (mps__hostmem_overlaps((void *)start, end - start))
		return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
	if (!mapped_rw(start, end, 'p')) {
		mps_log_warn("openmps: host memory at %p (%zu bytes): only private read-write memory can be pinned",
			     p, bytesize);
		return CUDA_ERROR_INVALID_VALUE;
	}
	if (own_stack(start, end)) {
		fd = move_stack((uint8_t *)start, end - start, user ? user : p, &r);
		if (fd < 0)
			return r;
		r = send_pinned(start, end - start, fd, flags, user, &devptr);
		close(fd);
		if (r != CUDA_SUCCESS)
			unmove_stack(user ? user : p);
		return r;
	}
	fd = move_pages((uint8_t *)start, end - start, p, bytesize);
	if (fd < 0)
		return CUDA_ERROR_OUT_OF_MEMORY;
	r = send_pinned(start, end - start, fd, flags, user, &devptr);
	close(fd);   /* the pages stay mapped, and the server has its own */
	return r;
}

static CUresult host_register(void *p, size_t bytesize, unsigned int flags)
{
	CUresult r;

	if (!p || !bytesize || (flags & ~(unsigned int)KNOWN_FLAGS) || (uintptr_t)p + bytesize < (uintptr_t)p)
		return CUDA_ERROR_INVALID_VALUE;
	if (flags & CU_MEMHOSTREGISTER_IOMEMORY) {
		mps__unsupported("cuMemHostRegister of I/O memory");
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	if (!mps__ctx_cur())
		return CUDA_ERROR_INVALID_CONTEXT;
	r = mps__capture_check();
	return r == CUDA_SUCCESS ? pin_pages(p, bytesize, flags, p) : r;
}

/* Unpins the region the server calls handle. */
static CUresult unpin(uint32_t handle)
{
	struct mps_msg_handle q;
	struct mps_call call;
	CUresult r;

	memset(&q, 0, sizeof(q));
	q.handle = handle;
	r = mps__call(MPS_OP_HOST_FREE, 0, &q.hdr, sizeof(q), NULL, 0, &call);
	mps__call_end(&call);
	return r;
}

CUresult mps__host_unpin_shared(void *start)
{
	uint32_t handle;

	return mps__hostmem_take_adopted(start, &handle) ? unpin(handle) : CUDA_ERROR_INVALID_VALUE;
}

static CUresult host_unregister(void *p)
{
	uint32_t handle;
	CUresult r;

	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	if (!mps__hostmem_take_registered(p, &handle))
		return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
	r = unpin(handle);
	unmove_stack(p);   /* no-op unless it was on a thread's own stack */
	return r;
}

const struct mps_impl mps__hostreg_api[] = {
	MPS_IMPL(cuMemHostRegister_v2, host_register),
	MPS_IMPL(cuMemHostUnregister, host_unregister),
	MPS_IMPL_END
};
