// SPDX-License-Identifier: MIT
/*
 * See crash.h. The handler only uses async-signal-safe calls (write, and
 * backtrace_symbols_fd, whose library is loaded at install time), then
 * restores the default action and re-raises the signal so the process ends
 * as it would have, for the daemon to log its status.
 */
#include <execinfo.h>
#include <stdint.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "server/crash.h"
#include "server/devout.h"

#define ALT_STACK (64 * 1024)

static __thread pid_t thread_client;

static void put(int fd, const char *s)
{
	if (write(fd, s, strlen(s)) < 0) {
		/* Nothing more can be done from here. */
	}
}

/* Unsigned number to text, without the stdio machinery. */
static void put_num(int fd, unsigned long long v, int base)
{
	char buf[32];
	int i = sizeof(buf);

	buf[--i] = 0;
	do {
		buf[--i] = "0123456789abcdef"[v % (unsigned int)base];
		v /= (unsigned int)base;
	} while (v && i > 2);
	if (base == 16) {
		buf[--i] = 'x';
		buf[--i] = '0';
	}
	put(fd, buf + i);
}

static void on_fatal(int sig, siginfo_t *si, void *uc)
{
	int fd = mps_log_fd();
	void *frames[64];
	int n;

	(void)uc;
	put(fd, "[openmps-server ");
	put_num(fd, (unsigned long long)getpid(), 10);
	put(fd, "] FATAL: signal ");
	put_num(fd, (unsigned long long)sig, 10);
	put(fd, " at address ");
	put_num(fd, (unsigned long long)(uintptr_t)si->si_addr, 16);
	if (thread_client) {
		put(fd, " while serving client ");
		put_num(fd, (unsigned long long)thread_client, 10);
	}
	put(fd, "\n");
	n = backtrace(frames, 64);
	backtrace_symbols_fd(frames, n, fd);
	mps_devout_crash(fd);   /* what went to stderr just before (an abort's message) */
	signal(sig, SIG_DFL);
	raise(sig);
}

void mps_crash_install(void)
{
	static const int sigs[] = { SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT };
	struct sigaction sa;
	void *warm[1];

	/* Under a sanitizer, its runtime owns the fatal signals and every
	 * thread's signal stack, and reports crashes better than we would:
	 * stand aside. */
	if (SANITIZED)
		return;
	backtrace(warm, 1);   /* loads the unwinder now, not inside the handler */
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_fatal;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaction(sigs[i], &sa, NULL);
	mps_crash_thread(0);
}

void mps_crash_client(pid_t client)
{
	thread_client = client;
}

void mps_crash_thread(pid_t client)
{
	stack_t ss;

	thread_client = client;
	if (SANITIZED)
		return;
	ss.ss_sp = malloc(ALT_STACK);
	ss.ss_size = ALT_STACK;
	ss.ss_flags = 0;
	/* The stack lives as long as the thread; the last one is never freed. */
	if (ss.ss_sp)
		sigaltstack(&ss, NULL);
}
