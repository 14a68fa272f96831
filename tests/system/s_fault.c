// SPDX-License-Identifier: MIT
/*
 * A GPU fault in a shared server, and the recovery.
 *
 * Round 1: a bystander runs verified work (random words through a kernel)
 * in a loop while a culprit launches a kernel that writes through an
 * invalid pointer. The culprit's synchronize returns
 * CUDA_ERROR_ILLEGAL_ADDRESS, and so does every later call it makes; the
 * bystander, which shares the GPU's context, ends with the same error
 * (never with wrong data). A new client then works at once, on a fresh
 * server; the control log names the two clients as suspects.
 *
 * Round 2: the culprit alone: the control log names it the culprit, with
 * the kernel's name. Round 3: two fault domains (OPENMPS_FAULT_DOMAIN):
 * the culprit faults in its own domain while the bystander, in another,
 * goes on with correct results to the end. Round 4: a kernel's failed
 * device assert: CUDA_ERROR_ASSERT, and the assert's message on the
 * culprit's own stderr by the time its synchronize returns.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../cuda/common.h"
#include "server/crash.h"   /* SANITIZED: such a server keeps stderr for its reports */

#define WORDS 4096

enum { BYSTANDER_FAULTED = 10, BYSTANDER_CLEAN = 11 };

/* Verified rounds until told to stop (a byte on `stop`) or a call fails:
 * BYSTANDER_FAULTED if that failure was the GPU fault's error,
 * BYSTANDER_CLEAN if it was told to stop, T_FAIL otherwise. */
static int bystander(int ready, int stop)
{
	uint64_t rng = t_rng(5);
	uint32_t in[WORDS], got[WORDS];
	CUdeviceptr d;
	CUfunction affine;
	int n = WORDS, rounds = 0;
	CUresult r = CUDA_SUCCESS;
	char c;

	t_primary(t_device());
	affine = t_func(t_module(), "affine_u32");
	REQUIRE_CU(cuMemAlloc(&d, sizeof(in)));
	REQUIRE(write(ready, "r", 1) == 1, "pipe");
	while (read(stop, &c, 1) != 1) {
		uint32_t mul = (uint32_t)t_rand(&rng) | 1, add = (uint32_t)t_rand(&rng);
		void *args[] = { &d, &mul, &add, &n };

		t_fill_u32(in, WORDS, &rng);
		if ((r = cuMemcpyHtoD(d, in, sizeof(in))) != CUDA_SUCCESS ||
		    (r = t_launch(affine, WORDS / 256, 256, NULL, args)) != CUDA_SUCCESS ||
		    (r = cuMemcpyDtoH(got, d, sizeof(got))) != CUDA_SUCCESS)
			break;
		for (int i = 0; i < WORDS; i++)
			if (!CHECK(got[i] == in[i] * mul + add, "bystander: word %d wrong after %d rounds", i, rounds))
				return T_FAIL;
		rounds++;
	}
	printf("s_fault: bystander: %d verified rounds, then %s\n", rounds, t_errname(r));
	if (r == CUDA_SUCCESS)
		return rounds > 0 ? BYSTANDER_CLEAN : T_FAIL;
	return r == CUDA_ERROR_ILLEGAL_ADDRESS ? BYSTANDER_FAULTED : T_FAIL;
}

