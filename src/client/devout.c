// SPDX-License-Identifier: MIT
/*
 * What kernels print, brought back to the program. The driver writes a
 * kernel's printf output in the server, whose context runs the kernel
 * (server/devout.c). A module whose image names vprintf can print: the
 * first such module loaded tells the server to keep that output for this
 * process, and after each synchronizing call (a context's, a stream's or
 * an event's synchronize, a blocking copy, a context's end) the output is
 * fetched and written through this process's stdout and stderr, so that
 * it falls in order with the program's own output, where the driver would
 * have written it. A process whose modules do not print pays one flag
 * read per synchronize. A name that a fat binary's compression hides is
 * not seen: such a module's output goes to the server's log, unless
 * another module of the process prints too. A failed device assert's
 * message is printed at the GPU fault it causes, which ends every client
 * of the server: the server sends it, with what else was printed just
 * before, to the clients whose work was running, ahead of the refusal
 * that ends them (mps__devout_write, from conn.c).
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "client/client.h"
#include "common/atomics.h"
#include "common/log.h"

#define MAX_ROUNDS 4096   /* slots of output taken after one synchronize: 32 MiB */

static int enabled;   /* atomic: this process's modules print */

void mps__devout_scan(const void *image, size_t size, uint32_t ctx)
{
	struct mps_msg_devout q = { .hdr.flags = MPS_DEVOUT_ENABLE };
	struct mps_call call;

	if (mps_load_acquire(&enabled) || !image)
		return;
	if (!memmem(image, size, "vprintf", 7))
		return;
	if (mps_xchg(&enabled, 1))
		return;
	if (mps__call(MPS_OP_DEVOUT, ctx, &q.hdr, sizeof(q), NULL, 0, &call) != CUDA_SUCCESS)
		mps_log_debug("openmps: the server keeps no kernel output for this process");
	mps__call_end(&call);
}

void mps__devout_write(uint32_t stream, const void *bytes, size_t n)
{
	FILE *f = stream == 1 ? stdout : stream == 2 ? stderr : NULL;

	if (f && n) {
		fwrite(bytes, 1, n, f);
		fflush(f);
	}
}

void mps__devout_take(uint32_t stream, uint32_t ctx)
{
	struct mps_msg_devout q = { .hdr.flags = MPS_DEVOUT_TAKE, .stream = stream };
	static uint8_t buf[MPS_SLOT_DATA];
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	bool more = true;

	if (!mps_load_acquire(&enabled))
		return;
	/* One thread at a time, so that each one's output stays whole. */
	pthread_mutex_lock(&lock);
	for (int round = 0; more && round < MAX_ROUNDS; round++) {
		struct mps_call call;
		uint64_t n[2] = { 0, 0 };
		CUresult r;

		more = false;
		r = mps__call(MPS_OP_DEVOUT, ctx, &q.hdr, sizeof(q), NULL, 0, &call);
		if (r == CUDA_SUCCESS && call.s && call.s->val[0] <= MPS_SLOT_DATA &&
		    call.s->val[1] <= MPS_SLOT_DATA - call.s->val[0]) {
			n[0] = call.s->val[0];
			n[1] = call.s->val[1];
			memcpy(buf, call.s->data, n[0] + n[1]);
			more = call.s->val[2] != 0;
		}
		mps__call_end(&call);
		if (n[0])
			fwrite(buf, 1, n[0], stdout);
		if (n[1])
			fwrite(buf + n[0], 1, n[1], stderr);
	}
	pthread_mutex_unlock(&lock);
}
