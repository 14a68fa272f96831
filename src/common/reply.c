// SPDX-License-Identifier: MIT
/*
 * See reply.h.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/reply.h"
#include "common/sock.h"

void mps_reply_packet(const char *text, size_t len, size_t off, const char **pkt, size_t *plen)
{
	static const char nul;

	if (len - off >= MPS_REPLY_CHUNK) {
		*pkt = text + off;
		*plen = MPS_REPLY_CHUNK;
	} else if (len - off) {
		*pkt = text + off;
		*plen = len - off;
	} else {
		*pkt = &nul;   /* a multiple of the chunk, or empty */
		*plen = 1;
	}
}

ssize_t mps_reply_recv(int fd, char **out)
{
	size_t used = 0, cap = 0;
	char *buf = NULL;

	*out = NULL;
	for (;;) {
		ssize_t n;

		if (cap - used < MPS_REPLY_CHUNK + 1) {
			char *more;

			cap = cap ? 2 * cap : MPS_REPLY_CHUNK + 1;
			if (cap > MPS_REPLY_CAP + MPS_REPLY_CHUNK + 1) {
				free(buf);
				return -EMSGSIZE;
			}
			more = realloc(buf, cap);
			if (!more) {
				free(buf);
				return -ENOMEM;
			}
			buf = more;
		}
		n = mps_sock_recv(fd, buf + used, MPS_REPLY_CHUNK + 1, NULL);
		if (n <= 0) {
			free(buf);
			return n == 0 && used ? -EPROTO : n;
		}
		used += (size_t)n;
		if ((size_t)n < MPS_REPLY_CHUNK)
			break;
	}
	buf[used] = 0;
	*out = buf;
	return (ssize_t)strlen(buf);   /* a last NUL packet is not text */
}
