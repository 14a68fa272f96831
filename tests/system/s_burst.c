// SPDX-License-Identifier: MIT
/*
 * Many clients arriving at once: 128 processes connect in the same instant
 * (they wait on a pipe, then all go), each allocates, fills and reads back
 * its own memory, and holds its connection until every other one has done
 * the same, so all of them are connected together. Every one must be served:
 * none refused because the daemon's hand-over channel or the server's accept
 * path was briefly full.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../cuda/common.h"

#define NPROC 128

static int client(int id, int gun, int done, int hold)
{
	uint32_t want = 0x5a000000u + (uint32_t)id, got[256];
	CUdeviceptr d;
	char c;

	if (read(gun, &c, 1) != 1)
		return T_FAIL;
	t_primary(t_device());
	REQUIRE_CU(cuMemAlloc(&d, sizeof(got)));
	REQUIRE_CU(cuMemsetD32(d, want, 256));
	REQUIRE_CU(cuMemcpyDtoH(got, d, sizeof(got)));
	for (int i = 0; i < 256; i++)
		REQUIRE(got[i] == want, "client %d read %#x, wrote %#x", id, got[i], want);
	if (write(done, "d", 1) != 1 || read(hold, &c, 1) != 1)
		return T_FAIL;
	REQUIRE_CU(cuMemFree(d));
	return T_PASS;
}

int main(int argc, char **argv)
{
	int gun[2], done[2], hold[2], ok = 0, failed = 0;
	pid_t pids[NPROC];
	char c;

	t_init(argc, argv);
	if (pipe(gun) < 0 || pipe(done) < 0 || pipe(hold) < 0)
		return T_FAIL;
	for (int i = 0; i < NPROC; i++) {
		pids[i] = fork();
		if (pids[i] == 0)
			_exit(client(i, gun[0], done[1], hold[0]));
	}
	close(done[1]);
	for (int i = 0; i < NPROC; i++)
		if (write(gun[1], "g", 1) != 1)
			return T_FAIL;
	/* Wait until every client is connected and verified (or gone). */
	while (ok < NPROC && read(done[0], &c, 1) == 1)
		ok++;
	for (int i = 0; i < NPROC; i++)
		if (write(hold[1], "h", 1) != 1)
			return T_FAIL;
	for (int i = 0; i < NPROC; i++) {
		int st;

		waitpid(pids[i], &st, 0);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
			failed++;
	}
	printf("s_burst: %d of %d clients connected at once and verified, %d failed\n", ok, NPROC, failed);
	return ok == NPROC && !failed ? T_PASS : T_FAIL;
}
