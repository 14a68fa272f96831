// SPDX-License-Identifier: MIT
/*
 * See bench.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

const char *b_errname(CUresult r)
{
	const char *s = NULL;

	if (cuGetErrorName(r, &s) != CUDA_SUCCESS || !s)
		return "unknown CUresult";
	return s;
}

void b_fail_cu(const char *file, int line, const char *call, CUresult r)
{
	fprintf(stderr, "error: %s:%d: %s -> %s (%d)\n", file, line, call, b_errname(r), (int)r);
	exit(2);
}

void b_die(const char *fmt, ...)
{
	va_list ap;

	fputs("error: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
}

double b_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

CUdevice b_setup(CUcontext *ctx)
{
	CUdevice dev;

	B_CHECK(cuInit(0));
	B_CHECK(cuDeviceGet(&dev, 0));
	B_CHECK(cuDevicePrimaryCtxRetain(ctx, dev));
	B_CHECK(cuCtxSetCurrent(*ctx));
	return dev;
}

char *b_read_ptx(void)
{
	const char *path = getenv("OPENMPS_TEST_PTX");
	FILE *f;
	char *buf = NULL;
	size_t len = 0, cap = 0, got;

	if (!path || !*path)
		path = "build/tests/kernels.ptx";
	f = fopen(path, "rb");
	if (!f)
		return NULL;
	do {
		if (cap - len < 4096) {
			char *nb;

			cap = cap ? cap * 2 : 65536;
			nb = realloc(buf, cap + 1);
			if (!nb) {
				free(buf);
				fclose(f);
				return NULL;
			}
			buf = nb;
		}
		got = fread(buf + len, 1, cap - len, f);
		len += got;
	} while (got > 0);
	fclose(f);
	buf[len] = '\0';
	return buf;
}

CUmodule b_module(void)
{
	char *ptx = b_read_ptx();
	CUmodule mod;

	if (!ptx)
		b_die("cannot read the kernels' PTX (set OPENMPS_TEST_PTX): %s", strerror(errno));
	B_CHECK(cuModuleLoadData(&mod, ptx));
	free(ptx);
	return mod;
}

void b_touch(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	if (fd < 0)
		b_die("cannot create %s: %s", path, strerror(errno));
	close(fd);
}

void b_wait_file(const char *path, double timeout_s)
{
	double deadline = b_now() + timeout_s;
	struct timespec nap = { 0, 50 * 1000 };

	while (access(path, F_OK) != 0) {
		if (b_now() > deadline) {
			fprintf(stderr, "error: %s did not appear within %.0f s\n", path, timeout_s);
			exit(3);
		}
		nanosleep(&nap, NULL);
	}
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

CUgreenCtx b_green_all(CUdevice dev)
{
	CUdevResource sms;
	CUdevResourceDesc desc;
	CUgreenCtx g;

	B_CHECK(cuDeviceGetDevResource(dev, &sms, CU_DEV_RESOURCE_TYPE_SM));
	B_CHECK(cuDevResourceGenerateDesc(&desc, &sms, 1));
	B_CHECK(cuGreenCtxCreate(&g, desc, dev, CU_GREEN_CTX_DEFAULT_STREAM));
	return g;
}

double b_median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int b_start_children(int nproc, void (*child)(int go, int out, void *arg), void *arg)
{
	int go[2], res[2];

	if (pipe(go) < 0 || pipe(res) < 0)
		b_die("pipe");
	for (int i = 0; i < nproc; i++) {
		pid_t p = fork();

		if (p < 0)
			b_die("fork");
		if (p == 0) {
			close(go[1]);
			close(res[0]);
			child(go[0], res[1], arg);
			exit(0);
		}
	}
	close(go[0]);
	close(res[1]);
	/* Give every child time to connect and warm up, then start them all. */
	sleep(1);
	for (int i = 0; i < nproc; i++)
		if (write(go[1], "g", 1) != 1)
			b_die("cannot start the children");
	close(go[1]);
	return res[0];
}
