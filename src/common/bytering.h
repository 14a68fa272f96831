// SPDX-License-Identifier: MIT
/*
 * Placement in a byte ring handed out in order and taken back in order:
 * `head` and `tail` count the bytes ever handed out and taken back, a
 * stretch never crosses the ring's end (one that would skips to its start,
 * the skipped bytes belonging to it). The client's pinned upload ring
 * (client/copy.c) and the server's bounce rings (server/bounce.c) keep
 * their stretches this way.
 */
#ifndef OPENMPS_COMMON_BYTERING_H
#define OPENMPS_COMMON_BYTERING_H

#include <stdbool.h>
#include <stdint.h>

/* Whether n bytes fit in a ring of size bytes now; if so *end is `head`
 * once they are handed out, and they start at offset (*end - n) % size. */
static inline bool mps_bytering_fit(uint64_t head, uint64_t tail, uint64_t size, uint64_t n, uint64_t *end)
{
	uint64_t at = head % size, start = at + n > size ? head + (size - at) : head;

	if (start + n - tail > size)
		return false;
	*end = start + n;
	return true;
}

#endif
