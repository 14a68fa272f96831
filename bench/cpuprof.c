// SPDX-License-Identifier: MIT
/*
 * bench/cpuprof.c: where a process's CPU goes, for bench/cpuprofile.py, on
 * machines without perf. Preloaded (LD_PRELOAD=libcpuprof.so), it does
 * nothing until the program calls cpuprof_start(); from then on SIGPROF,
 * every CPUPROF_US (default 500) µs of the process's CPU time, records the
 * instruction pointer of the thread it interrupted and whether that was
 * the main thread and the thread's name, until cpuprof_stop().
 * cpuprof_dump(path) writes one line a sample, "MAIN FILE OFFSET THREAD"
 * (MAIN 1 for the main thread; FILE the object the address is in, OFFSET
 * its offset there in hex, or the address itself in a program not built
 * position-independent, as nm counts; THREAD the thread's name), then
 * "CALLER CALLER_OFFSET" for the word at the stack pointer, which is the
 * return address when the sample fell in a leaf function that keeps
 * nothing on the stack (memcpy, a system call's wrapper) and noise
 * otherwise, for bench/cpuprofile.py to sum up by object and symbol. It makes no CUDA call,
 * so it measures native and openmps columns alike. At most 2^20 samples.
 *
 * It also counts the program's ioctl calls (the driver's way into the
 * kernel), by request: cpuprof_ioctls() gives the total so far, and the
 * dump ends with a line "#ioctl REQUEST COUNT" per request.
 *
 * A program that cannot call it (a server started by its daemon) is
 * sampled whole when CPUPROF_OUT is set in its environment and its name is
 * CPUPROF_ONLY (when that is set): sampling starts as the library loads and
 * the samples go to CPUPROF_OUT.PID when the program exits. With
 * CPUPROF_GATE=PATH too, a sample is kept only while PATH exists (what
 * another program, say bench/infer.py's INFER_GATE, makes for a window).
 */
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <ucontext.h>
#include <unistd.h>

#include "common/atomics.h"

#define API __attribute__((visibility("default")))
#define SAMPLES_MAX (1u << 20)

static uintptr_t ips[SAMPLES_MAX];
static unsigned char on_main[SAMPLES_MAX];
static char names[SAMPLES_MAX][16];
static uintptr_t tops[SAMPLES_MAX];   /* the word at the stack pointer */
static unsigned int nsamples;   /* atomic */
static volatile sig_atomic_t sampling;

#define IOCTL_KINDS 64
static unsigned long ioctls;   /* atomic */
static struct {
	unsigned long req;     /* atomic: 0 free, else the request */
	unsigned long n;       /* atomic */
} ioctl_by[IOCTL_KINDS];
static int (*real_ioctl)(int, unsigned long, void *);

API int ioctl(int fd, unsigned long req, ...);
int ioctl(int fd, unsigned long req, ...)
{
	va_list ap;
	void *arg;

	va_start(ap, req);
	arg = va_arg(ap, void *);
	va_end(ap);
	if (!real_ioctl)
		real_ioctl = (int (*)(int, unsigned long, void *))dlsym(RTLD_NEXT, "ioctl");
	mps_fetch_add(&ioctls, 1);
	for (int i = 0; i < IOCTL_KINDS; i++) {
		unsigned long had = mps_load_relaxed(&ioctl_by[i].req);

		if (!had && !mps_cas(&ioctl_by[i].req, &had, req) && had != req)
			continue;
		if (had && had != req)
			continue;
		mps_fetch_add(&ioctl_by[i].n, 1);
		break;
	}
	return real_ioctl(fd, req, arg);
}

API unsigned long cpuprof_ioctls(void);
unsigned long cpuprof_ioctls(void)
{
	return mps_load_relaxed(&ioctls);
}
static pid_t main_tid;
static const char *gate;   /* CPUPROF_GATE: sample only while it exists */

static void on_prof(int sig, siginfo_t *si, void *uc)
{
	unsigned int i;

	(void)sig;
	(void)si;
	if (!sampling)
		return;
	if (gate) {
		int e = errno;
		int shut = access(gate, F_OK) != 0;

		errno = e;
		if (shut)
			return;
	}
	i = mps_fetch_add(&nsamples, 1);
	if (i < SAMPLES_MAX) {
		ips[i] = (uintptr_t)((ucontext_t *)uc)->uc_mcontext.gregs[REG_RIP];
		tops[i] = *(const uintptr_t *)((ucontext_t *)uc)->uc_mcontext.gregs[REG_RSP];
		int e = errno;

		on_main[i] = (pid_t)syscall(SYS_gettid) == main_tid;
		prctl(PR_GET_NAME, names[i]);
		errno = e;
	}
}

