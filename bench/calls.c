// SPDX-License-Identifier: MIT
/*
 * calls launch|sync|spin COUNT [SERVER_PID]
 *
 * What one forwarded call costs the server that forwards it. The client
 * makes COUNT calls of one kind on the default stream:
 *   launch  COUNT asynchronous launches of the empty kernel, then one
 *           cuCtxSynchronize (COUNT + 1 calls)
 *   sync    COUNT times a launch and a cuCtxSynchronize (2 * COUNT calls)
 *   spin    COUNT times a launch of a one-block kernel that spins
 *           $CALLS_SPIN_CYCLES clock cycles (default 200000, ~100 µs on an
 *           H100 or H200) and a cuCtxSynchronize (2 * COUNT calls): what a
 *           wait that outlasts the polling costs
 * and reads SERVER_PID's CPU time (user + system, all its threads, from
 * /proc/SERVER_PID/stat) before and after. Prints:
 *   calls=N                   the calls made in the timed section
 *   wall_us_per_call          the client's wall time per call
 *   client_cpu_us_per_call    the client's own CPU time per call
 *   server_cpu_us_per_call    the server's CPU time per call (only with a
 *                             SERVER_PID other than 0)
 * and each of the three also per launch (+ synchronize), as *_per_iter.
 * Natively there is no server: the two client figures alone are printed.
 * The setup (context, module, a warm-up of 1000 launches) happens before
 * the first reading, so only the calls themselves are counted. The
 * server's clock ticks are 10 ms, so COUNT should make the run last a good
 * fraction of a second.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "bench.h"

static CUfunction empty, spin;
static long long spin_cycles = 200000;
static CUdeviceptr spin_out;

static void launch(void)
{
	B_CHECK(cuLaunchKernel(empty, 1, 1, 1, 1, 1, 1, 0, 0, NULL, NULL));
}

static void launch_spin(void)
{
	void *args[] = { &spin_cycles, &spin_out };

	B_CHECK(cuLaunchKernel(spin, 1, 1, 1, 128, 1, 1, 0, 0, args, NULL));
}

/* utime + stime of a process in seconds, from /proc/PID/stat; -1 if unreadable. */
static double proc_cpu_s(long pid)
{
	char path[64], buf[4096], *p;
	unsigned long long ut, st;
	size_t got;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	got = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[got] = '\0';
	/* The command name may hold spaces and parentheses: fields are counted
	 * after the last ')'. utime and stime are fields 14 and 15, that is the
	 * 12th and 13th after it. */
	p = strrchr(buf, ')');
	if (!p || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return -1;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static double self_cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

int main(int argc, char **argv)
{
	double t0, t1, c0, c1, s0 = 0, s1 = 0;
	long count, pid = 0, calls;
	int sync_each, spinning = 0;
	const char *cyc = getenv("CALLS_SPIN_CYCLES");
	void (*one)(void) = launch;
	CUcontext ctx;
	CUmodule mod;

	if (argc != 3 && argc != 4) {
		fprintf(stderr, "usage: %s launch|sync|spin COUNT [SERVER_PID]\n", argv[0]);
		return 2;
	}
	if (strcmp(argv[1], "launch") == 0) {
		sync_each = 0;
	} else if (strcmp(argv[1], "sync") == 0) {
		sync_each = 1;
	} else if (strcmp(argv[1], "spin") == 0) {
		sync_each = spinning = 1;
		one = launch_spin;
	} else {
		b_die("unknown kind '%s' (launch, sync or spin)", argv[1]);
	}
	if (cyc && *cyc)
		spin_cycles = atoll(cyc);
	if (spin_cycles <= 0)
		b_die("CALLS_SPIN_CYCLES must be positive");
	count = atol(argv[2]);
	if (argc == 4)
		pid = atol(argv[3]);
	if (count <= 0 || pid < 0)
		b_die("COUNT must be positive and SERVER_PID a pid or 0");

	b_setup(&ctx);
	mod = b_module();
	B_CHECK(cuModuleGetFunction(&empty, mod, "empty"));
	B_CHECK(cuModuleGetFunction(&spin, mod, "spin"));
	B_CHECK(cuMemAlloc(&spin_out, 4096 * sizeof(int)));
	for (int i = 0; i < 1000; i++)
		launch();
	if (spinning)
		launch_spin();
	B_CHECK(cuCtxSynchronize());

	if (pid > 0 && (s0 = proc_cpu_s(pid)) < 0)
		b_die("cannot read /proc/%ld/stat", pid);
	c0 = self_cpu_s();
	t0 = b_now();
	for (long i = 0; i < count; i++) {
		one();
		if (sync_each)
			B_CHECK(cuCtxSynchronize());
	}
	if (!sync_each)
		B_CHECK(cuCtxSynchronize());
	t1 = b_now();
	c1 = self_cpu_s();
	if (pid > 0 && (s1 = proc_cpu_s(pid)) < 0)
		b_die("cannot read /proc/%ld/stat after the calls (did the server exit?)", pid);

	calls = sync_each ? 2 * count : count + 1;
	printf("calls=%ld\n", calls);
	printf("wall_us_per_call=%.3f\n", (t1 - t0) / (double)calls * 1e6);
	printf("wall_us_per_iter=%.3f\n", (t1 - t0) / (double)count * 1e6);
	printf("client_cpu_us_per_call=%.3f\n", (c1 - c0) / (double)calls * 1e6);
	printf("client_cpu_us_per_iter=%.3f\n", (c1 - c0) / (double)count * 1e6);
	if (pid > 0) {
		printf("server_cpu_us_per_call=%.3f\n", (s1 - s0) / (double)calls * 1e6);
		printf("server_cpu_us_per_iter=%.3f\n", (s1 - s0) / (double)count * 1e6);
	}
	B_CHECK(cuMemFree(spin_out));
	B_CHECK(cuModuleUnload(mod));
	return 0;
}
