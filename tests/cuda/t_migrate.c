// SPDX-License-Identifier: MIT
/*
 * Managed memory as the CPU and the device take turns with it, block by
 * block: a 9 MiB allocation (five 2 MiB blocks and a part) written whole
 * by the CPU, then a block and a bit, then only read, each time rewritten in place
 * by a kernel and read back whole by the CPU (fresh memory filled by
 * read(2) first); copies and a memset into it
 * and out of it between CPU reads and writes of single words; a prefetch
 * to the CPU that lets write(2) and read(2) use it; a kernel's arguments
 * kept in managed memory; 600 random steps of all of these over three
 * allocations, checked against plain copies; memory attached to a stream
 * or to the host used by the CPU while another stream is held up; a host
 * function reading and writing it between two kernels; four threads at
 * once,
 * each with an allocation of its own on a stream of its own; freeing
 * while the CPU holds part of it. Runs natively too (the driver's managed
 * memory). With T_MIGRATE_ON_DEVICE=1 (OPENMPS_MANAGED=device under
 * openmps, tests/system/migrate.sh) it also checks what that mode says of
 * itself: no concurrent managed access, and the copy inaccessible to the
 * kernel's own reads after a kernel until a prefetch to the CPU.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

#define WORDS ((9u << 20) / 4 + 3001)
#define BLOCK_WORDS ((2u << 20) / 4)
#define THREADS 4
#define THREAD_WORDS (3u << 18)

static CUfunction affine;
static CUcontext primary;

static void affine_on(CUdeviceptr p, uint32_t mul, uint32_t add, int n, CUstream s)
{
	void *args[] = { &p, &mul, &add, &n };

	REQUIRE_CU(t_launch(affine, ((unsigned)n + 255) / 256, 256, s, args));
}

/* One thread's turns: its CPU writes, a kernel, its CPU reads. */
static void *turns(void *arg)
{
	uint64_t rng = t_rng((unsigned)(uintptr_t)arg + 100);
	uint32_t *want = malloc(THREAD_WORDS * 4), *m;
	CUdeviceptr p;
	CUstream s;

	REQUIRE(want, "out of memory");
	REQUIRE_CU(cuCtxSetCurrent(primary));
	REQUIRE_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	REQUIRE_CU(cuMemAllocManaged(&p, THREAD_WORDS * 4, CU_MEM_ATTACH_GLOBAL));
	m = (uint32_t *)(uintptr_t)p;
	for (int round = 0; round < 6; round++) {
		uint32_t mul = (uint32_t)t_rand(&rng) | 1, add = (uint32_t)t_rand(&rng);

		t_fill_u32(m, THREAD_WORDS, &rng);
		for (uint32_t i = 0; i < THREAD_WORDS; i++)
			want[i] = m[i] * mul + add;
		affine_on(p, mul, add, (int)THREAD_WORDS, s);
		REQUIRE_CU(cuStreamSynchronize(s));
		CMP_U32(m, want, THREAD_WORDS, "a thread's allocation after its kernel");
	}
	REQUIRE_CU(cuMemFree(p));
	REQUIRE_CU(cuStreamDestroy(s));
	free(want);
	return NULL;
}

/* A random range of an allocation of n words: [*at, *at + *len). */
static void pick(uint64_t *rng, uint32_t n, uint32_t *at, uint32_t *len)
{
	*at = (uint32_t)(t_rand(rng) % n);
	*len = 1 + (uint32_t)(t_rand(rng) % (n - *at < (3u << 18) ? n - *at : (3u << 18)));
}

/* Random steps over three allocations of odd sizes (partial blocks at
 * their ends), each kept beside a plain copy of what it must hold: CPU
 * writes and reads of random ranges, kernels, memsets, copies between
 * them and to and from pageable memory, prefetches either way; every read
 * compared with the copy. */