API void cpuprof_start(void);
void cpuprof_start(void)
{
	struct sigaction sa = { .sa_sigaction = on_prof, .sa_flags = SA_SIGINFO | SA_RESTART };
	const char *v = getenv("CPUPROF_US");
	long us = v ? atol(v) : 500;
	struct itimerval it;

	if (us < 100 || us > 1000000)
		us = 500;
	it.it_interval.tv_sec = it.it_value.tv_sec = us / 1000000;
	it.it_interval.tv_usec = it.it_value.tv_usec = us % 1000000;
	main_tid = getpid();
	sigemptyset(&sa.sa_mask);
	sigaction(SIGPROF, &sa, NULL);
	mps_store_relaxed(&nsamples, 0);
	sampling = 1;
	setitimer(ITIMER_PROF, &it, NULL);
}

API void cpuprof_stop(void);
void cpuprof_stop(void)
{
	struct itimerval it = { { 0, 0 }, { 0, 0 } };

	setitimer(ITIMER_PROF, &it, NULL);
	sampling = 0;
}

/* "FILE OFFSET" of an address, or "? ADDRESS". The program itself may be
 * named as it was started (no path): /proc/self/exe says which file. */
static void where(FILE *f, uintptr_t ip)
{
	static char exe[4096];
	Dl_info d;

	if (!exe[0]) {
		ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

		exe[n > 0 ? n : 0] = 0;
	}
	if (dladdr((void *)ip, &d) && d.dli_fname && (d.dli_fname[0] || exe[0])) {
		const Elf64_Ehdr *h = d.dli_fbase;
		uintptr_t base = h && h->e_type == ET_EXEC ? 0 : (uintptr_t)d.dli_fbase;
		const char *name = strchr(d.dli_fname, '/') || !exe[0] ? d.dli_fname : exe;

		fprintf(f, "%s %lx", name, (unsigned long)(ip - base));
	} else {
		fprintf(f, "? %lx", (unsigned long)ip);
	}
}

/* Writes the samples to path: 0, or -1 when it cannot. */
API int cpuprof_dump(const char *path);
int cpuprof_dump(const char *path)
{
	unsigned int n = mps_load_relaxed(&nsamples);
	FILE *f = fopen(path, "w");

	if (!f)
		return -1;
	if (n > SAMPLES_MAX)
		n = SAMPLES_MAX;
	for (unsigned int i = 0; i < n; i++) {
		fprintf(f, "%d ", on_main[i]);
		where(f, ips[i]);
		names[i][15] = 0;
		for (char *p = names[i]; *p; p++)
			if (*p == ' ' || *p == '\t' || *p == '\n')
				*p = '_';
		fprintf(f, " %s ", names[i][0] ? names[i] : "?");
		where(f, tops[i]);
		fputc('\n', f);
	}
	for (int i = 0; i < IOCTL_KINDS; i++)
		if (ioctl_by[i].req)
			fprintf(f, "#ioctl %#lx %lu\n", ioctl_by[i].req, ioctl_by[i].n);
	return fclose(f) ? -1 : 0;
}

static int whole;   /* sampled from load to exit (CPUPROF_OUT) */

__attribute__((constructor)) static void auto_start(void)
{
	const char *only = getenv("CPUPROF_ONLY");
	char comm[16] = "";

	if (!getenv("CPUPROF_OUT"))
		return;
	prctl(PR_GET_NAME, comm);
	if (only && strcmp(only, comm) != 0) {
		/* An image the sampled program exec'd keeps its timer. */
		struct itimerval off = { { 0, 0 }, { 0, 0 } };

		setitimer(ITIMER_PROF, &off, NULL);
		return;
	}
	whole = 1;
	gate = getenv("CPUPROF_GATE");
	cpuprof_start();
}

__attribute__((destructor)) static void auto_dump(void)
{
	char path[4096];

	if (!whole)
		return;
	cpuprof_stop();
	if (!mps_load_relaxed(&nsamples))
		return;   /* a helper the program ran, say */
	snprintf(path, sizeof(path), "%s.%d", getenv("CPUPROF_OUT"), (int)getpid());
	if (cpuprof_dump(path) != 0)
		fprintf(stderr, "cpuprof: cannot write %s\n", path);
}
