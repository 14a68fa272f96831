// SPDX-License-Identifier: MIT
/*
 * The driver's error log (CUDA's "error log management", cuLogs*) for a
 * served client. The real driver keeps, per process, the last 25,600 bytes
 * of messages, one line each:
 *
 *   [HH:MM:SS.mmm][thread][source][E|W] message
 *
 * (local time, pthread_self() in decimal, "CUDA" or the source a library
 * named, E for an error and W for a warning), hands each new message to
 * the callbacks registered with cuLogsRegisterCallback (without the
 * prefix), writes it to CUDA_LOG_FILE (stdout, stderr or a path) when that
 * is set, and dumps the buffer from an iterator (a message's number, from 0
 * at start) to memory or a file. This file does the same, with the
 * behaviour measured on driver 580: a failed cuLogs* call logs why and
 * "Returning N (NAME) from FUNCTION", a dump into a buffer too small for
 * every message begins with a line saying so and keeps the newest that fit,
 * one too small for any fails and leaves the iterator where it was, one
 * from an iterator whose messages were dropped begins with a line saying
 * so, a dump to a file replaces the file. Unlike the driver's, a dump into
 * memory never writes more than *size bytes (driver 580 writes past a
 * buffer exactly as long as the messages, for the terminating NUL).
 *
 * Where messages come from here: cudart and the libraries that carry it
 * send theirs through slot 1 of the private table f8cff951
 * (exports/cudart.c), openmps says when it does not serve a function
 * (dispatch.c), and with CUDA_LOG_FILE set every served call that fails is
 * logged as the driver logs it (trace.c: that needs the traced entry
 * points, so it is not on otherwise, and a program that only registers a
 * callback sees the first two kinds). The reasons the driver gives before
 * its "Returning" line are its own and are not invented here.
 *
 * Callbacks run on the thread that logged, after the buffer's lock is let
 * go, so one may call cuLogs*; messages logged from inside a callback are
 * kept but not handed to callbacks again.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client/api.h"
#include "client/client.h"
#include "client/gen/symbols.h"
#include "common/atomics.h"

#define LOG_BYTES   25600   /* the driver's buffer, cuLogsDumpToMemory's documented most */
#define LOG_ENTRIES 1024    /* messages kept at most (a line is at least ~40 bytes) */
#define CALLBACKS   64
#define MSG_MAX     4096    /* a message's own text, longer ones cut */

static const char TOO_SMALL[] =
	"The provided buffer is not large enough to hold all messages. Some messages will be missing\n";
static const char OVERWRITTEN[] =
	"Log buffer has rolled over since the previous dump. The oldest messages will be missing\n";

struct line {
	char *text;                 /* the whole line, prefix and newline included */
	uint32_t len;
};

struct mps_logs_cb {            /* a CUlogsCallbackHandle */
	CUlogsCallback fn;
	void *data;
};

static struct {
	pthread_mutex_t lock;
	struct line ring[LOG_ENTRIES];
	unsigned int head, count;   /* the oldest kept, how many */
	uint32_t bytes;             /* the kept lines' */
	uint32_t next;              /* the next message's number (CUlogIterator) */
	struct mps_logs_cb *cb[CALLBACKS];
	unsigned int ncb;
	int fd;                     /* CUDA_LOG_FILE's, -1: none */
	bool fd_open;
} logs = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.fd = -1,
};

static __thread bool in_callback;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

/* A child made by fork() may log (its calls fail, and say so): the lock
 * is taken across the fork so the child never inherits it held. */
static void fork_lock(void)
{
	pthread_mutex_lock(&logs.lock);
}

static void unlock(void)
{
	pthread_mutex_unlock(&logs.lock);
}

static void at_fork(void)
{
	pthread_atfork(fork_lock, unlock, unlock);
}

static void lock(void)
{
	pthread_once(&fork_once, at_fork);
	pthread_mutex_lock(&logs.lock);
}