static void random_steps(CUstream s, uint64_t *rng, int steps)
{
	static const uint32_t words[3] = { (5u << 20) / 4 + 77, (2u << 20) / 4, 3001 };
	uint32_t *ref[3], *m[3], *tmp = malloc((5u << 20) + 4096);
	CUdeviceptr p[3];

	REQUIRE(tmp, "out of memory");
	for (int k = 0; k < 3; k++) {
		REQUIRE_CU(cuMemAllocManaged(&p[k], words[k] * 4, CU_MEM_ATTACH_GLOBAL));
		m[k] = (uint32_t *)(uintptr_t)p[k];
		ref[k] = calloc(words[k], 4);
		REQUIRE(ref[k], "out of memory");
	}
	for (int step = 0; step < steps; step++) {
		int k = (int)(t_rand(rng) % 3), op = (int)(t_rand(rng) % 9);
		uint32_t at, len, v = (uint32_t)t_rand(rng);

		pick(rng, words[k], &at, &len);
		switch (op) {
		case 0:   /* the CPU writes */
			for (uint32_t i = 0; i < len; i++)
				m[k][at + i] = ref[k][at + i] = v + i * 2654435761u;
			break;
		case 1:   /* the CPU reads */
			if (!CHECK(!memcmp(m[k] + at, ref[k] + at, (size_t)len * 4),
				   "step %d: the CPU's read of allocation %d words %u+%u differs", step, k, at, len))
				return;
			break;
		case 2: { /* a kernel over the range */
			uint32_t mul = v | 1, add = v >> 7;

			affine_on(p[k] + (CUdeviceptr)at * 4, mul, add, (int)len, s);
			REQUIRE_CU(cuStreamSynchronize(s));
			for (uint32_t i = 0; i < len; i++)
				ref[k][at + i] = ref[k][at + i] * mul + add;
			break;
		}
		case 3:   /* a memset */
			REQUIRE_CU(cuMemsetD32(p[k] + (CUdeviceptr)at * 4, v, len));
			for (uint32_t i = 0; i < len; i++)
				ref[k][at + i] = v;
			break;
		case 4: { /* a copy from another allocation */
			int j = (k + 1 + (int)(v % 2)) % 3;
			uint32_t from = (uint32_t)(t_rand(rng) % words[j]), n = len;

			if (n > words[j] - from)
				n = words[j] - from;
			REQUIRE_CU(cuMemcpyDtoDAsync(p[k] + (CUdeviceptr)at * 4, p[j] + (CUdeviceptr)from * 4,
						     (size_t)n * 4, s));
			REQUIRE_CU(cuStreamSynchronize(s));
			memmove(ref[k] + at, ref[j] + from, (size_t)n * 4);
			break;
		}
		case 5:   /* from pageable memory, on the stream: a synchronous copy
			   from pageable memory may return before its DMA has
			   landed, ordered on the legacy stream only, which the
			   kernels' stream does not wait for */
			for (uint32_t i = 0; i < len; i++)
				tmp[i] = ref[k][at + i] = v ^ i;
			REQUIRE_CU(cuMemcpyHtoDAsync(p[k] + (CUdeviceptr)at * 4, tmp, (size_t)len * 4, s));
			REQUIRE_CU(cuStreamSynchronize(s));
			break;
		case 6:   /* to pageable memory */
			REQUIRE_CU(cuMemcpyDtoH(tmp, p[k] + (CUdeviceptr)at * 4, (size_t)len * 4));
			if (!CHECK(!memcmp(tmp, ref[k] + at, (size_t)len * 4),
				   "step %d: a copy out of allocation %d words %u+%u differs", step, k, at, len))
				return;
			break;
		default: { /* a prefetch, to the CPU or the device */
			CUmemLocation to = { .type = v % 2 ? CU_MEM_LOCATION_TYPE_HOST : CU_MEM_LOCATION_TYPE_DEVICE,
					     .id = 0 };

			REQUIRE_CU(cuMemPrefetchAsync_v2(p[k] + (CUdeviceptr)at * 4, (size_t)len * 4, to, 0, s));
			REQUIRE_CU(cuStreamSynchronize(s));
			break;
		}
		}
	}
	for (int k = 0; k < 3; k++) {
		CMP_U32(m[k], ref[k], words[k], "an allocation after the random steps");
		REQUIRE_CU(cuMemFree(p[k]));
		free(ref[k]);
	}
	free(tmp);
}

