// SPDX-License-Identifier: MIT
//
// What the real driver keeps for good once a context has needed it, which
// a long-lived server shows as memory or threads it never gives back
// although nothing of a client's is left (tests/system/s_soak measures the
// server against a baseline; src/server/device.c and the soak's allowance
// follow from these answers). Each question runs in a fresh process with a
// primary context and prints one "keeps:" line: the threads and free device
// memory after each of four rounds, relative to before the first.
//
//   streams N      N streams alive at once (each with an event and a
//                  memset), all synchronized and destroyed; N rises and
//                  falls: the memory follows the most streams ever alive;
//   hostfn         a host function launched and synchronized (the driver
//                  starts the thread that runs host functions);
//   hostfn-pending a stream destroyed with its host function still queued;
//   wait-pending   a stream destroyed while it waits on another stream's
//                  unfinished work;
//   work-pending   a stream destroyed with memsets queued.
//
// Measured on an H200 with driver 580 (each question asked on its own
// before they were gathered here): 512 KiB for every stream of the highest
// count (16 streams: 8 MiB, 200: 108 MiB, never returned), one thread for
// host functions, 2 MiB at the first wait-pending destroy and nothing for
// the other cases. Exit 0 when every question ran.
//
//   cc -O2 -std=c11 -D_GNU_SOURCE -I/usr/local/cuda/include -o driver_keeps
//      tests/gpu/driver_keeps.c -L/usr/local/nvidia/lib64 -lcuda
//   ./driver_keeps
#include <cuda.h>
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define WORDS (1u << 20)

#define CHECK(x)                                                                   \
	do {                                                                           \
		CUresult r_ = (x);                                                         \
		if (r_ != CUDA_SUCCESS) {                                                  \
			fprintf(stderr, "driver_keeps: %s:%d: %s: %d\n", __FILE__, __LINE__, #x, (int)r_); \
			exit(1);                                                               \
		}                                                                          \
	} while (0)

static CUdeviceptr buf;

static int threads(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

static long long free_bytes(void)
{
	size_t f = 0, t = 0;

	CHECK(cuMemGetInfo(&f, &t));
	return (long long)f;
}

static void CUDA_CB slow(void *arg)
{
	(void)arg;
	usleep(200 * 1000);
}

/* Enough work to be unfinished when the next call comes. */
static void busy(CUstream s)
{
	for (unsigned int i = 0; i < 8; i++)
		CHECK(cuMemsetD32Async(buf, i, 64 * WORDS, s));
}

static void streams_alive(int n)
{
	CUstream s[256];
	CUevent e[256];

	for (int i = 0; i < n; i++) {
		CHECK(cuStreamCreate(&s[i], CU_STREAM_NON_BLOCKING));
		CHECK(cuEventCreate(&e[i], CU_EVENT_DISABLE_TIMING));
		CHECK(cuMemsetD32Async(buf + 4096ull * (unsigned int)i, (unsigned int)i, 1024, s[i]));
		CHECK(cuEventRecord(e[i], s[i]));
	}
	for (int i = 0; i < n; i++) {
		CHECK(cuStreamSynchronize(s[i]));
		CHECK(cuEventDestroy(e[i]));
		CHECK(cuStreamDestroy(s[i]));
	}
}

/* One round of question q (round i of four). */
static void round_of(const char *q, int i)
{
	static const int counts[] = { 16, 32, 16, 64 };
	CUstream s, s2;
	CUevent ev;

	if (!strcmp(q, "streams")) {
		streams_alive(counts[i]);
		return;
	}
	CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	if (!strcmp(q, "hostfn")) {
		CHECK(cuLaunchHostFunc(s, slow, NULL));
		CHECK(cuStreamSynchronize(s));
	} else if (!strcmp(q, "hostfn-pending")) {
		CHECK(cuLaunchHostFunc(s, slow, NULL));
	} else if (!strcmp(q, "wait-pending")) {
		CHECK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
		CHECK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
		busy(s2);
		CHECK(cuEventRecord(ev, s2));
		CHECK(cuStreamWaitEvent(s, ev, 0));
		CHECK(cuEventDestroy(ev));
		CHECK(cuStreamDestroy(s));
		CHECK(cuStreamSynchronize(s2));
		CHECK(cuStreamDestroy(s2));
		return;
	} else {
		busy(s);
	}
	CHECK(cuStreamDestroy(s));
}

static void ask(const char *q)
{
	CUcontext ctx;
	CUdevice dev;
	CUstream s;
	long long f0;
	int t0;

	CHECK(cuInit(0));
	CHECK(cuDeviceGet(&dev, 0));
	CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CHECK(cuCtxSetCurrent(ctx));
	CHECK(cuMemAlloc(&buf, 256ull * WORDS));
	/* What any first use grows to, before the baseline. */
	CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	busy(s);
	CHECK(cuStreamSynchronize(s));
	CHECK(cuStreamDestroy(s));
	usleep(200 * 1000);
	t0 = threads();
	f0 = free_bytes();
	printf("keeps: %-15s", q);
	for (int i = 0; i < 4; i++) {
		round_of(q, i);
		CHECK(cuCtxSynchronize());
		usleep(300 * 1000);
		printf(" | threads %+d, memory %+lld KiB", threads() - t0, (free_bytes() - f0) / 1024);
	}
	printf("\n");
}

int main(void)
{
	static const char *const questions[] = { "streams", "hostfn", "hostfn-pending", "wait-pending",
						  "work-pending" };
	int failed = 0;

	for (size_t i = 0; i < sizeof(questions) / sizeof(questions[0]); i++) {
		pid_t p;
		int st;

		fflush(stdout);
		p = fork();
		if (p == 0) {
			ask(questions[i]);
			fflush(stdout);
			_exit(0);
		}
		if (p < 0 || waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			failed = 1;
	}
	return failed;
}