/* CUDA_LOG_FILE, opened at the first message. Under logs.lock. */
static void open_file(void)
{
	const char *v;

	if (logs.fd_open)
		return;
	logs.fd_open = true;
	v = getenv("CUDA_LOG_FILE");
	if (!v || !*v)
		return;
	if (!strcmp(v, "stdout"))
		logs.fd = STDOUT_FILENO;
	else if (!strcmp(v, "stderr"))
		logs.fd = STDERR_FILENO;
	else
		logs.fd = open(v, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
}

bool mps__logs_to_file(void)
{
	static int set = -1;
	int v = mps_load_relaxed(&set);

	if (v < 0) {
		const char *e = getenv("CUDA_LOG_FILE");

		v = e && *e;
		mps_store_relaxed(&set, v);
	}
	return v;
}

/* Keeps one line, dropping the oldest while the buffer is over. Under
 * logs.lock; takes `text`. */
static void keep(char *text, uint32_t len)
{
	while (logs.count && (logs.count == LOG_ENTRIES || logs.bytes + len > LOG_BYTES)) {
		struct line *o = &logs.ring[logs.head];

		logs.bytes -= o->len;
		free(o->text);
		o->text = NULL;
		logs.head = (logs.head + 1) % LOG_ENTRIES;
		logs.count--;
	}
	logs.ring[(logs.head + logs.count) % LOG_ENTRIES] = (struct line){ .text = text, .len = len };
	logs.count++;
	logs.bytes += len;
}

/* Seconds east of UTC at t, looked up at most once an hour: localtime_r
 * takes the C library's time-zone lock, which a child forked while a
 * thread logs could inherit held; this lock it cannot (at_fork). Under
 * logs.lock. */
static long utc_offset(time_t t)
{
	static time_t at;
	static long off;
	static bool known;
	struct tm tm;

	if ((!known || t < at || t - at >= 3600) && localtime_r(&t, &tm)) {
		off = tm.tm_gmtoff;
		at = t;
		known = true;
	}
	return off;
}

void mps__logs_vadd(const char *source, CUlogLevel level, const char *fmt, va_list ap)
{
	struct mps_logs_cb cbs[CALLBACKS];
	unsigned int ncb = 0;
	char msg[MSG_MAX], *line;
	struct timespec now;
	long day;
	int n, len;

	if (!fmt)
		return;
	n = vsnprintf(msg, sizeof(msg), fmt, ap);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(msg))
		n = (int)sizeof(msg) - 1;
	clock_gettime(CLOCK_REALTIME, &now);
	lock();
	day = (long)((now.tv_sec + utc_offset(now.tv_sec)) % 86400 + 86400) % 86400;
	len = asprintf(&line, "[%02ld:%02ld:%02ld.%03ld][%lu][%s][%c] %s\n", day / 3600, day / 60 % 60, day % 60,
		       now.tv_nsec / 1000000, (unsigned long)pthread_self(), source ? source : "CUDA",
		       level == CU_LOG_LEVEL_ERROR ? 'E' : 'W', msg);
	if (len < 0) {
		unlock();
		return;
	}
	open_file();
	if (logs.fd >= 0 && write(logs.fd, line, (size_t)len) < 0) {
		/* a log that cannot be written is not the program's error */
	}
	if ((uint32_t)len > LOG_BYTES)
		free(line);     /* longer than the whole buffer: written, not kept */
	else
		keep(line, (uint32_t)len);
	logs.next++;
	if (!in_callback)
		for (unsigned int i = 0; i < logs.ncb; i++)
			cbs[ncb++] = *logs.cb[i];
	unlock();
	if (!ncb)
		return;
	in_callback = true;
	for (unsigned int i = 0; i < ncb; i++)
		cbs[i].fn(cbs[i].data, level, msg, (size_t)n);
	in_callback = false;
}

void mps__logs_add(const char *source, CUlogLevel level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	mps__logs_vadd(source, level, fmt, ap);
	va_end(ap);
}

void mps__logs_returning(int sym, CUresult r)
{
	mps__logs_add("CUDA", CU_LOG_LEVEL_ERROR, "Returning %d (%s) from %s", (int)r, mps__error_name(r),
		      sym >= 0 && sym < MPS_NSYMS ? mps__sym_names[sym] : "?");
}

/* A failed cuLogs* call: why, then what it returns, as the driver logs. */
static CUresult refuse(int sym, const char *why, ...)
{
	va_list ap;

	va_start(ap, why);
	mps__logs_vadd("CUDA", CU_LOG_LEVEL_ERROR, why, ap);
	va_end(ap);
	mps__logs_returning(sym, CUDA_ERROR_INVALID_VALUE);
	return CUDA_ERROR_INVALID_VALUE;
}

static CUresult logs_register(CUlogsCallback fn, void *data, CUlogsCallbackHandle *out)
{
	struct mps_logs_cb *cb;

	if (!fn)
		return refuse(MPS_SYM_cuLogsRegisterCallback, "callbackFunc cannot be NULL");
	cb = malloc(sizeof(*cb));
	if (!cb)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*cb = (struct mps_logs_cb){ .fn = fn, .data = data };
	lock();
	if (logs.ncb == CALLBACKS) {
		unlock();
		free(cb);
		return refuse(MPS_SYM_cuLogsRegisterCallback, "No more than %d callbacks can be registered", CALLBACKS);
	}
	logs.cb[logs.ncb++] = cb;
	unlock();
	if (out)
		*out = (CUlogsCallbackHandle)cb;
	return CUDA_SUCCESS;
}