static uint32_t *gate;   /* pinned: the word a stream waits on */
static int watchdog_fired;

static void *watchdog(void *arg)
{
	for (int i = 0; i < 1000 && !__atomic_load_n(gate, __ATOMIC_ACQUIRE); i++)
		nanosleep(&(struct timespec){ .tv_nsec = 10 * 1000 * 1000 }, NULL);
	if (!__atomic_load_n(gate, __ATOMIC_ACQUIRE)) {
		__atomic_store_n(&watchdog_fired, 1, __ATOMIC_RELEASE);
		__atomic_store_n(gate, 1, __ATOMIC_RELEASE);
	}
	return arg;
}

/* Memory attached to one stream, or to the host, is the CPU's while
 * another stream is held up: one stream waits on a word of pinned memory
 * while the CPU writes an allocation attached to a second stream, a
 * kernel on that stream rewrites it and the CPU reads it back, and the
 * CPU writes and reads an allocation made attached to the host; only then
 * is the word set. (Waiting for the whole context there would wait for
 * ever: a watchdog sets the word after 10 s, and that fails.) */
static void attached(void)
{
	const uint32_t n = (1u << 20) / 4;
	uint32_t *q, *h, *want = malloc(n * 4);
	CUdeviceptr qp, hp, gate_d;
	CUstream held, own;
	pthread_t dog;
	void *gate_h;

	REQUIRE(want, "out of memory");
	REQUIRE_CU(cuStreamCreate(&held, CU_STREAM_NON_BLOCKING));
	REQUIRE_CU(cuStreamCreate(&own, CU_STREAM_NON_BLOCKING));
	REQUIRE_CU(cuMemHostAlloc(&gate_h, 4096, CU_MEMHOSTALLOC_DEVICEMAP));
	gate = gate_h;
	__atomic_store_n(gate, 0, __ATOMIC_RELEASE);
	REQUIRE_CU(cuMemHostGetDevicePointer(&gate_d, gate_h, 0));
	REQUIRE_CU(cuMemAllocManaged(&qp, n * 4, CU_MEM_ATTACH_GLOBAL));
	REQUIRE_CU(cuStreamAttachMemAsync(own, qp, 0, CU_MEM_ATTACH_SINGLE));
	REQUIRE_CU(cuStreamSynchronize(own));
	REQUIRE_CU(cuMemAllocManaged(&hp, 64 << 10, CU_MEM_ATTACH_HOST));
	q = (uint32_t *)(uintptr_t)qp;
	h = (uint32_t *)(uintptr_t)hp;

	REQUIRE_CU(cuStreamWaitValue32(held, gate_d, 1, CU_STREAM_WAIT_VALUE_EQ));
	REQUIRE(pthread_create(&dog, NULL, watchdog, NULL) == 0, "pthread_create");
	for (int round = 0; round < 3; round++) {
		for (uint32_t i = 0; i < n; i++)
			q[i] = i ^ (uint32_t)round;
		for (uint32_t i = 0; i < n; i++)
			want[i] = (i ^ (uint32_t)round) * 7 + 5;
		affine_on(qp, 7, 5, (int)n, own);
		REQUIRE_CU(cuStreamSynchronize(own));
		CMP_U32(q, want, n, "memory attached to a stream, read while another stream is held");
	}
	for (uint32_t i = 0; i < (16u << 10); i++)
		h[i] = i * 3;
	for (uint32_t i = 0; i < (16u << 10); i += 1021)
		CHECK(h[i] == i * 3, "memory attached to the host, word %u: %#x", i, h[i]);
	CHECK(!__atomic_load_n(&watchdog_fired, __ATOMIC_ACQUIRE),
	      "the CPU's use of attached memory waited for a held stream (the watchdog let it go)");
	__atomic_store_n(gate, 1, __ATOMIC_RELEASE);
	pthread_join(dog, NULL);
	REQUIRE_CU(cuStreamSynchronize(held));
	REQUIRE_CU(cuMemFree(qp));
	REQUIRE_CU(cuMemFree(hp));
	REQUIRE_CU(cuStreamDestroy(held));
	REQUIRE_CU(cuStreamDestroy(own));
	REQUIRE_CU(cuMemFreeHost(gate_h));
	free(want);
}

