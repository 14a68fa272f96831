// SPDX-License-Identifier: MIT
/*
 * Managed memory that lives on the device (OPENMPS_MANAGED=device): the
 * allocation is device memory in the server, and the program's CPU works
 * on a copy at the same address here — shared memory (a sealed memfd)
 * mapped over the range memory.c holds for the device's addresses and
 * pinned in the server, so that the server's copy engine moves it. Each
 * block of the copy (2 MiB, or larger for allocations past 8 GiB, so
 * that no allocation has more than 4096 blocks, each of which may become
 * a mapping of its own) is in one of three states:
 *
 *   DEVICE  the device's bytes are the truth; the copy is inaccessible
 *   CLEAN   both agree; the copy is readable
 *   DIRTY   the CPU wrote the copy; it is readable and writable
 *
 * Before work that may touch the memory goes to the device (a launch, a
 * graph launch, a copy or a memset, a prefetch to the device), and after a
 * host function the program ran in stream order, the dirty blocks are
 * copied to the device and waited for, and every block becomes DEVICE:
 * the GPU reads and writes device memory at its own speed. A CPU access
 * to a DEVICE block faults; the handler (SIGSEGV) waits for the work that
 * may write it (not holding the table's lock, so that a host function that
 * work waits for may fault too; a host function itself waits for nothing,
 * its stream's work before it being done), copies the block back and
 * makes it CLEAN, or DIRTY for a write (a write to a CLEAN block faults
 * once more). The library's copies go on a stream of its own in each
 * context, which waits for none of the program's. This is the model of
 * devices without concurrent managed access, which is what the client
 * reports for CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS in this mode:
 * the CPU may touch managed memory only while the device's work is done,
 * or, for memory attached to the host or to one stream
 * (cuStreamAttachMemAsync, or made with CU_MEM_ATTACH_HOST), while that
 * stream's is: a launch moves only what its stream's kernels may reach,
 * and a fault waits for that stream alone (none for memory attached to
 * the host). A program that touches memory while a kernel that may reach
 * it runs waits for the kernel here (the driver would end it with a
 * fault).
 *
 * What the fault handler cannot see: the kernel reading or writing the
 * copy on the program's behalf (read(2) into a DEVICE block, write(2) from
 * one) finds it inaccessible and the call fails with EFAULT; a prefetch to
 * the CPU (cuMemPrefetchAsync to CU_DEVICE_CPU) first makes the range
 * readable and writable. The handler chains to the handler that was there
 * before for every other fault.
 *
 * A new allocation is the CPU's (DIRTY, zeroes in the copy), so that the
 * program may fill it, read(2) included, before the device's first work
 * takes it.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include "client/capture.h"
#include "client/client.h"
#include "common/atomics.h"
#include "common/log.h"
#include "common/shm.h"

#define BLOCK (2ull << 20)   /* a block's size, at least */
#define MAX_BLOCKS 4096       /* an allocation's blocks, at most: each may be a mapping of its own */
#define GROUP 8   /* blocks protected, then copied, at a time */

enum { DEVICE = 0, CLEAN, DIRTY };

struct mig {
	uint64_t base;        /* the program's pointer: page-aligned, inside the device allocation */
	size_t len;           /* whole pages */
	uint64_t alloc;       /* the device allocation's own address (for cuMemFree) */
	uint32_t ctx;         /* the server's handle of the context it was made in */
	unsigned int attach;  /* CU_MEM_ATTACH_GLOBAL, _HOST or _SINGLE (to stream) */
	uint32_t stream;
	uint32_t own;         /* the library's own stream of ctx, for its copies */
	uint8_t *state;       /* per block */
	size_t nblocks;
	uint64_t block;       /* bytes a block: BLOCK, more for an allocation of more than MAX_BLOCKS of them */
};

static struct {
	pthread_mutex_t lock;
	struct mig *v;
	size_t n, cap;
	struct sigaction old;     /* the SIGSEGV handler before ours */
	bool installed;
	uint32_t synced_seq;      /* the last message posted when the handler last waited */
	struct own { uint32_t ctx, stream; CUstream st; } *own;   /* the library's own stream of each context */
	size_t nown;
} mg = { .lock = PTHREAD_MUTEX_INITIALIZER };

