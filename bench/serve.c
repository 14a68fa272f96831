// SPDX-License-Identifier: MIT
/*
 * serve NPROC SECONDS [LAUNCHES]
 *
 * A serving loop without a framework: NPROC processes each answer requests
 * as fast as they can for SECONDS, all starting together. A request is what
 * a batch-1 inference step asks of the driver: its input (4 KiB from
 * pageable memory) uploaded, LAUNCHES (default 14) small kernels in a chain
 * on one stream, the result copied back into pageable memory and the
 * stream synchronized; then the result is checked on the host. With no
 * Python in the loop the client's own CPU a request is a few microseconds,
 * so what it shows is the cost of the way to the GPU and back: the
 * driver's under native and NVIDIA MPS, the client, ring and server's
 * under openmps.
 *
 * The chain: y = 0, then LAUNCHES saxpy kernels y += a_k * x with a_k = 1
 * or 2 and x small integers that vary by request, so every result is exact
 * in float and wrong values (a lost launch, a stale copy) are caught.
 *
 * Prints req_per_s (all processes), p50_us / p99_us (request latency over
 * every request of every process), cpu_us_per_req (the clients' user +
 * system CPU a request), per_proc_min (the slowest process's share of
 * the mean), first_us (the slowest of the processes' first requests) and
 * first_parts_us, that request's upload call / memset and launches /
 * download and synchronize.
 * With SERVE_IDLE_MS set, the processes sit idle that long between their
 * warm-up and the window, all together, as a service does between bursts:
 * first_us is then a burst's first request after a quiet spell. With
 * SERVE_GAP_US set, each process sleeps between its requests, a random
 * time between half and one and a half that much (its own sequence), as
 * a lightly loaded service waits for its next request: every request then
 * comes after a quiet spell, and p50_us / p99_us say what that costs.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

#define N_ELEMS 1024
#define LAT_MAX (1 << 20)

struct report {
	double reqs;
	double seconds;
	double cpu_s;
	double first;   /* the first request's seconds */
	double first_parts[3];   /* and its parts (parts[]) */
	unsigned int nlat;
};

