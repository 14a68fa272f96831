// SPDX-License-Identifier: MIT
/*
 * A memory pool shared between two client processes, as CUDA's
 * stream-ordered allocator does it between processes: the exporter makes a
 * pool with the POSIX handle type, sends its file descriptor over a unix
 * socket, allocates from it, writes random words there and sends the
 * pointer's export data; the importer imports the pool and the pointer,
 * checks the words, runs a kernel over them, and frees its view; the
 * exporter then sees the kernel's result. The exporter frees its
 * allocation while the importer still holds a second one, which stays
 * readable until the importer frees it; the exporter destroys the pool
 * while the importer still has it, and the importer then destroys its
 * copy. Also the errors: a pool made without a handle type
 * refuses to export; an allocation from an imported pool is refused; an
 * export data that names nothing, and a pool fd that is not one, are
 * refused.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../cuda/common.h"
#include "common/sock.h"

#define WORDS (1u << 18)   /* 1 MiB */

struct ptrs {
	CUmemPoolPtrExportData a, b;
	uint32_t mul, add;
};

static void put(int fd, const void *p, size_t n)
{
	REQUIRE(write(fd, p, n) == (ssize_t)n, "socket write");
}

static void get(int fd, void *p, size_t n)
{
	size_t done = 0;

	while (done < n) {
		ssize_t k = read(fd, (char *)p + done, n - done);

		REQUIRE(k > 0, "socket read");
		done += (size_t)k;
	}
}

static CUmemoryPool make_pool(CUdevice dev, CUmemAllocationHandleType types)
{
	CUmemPoolProps pp;
	CUmemoryPool pool;

	memset(&pp, 0, sizeof(pp));
	pp.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
	pp.handleTypes = types;
	pp.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	pp.location.id = dev;
	REQUIRE_CU(cuMemPoolCreate(&pool, &pp));
	return pool;
}