static int mode = -1;         /* 1: device, 0: host (managed.c alone) */
static uint64_t readable;     /* blocks not DEVICE, all allocations: read without the lock */
static __thread int in_fault; /* this thread is in the handler */

static pthread_once_t mode_once = PTHREAD_ONCE_INIT;

static void read_mode(void)
{
	const char *v = getenv("OPENMPS_MANAGED");

	if (v && *v && strcmp(v, "device") && strcmp(v, "host"))
		mps_log_warn("openmps: ignoring OPENMPS_MANAGED=%s (want host or device)", v);
	mps_store_release(&mode, v && !strcmp(v, "device"));
}

bool mps__migrate_on(void)
{
	int m = mps_load_acquire(&mode);

	if (m < 0) {
		pthread_once(&mode_once, read_mode);
		m = mps_load_acquire(&mode);
	}
	return m == 1;
}

static size_t block_len(const struct mig *m, size_t b)
{
	size_t off = b * m->block;

	return m->len - off < m->block ? m->len - off : m->block;
}

/* The allocation holding address a, or -1. Under the lock. */
static long find_locked(uint64_t a)
{
	for (size_t i = 0; i < mg.n; i++)
		if (a >= mg.v[i].base && a - mg.v[i].base < mg.v[i].len)
			return (long)i;
	return -1;
}

bool mps__migrate_has(uint64_t a)
{
	bool in;

	if (!mps__migrate_on())
		return false;
	pthread_mutex_lock(&mg.lock);
	in = find_locked(a) >= 0;
	pthread_mutex_unlock(&mg.lock);
	return in;
}

static void set_state(struct mig *m, size_t b, uint8_t s)
{
	if ((m->state[b] == DEVICE) != (s == DEVICE)) {
		if (s == DEVICE)
			mps_fetch_sub(&readable, 1);
		else
			mps_fetch_add(&readable, 1);
	}
	m->state[b] = s;
}

/* The bytes of blocks [b, e) of m. */
static size_t span(const struct mig *m, size_t b, size_t e)
{
	return (e - 1) * m->block + block_len(m, e - 1) - b * m->block;
}

/* Blocks [b, e) of m, all in one state, as the protection that state
 * wants. */
static int protect(struct mig *m, size_t b, size_t e, uint8_t s)
{
	int prot = s == DEVICE ? PROT_NONE : s == CLEAN ? PROT_READ : PROT_READ | PROT_WRITE;

	return mprotect((void *)(uintptr_t)(m->base + b * m->block), span(m, b, e), prot);
}

/* Block b of m in state s, protected as it wants; false if it could not be. */
static bool become(struct mig *m, size_t b, uint8_t s)
{
	if (protect(m, b, b + 1, s) < 0)
		return false;
	set_state(m, b, s);
	return true;
}

/* Blocks [b, e) of m, all DIRTY, copied to the device on the library's own
 * stream of its context (which waits for no program's stream), not waited
 * for. */
static CUresult push(struct mig *m, size_t b, size_t e)
{
	return mps__copy_h2d(m->base + b * m->block, (const void *)(uintptr_t)(m->base + b * m->block),
			     span(m, b, e), m->own, m->ctx);
}

/* Everything of m on the device: all of it DEVICE, its dirty blocks
 * copied there. Blocks the CPU may touch are made inaccessible before
 * they go, so that another thread's access waits for us and then finds
 * the device's bytes; a few blocks at a time, so that one group's
 * protection is changed while the one before it is copied. Under the
 * lock; *pushed: something is being copied (the caller waits for it). */
