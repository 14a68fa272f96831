// SPDX-License-Identifier: MIT
/*
 * threadspy.so: an LD_PRELOAD shim that says where threads come from. Every
 * pthread_create made by a thread whose name starts with "omps-" (the
 * server's own threads name themselves so) for a thread that does not start
 * in openmps-server itself appends a record to the file
 * $OPENMPS_THREADSPY_LOG: the creating thread's name, the library the new
 * thread starts in, and the backtrace of the call, as backtrace_symbols_fd writes it ("binary(symbol+offset)" or
 * "binary(+offset)": addr2line -e on the binary names an offset's line).
 * A thread the driver starts from inside one of its calls shows which call
 * that was. tests/gpu/faults.sh builds and preloads it for the soak, whose
 * report of a thread the server kept then comes with the thread's origin.
 * Costs nothing to threads created by others (one prctl).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

typedef int (*create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

static void record(const char *name, const char *lib)
{
	const char *path = getenv("OPENMPS_THREADSPY_LOG");
	void *frames[32];
	char head[512];
	int n, fd, len;

	if (!path || !*path)
		return;
	n = backtrace(frames, 32);
	len = snprintf(head, sizeof(head), "--- pid %d: a thread of %s started by %s\n", (int)getpid(), lib, name);
	pthread_mutex_lock(&log_lock);
	fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd >= 0) {
		if (write(fd, head, (size_t)len) == len)
			backtrace_symbols_fd(frames + 1, n - 1, fd);
		close(fd);
	}
	pthread_mutex_unlock(&log_lock);
}

int pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*start)(void *), void *arg)
{
	static create_fn real;
	char name[16] = "";
	Dl_info si;

	if (!real)
		real = (create_fn)dlsym(RTLD_NEXT, "pthread_create");
	if (!real)
		return 11;   /* EAGAIN: no pthread_create to call */
	if (prctl(PR_GET_NAME, name, 0, 0, 0) == 0 && strncmp(name, "omps-", 5) == 0 &&
	    dladdr((void *)start, &si) && si.dli_fname && !strstr(si.dli_fname, "openmps-server"))
		record(name, si.dli_fname);
	return real(t, attr, start, arg);
}