struct hostfn_job {
	uint32_t *m;
	uint32_t n, want0;
	int seen;   /* the function found the kernel's words: 1, or 0 */
};

/* In stream order between two kernels: checks the first kernel's words and
 * adds one to each. */
static void CUDA_CB touch_managed(void *arg)
{
	struct hostfn_job *j = arg;
	int ok = j->m[0] == j->want0 && j->m[j->n - 1] == (j->n - 1) * 3 + 2;

	for (uint32_t i = 0; i < j->n; i++)
		j->m[i] += 1;
	__atomic_store_n(&j->seen, ok, __ATOMIC_RELEASE);
}

/* A host function that reads and writes managed memory between two
 * kernels on its stream: it sees the first kernel's words, and the second
 * kernel sees its own (with managed memory on the device, the function's
 * fault must not wait for its own stream, and what it wrote goes to the
 * device before the stream goes on). */
static void host_function(CUstream s)
{
	const uint32_t n = (3u << 20) / 4 + 11;
	struct hostfn_job j = { .n = n, .want0 = 2, .seen = -1 };
	CUdeviceptr p;

	REQUIRE_CU(cuMemAllocManaged(&p, n * 4, CU_MEM_ATTACH_GLOBAL));
	j.m = (uint32_t *)(uintptr_t)p;
	for (uint32_t i = 0; i < n; i++)
		j.m[i] = i;
	affine_on(p, 3, 2, (int)n, s);        /* i * 3 + 2 */
	REQUIRE_CU(cuLaunchHostFunc(s, touch_managed, &j));
	affine_on(p, 5, 0, (int)n, s);        /* (i * 3 + 3) * 5 */
	REQUIRE_CU(cuStreamSynchronize(s));
	CHECK(__atomic_load_n(&j.seen, __ATOMIC_ACQUIRE) == 1, "a host function read a kernel's words in managed "
	      "memory: %d", j.seen);
	{
		uint32_t bad = 0, first = 0;

		for (uint32_t i = n; i-- > 0;)
			if (j.m[i] != (i * 3 + 3) * 5)
				bad++, first = i;
		CHECK(bad == 0, "%u words after kernel, host function, kernel are wrong, the first %u: %u (want %u)", bad,
		      first, j.m[first], (first * 3 + 3) * 5);
	}
	REQUIRE_CU(cuMemFree(p));
}