static CUresult to_device_locked(struct mig *m, bool *pushed)
{
	for (size_t b = 0; b < m->nblocks;) {
		size_t e = b;

		if (m->state[b] == DEVICE) {
			b++;
			continue;
		}
		while (e < m->nblocks && m->state[e] != DEVICE && e - b < GROUP)
			e++;
		if (protect(m, b, e, DEVICE) < 0)
			return CUDA_ERROR_UNKNOWN;
		for (size_t d = b; d < e;) {
			size_t de = d;
			CUresult r;

			if (m->state[d] != DIRTY) {
				set_state(m, d++, DEVICE);
				continue;
			}
			while (de < e && m->state[de] == DIRTY)
				de++;
			r = push(m, d, de);
			if (r != CUDA_SUCCESS) {
				/* What is left is still the CPU's, as it was. */
				for (size_t i = d; i < e; i++)
					protect(m, i, i + 1, m->state[i]);
				return r;
			}
			*pushed = true;
			while (d < de)
				set_state(m, d++, DEVICE);
		}
		b = e;
	}
	return CUDA_SUCCESS;
}

/* Every allocation the work may reach moved to the device: with `any`,
 * all but those attached to the host; else what kernels on stream may
 * reach and the allocations holding a and b. */
static CUresult to_device(bool any, uint32_t stream, uint64_t a, uint64_t b)
{
	CUresult r = CUDA_SUCCESS;

	if (!mps_load_acquire(&readable))
		return CUDA_SUCCESS;
	/* A capture records work; what it reads is moved when its graph runs. */
	if (stream && mps__capture_on(stream))
		return CUDA_SUCCESS;
	pthread_mutex_lock(&mg.lock);
	for (size_t i = 0; i < mg.n && r == CUDA_SUCCESS; i++) {
		const struct mig *m = &mg.v[i];
		bool pushed = false, named = a - m->base < m->len || b - m->base < m->len;

		/* Kernels on one stream reach neither memory attached to the
		 * host nor memory attached to another stream, unless the work
		 * names it. */
		if (!named && (m->attach == CU_MEM_ATTACH_HOST ||
			       (m->attach == CU_MEM_ATTACH_SINGLE && m->stream != stream && !any)))
			continue;

		r = to_device_locked(&mg.v[i], &pushed);
		/* In place before the work that follows, on any stream. Only
		 * the library's copies are on that stream: the wait never
		 * depends on the program's work (a host function's, say). */
		if (pushed) {
			CUresult w = mps__call_handle(MPS_OP_STREAM_SYNC, mg.v[i].ctx, mg.v[i].own);

			if (r == CUDA_SUCCESS)
				r = w;
		}
	}
	pthread_mutex_unlock(&mg.lock);
	return r;
}

CUresult mps__migrate_to_device(uint32_t stream, uint64_t a, uint64_t b)
{
	return to_device(false, stream, a, b);
}

CUresult mps__migrate_settle(void)
{
	return to_device(true, 0, 0, 0);
}

/* What a CPU access to memory of m's must wait for before the device's
 * bytes are fetched: the work that may have written it — the context's,
 * or the stream's it is attached to; nothing for memory attached to the
 * host, or for a host function (it runs in stream order, after the work
 * before it; waiting for its own stream would wait for itself). Called
 * without the lock: another thread's fault on the same memory must be able
 * to come in meanwhile (a host function the wait depends on may make one). */
static CUresult wait_writers(uint32_t ctx, unsigned int attach, uint32_t stream)
{
	uint32_t sent = mps_load_acquire(&mps_conn.sent);
	CUresult r;

	if (attach == CU_MEM_ATTACH_HOST || mps__hostfn_runner())
		return CUDA_SUCCESS;
	if (attach == CU_MEM_ATTACH_SINGLE)
		return mps__call_handle(MPS_OP_STREAM_SYNC, ctx, stream);
	if (sent == mps_load_acquire(&mg.synced_seq))
		return CUDA_SUCCESS;   /* nothing went to the server since the last wait */
	r = mps__call_handle(MPS_OP_CTX_SYNC, ctx, 0);
	if (r == CUDA_SUCCESS)
		mps_store_release(&mg.synced_seq, sent);
	return r;
}

/* Block b of m back from the device, on the library's own stream (after
 * its pushes), then readable (and writable for a write). Under the lock,
 * once the writers were waited for. */
