// SPDX-License-Identifier: MIT
/*
 * See log.h. A line is formatted whole into a buffer and written with one
 * write(2), so concurrent writers (threads, or processes sharing an O_APPEND
 * file) never interleave inside a line.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"

static const char *log_role = "Client";
static int log_out = 2;
static int log_level = MPS_LOG_INFO;
static const char *bad_level;   /* an OPENMPS_LOG_LEVEL not understood, said once */

void mps_log_init(const char *role, int fd)
{
	const char *lv = getenv("OPENMPS_LOG_LEVEL");

	log_role = role;
	if (fd >= 0)
		log_out = fd;
	if (lv) {
		if (!strcasecmp(lv, "error"))
			log_level = MPS_LOG_ERROR;
		else if (!strcasecmp(lv, "warn"))
			log_level = MPS_LOG_WARN;
		else if (!strcasecmp(lv, "info"))
			log_level = MPS_LOG_INFO;
		else if (!strcasecmp(lv, "debug"))
			log_level = MPS_LOG_DEBUG;
		else if (*lv)
			bad_level = lv;
	}
	if (bad_level) {
		mps_log(MPS_LOG_WARN, "OPENMPS_LOG_LEVEL=%s is not error, warn, info or debug: info it is", bad_level);
		bad_level = NULL;
	}
}

void mps_log_set_fd(int fd)
{
	log_out = fd;
}

int mps_log_fd(void)
{
	return log_out;
}

int mps_log_enabled(enum mps_log_level level)
{
	return (int)level <= log_level;
}

void mps_log(enum mps_log_level level, const char *fmt, ...)
{
	char line[1024];
	struct timeval tv;
	struct tm tm;
	va_list ap;
	int n, m;

	if (!mps_log_enabled(level))
		return;
	gettimeofday(&tv, NULL);
	localtime_r(&tv.tv_sec, &tm);
	n = snprintf(line, sizeof(line), "[%04d-%02d-%02d %02d:%02d:%02d.%03d %s %5d] ",
		     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
		     (int)(tv.tv_usec / 1000), log_role, (int)getpid());
	va_start(ap, fmt);
	m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (m < 0)
		m = 0;
	n += m;
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	if (write(log_out, line, (size_t)n) < 0) {
		/* Nowhere left to report it. */
	}
}
