// SPDX-License-Identifier: MIT
/*
 * See env.h. The warning goes through the process's log (common/log.h), so a
 * client says it on stderr and a server in server.log.
 */
#include <errno.h>
#include <stdlib.h>

#include "common/env.h"
#include "common/log.h"

long mps_env_long(const char *name, long def, long lo, long hi)
{
	const char *v = getenv(name);
	char *end;
	long x;

	if (!v || !*v)
		return def;
	errno = 0;
	x = strtol(v, &end, 10);
	if (errno || *end || end == v || x < lo || x > hi) {
		mps_log_warn("openmps: ignoring %s=%s (want %ld..%ld)", name, v, lo, hi);
		return def;
	}
	return x;
}
