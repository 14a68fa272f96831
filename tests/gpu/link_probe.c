// SPDX-License-Identifier: MIT
/*
 * tests/gpu/link_probe.c: does the real driver's JIT linker survive the
 * sequence that crashes openmps's server in s_malformed's link attack
 * (about one run in four, a SIGSEGV inside cuLinkCreate_v2)? Natively, in
 * one process, round after round: a link made with an optimisation level
 * and the server's own options (info and error logs, wall time), completed
 * with no input, destroyed; then a link with the server's options only,
 * destroyed. Each variant runs in a child of its own, so a crash is
 * reported as a signal rather than ending the probe:
 *
 *   fresh    every link's options and logs in a new allocation
 *   reused   the second link's options and logs at the very address of the
 *            first's, freed just before (malloc hands the block straight
 *            back, as it does in the server)
 *   threads  reused, each call from a thread of its own (the server's
 *            service threads take the messages in turn)
 *   jit      reused, while another thread loads a PTX module (a JIT
 *            compile) again and again
 *
 * Build and run on a GPU machine (the PTX is the tests' kernels):
 *   cc -O1 -I/usr/local/cuda/include -o /tmp/link_probe tests/gpu/link_probe.c \
 *      -L/usr/local/nvidia/lib64 -lcuda -lpthread
 *   /tmp/link_probe build/tests/kernels.ptx [ROUNDS]
 */
#include <cuda.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define LOG_BYTES 4096

struct jit {
	unsigned int n;
	CUjit_option opt[8];
	void *val[8];
	char info[LOG_BYTES], error[LOG_BYTES];
};

static CUcontext ctx;
static char *ptx;
static volatile int stop;

/* The options the server passes: the client's, then its own logs and wall time. */
static void options(struct jit *j, int level)
{
	unsigned int k = 0;

	if (level) {
		j->opt[k] = CU_JIT_OPTIMIZATION_LEVEL;
		j->val[k++] = (void *)(uintptr_t)level;
	}
	j->opt[k] = CU_JIT_INFO_LOG_BUFFER;
	j->val[k++] = j->info;
	j->opt[k] = CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES;
	j->val[k++] = (void *)(uintptr_t)LOG_BYTES;
	j->opt[k] = CU_JIT_ERROR_LOG_BUFFER;
	j->val[k++] = j->error;
	j->opt[k] = CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES;
	j->val[k++] = (void *)(uintptr_t)LOG_BYTES;
	j->opt[k] = CU_JIT_WALL_TIME;
	j->val[k++] = NULL;
	j->n = k;
}

struct step {
	int what;   /* 0 create, 1 complete, 2 destroy */
	struct jit *j;
	CUlinkState st;
	CUresult r;
};

static void *step_thread(void *arg)
{
	struct step *s = arg;
	void *image;
	size_t size;

	cuCtxSetCurrent(ctx);
	if (s->what == 0)
		s->r = cuLinkCreate(s->j->n, s->j->opt, s->j->val, &s->st);
	else if (s->what == 1)
		s->r = cuLinkComplete(s->st, &image, &size);
	else
		s->r = cuLinkDestroy(s->st);
	return NULL;
}

static CUresult step(struct step *s, int what, int threaded)
{
	pthread_t t;

	s->what = what;
	if (!threaded || pthread_create(&t, NULL, step_thread, s) != 0) {
		step_thread(s);
		return s->r;
	}
	pthread_join(t, NULL);
	return s->r;
}

static void *jit_thread(void *arg)
{
	(void)arg;
	cuCtxSetCurrent(ctx);
	while (!stop) {
		CUmodule m;

		if (cuModuleLoadData(&m, ptx) == CUDA_SUCCESS)
			cuModuleUnload(m);
	}
	return NULL;
}

/* One variant; 0 if every round went through. */
static int variant(const char *name, int rounds)
{
	int reuse = strcmp(name, "fresh") != 0, threaded = !strcmp(name, "threads");
	pthread_t jt;
	int jit = !strcmp(name, "jit");

	if (jit && pthread_create(&jt, NULL, jit_thread, NULL) != 0)
		return 2;
	for (int i = 0; i < rounds; i++) {
		struct step s = { 0 };

		s.j = calloc(1, sizeof(*s.j));
		options(s.j, 2);
		if (step(&s, 0, threaded) != CUDA_SUCCESS)
			return 3;
		step(&s, 1, threaded);   /* nothing to link: the driver links an empty image */
		step(&s, 2, threaded);
		if (!reuse) {
			struct jit *keep = s.j;

			s.j = calloc(1, sizeof(*s.j));
			free(keep);
		} else {
			free(s.j);
			s.j = calloc(1, sizeof(*s.j));   /* the same block, as a rule */
		}
		options(s.j, 0);
		if (step(&s, 0, threaded) != CUDA_SUCCESS)
			return 4;
		step(&s, 2, threaded);
		free(s.j);
	}
	stop = 1;
	if (jit)
		pthread_join(jt, NULL);
	return 0;
}

static char *read_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0 &&
	    (buf = malloc((size_t)n + 1)) && fread(buf, 1, (size_t)n, f) == (size_t)n)
		buf[n] = 0;
	else {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	return buf;
}

int main(int argc, char **argv)
{
	const char *variants[] = { "fresh", "reused", "threads", "jit" };
	int rounds = argc > 2 ? atoi(argv[2]) : 300, bad = 0;

	if (argc < 2 || !(ptx = read_file(argv[1]))) {
		fprintf(stderr, "usage: link_probe KERNELS.ptx [ROUNDS]\n");
		return 2;
	}
	for (size_t v = 0; v < sizeof(variants) / sizeof(variants[0]); v++) {
		pid_t p = fork();
		int st;

		if (p == 0) {
			CUdevice d;

			if (cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&ctx, d) || cuCtxSetCurrent(ctx))
				_exit(5);
			_exit(variant(variants[v], rounds));
		}
		if (p < 0 || waitpid(p, &st, 0) != p)
			return 2;
		if (WIFSIGNALED(st))
			printf("link_probe %-8s: killed by signal %d\n", variants[v], WTERMSIG(st));
		else
			printf("link_probe %-8s: %s (exit %d), %d rounds\n", variants[v],
			       WEXITSTATUS(st) ? "FAIL" : "fine", WEXITSTATUS(st), rounds);
		bad += !WIFEXITED(st) || WEXITSTATUS(st) != 0;
	}
	return bad ? 1 : 0;
}