static bool fetch_locked(struct mig *m, size_t b, bool write)
{
	uint8_t s = write ? DIRTY : CLEAN;

	if (mps__copy_d2h((void *)(uintptr_t)(m->base + b * m->block), m->base + b * m->block, block_len(m, b),
			  m->own, m->ctx) != CUDA_SUCCESS)
		return false;
	return become(m, b, s);
}

/* Whether the fault at a was ours to serve, and served. */
static bool serve(uint64_t a, bool write)
{
	bool ok = true, waited = false;
	struct mig *m;
	size_t b;
	long i;

	pthread_mutex_lock(&mg.lock);
again:
	i = find_locked(a);
	if (i < 0) {
		pthread_mutex_unlock(&mg.lock);
		return waited;   /* freed meanwhile: as an access to memory freed */
	}
	m = &mg.v[i];
	b = (size_t)((a - m->base) / m->block);
	switch (m->state[b]) {
	case DEVICE:
		if (!waited) {
			uint32_t ctx = m->ctx, stream = m->stream;
			unsigned int attach = m->attach;

			pthread_mutex_unlock(&mg.lock);
			if (wait_writers(ctx, attach, stream) != CUDA_SUCCESS)
				return false;
			waited = true;
			pthread_mutex_lock(&mg.lock);
			goto again;
		}
		ok = fetch_locked(m, b, write);
		break;
	case CLEAN:
		/* A write to what was read: it is the CPU's now. */
		ok = become(m, b, DIRTY);
		break;
	default:
		break;   /* another thread served it first */
	}
	pthread_mutex_unlock(&mg.lock);
	return ok;
}

static bool fault_is_write(void *uc)
{
#if defined(__x86_64__)
	return (((ucontext_t *)uc)->uc_mcontext.gregs[REG_ERR] & 2) != 0;
#else
	(void)uc;
	return false;   /* a write to a block made readable faults again */
#endif
}

static void on_fault(int sig, siginfo_t *si, void *uc)
{
	int saved = errno;

	if (!in_fault && si->si_code > 0) {
		bool ours;

		in_fault = 1;
		ours = serve((uint64_t)(uintptr_t)si->si_addr, fault_is_write(uc));
		in_fault = 0;
		if (ours) {
			errno = saved;
			return;
		}
	}
	errno = saved;
	/* Not ours (or not served): as if we were never here. */
	if (mg.old.sa_flags & SA_SIGINFO) {
		mg.old.sa_sigaction(sig, si, uc);
	} else if (mg.old.sa_handler != SIG_DFL && mg.old.sa_handler != SIG_IGN) {
		mg.old.sa_handler(sig);
	} else {
		/* The default action: the access is made again and ends the
		 * process as it would have. */
		signal(sig, SIG_DFL);
	}
}

/* Our handler for SIGSEGV, once; false if it cannot be. Under the lock. */
static bool install_locked(void)
{
	struct sigaction sa;

	if (mg.installed)
		return true;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_fault;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGSEGV, &sa, &mg.old) < 0)
		return false;
	mg.installed = true;
	return true;
}

/* The library's own stream of context ctx (the current one), made on
 * first use: its copies go there, so that they never wait for the
 * program's streams (the legacy stream waits for blocking ones) and a wait
 * for them never waits for the program's work. */