static int culprit(void)
{
	unsigned int *bad = (unsigned int *)(uintptr_t)0x10, v = 7;
	void *args[] = { &bad, &v };
	CUfunction store;
	CUdeviceptr d;
	CUresult r;

	t_primary(t_device());
	store = t_func(t_module(), "store_at");
	r = t_launch(store, 1, 1, NULL, args);
	if (r == CUDA_SUCCESS)
		r = cuCtxSynchronize();
	CHECK(r == CUDA_ERROR_ILLEGAL_ADDRESS, "the faulting kernel: %s", t_errname(r));
	/* The context is dead: every later call says so. */
	usleep(200 * 1000);
	r = cuMemAlloc(&d, 4096);
	CHECK(r == CUDA_ERROR_ILLEGAL_ADDRESS, "a call after the fault: %s", t_errname(r));
	/* Its name and text, with the server gone. */
	{
		const char *name = NULL, *text = NULL;

		CHECK(cuGetErrorName(r, &name) == CUDA_SUCCESS && name && !strcmp(name, "CUDA_ERROR_ILLEGAL_ADDRESS"),
		      "the fault's name after the server went: %s", name ? name : "none");
		CHECK(cuGetErrorString(r, &text) == CUDA_SUCCESS && text && strstr(text, "illegal memory access"),
		      "the fault's text after the server went: %s", text ? text : "none");
	}
	return check_failures() ? T_FAIL : T_PASS;
}

static int status_of(pid_t p);