static CUresult logs_unregister(CUlogsCallbackHandle h)
{
	struct mps_logs_cb *cb = (struct mps_logs_cb *)h;

	if (!h)
		return refuse(MPS_SYM_cuLogsUnregisterCallback, "Callback handle cannot be NULL");
	lock();
	for (unsigned int i = 0; i < logs.ncb; i++) {
		if (logs.cb[i] != cb)
			continue;
		memmove(&logs.cb[i], &logs.cb[i + 1], (logs.ncb - i - 1) * sizeof(logs.cb[0]));
		logs.ncb--;
		unlock();
		free(cb);
		return CUDA_SUCCESS;
	}
	unlock();
	return refuse(MPS_SYM_cuLogsUnregisterCallback, "Callback handle is not registered");
}

static CUresult logs_current(CUlogIterator *it, unsigned int flags)
{
	(void)flags;   /* reserved; the driver takes any */
	if (!it)
		return refuse(MPS_SYM_cuLogsCurrent, "Iterator cannot be NULL");
	lock();
	*it = logs.next;
	unlock();
	return CUDA_SUCCESS;
}

/* Where a dump from *it (from the oldest kept without one) begins among
 * the kept lines, and whether some after *it were overwritten. Under
 * logs.lock. */
static unsigned int first_of(const CUlogIterator *it, bool *lost)
{
	uint32_t oldest = logs.next - logs.count;

	*lost = it && *it < oldest;
	if (!it || *it < oldest)
		return 0;
	if (*it >= logs.next)
		return logs.count;
	return *it - oldest;
}

static const struct line *line_at(unsigned int i)
{
	return &logs.ring[(logs.head + i) % LOG_ENTRIES];
}

static CUresult logs_dump_memory(CUlogIterator *it, char *buf, size_t *size, unsigned int flags)
{
	unsigned int from, i;
	size_t total = 0, head = 0, at;
	bool lost;

	(void)flags;
	if (!buf)
		return refuse(MPS_SYM_cuLogsDumpToMemory, "buffer cannot be NULL");
	if (!size)
		return refuse(MPS_SYM_cuLogsDumpToMemory, "size cannot be NULL");
	lock();
	from = first_of(it, &lost);
	if (lost)
		head = sizeof(OVERWRITTEN) - 1;
	for (i = from; i < logs.count; i++)
		total += line_at(i)->len;
	if (head + total + 1 > *size && !total) {
		head = 0;   /* nothing to dump: an empty buffer says it */
	} else if (head + total + 1 > *size) {
		/* The newest that fit after the line saying some are missing. */
		head = sizeof(TOO_SMALL) - 1;
		total = 0;
		for (i = logs.count; i > from && head + total + line_at(i - 1)->len + 1 <= *size; i--)
			total += line_at(i - 1)->len;
		if (!total) {
			unlock();
			*size = 0;
			return refuse(MPS_SYM_cuLogsDumpToMemory, "Provided buffer is not large enough to write any logs to");
		}
		memcpy(buf, TOO_SMALL, head);
		from = i;
	} else if (head) {
		memcpy(buf, OVERWRITTEN, head);
	}
	at = head;
	for (i = from; i < logs.count; i++) {
		memcpy(buf + at, line_at(i)->text, line_at(i)->len);
		at += line_at(i)->len;
	}
	if (*size)
		buf[at] = '\0';
	*size = at;
	if (it)
		*it = logs.next;
	unlock();
	return CUDA_SUCCESS;
}

static CUresult logs_dump_file(CUlogIterator *it, const char *path, unsigned int flags)
{
	unsigned int from;
	bool lost;
	FILE *f;

	(void)flags;
	if (!path)
		return refuse(MPS_SYM_cuLogsDumpToFile, "pathToFile cannot be NULL");
	f = fopen(path, "we");   /* replaced, as the driver does */
	if (!f)
		return refuse(MPS_SYM_cuLogsDumpToFile, "Unable to open file at %s for dumping logs", path);
	lock();
	from = first_of(it, &lost);
	if (lost)
		fputs(OVERWRITTEN, f);
	for (unsigned int i = from; i < logs.count; i++)
		fwrite(line_at(i)->text, 1, line_at(i)->len, f);
	if (it)
		*it = logs.next;
	unlock();
	if (fclose(f) != 0)
		return refuse(MPS_SYM_cuLogsDumpToFile, "Unable to write the logs to %s", path);
	return CUDA_SUCCESS;
}

const struct mps_impl mps__logs_api[] = {
	MPS_IMPL(cuLogsRegisterCallback, logs_register),
	MPS_IMPL(cuLogsUnregisterCallback, logs_unregister),
	MPS_IMPL(cuLogsCurrent, logs_current),
	MPS_IMPL(cuLogsDumpToFile, logs_dump_file),
	MPS_IMPL(cuLogsDumpToMemory, logs_dump_memory),
	MPS_IMPL_END
};
