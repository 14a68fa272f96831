// SPDX-License-Identifier: MIT
/*
 * The client library's parallel memcpy (src/client/pcopy.c), with several
 * threads forced on whatever machine runs it: every byte of copies of many
 * sizes — odd ones especially, around the parallel threshold and the
 * slicing boundaries — must arrive, and no byte beyond the end may be
 * touched. The same for mps__pwrite_parallel into a memfd at an offset
 * (whole and partial pages), and a write to a descriptor that is not open
 * must give its error.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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
	/* Into a file: each size at an offset of a page and a few bytes, read
	 * back; the bytes before and after stay zero. */
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		size_t n = sizes[k];
		off_t at = 4096 + (off_t)(k % 3) * 8;
		int fd = memfd_create("test_pcopy", MFD_CLOEXEC);
		size_t got;

		CHECK(fd >= 0 && ftruncate(fd, (off_t)max + 8192) == 0, "memfd: %s", strerror(errno));
		if (fd < 0)
			break;
		CHECK(mps__pwrite_parallel(fd, src, at, n) == 0, "pwrite of %zu bytes at %lld", n, (long long)at);
		memset(dst, 0xee, max);
		got = (size_t)pread(fd, dst, n + 64, at - 64);
		CHECK(got == n + 64, "read back %zu of %zu bytes", got, n + 64);
		for (size_t i = 0; i < 64; i++)
			CHECK(!dst[i], "%zu bytes: byte %zu before the offset written", n, i);
		CHECK(!memcmp(dst + 64, src, n), "%zu bytes at %lld: not what was written", n, (long long)at);
		got = (size_t)pread(fd, dst, 64, at + (off_t)n);
		CHECK(got == 64, "read after: %zu", got);
		for (size_t i = 0; i < 64; i++)
			CHECK(!dst[i], "%zu bytes: byte %zu past the end written", n, i);
		close(fd);
	}
	CHECK(mps__pwrite_parallel(-1, src, 0, 4 * 1048576) == -EBADF, "a bad descriptor's error");
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