static CUresult own_stream(uint32_t ctx, uint32_t *out)
{
	uint32_t handle, sctx;
	CUstream st;
	CUresult r;

	pthread_mutex_lock(&mg.lock);
	for (size_t i = 0; i < mg.nown; i++) {
		if (mg.own[i].ctx == ctx) {
			*out = mg.own[i].stream;
			pthread_mutex_unlock(&mg.lock);
			return CUDA_SUCCESS;
		}
	}
	pthread_mutex_unlock(&mg.lock);
	r = cuStreamCreate(&st, CU_STREAM_NON_BLOCKING);
	if (r == CUDA_SUCCESS)
		r = mps__stream_resolve(st, false, &handle, &sctx);
	if (r != CUDA_SUCCESS)
		return r;
	pthread_mutex_lock(&mg.lock);
	{
		struct own *v = realloc(mg.own, (mg.nown + 1) * sizeof(*v));

		if (!v) {
			pthread_mutex_unlock(&mg.lock);
			cuStreamDestroy_v2(st);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
		mg.own = v;
	}
	/* Kept for the process's life: allocations of the context name it. */
	mg.own[mg.nown++] = (struct own){ ctx, handle, st };
	pthread_mutex_unlock(&mg.lock);
	*out = handle;
	return CUDA_SUCCESS;
}

/* Sealed shared memory of len bytes, for the copy. */
static int shared_fd(size_t len)
{
	int fd = mps_shm_create("openmps-managed", len);

	return fd < 0 ? -1 : fd;
}

CUresult mps__migrate_alloc(size_t bytesize, unsigned int flags, uint32_t ctx, CUdeviceptr *dptr)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), len = (bytesize + page - 1) & ~(page - 1);
	CUdeviceptr alloc = 0;
	uint64_t base, devptr;
	struct mig m = { .ctx = ctx, .attach = flags };
	CUresult r;
	void *p;
	int fd;

	r = own_stream(ctx, &m.own);
	if (r != CUDA_SUCCESS)
		return r;
	/* A page more, so the copy's pages are the allocation's alone. */
	r = cuMemAlloc_v2(&alloc, len + page);
	if (r != CUDA_SUCCESS)
		return r;
	base = (alloc + page - 1) & ~(uint64_t)(page - 1);
	if (!mps__devmem_reserved(alloc, len + page)) {
		r = CUDA_ERROR_NOT_SUPPORTED;   /* the addresses are this process's own */
		goto err_free;
	}
	fd = shared_fd(len);
	if (fd < 0) {
		r = CUDA_ERROR_OUT_OF_MEMORY;
		goto err_free;
	}
	p = mmap((void *)(uintptr_t)base, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0);
	if (p != (void *)(uintptr_t)base) {
		close(fd);
		r = CUDA_ERROR_OUT_OF_MEMORY;
		goto err_free;
	}
	r = mps__host_pin_shared(p, len, fd, &devptr);
	close(fd);
	if (r != CUDA_SUCCESS)
		goto err_unmap;
	m.base = base;
	m.len = len;
	m.alloc = alloc;
	/* Each block's protection may differ from its neighbours', and each
	 * such run is a mapping of the process's: blocks grow with the
	 * allocation, so that it never holds more than MAX_BLOCKS. */
	m.block = BLOCK;
	while ((len + m.block - 1) / m.block > MAX_BLOCKS)
		m.block *= 2;
	m.nblocks = (len + m.block - 1) / m.block;
	m.state = malloc(m.nblocks);
	if (!m.state) {
		r = CUDA_ERROR_OUT_OF_MEMORY;
		goto err_unpin;
	}
	pthread_mutex_lock(&mg.lock);
	if (!install_locked()) {
		pthread_mutex_unlock(&mg.lock);
		mps_log_warn("openmps: cannot handle SIGSEGV: managed memory stays in host memory");
		r = CUDA_ERROR_NOT_SUPPORTED;
		goto err_state;
	}
	if (mg.n == mg.cap) {
		size_t cap = mg.cap ? 2 * mg.cap : 16;
		struct mig *v = realloc(mg.v, cap * sizeof(*v));

		if (!v) {
			pthread_mutex_unlock(&mg.lock);
			r = CUDA_ERROR_OUT_OF_MEMORY;
			goto err_state;
		}
		mg.v = v;
		mg.cap = cap;
	}
	/* The CPU's: zeroes, as fresh managed memory reads (and read(2) may
	 * fill it); they go to the device before its first work. */
	memset(m.state, DEVICE, m.nblocks);
	mg.v[mg.n] = m;
	for (size_t b = 0; b < m.nblocks; b++)
		set_state(&mg.v[mg.n], b, DIRTY);
	mg.n++;
	pthread_mutex_unlock(&mg.lock);
	*dptr = (CUdeviceptr)base;
	return CUDA_SUCCESS;

