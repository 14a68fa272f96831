// SPDX-License-Identifier: MIT
/*
 * One client's flood of launches must not starve another's synchronous
 * calls. A flooder queues FLOOD empty-kernel launches as fast as its ring
 * takes them (its ring is full for the whole flood); once it is under way a
 * second client makes TRIPS synchronous round trips (a launch of its own and
 * a 4-byte copy back, checked). Served in turns, the second client's trips
 * finish while the flood is still going; served "until the ring is empty",
 * they would wait for the whole flood. Which of the two finishes first is
 * what is checked — an order, not a time. The flood stops early once the
 * trips are done, so its length is only a bound: ten times what a loaded
 * two-CPU machine needs for the trips when served in turns, and the test
 * stays short where it passes. Run with OPENMPS_THREADS=1 too
 * (tests/system/sched.sh) so that one service thread must share itself.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../cuda/common.h"

#define FLOOD 4000000
#define TRIPS 200

static int flooder(int started, int order, int stop)
{
	CUfunction empty;
	CUmodule mod;
	char c;

	t_primary(t_device());
	mod = t_module();
	REQUIRE_CU(cuModuleGetFunction(&empty, mod, "empty"));
	for (int i = 0; i < FLOOD; i++) {
		REQUIRE_CU(cuLaunchKernel(empty, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
		if (i == 4096 && write(started, "s", 1) != 1)
			return T_FAIL;
		if (i % 4096 == 4095 && read(stop, &c, 1) == 1)
			break;
	}
	REQUIRE_CU(cuCtxSynchronize());
	if (write(order, "F", 1) != 1)
		return T_FAIL;
	return T_PASS;
}

static int tripper(int started, int order, int stop)
{
	CUfunction store;
	CUdeviceptr d;
	CUmodule mod;
	char c;

	t_primary(t_device());
	mod = t_module();
	REQUIRE_CU(cuModuleGetFunction(&store, mod, "store_at"));
	REQUIRE_CU(cuMemAlloc(&d, 4));
	if (read(started, &c, 1) != 1)
		return T_FAIL;
	for (unsigned int i = 0; i < TRIPS; i++) {
		unsigned int v = 0x7100u + i * 7u, got = 0;
		void *args[] = { &d, &v };

		REQUIRE_CU(cuLaunchKernel(store, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
		REQUIRE_CU(cuMemcpyDtoH(&got, d, 4));
		REQUIRE(got == v, "trip %u read %#x, stored %#x", i, got, v);
	}
	if (write(order, "T", 1) != 1 || write(stop, "t", 1) != 1)
		return T_FAIL;
	REQUIRE_CU(cuMemFree(d));
	return T_PASS;
}

int main(int argc, char **argv)
{
	int started[2], order[2], stop[2], status, failed = 0;
	char first = 0, second = 0;
	pid_t a, b;

	t_init(argc, argv);
	if (pipe(started) < 0 || pipe(order) < 0 || pipe2(stop, O_NONBLOCK) < 0)
		return T_FAIL;
	a = fork();
	if (a == 0)
		_exit(flooder(started[1], order[1], stop[0]));
	b = fork();
	if (b == 0)
		_exit(tripper(started[0], order[1], stop[1]));
	close(order[1]);
	if (read(order[0], &first, 1) != 1 || read(order[0], &second, 1) != 1)
		failed = 1;
	while (wait(&status) > 0)
		if (!WIFEXITED(status) || WEXITSTATUS(status) != T_PASS)
			failed = 1;
	REQUIRE(!failed, "a client failed");
	REQUIRE(first == 'T' && second == 'F',
		"the round trips finished %s the flood of %d launches", first == 'F' ? "after" : "with", FLOOD);
	return T_PASS;
}