static double cpu_seconds(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
	       (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* Where the request's time went: the upload's call, the memset and the
 * launches, the download and the synchronize (seconds each). */
static double parts[3];

static void request(CUfunction saxpy, CUstream s, CUdeviceptr dx, CUdeviceptr dy,
		    float *in, float *out, int launches, unsigned long k)
{
	int n = N_ELEMS;
	float sum = 0;
	double t0;

	for (int i = 0; i < n; i++)
		in[i] = (float)((i + k) % 61);
	t0 = b_now();
	B_CHECK(cuMemcpyHtoDAsync(dx, in, n * sizeof(float), s));
	parts[0] = b_now() - t0;
	B_CHECK(cuMemsetD32Async(dy, 0, n, s));
	for (int l = 0; l < launches; l++) {
		float a = (float)(1 + ((k + l) & 1));
		void *args[] = { &a, &dx, &dy, &n };

		sum += a;
		B_CHECK(cuLaunchKernel(saxpy, n / 256, 1, 1, 256, 1, 1, 0, s, args, NULL));
	}
	parts[1] = b_now() - t0 - parts[0];
	B_CHECK(cuMemcpyDtoHAsync(out, dy, n * sizeof(float), s));
	B_CHECK(cuStreamSynchronize(s));
	parts[2] = b_now() - t0 - parts[0] - parts[1];
	for (int i = 0; i < n; i++)
		if (out[i] != sum * in[i])
			b_die("request %lu: y[%d] = %g, want %g", k, i, out[i], sum * in[i]);
}

/* Sleeps us microseconds, however many. */
static void sleep_us(long us)
{
	nanosleep(&(struct timespec){ .tv_sec = us / 1000000, .tv_nsec = us % 1000000 * 1000 }, NULL);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

struct job {
	int lat_fd;
	double seconds;
	int launches;
	long idle_ms;
	long gap_us;
};

static void child(int go, int out, void *arg)
{
	const struct job *job = arg;
	int lat_fd = job->lat_fd, launches = job->launches;
	double seconds = job->seconds;
	CUcontext ctx;
	CUmodule mod;
	CUfunction saxpy;
	CUstream s;
	CUdeviceptr dx, dy;
	static float in[N_ELEMS], res[N_ELEMS];
	static double lat[LAT_MAX];
	struct report r = { 0 };
	unsigned long k = 0;
	unsigned int seed = (unsigned int)getpid();
	double t0, t, c0;
	char c;

	b_setup(&ctx);
	mod = b_module();
	B_CHECK(cuModuleGetFunction(&saxpy, mod, "saxpy"));
	B_CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	B_CHECK(cuMemAlloc(&dx, sizeof(in)));
	B_CHECK(cuMemAlloc(&dy, sizeof(res)));
	for (int i = 0; i < 20; i++)   /* warm-up */
		request(saxpy, s, dx, dy, in, res, launches, k++);
	if (read(go, &c, 1) != 1)
		b_die("no start signal");
	if (job->idle_ms > 0)
		sleep_us(job->idle_ms * 1000);
	c0 = cpu_seconds();
	t0 = t = b_now();
	do {
		double a = t;

		request(saxpy, s, dx, dy, in, res, launches, k++);
		t = b_now();
		if (!r.nlat)
			memcpy(r.first_parts, parts, sizeof(parts));
		if (r.nlat < LAT_MAX)
			lat[r.nlat++] = t - a;
		r.reqs++;
		if (job->gap_us > 0) {
			sleep_us(job->gap_us / 2 + rand_r(&seed) % (job->gap_us + 1));
			t = b_now();
		}
	} while (t - t0 < seconds);
	r.seconds = t - t0;
	r.first = lat[0];
	r.cpu_s = cpu_seconds() - c0;
	if (write(out, &r, sizeof(r)) != sizeof(r) ||
	    write(lat_fd, lat, r.nlat * sizeof(double)) != (ssize_t)(r.nlat * sizeof(double)))
		b_die("cannot report");
	B_CHECK(cuMemFree(dx));
	B_CHECK(cuMemFree(dy));
	B_CHECK(cuStreamDestroy(s));
	exit(0);
}

int main(int argc, char **argv)
{
	int nproc = argc > 1 ? atoi(argv[1]) : 1, res, failed = 0;
	double seconds = argc > 2 ? atof(argv[2]) : 2.0, rate = 0, min = 0, cpu = 0, reqs = 0, first = 0;
	const char *idle = getenv("SERVE_IDLE_MS"), *gap = getenv("SERVE_GAP_US");
	double fparts[3] = { 0 };
	int launches = argc > 3 ? atoi(argv[3]) : 14;
	double *all = NULL;
	size_t nall = 0;
	char tmpl[] = "/tmp/serve-lat.XXXXXX";
	int lat_fd = mkstemp(tmpl);

	if (nproc < 1 || nproc > 1024 || seconds <= 0 || launches < 1 || launches > 1000)
		b_die("usage: serve NPROC SECONDS [LAUNCHES <= 1000]");
	if (lat_fd < 0)
		b_die("cannot create %s", tmpl);
	unlink(tmpl);
	/* One file for every child's latencies: each write appends whole. */
	if (fcntl(lat_fd, F_SETFL, O_APPEND) < 0)
		b_die("fcntl");
	res = b_start_children(nproc, child, &(struct job){ lat_fd, seconds, launches, idle ? atol(idle) : 0,
							 gap ? atol(gap) : 0 });
	for (int i = 0; i < nproc; i++) {
		struct report r;

		if (read(res, &r, sizeof(r)) != sizeof(r)) {
			failed++;
			continue;
		}
		if (r.first > first) {
			first = r.first;
			memcpy(fparts, r.first_parts, sizeof(fparts));
		}
		rate += r.reqs / r.seconds;
		reqs += r.reqs;
		cpu += r.cpu_s;
		if (!min || r.reqs / r.seconds < min)
			min = r.reqs / r.seconds;
	}
	while (wait(NULL) > 0)
		;
	if (failed)
		b_die("%d of %d processes failed", failed, nproc);
	{
		off_t end = lseek(lat_fd, 0, SEEK_END);

		nall = end > 0 ? (size_t)end / sizeof(double) : 0;
		all = malloc((nall ? nall : 1) * sizeof(double));
		if (!all || pread(lat_fd, all, nall * sizeof(double), 0) != (ssize_t)(nall * sizeof(double)))
			b_die("cannot read the latencies");
		qsort(all, nall, sizeof(double), cmp_double);
	}
	printf("req_per_s=%.0f\np50_us=%.1f\np99_us=%.1f\ncpu_us_per_req=%.2f\nper_proc_min=%.2f\nfirst_us=%.1f\n",
	       rate, nall ? all[nall / 2] * 1e6 : 0, nall ? all[nall * 99 / 100] * 1e6 : 0,
	       reqs ? cpu / reqs * 1e6 : 0, min / (rate / nproc), first * 1e6);
	printf("first_parts_us=%.1f/%.1f/%.1f\n", fparts[0] * 1e6, fparts[1] * 1e6, fparts[2] * 1e6);
	free(all);
	return 0;
}
