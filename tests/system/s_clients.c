// SPDX-License-Identifier: MIT
/*
 * Several client processes at once, each with work whose result depends on
 * every one of its operations running, in order, on its own data: a chain
 * of affine_u32 launches with per-process constants on its own stream and on
 * the legacy stream, pinned and pageable copies, then a check against the
 * same chain computed on the host. The processes start together (a pipe is
 * the starting gun) so their work really overlaps in the server.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../cuda/common.h"

#define NPROC  6
#define N      4096
#define ROUNDS 40

static int child(int id, int gun)
{
	uint64_t rng = t_rng((unsigned int)id);
	uint32_t *host, *pinned, want[N];
	CUdeviceptr d;
	CUmodule mod;
	CUfunction affine;
	CUstream s;
	char go;
	int n = N;

	t_primary(t_device());
	/* Under openmps (with-openmps.sh names the server's driver) each
	 * client says it is served, not passed through to a driver. */
	if (getenv("OPENMPS_DRIVER")) {
		int (*mode)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "openmps_client_mode");

		REQUIRE(mode && mode() == 2, "client %d is not served by the server (mode %d)", id, mode ? mode() : -1);
	}
	mod = t_module();
	affine = t_func(mod, "affine_u32");
	REQUIRE_CU(cuStreamCreate(&s, 0));
	REQUIRE_CU(cuMemAlloc(&d, N * 4));
	REQUIRE_CU(cuMemAllocHost((void **)&pinned, N * 4));
	host = malloc(N * 4);
	REQUIRE(host, "out of memory");
	if (read(gun, &go, 1) != 1)
		return T_FAIL;

	for (int round = 0; round < ROUNDS; round++) {
		CUstream st = round % 2 ? s : NULL;   /* alternate own and legacy stream */

		t_fill_u32(host, N, &rng);
		memcpy(want, host, sizeof(want));
		REQUIRE_CU(cuMemcpyHtoDAsync(d, host, N * 4, st));
		for (int k = 0; k < 8; k++) {
			uint32_t mul = (uint32_t)t_rand(&rng) | 1, add = (uint32_t)t_rand(&rng);
			void *args[] = { &d, &mul, &add, &n };

			for (int i = 0; i < N; i++)
				want[i] = want[i] * mul + add;
			REQUIRE_CU(t_launch(affine, N / 256, 256, st, args));
		}
		memset(pinned, 0, N * 4);
		REQUIRE_CU(cuMemcpyDtoHAsync(pinned, d, N * 4, st));
		REQUIRE_CU(cuStreamSynchronize(st));
		if (CMP_U32(pinned, want, N, "affine chain"))
			return T_FAIL;
	}
	REQUIRE_CU(cuMemFreeHost(pinned));
	REQUIRE_CU(cuMemFree(d));
	REQUIRE_CU(cuStreamDestroy(s));
	free(host);
	return check_failures() ? T_FAIL : T_PASS;
}

int main(int argc, char **argv)
{
	int gun[2], failed = 0;
	pid_t pids[NPROC];

	t_init(argc, argv);
	if (pipe(gun) < 0)
		return T_FAIL;
	for (int i = 0; i < NPROC; i++) {
		pids[i] = fork();
		if (pids[i] == 0) {
			close(gun[1]);
			_exit(child(i, gun[0]));
		}
	}
	close(gun[0]);
	sleep(1);   /* let every child connect and set up */
	for (int i = 0; i < NPROC; i++)
		if (write(gun[1], "g", 1) != 1)
			return T_FAIL;
	for (int i = 0; i < NPROC; i++) {
		int st;

		waitpid(pids[i], &st, 0);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			fprintf(stderr, "s_clients: client %d failed (status %#x)\n", i, st);
			failed++;
		}
	}
	printf("s_clients: %d of %d concurrent clients correct\n", NPROC - failed, NPROC);
	return failed ? T_FAIL : T_PASS;
}
