// SPDX-License-Identifier: MIT
/*
 * Interprocess memory and event handles between two client processes: an
 * exporter writes a pattern, runs a kernel over it and records an
 * interprocess event (behind a backlog of 20,000 launches); an importer
 * opens both handles, waits for the event on its own stream as soon as the
 * exporter's cuEventRecord has returned, checks the kernel's result and
 * writes a second
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
#define BACKLOG 20000

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
	REQUIRE_CU(cuMemAlloc(&a, WORDS * 4));
	REQUIRE_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	REQUIRE_CU(cuEventCreate(&ev, CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING));
	REQUIRE_CU(cuEventCreate(&plain, CU_EVENT_DEFAULT));
	t_fill_u32(in, WORDS, &rng);
	REQUIRE_CU(cuMemcpyHtoD(a, in, WORDS * 4));
	put(to, in, WORDS * 4);   /* ahead, so that the handles find the importer waiting */
	REQUIRE_CU(cuIpcGetMemHandle(&sh.mem, a));
	REQUIRE_CU(cuIpcGetEventHandle(&sh.ev, ev));
	{
		CUipcMemHandle inner;

		/* An address inside the allocation names the allocation too. */
		REQUIRE_CU(cuIpcGetMemHandle(&inner, a + 4096));
	}
	CHECK_CU(cuIpcGetEventHandle(&sh.ev, plain), CUDA_ERROR_INVALID_HANDLE);
	REQUIRE_CU(cuIpcGetMemHandle(&sh.mem, a));
	REQUIRE_CU(cuIpcGetEventHandle(&sh.ev, ev));
	{
		CUresult r = cuIpcOpenMemHandle(&opened, sh.mem, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);

		CHECK(r != CUDA_SUCCESS, "a handle opened in the process that made it");
		printf("s_ipc: opening one's own handle: %s\n", t_errname(r));
	}
	/* A slow kernel, then the event: the importer must wait for it. A
	 * backlog of launches ahead of them, so that a server still working
	 * through this process's queue when the importer waits would let it
	 * wait for an event not yet recorded there. */
	{
		CUfunction empty = t_func(t_module(), "empty");

		for (int k = 0; k < BACKLOG; k++)
			REQUIRE_CU(t_launch(empty, 1, 1, s, NULL));
	}
	REQUIRE_CU(t_launch(t_func(t_module(), "affine_u32"), WORDS / 256, 256, s, args));
	REQUIRE_CU(cuEventRecord(ev, s));
	put(to, &sh, sizeof(sh));

	get(from, &c, 1);   /* the importer checked and wrote its pattern */
	REQUIRE_CU(cuMemcpyDtoH(out, a, 4096));
	for (int i = 0; i < 1024; i++)
		if (!CHECK(out[i] == 0x5a5a5a5au, "word %d after the importer's memset: %#x", i, out[i]))
			break;
	REQUIRE_CU(cuStreamSynchronize(s));
	REQUIRE_CU(cuMemFree(a));
	REQUIRE_CU(cuEventDestroy(ev));
	put(to, "f", 1);
	get(from, &c, 1);   /* the importer closed everything */
	REQUIRE_CU(cuEventDestroy(plain));
	REQUIRE_CU(cuStreamDestroy(s));
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
	REQUIRE_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	get(from, want, WORDS * 4);
	for (uint32_t i = 0; i < WORDS; i++)
		want[i] = want[i] * 3 + 1;
	get(from, &sh, sizeof(sh));
	memset(&junk, 0x77, sizeof(junk));
	CHECK(cuIpcOpenMemHandle(&junk_p, junk, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) != CUDA_SUCCESS,
	      "a handle of 0x77 bytes opened");
	REQUIRE_CU(cuIpcOpenMemHandle(&b, sh.mem, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
	REQUIRE_CU(cuIpcOpenEventHandle(&ev, sh.ev));
	REQUIRE_CU(cuStreamWaitEvent(s, ev, 0));
	REQUIRE_CU(cuMemcpyDtoHAsync(out, b, WORDS * 4, s));
	REQUIRE_CU(cuStreamSynchronize(s));
	CMP_U32(out, want, WORDS, "the exporter's memory after its kernel, read through the handle");
	REQUIRE_CU(cuMemsetD32(b, 0x5a5a5a5au, 1024));
	REQUIRE_CU(cuCtxSynchronize());   /* a memset of device memory may return before it is done */
	put(to, "o", 1);

	get(from, &c, 1);   /* the exporter freed its memory and destroyed its event */
	REQUIRE_CU(cuMemcpyDtoH(out, b + 4096, WORDS * 4 - 4096));
	CMP_U32(out, want + 1024, WORDS - 1024, "the memory its exporter freed, still open here");
	REQUIRE_CU(cuEventSynchronize(ev));
	REQUIRE_CU(cuIpcCloseMemHandle(b));
	CHECK_CU(cuIpcCloseMemHandle(b), CUDA_ERROR_INVALID_VALUE);
	REQUIRE_CU(cuEventDestroy(ev));
	put(to, "c", 1);
	REQUIRE_CU(cuStreamDestroy(s));
	free(want);
	free(out);
	return t_finish();
}

int main(int argc, char **argv)
{
	int e2i[2], i2e[2], st;
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

		if (!CHECK(WIFEXITED(st) && WEXITSTATUS(st) == T_PASS, "the %s ended with status %#x",
			   p == e ? "exporter" : "importer", st))
			kill(p == e ? i : e, SIGKILL);
	}
	return check_finish("s_ipc");
}
