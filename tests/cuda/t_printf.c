// SPDX-License-Identifier: MIT
/*
 * Device printf: what a kernel prints reaches the program's own stdout by
 * the time a synchronizing call returns — a stream's, the context's or an
 * event's synchronize, or a blocking copy — each line once, through the
 * program's stdout (so it falls in order with what the program prints).
 * The kernel is printf_u32 of tests/kernels/printf.cu (build/tests/
 * printf.ptx, beside the kernels' PTX): each thread prints "openmps printf
 * V thread T". stdout goes to a temporary file while the test runs, and
 * after each call the file must hold exactly the lines of the kernels run
 * so far.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"

#define THREADS 3
#define ROUNDS 4

static FILE *out;      /* where stdout goes while the kernels print */
static int saved = -1; /* the test's own stdout */

/* The kernels of rounds [0, rounds) printed, every line once, and nothing
 * else: 0, or the count of lines wrong. */
static int printed(int rounds, const char *when)
{
	char *text, line[64];
	struct stat st;
	int bad = 0, lines = 0;

	/* Read by its descriptor: stdio would keep an offset of its own. */
	fflush(stdout);
	REQUIRE(fstat(fileno(out), &st) == 0, "cannot stat stdout's file");
	text = malloc((size_t)st.st_size + 1);
	REQUIRE(text, "out of memory");
	REQUIRE(pread(fileno(out), text, (size_t)st.st_size, 0) == st.st_size, "cannot read stdout back");
	text[st.st_size] = '\0';
	for (int r = 0; r < rounds; r++)
		for (int t = 0; t < THREADS; t++) {
			char *at, *again;

			snprintf(line, sizeof(line), "openmps printf %d thread %d\n", 1000 + r, t);
			at = strstr(text, line);
			again = at ? strstr(at + 1, line) : NULL;
			if (!CHECK(at && !again, "after %s: \"openmps printf %d thread %d\" printed %s", when, 1000 + r, t,
				   at ? "twice" : "not at all"))
				bad++;
		}
	for (const char *p = text; *p; p++)
		lines += *p == '\n';
	if (!CHECK(lines == rounds * THREADS, "after %s: %d lines printed, want %d:\n%s", when, lines,
		   rounds * THREADS, text))
		bad++;
	free(text);
	return bad;
}

static void launch(CUfunction f, unsigned v, CUstream s)
{
	void *args[] = { &v };

	REQUIRE_CU(cuLaunchKernel(f, 1, 1, 1, THREADS, 1, 1, 0, s, args, NULL));
}

int main(int argc, char **argv)
{
	CUmodule mod;
	CUfunction f;
	CUstream s;
	CUevent e;
	CUdeviceptr d;
	uint32_t word = 0;
	char *ptx;

	t_init(argc, argv);
	t_primary(t_device());
	ptx = t_ptx_beside("printf.ptx");
	REQUIRE_CU(cuModuleLoadData(&mod, ptx));
	free(ptx);
	f = t_func(mod, "printf_u32");
	REQUIRE_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	REQUIRE_CU(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
	REQUIRE_CU(cuMemAlloc(&d, sizeof(word)));

	fflush(stdout);
	out = tmpfile();
	saved = dup(1);
	REQUIRE(out && saved >= 0 && dup2(fileno(out), 1) == 1, "cannot send stdout to a file");

	launch(f, 1000, s);
	REQUIRE_CU(cuStreamSynchronize(s));
	printed(1, "a stream synchronize");
	launch(f, 1001, s);
	REQUIRE_CU(cuCtxSynchronize());
	printed(2, "a context synchronize");
	launch(f, 1002, s);
	REQUIRE_CU(cuEventRecord(e, s));
	REQUIRE_CU(cuEventSynchronize(e));
	printed(3, "an event synchronize");
	launch(f, 1003, NULL);   /* the legacy stream, which the copy follows */
	REQUIRE_CU(cuMemcpyDtoH(&word, d, sizeof(word)));
	printed(ROUNDS, "a blocking copy");

	fflush(stdout);
	REQUIRE(dup2(saved, 1) == 1, "cannot give stdout back");
	close(saved);
	fclose(out);
	REQUIRE_CU(cuMemFree(d));
	REQUIRE_CU(cuEventDestroy(e));
	REQUIRE_CU(cuStreamDestroy(s));
	REQUIRE_CU(cuModuleUnload(mod));
	return check_failures() ? T_FAIL : T_PASS;
}
