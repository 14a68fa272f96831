// SPDX-License-Identifier: MIT
/*
 * Interprocess memory and event handles between two client processes: an
 * exporter writes a pattern, runs a kernel over it and records an
 * interprocess event; an importer opens both handles, waits for the event
 * on its own stream, checks the kernel's result and writes a second
 * pattern, which the exporter then sees. The exporter frees its memory and
 * destroys its event while the importer still has them open: the memory
 * stays readable until the importer closes it. Also the errors: opening a
 * handle in the process that made it, a handle that names nothing, an
 * event that is not interprocess; an address inside an allocation gives
 * the allocation's handle. Runs on the real driver as well (the handles are its own).
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../cuda/common.h"

#define WORDS (1u << 20)   /* 4 MiB */

struct shared {
	CUipcMemHandle mem;
	CUipcEventHandle ev;
};

static void put(int fd, const void *p, size_t n)
{
	for (size_t done = 0; done < n;) {
		ssize_t k = write(fd, (const char *)p + done, n - done);

		REQUIRE(k > 0, "pipe write");
		done += (size_t)k;
	}
}

static void get(int fd, void *p, size_t n)
{
	for (size_t done = 0; done < n;) {
		ssize_t k = read(fd, (char *)p + done, n - done);

		REQUIRE(k > 0, "pipe read");
		done += (size_t)k;
	}
}

static int exporter(int to, int from)
{
	uint64_t rng = t_rng(1);
	uint32_t *in = malloc(WORDS * 4), *out = malloc(WORDS * 4);
	unsigned int mul = 3, add = 1;
	int n = WORDS;
	CUdeviceptr a;
	CUevent ev, plain;
	CUstream s;
	CUdeviceptr opened;
	struct shared sh;
	void *args[] = { &a, &mul, &add, &n };
	char c;

	REQUIRE(in && out, "malloc");
	t_primary(t_device());
	CHECK(cuMemAlloc(&a, WORDS * 4));
	CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CHECK(cuEventCreate(&ev, CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING));
	CHECK(cuEventCreate(&plain, CU_EVENT_DEFAULT));
	t_fill_u32(in, WORDS, &rng);
	CHECK(cuMemcpyHtoD(a, in, WORDS * 4));
	CHECK(cuIpcGetMemHandle(&sh.mem, a));
	CHECK(cuIpcGetEventHandle(&sh.ev, ev));
	{
		CUipcMemHandle inner;

		/* An address inside the allocation names the allocation too. */
		CHECK(cuIpcGetMemHandle(&inner, a + 4096));
	}
	CHECK_ERR(cuIpcGetEventHandle(&sh.ev, plain), CUDA_ERROR_INVALID_HANDLE);
	CHECK(cuIpcGetMemHandle(&sh.mem, a));
	CHECK(cuIpcGetEventHandle(&sh.ev, ev));
	{
		CUresult r = cuIpcOpenMemHandle(&opened, sh.mem, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);

		EXPECT(r != CUDA_SUCCESS, "a handle opened in the process that made it");
		printf("s_ipc: opening one's own handle: %s\n", t_errname(r));
	}
	/* A slow kernel, then the event: the importer must wait for it. */
	CHECK(t_launch(t_func(t_module(), "affine_u32"), WORDS / 256, 256, s, args));
	CHECK(cuEventRecord(ev, s));
	put(to, &sh, sizeof(sh));
	put(to, in, WORDS * 4);

	get(from, &c, 1);   /* the importer checked and wrote its pattern */
	CHECK(cuMemcpyDtoH(out, a, 4096));
	for (int i = 0; i < 1024; i++)
		if (!EXPECT(out[i] == 0x5a5a5a5au, "word %d after the importer's memset: %#x", i, out[i]))
			break;
	CHECK(cuStreamSynchronize(s));
	CHECK(cuMemFree(a));
	CHECK(cuEventDestroy(ev));
	put(to, "f", 1);
	get(from, &c, 1);   /* the importer closed everything */
	CHECK(cuEventDestroy(plain));
	CHECK(cuStreamDestroy(s));
	free(in);
	free(out);
	return t_finish();
}

static int importer(int to, int from)
{
	uint32_t *want = malloc(WORDS * 4), *out = malloc(WORDS * 4);
	CUipcMemHandle junk;
	CUdeviceptr b = 0, junk_p;
	CUevent ev;
	CUstream s;
	struct shared sh;
	char c;

	REQUIRE(want && out, "malloc");
	t_primary(t_device());
	CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	get(from, &sh, sizeof(sh));
	get(from, want, WORDS * 4);
	for (uint32_t i = 0; i < WORDS; i++)
		want[i] = want[i] * 3 + 1;
	memset(&junk, 0x77, sizeof(junk));
	EXPECT(cuIpcOpenMemHandle(&junk_p, junk, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) != CUDA_SUCCESS,
	       "a handle of 0x77 bytes opened");
	CHECK(cuIpcOpenMemHandle(&b, sh.mem, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
	CHECK(cuIpcOpenEventHandle(&ev, sh.ev));
	CHECK(cuStreamWaitEvent(s, ev, 0));
	CHECK(cuMemcpyDtoHAsync(out, b, WORDS * 4, s));
	CHECK(cuStreamSynchronize(s));
	CMP_U32(out, want, WORDS, "the exporter's memory after its kernel, read through the handle");
	CHECK(cuMemsetD32(b, 0x5a5a5a5au, 1024));
	CHECK(cuCtxSynchronize());   /* a memset of device memory may return before it is done */
	put(to, "o", 1);

	get(from, &c, 1);   /* the exporter freed its memory and destroyed its event */
	CHECK(cuMemcpyDtoH(out, b + 4096, WORDS * 4 - 4096));
	CMP_U32(out, want + 1024, WORDS - 1024, "the memory its exporter freed, still open here");
	CHECK(cuEventSynchronize(ev));
	CHECK(cuIpcCloseMemHandle(b));
	CHECK_ERR(cuIpcCloseMemHandle(b), CUDA_ERROR_INVALID_VALUE);
	CHECK(cuEventDestroy(ev));
	put(to, "c", 1);
	CHECK(cuStreamDestroy(s));
	free(want);
	free(out);
	return t_finish();
}

int main(int argc, char **argv)
{
	int e2i[2], i2e[2], st, rc = T_PASS;
	pid_t e, i;

	t_init(argc, argv);
	if (pipe(e2i) < 0 || pipe(i2e) < 0)
		return T_FAIL;
	e = fork();
	if (e == 0)
		_exit(exporter(e2i[1], i2e[0]));
	i = fork();
	if (i == 0)
		_exit(importer(i2e[1], e2i[0]));
	close(e2i[1]);
	close(i2e[1]);
	for (int k = 0; k < 2; k++) {
		pid_t p = wait(&st);

		if (!WIFEXITED(st) || WEXITSTATUS(st) != T_PASS) {
			fprintf(stderr, "s_ipc: the %s ended with status %#x\n", p == e ? "exporter" : "importer", st);
			rc = T_FAIL;
			kill(p == e ? i : e, SIGKILL);
		}
	}
	printf("s_ipc: %s\n", rc == T_PASS ? "PASS" : "FAIL");
	return rc;
}
