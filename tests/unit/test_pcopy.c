// SPDX-License-Identifier: MIT
/*
 * The client library's parallel memcpy (src/client/pcopy.c), with several
 * threads forced on whatever machine runs it: every byte of copies of many
 * sizes — odd ones especially, around the parallel threshold and the
 * slicing boundaries — must arrive, and no byte beyond the end may be
 * touched.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client/client.h"

#include "../check.h"

static int run(const char *threads)
{
	static const size_t sizes[] = {
		0, 1, 63, 64, 65, 4095, 256 * 1024 - 1, 256 * 1024, 256 * 1024 + 1, 1048576, 1048579,
		2 * 1048576 - 3, 2 * 1048576, 2 * 1048576 + 63, 3 * 1048576 + 7, 8 * 1048576 + 5,
	};
	size_t max = 8 * 1048576 + 64 + 64;
	uint8_t *src = malloc(max), *dst = malloc(max);
	uint64_t x = 0x243f6a8885a308d3ull;

	if (!src || !dst)
		return 1;
	/* Before the pool starts: several helpers even on a small machine. */
	setenv("OPENMPS_COPY_THREADS", threads, 1);
	for (size_t i = 0; i < max; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		src[i] = (uint8_t)x | 1;
	}
	for (int round = 0; round < 3; round++) {
		for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
			size_t n = sizes[k], off = (size_t)round * 8;

			memset(dst, 0, max);
			mps__pcopy(dst + off, src + off, n);
			size_t at = n, end = off + n;

			if (memcmp(dst + off, src + off, n))
				for (at = 0; dst[off + at] == src[off + at]; at++)
					;
			CHECK(at == n, "%zu bytes at offset %zu: byte %zu differs", n, off, at);
			while (end < off + n + 64 && end < max && !dst[end])
				end++;
			CHECK(end == off + n + 64 || end == max, "%zu bytes: wrote past the end (byte %zu)", n, end - off);
		}
	}
	free(src);
	free(dst);
	return check_failures() ? 1 : 0;
}

/* Each thread count in its own process: the pool is made once per process. */
int main(void)
{
	static const char *const counts[] = { "1", "2", "3", "4", "5", "8" };

	for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
		pid_t pid = fork();
		int st;

		if (pid == 0)
			_exit(run(counts[i]));
		waitpid(pid, &st, 0);
		CHECK(WIFEXITED(st) && !WEXITSTATUS(st), "failed with %s threads", counts[i]);
	}
	return check_finish("test_pcopy");
}