err_state:
	free(m.state);
err_unpin:
	mps__host_unpin_shared(p);
err_unmap:
	/* Back to what memory.c holds there: inaccessible, uncommitted. */
	mmap(p, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
err_free:
	cuMemFree_v2(alloc);
	return r;
}

bool mps__migrate_free(uint64_t p, CUresult *r)
{
	struct mig m;
	CUresult sync;
	long i;

	if (!mps__migrate_on())
		return false;
	pthread_mutex_lock(&mg.lock);
	i = find_locked(p);
	if (i < 0) {
		pthread_mutex_unlock(&mg.lock);
		return false;
	}
	if (mg.v[i].base != p) {
		pthread_mutex_unlock(&mg.lock);
		*r = CUDA_ERROR_INVALID_VALUE;
		return true;
	}
	m = mg.v[i];
	for (size_t b = 0; b < m.nblocks; b++)
		set_state(&mg.v[i], b, DEVICE);
	mg.v[i] = mg.v[--mg.n];
	pthread_mutex_unlock(&mg.lock);
	/* As cuMemFree of managed memory: the GPU's work that may use it first. */
	sync = mps__call_handle(MPS_OP_CTX_SYNC, m.ctx, 0);
	mps__host_unpin_shared((void *)(uintptr_t)m.base);
	mmap((void *)(uintptr_t)m.base, m.len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED,
	     -1, 0);
	free(m.state);
	*r = cuMemFree_v2(m.alloc);
	if (*r == CUDA_SUCCESS && sync != CUDA_ERROR_INVALID_CONTEXT)
		*r = sync;
	return true;
}

void mps__migrate_attach(uint64_t p, unsigned int flags, uint32_t stream)
{
	long i;

	pthread_mutex_lock(&mg.lock);
	i = find_locked(p);
	if (i >= 0) {
		mg.v[i].attach = flags;
		mg.v[i].stream = stream;
	}
	pthread_mutex_unlock(&mg.lock);
}

void mps__migrate_attach_gone(uint32_t stream)
{
	if (!mps__migrate_on())
		return;
	pthread_mutex_lock(&mg.lock);
	for (size_t i = 0; i < mg.n; i++) {
		if (mg.v[i].attach != CU_MEM_ATTACH_SINGLE || mg.v[i].stream != stream)
			continue;
		mg.v[i].attach = CU_MEM_ATTACH_GLOBAL;
		mg.v[i].stream = 0;
	}
	pthread_mutex_unlock(&mg.lock);
}

CUresult mps__migrate_to_host(uint64_t p, size_t count)
{
	CUresult r = CUDA_SUCCESS;
	uint32_t ctx, stream;
	unsigned int attach;
	struct mig *m;
	long i;

	pthread_mutex_lock(&mg.lock);
	i = find_locked(p);
	if (i < 0) {
		pthread_mutex_unlock(&mg.lock);
		return CUDA_ERROR_INVALID_VALUE;
	}
	ctx = mg.v[i].ctx, stream = mg.v[i].stream, attach = mg.v[i].attach;
	pthread_mutex_unlock(&mg.lock);
	r = wait_writers(ctx, attach, stream);
	if (r != CUDA_SUCCESS)
		return r;
	pthread_mutex_lock(&mg.lock);
	i = find_locked(p);
	if (i < 0) {
		pthread_mutex_unlock(&mg.lock);
		return CUDA_ERROR_INVALID_VALUE;
	}
	m = &mg.v[i];
	for (size_t b = (size_t)((p - m->base) / m->block); b * m->block < p - m->base + count && b < m->nblocks;
	     b++) {
		if ((m->state[b] == DEVICE && !fetch_locked(m, b, true)) ||
		    (m->state[b] == CLEAN && !become(m, b, DIRTY))) {
			r = CUDA_ERROR_UNKNOWN;
			break;
		}
	}
	pthread_mutex_unlock(&mg.lock);
	return r;
}