static int exporter(int sock)
{
	uint64_t rng = t_rng(1);
	uint32_t *in = malloc(WORDS * 4), *out = malloc(WORDS * 4);
	CUdevice dev = t_device();
	CUmemPoolPtrExportData junk;
	CUmemoryPool pool, plain;
	CUdeviceptr a, b;
	struct ptrs p;
	CUstream s;
	int fd = -1;
	char c;

	REQUIRE(in && out, "out of memory");
	t_primary(dev);
	REQUIRE_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));

	/* No handle type: nothing to export. */
	plain = make_pool(dev, CU_MEM_HANDLE_TYPE_NONE);
	CHECK(cuMemPoolExportToShareableHandle(&fd, plain, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0) !=
		      CUDA_SUCCESS, "a pool made without a handle type was exported");
	REQUIRE_CU(cuMemAllocFromPoolAsync(&a, 4096, plain, s));
	REQUIRE_CU(cuStreamSynchronize(s));
	CHECK(cuMemPoolExportPointer(&junk, a) != CUDA_SUCCESS, "a pointer of an unshareable pool was exported");
	REQUIRE_CU(cuMemFreeAsync(a, s));
	REQUIRE_CU(cuMemPoolDestroy(plain));

	pool = make_pool(dev, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
	REQUIRE_CU(cuMemPoolExportToShareableHandle(&fd, pool, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
	REQUIRE(fd >= 0, "the pool's fd is %d", fd);
	REQUIRE(mps_sock_send(sock, "p", 1, fd) == 1, "sending the pool's fd");
	close(fd);

	REQUIRE_CU(cuMemAllocFromPoolAsync(&a, WORDS * 4, pool, s));
	REQUIRE_CU(cuMemAllocFromPoolAsync(&b, WORDS * 4, pool, s));
	t_fill_u32(in, WORDS, &rng);
	REQUIRE_CU(cuMemcpyHtoDAsync(a, in, WORDS * 4, s));
	REQUIRE_CU(cuMemsetD32Async(b, 0x7e57u, WORDS, s));
	REQUIRE_CU(cuStreamSynchronize(s));
	memset(&p, 0, sizeof(p));
	REQUIRE_CU(cuMemPoolExportPointer(&p.a, a));
	REQUIRE_CU(cuMemPoolExportPointer(&p.b, b));
	p.mul = (uint32_t)t_rand(&rng) | 1;
	p.add = (uint32_t)t_rand(&rng);
	put(sock, &p, sizeof(p));
	put(sock, in, WORDS * 4);

	/* The importer ran its kernel over a. */
	get(sock, &c, 1);
	REQUIRE_CU(cuMemcpyDtoH(out, a, WORDS * 4));
	for (uint32_t i = 0; i < WORDS; i++)
		if (!CHECK(out[i] == in[i] * p.mul + p.add, "a[%u] = %#x after the importer's kernel", i, out[i]))
			break;

	/* Freed and destroyed here while the importer holds b and the pool. */
	REQUIRE_CU(cuMemFreeAsync(a, s));
	REQUIRE_CU(cuMemFreeAsync(b, s));
	REQUIRE_CU(cuStreamSynchronize(s));
	REQUIRE_CU(cuMemPoolDestroy(pool));
	put(sock, "f", 1);
	get(sock, &c, 1);   /* the importer is done */
	REQUIRE_CU(cuStreamDestroy(s));
	free(in);
	free(out);
	return check_failures() ? T_FAIL : T_PASS;
}

static int importer(int sock)
{
	uint32_t *in = malloc(WORDS * 4), *out = malloc(WORDS * 4);
	CUdevice dev = t_device();
	CUmemPoolPtrExportData bad;
	CUmemoryPool pool, again;
	CUdeviceptr a, b, x;
	CUfunction affine;
	CUstream s;
	struct ptrs p;
	int n = WORDS, fd = -1, junk;
	char c;

	REQUIRE(in && out, "out of memory");
	t_primary(dev);
	affine = t_func(t_module(), "affine_u32");
	REQUIRE_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	REQUIRE(mps_sock_recv(sock, &c, 1, &fd) == 1 && fd >= 0, "no pool fd came");

	/* An fd that is no pool's. */
	junk = dup(STDIN_FILENO);
	CHECK(cuMemPoolImportFromShareableHandle(&again, (void *)(uintptr_t)junk,
						 CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0) != CUDA_SUCCESS,
	      "an fd that is no pool's was imported");
	close(junk);
	REQUIRE_CU(cuMemPoolImportFromShareableHandle(&pool, (void *)(uintptr_t)fd,
						      CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
	close(fd);
	CHECK(cuMemAllocFromPoolAsync(&x, 4096, pool, s) != CUDA_SUCCESS, "an imported pool gave an allocation");

	get(sock, &p, sizeof(p));
	get(sock, in, WORDS * 4);
	memset(&bad, 0x5a, sizeof(bad));
	CHECK(cuMemPoolImportPointer(&x, pool, &bad) != CUDA_SUCCESS, "export data that names nothing was imported");
	REQUIRE_CU(cuMemPoolImportPointer(&a, pool, &p.a));
	REQUIRE_CU(cuMemPoolImportPointer(&b, pool, &p.b));
	REQUIRE_CU(cuMemcpyDtoH(out, a, WORDS * 4));
	CMP_U32(out, in, WORDS, "the exporter's words, read through the imported pointer");
	{
		void *args[] = { &a, &p.mul, &p.add, &n };

		REQUIRE_CU(t_launch(affine, WORDS / 256, 256, s, args));
	}
	REQUIRE_CU(cuStreamSynchronize(s));
	REQUIRE_CU(cuMemFreeAsync(a, s));   /* the view only */
	REQUIRE_CU(cuStreamSynchronize(s));
	put(sock, "k", 1);

	/* The exporter freed b and destroyed the pool: both still ours. */
	get(sock, &c, 1);
	REQUIRE_CU(cuMemcpyDtoH(out, b, WORDS * 4));
	for (uint32_t i = 0; i < WORDS; i++)
		if (!CHECK(out[i] == 0x7e57u, "b[%u] = %#x after the exporter freed it", i, out[i]))
			break;
	REQUIRE_CU(cuMemFree(b));
	REQUIRE_CU(cuMemPoolDestroy(pool));
	put(sock, "d", 1);
	REQUIRE_CU(cuStreamDestroy(s));
	free(in);
	free(out);
	return check_failures() ? T_FAIL : T_PASS;
}

int main(int argc, char **argv)
{
	int sv[2], st;
	pid_t e, i;

	t_init(argc, argv);
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0)
		return T_FAIL;
	e = fork();
	if (e == 0) {
		close(sv[1]);
		_exit(exporter(sv[0]));
	}
	i = fork();
	if (i == 0) {
		close(sv[0]);
		_exit(importer(sv[1]));
	}
	close(sv[0]);
	close(sv[1]);
	for (int k = 0; k < 2; k++) {
		pid_t p = wait(&st);

		if (!CHECK(WIFEXITED(st) && WEXITSTATUS(st) == T_PASS, "the %s ended with status %#x",
			   p == e ? "exporter" : "importer", st))
			kill(p == e ? i : e, SIGKILL);
	}
	return check_finish("s_poolshare");
}
