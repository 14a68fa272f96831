// SPDX-License-Identifier: MIT
/*
 * See slice.h. sched_setattr has no libc wrapper; its attribute block is
 * declared here as the kernel's ABI gives it (the first 48 bytes, version
 * SCHED_ATTR_SIZE_VER0, are all it needs). The thread's nice value is kept.
 */
#include <errno.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/slice.h"

struct slice_attr {
	uint32_t size;
	uint32_t policy;
	uint64_t flags;
	int32_t nice;
	uint32_t priority;
	uint64_t runtime;    /* for SCHED_OTHER: the slice, in ns */
	uint64_t deadline;
	uint64_t period;
};

int mps_set_slice(uint64_t ns)
{
	struct slice_attr a = { .size = sizeof(a), .policy = 0 /* SCHED_OTHER */ };

	errno = 0;
	a.nice = getpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid));
	if (errno)
		return -errno;
	a.runtime = ns;
	if (syscall(SYS_sched_setattr, 0, &a, 0) < 0)
		return -errno;
	return 0;
}