/* A fresh client's verified copy: 0 and the milliseconds it took, or -1. */
static double newcomer(void)
{
	struct timespec a, b;
	pid_t p;

	clock_gettime(CLOCK_MONOTONIC, &a);
	p = fork();
	if (p == 0) {
		uint64_t rng = t_rng(9);
		uint32_t in[WORDS], got[WORDS];
		CUdeviceptr d;

		t_primary(t_device());
		t_fill_u32(in, WORDS, &rng);
		REQUIRE_CU(cuMemAlloc(&d, sizeof(in)));
		REQUIRE_CU(cuMemcpyHtoD(d, in, sizeof(in)));
		REQUIRE_CU(cuMemcpyDtoH(got, d, sizeof(got)));
		CMP_U32(got, in, WORDS, "a new client's words");
		_exit(check_failures() ? T_FAIL : T_PASS);
	}
	if (p < 0 || status_of(p) != T_PASS)
		return -1;
	clock_gettime(CLOCK_MONOTONIC, &b);
	return (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6;
}

/* A kernel's failed device assert, stderr to the file at path: the
 * synchronize says so, and the assert's message is on stderr when it
 * returns (the driver writes it there during the synchronize). */
static int asserter(const char *path)
{
	unsigned int v = 1;
	void *args[] = { &v };
	char *ptx, text[4096];
	CUmodule mod;
	CUfunction f;
	CUresult r;
	ssize_t n;
	int fd;

	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	REQUIRE(fd >= 0 && dup2(fd, 2) == 2, "stderr to %s", path);
	t_primary(t_device());
	ptx = t_ptx_beside("printf.ptx");
	REQUIRE_CU(cuModuleLoadData(&mod, ptx));
	free(ptx);
	REQUIRE_CU(cuModuleGetFunction(&f, mod, "assert_u32"));
	r = t_launch(f, 1, 32, NULL, args);
	if (r == CUDA_SUCCESS)
		r = cuCtxSynchronize();
	n = pread(fd, text, sizeof(text) - 1, 0);
	text[n > 0 ? n : 0] = 0;
	printf("s_fault: the asserting kernel: %s; its stderr: %s\n", t_errname(r), text);
	CHECK(r == CUDA_ERROR_ASSERT, "the asserting kernel: %s", t_errname(r));
	CHECK(SANITIZED || strstr(text, "Assertion `v == 0u || threadIdx.x != 0` failed"),
	      "the assert's message is not on the program's stderr when its synchronize returns");
	return check_failures() ? T_FAIL : T_PASS;
}

static pid_t spawn_culprit(const char *domain)
{
	pid_t p = fork();

	if (p == 0) {
		if (domain)
			setenv("OPENMPS_FAULT_DOMAIN", domain, 1);
		_exit(culprit());
	}
	return p;
}

static void fcntl_nonblock(int fd)
{
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

static int status_of(pid_t p)
{
	int st;

	if (waitpid(p, &st, 0) != p)
		return -1;
	if (!WIFEXITED(st)) {
		fprintf(stderr, "s_fault: process %d ended by signal %d\n", (int)p, WTERMSIG(st));
		return -1;
	}
	return WEXITSTATUS(st);
}

/* Whether the control log has a line with every one of the words. */
static bool logged(const char *w1, const char *w2, const char *w3)
{
	const char *dir = getenv("CUDA_MPS_LOG_DIRECTORY");
	char path[512], line[1024];
	bool found = false;
	FILE *f;

	snprintf(path, sizeof(path), "%s/control.log", dir ? dir : "/var/log/nvidia-mps");
	f = fopen(path, "r");
	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, w1) && strstr(line, w2) && (!w3 || strstr(line, w3));
	fclose(f);
	return found;
}

/* The bystander in `domain` (NULL: the default), the culprit in
 * `culprit_domain`: the bystander's status. */
static int round_with_bystander(const char *domain, const char *culprit_domain, pid_t *cp)
{
	int ready[2], stop[2];
	pid_t b, c;
	char x;
	int bs;

	REQUIRE(pipe(ready) == 0 && pipe(stop) == 0, "pipe");
	b = fork();
	if (b == 0) {
		if (domain)
			setenv("OPENMPS_FAULT_DOMAIN", domain, 1);
		close(stop[1]);
		fcntl_nonblock(stop[0]);
		_exit(bystander(ready[1], stop[0]));
	}
	REQUIRE(read(ready[0], &x, 1) == 1, "the bystander did not start");
	usleep(100 * 1000);
	c = spawn_culprit(culprit_domain);
	*cp = c;
	CHECK(status_of(c) == T_PASS, "the culprit ended badly");
	usleep(300 * 1000);
	REQUIRE(write(stop[1], "s", 1) == 1, "pipe");
	bs = status_of(b);
	close(ready[0]);
	close(ready[1]);
	close(stop[0]);
	close(stop[1]);
	return bs;
}

int main(int argc, char **argv)
{
	char pid[32];
	double ms;
	pid_t c;
	int bs;

	t_init(argc, argv);

	/* Round 1: both at work in one domain. */
	bs = round_with_bystander(NULL, NULL, &c);
	CHECK(bs == BYSTANDER_FAULTED, "round 1: the bystander ended with %d, want the fault's error", bs);
	ms = newcomer();
	CHECK(ms >= 0, "round 1: a new client did not work after the fault");
	printf("s_fault: a new client worked %.0f ms after the fault\n", ms);
	snprintf(pid, sizeof(pid), "PID %d", (int)c);
	CHECK(logged("GPU fault", "suspects", pid), "round 1: the control log does not name %s a suspect", pid);

	/* Round 2: the culprit alone (the newcomer's leaving seen first). */
	usleep(500 * 1000);
	c = spawn_culprit(NULL);
	CHECK(status_of(c) == T_PASS, "round 2: the culprit ended badly");
	snprintf(pid, sizeof(pid), "culprit: PID %d", (int)c);
	CHECK(logged("GPU fault", pid, "store_at"), "round 2: the control log does not name the culprit and its kernel");
	CHECK(newcomer() >= 0, "round 2: a new client did not work after the fault");

	/* Round 3: the culprit in a domain of its own. */
	bs = round_with_bystander("work", "own", &c);
	CHECK(bs == BYSTANDER_CLEAN, "round 3: the bystander in another domain ended with %d", bs);
	CHECK(newcomer() >= 0, "round 3: a new client did not work after the fault");

	/* Round 4: a failed device assert, its message the culprit's. */
	{
		char path[] = "/tmp/s_fault.XXXXXX";
		int fd = mkstemp(path);

		REQUIRE(fd >= 0, "mkstemp");
		close(fd);
		usleep(500 * 1000);
		c = fork();
		if (c == 0)
			_exit(asserter(path));
		CHECK(status_of(c) == T_PASS, "round 4: the asserting client ended badly");
		unlink(path);
		CHECK(newcomer() >= 0, "round 4: a new client did not work after the fault");
	}

	return check_finish("s_fault");
}
