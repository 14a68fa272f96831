// SPDX-License-Identifier: MIT
/*
 * trips NPROC SECONDS [BYTES]
 *
 * Many busy clients at once: NPROC processes each do synchronous BYTES-byte
 * (default 4) host-to-device copies from pageable memory, as fast as they
 * can, for SECONDS, all starting together (a pipe is the starting gun). What
 * it prints:
 *   trips_per_s   round trips per second of all processes together
 *   per_proc_min  the slowest process's share, relative to the mean (1.0:
 *                 every process got the same; a starved one shows here)
 * Against a single process it shows whether clients that outnumber the
 * cores collapse the server, or share it.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

struct job {
	double seconds;
	size_t bytes;
};

static void child(int go, int out, void *arg)
{
	const struct job *job = arg;
	double seconds = job->seconds;
	size_t bytes = job->bytes;
	CUcontext ctx;
	CUdeviceptr d;
	char buf[4096] = { 1, 2, 3, 4 }, c;
	unsigned long n = 0;
	double t0, t;

	b_setup(&ctx);
	B_CHECK(cuMemAlloc(&d, bytes));
	B_CHECK(cuMemcpyHtoD(d, buf, bytes));   /* warm */
	if (read(go, &c, 1) != 1)
		b_die("no start signal");
	t0 = b_now();
	do {
		for (int i = 0; i < 64; i++)
			B_CHECK(cuMemcpyHtoD(d, buf, bytes));
		n += 64;
		t = b_now();
	} while (t - t0 < seconds);
	{
		double rate = n / (t - t0);

		if (write(out, &rate, sizeof(rate)) != sizeof(rate))
			b_die("cannot report");
	}
	B_CHECK(cuMemFree(d));
	exit(0);
}

int main(int argc, char **argv)
{
	int nproc = argc > 1 ? atoi(argv[1]) : 1, res, failed = 0;
	double seconds = argc > 2 ? atof(argv[2]) : 2.0, total = 0, min = 0;
	size_t bytes = argc > 3 ? (size_t)atol(argv[3]) : 4;

	if (nproc < 1 || nproc > 4096 || seconds <= 0 || bytes < 1 || bytes > 4096)
		b_die("usage: trips NPROC SECONDS [BYTES <= 4096]");
	res = b_start_children(nproc, child, &(struct job){ seconds, bytes });
	for (int i = 0; i < nproc; i++) {
		double r;

		if (read(res, &r, sizeof(r)) != sizeof(r)) {
			failed++;
			continue;
		}
		total += r;
		if (!min || r < min)
			min = r;
	}
	while (wait(NULL) > 0)
		;
	if (failed)
		b_die("%d of %d processes failed", failed, nproc);
	printf("trips_per_s=%.0f\nper_proc_min=%.2f\n", total, min / (total / nproc));
	return 0;
}
