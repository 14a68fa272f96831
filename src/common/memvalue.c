// SPDX-License-Identifier: MIT
/*
 * See memvalue.h.
 */
#include <ctype.h>
#include <errno.h>
#include <string.h>

#include "common/memvalue.h"

/* An integer followed by M or G (as NVIDIA's daemon takes it); plain 0
 * means no limit. */
int mps_parse_mem_value(const char *text, uint64_t *bytes)
{
	unsigned long long v = 0;
	const char *p = text;
	unsigned shift;

	if (!strcmp(text, "0")) {
		*bytes = 0;
		return 0;
	}
	if (!isdigit((unsigned char)*p))
		return -EINVAL;
	for (; isdigit((unsigned char)*p); p++) {
		v = v * 10 + (unsigned)(*p - '0');
		if (v > MPS_MEM_VALUE_MAX)
			return -EINVAL;
	}
	switch (*p) {
	case 'M': case 'm': shift = 20; break;
	case 'G': case 'g': shift = 30; break;
	default: return -EINVAL;
	}
	if (p[1] || v > (MPS_MEM_VALUE_MAX >> shift))
		return -EINVAL;
	*bytes = (uint64_t)v << shift;
	return 0;
}