int main(int argc, char **argv)
{
	const size_t bytes = (size_t)WORDS * 4;
	bool on_device = getenv("T_MIGRATE_ON_DEVICE") && !strcmp(getenv("T_MIGRATE_ON_DEVICE"), "1");
	uint32_t *want = malloc(bytes), *back = malloc(bytes), *m, mul, add;
	CUdevice dev = t_device();
	CUdeviceptr p, d;
	pthread_t th[THREADS];
	CUstream s;
	uint64_t rng;
	int fds[2];

	t_init(argc, argv);
	primary = t_primary(dev);
	rng = t_rng(11);
	REQUIRE(want && back, "out of memory");
	affine = t_func(t_module(), "affine_u32");
	REQUIRE_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	if (on_device) {
		int concurrent = -1;

		REQUIRE_CU(cuDeviceGetAttribute(&concurrent, CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, dev));
		CHECK(concurrent == 0, "concurrent managed access with managed memory on the device: %d", concurrent);
	}

	REQUIRE_CU(cuMemAllocManaged(&p, bytes, CU_MEM_ATTACH_GLOBAL));
	REQUIRE_CU(cuMemAlloc(&d, bytes));
	m = (uint32_t *)(uintptr_t)p;
	for (uint32_t i = 0; i < WORDS; i += 997)
		CHECK(m[i] == 0, "fresh managed memory at word %u: %#x", i, m[i]);
	/* Fresh memory is the CPU's, system calls included. */
	REQUIRE(pipe(fds) == 0, "pipe: %s", strerror(errno));
	t_fill_u32(back, 1024, &rng);
	CHECK(write(fds[1], back, 4096) == 4096 && read(fds[0], m + BLOCK_WORDS + 17, 4096) == 4096,
	      "read(2) into fresh managed memory: %s", strerror(errno));
	CMP_U32(m + BLOCK_WORDS + 17, back, 1024, "fresh managed memory filled by read(2)");
	close(fds[0]);
	close(fds[1]);

	/* Written whole by the CPU, rewritten by a kernel, read whole. */
	t_fill_u32(m, WORDS, &rng);
	memcpy(want, m, bytes);
	mul = (uint32_t)t_rand(&rng) | 1, add = (uint32_t)t_rand(&rng);
	affine_on(p, mul, add, (int)WORDS, s);
	REQUIRE_CU(cuStreamSynchronize(s));
	for (uint32_t i = 0; i < WORDS; i++)
		want[i] = want[i] * mul + add;
	CMP_U32(m, want, WORDS, "managed memory after a kernel over the CPU's words");

	/* One block written (read first, so it is fetched, then written). */
	for (uint32_t i = 2 * BLOCK_WORDS + 5; i < 3 * BLOCK_WORDS + 77; i += 3) {
		m[i] ^= 0xa5a5a5a5u;
		want[i] ^= 0xa5a5a5a5u;
	}
	mul = (uint32_t)t_rand(&rng) | 1, add = (uint32_t)t_rand(&rng);
	affine_on(p, mul, add, (int)WORDS, s);
	REQUIRE_CU(cuStreamSynchronize(s));
	for (uint32_t i = 0; i < WORDS; i++)
		want[i] = want[i] * mul + add;
	CMP_U32(m, want, WORDS, "managed memory after a kernel over words the CPU changed in two blocks");

	/* Only read by the CPU (above), then a kernel: what it reads is the
	 * device's, and the CPU sees the kernel's words again. */
	mul = (uint32_t)t_rand(&rng) | 1, add = (uint32_t)t_rand(&rng);
	affine_on(p, mul, add, (int)WORDS, s);
	REQUIRE_CU(cuStreamSynchronize(s));
	for (uint32_t i = 0; i < WORDS; i++)
		want[i] = want[i] * mul + add;
	CHECK(m[WORDS - 1] == want[WORDS - 1] && m[0] == want[0], "the last and first words after a kernel");
	CMP_U32(m, want, WORDS, "managed memory the CPU had only read, after a kernel");

	/* Copies and a memset between single-word CPU writes. */
	m[7] = 0x77777777u;
	want[7] = 0x77777777u;
	REQUIRE_CU(cuMemcpyDtoD(d, p, bytes));
	REQUIRE_CU(cuMemcpyDtoH(back, d, bytes));
	CMP_U32(back, want, WORDS, "device memory copied from managed memory after a CPU write");
	REQUIRE_CU(cuMemcpyHtoD(d, m, bytes));   /* the managed pointer as a host pointer */
	REQUIRE_CU(cuMemcpyDtoH(back, d, bytes));
	CMP_U32(back, want, WORDS, "cuMemcpyHtoD from managed memory");
	REQUIRE_CU(cuMemsetD32(p + 4 * BLOCK_WORDS, 0x0badf00du, BLOCK_WORDS));
	for (uint32_t i = BLOCK_WORDS; i < 2 * BLOCK_WORDS; i++)
		want[i] = 0x0badf00du;
	m[WORDS - 2] = 0x12345678u;
	want[WORDS - 2] = 0x12345678u;
	CMP_U32(m, want, WORDS, "managed memory after a memset and a CPU write");
	t_fill_u32(back, WORDS, &rng);
	REQUIRE_CU(cuMemcpyHtoDAsync(d, back, bytes, s));
	REQUIRE_CU(cuMemcpyDtoHAsync(m, d, bytes, s));   /* into managed memory as a host pointer */
	REQUIRE_CU(cuStreamSynchronize(s));
	CMP_U32(m, back, WORDS, "managed memory as the destination of cuMemcpyDtoHAsync");
	memcpy(want, back, bytes);

	/* After a kernel, the kernel's own reads of the memory; a prefetch to
	 * the CPU makes it the CPU's, system calls included. */
	affine_on(p, 1, 0, (int)WORDS, s);
	REQUIRE_CU(cuStreamSynchronize(s));
	REQUIRE(pipe(fds) == 0, "pipe: %s", strerror(errno));
	if (on_device) {
		errno = 0;
		CHECK(write(fds[1], m, 4096) < 0 && errno == EFAULT,
		      "write(2) from managed memory on the device: %s", strerror(errno));
	}
	{
		CUmemLocation cpu = { .type = CU_MEM_LOCATION_TYPE_HOST, .id = 0 };

		REQUIRE_CU(cuMemPrefetchAsync_v2(p, bytes, cpu, 0, s));
		REQUIRE_CU(cuStreamSynchronize(s));
	}
	CHECK(write(fds[1], m + BLOCK_WORDS, 4096) == 4096, "write(2) from managed memory after a prefetch: %s",
	      strerror(errno));
	CHECK(read(fds[0], m + 3 * BLOCK_WORDS, 4096) == 4096, "read(2) into managed memory after a prefetch: %s",
	      strerror(errno));
	memcpy(want + 3 * BLOCK_WORDS, want + BLOCK_WORDS, 4096);
	CMP_U32(m, want, WORDS, "managed memory after write(2) and read(2)");
	affine_on(p, 3, 1, (int)WORDS, s);
	REQUIRE_CU(cuStreamSynchronize(s));
	for (uint32_t i = 0; i < WORDS; i++)
		want[i] = want[i] * 3 + 1;
	CMP_U32(m, want, WORDS, "managed memory after a kernel over what read(2) wrote");
	close(fds[0]);
	close(fds[1]);

	/* A kernel's arguments read from managed memory, twice: the second
	 * time from memory a kernel has had since. */
	{
		struct { CUdeviceptr p; uint32_t mul, add; int n; } *a;
		CUdeviceptr ap;

		REQUIRE_CU(cuMemAllocManaged(&ap, sizeof(*a), CU_MEM_ATTACH_GLOBAL));
		a = (void *)(uintptr_t)ap;
		a->p = p, a->mul = 5, a->add = 9, a->n = (int)WORDS;
		for (int k = 0; k < 2; k++) {
			void *args[] = { &a->p, &a->mul, &a->add, &a->n };

			REQUIRE_CU(t_launch(affine, (WORDS + 255) / 256, 256, s, args));
			REQUIRE_CU(cuStreamSynchronize(s));
			for (uint32_t i = 0; i < WORDS; i++)
				want[i] = want[i] * 5 + 9;
		}
		CMP_U32(m, want, WORDS, "managed memory after kernels whose arguments were in managed memory");
		REQUIRE_CU(cuMemFree(ap));
	}

	random_steps(s, &rng, 600);
	attached();
	host_function(s);

	/* Threads, each with its own allocation and stream. */
	for (uintptr_t i = 0; i < THREADS; i++)
		REQUIRE(pthread_create(&th[i], NULL, turns, (void *)i) == 0, "pthread_create");
	for (int i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);

	/* Freed while the CPU holds part of it; an interior pointer refused. */
	m[1] = 1;
	CHECK_CU(cuMemFree(p + 4096), CUDA_ERROR_INVALID_VALUE);
	REQUIRE_CU(cuMemFree(p));
	REQUIRE_CU(cuMemFree(d));
	REQUIRE_CU(cuStreamDestroy(s));
	free(want);
	free(back);
	return t_finish();
}
