// SPDX-License-Identifier: MIT
/*
 * See jit.h. The program's log buffers live in its own process, so the
 * driver writes into the server's (struct mps_jit) and every answer carries
 * them back, with the wall time and the threads per block the driver left,
 * for the client to write where the program asked. Options that are plain
 * numbers are the only ones taken from a client: a pointer option would
 * have the driver write into the server.
 */
#include <errno.h>
#include <string.h>

#include "server/jit.h"
#include "server/server.h"

_Static_assert(sizeof(struct mps_link_reply) + 2 * MPS_JIT_LOG_BYTES <= MPS_SLOT_DATA, "both logs fit a reply");

int mps_jit_options(const struct mps_link_opt *in, uint32_t n, bool per_input, CUjit_option *opt, void **val)
{
	if (n > MPS_LINK_OPTS)
		return -E2BIG;
	for (uint32_t i = 0; i < n; i++) {
		if (!mps_jit_plain(in[i].opt, per_input))
			return -EINVAL;
		opt[i] = (CUjit_option)in[i].opt;
		val[i] = (void *)(uintptr_t)in[i].value;
	}
	return (int)n;
}

int mps_jit_init(struct mps_jit *j, const struct mps_link_opt *in, uint32_t n)
{
	int k = mps_jit_options(in, n, false, j->opt, j->val);

	if (k < 0)
		return k;
	j->info[0] = j->error[0] = 0;
	j->info_mark = j->error_mark = 0;
	j->opt[k] = CU_JIT_INFO_LOG_BUFFER;
	j->val[k++] = j->info;
	j->opt[k] = CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES;
	j->val[k++] = (void *)(uintptr_t)MPS_JIT_LOG_BYTES;
	j->opt[k] = CU_JIT_ERROR_LOG_BUFFER;
	j->val[k++] = j->error;
	j->opt[k] = CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES;
	j->val[k++] = (void *)(uintptr_t)MPS_JIT_LOG_BYTES;
	j->opt[k] = CU_JIT_WALL_TIME;
	j->val[k++] = NULL;
	j->n = (unsigned int)k;
	return 0;
}

static uint64_t sum(const char *text, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < n; i++)
		h = (h ^ (uint8_t)text[i]) * 0x100000001b3ull;
	return h;
}

void mps_jit_step(struct mps_jit *j)
{
	j->info_mark = strnlen(j->info, MPS_JIT_LOG_BYTES - 1);
	j->error_mark = strnlen(j->error, MPS_JIT_LOG_BYTES - 1);
	j->info_sum = sum(j->info, j->info_mark);
	j->error_sum = sum(j->error, j->error_mark);
}

/* Where the step's own text in a log begins: after what was there when it
 * began (and the line break the driver puts after it), if the driver added
 * to it. */
static size_t step_start(const char *log, size_t len, size_t mark, uint64_t h)
{
	if (!mark || len <= mark || sum(log, mark) != h)
		return 0;
	while (mark < len && log[mark] == '\n')   /* the driver's separator */
		mark++;
	return mark;
}

void mps_jit_answer(struct mps_client *c, uint32_t slot, const struct mps_jit *j, CUresult r)
{
	struct mps_slot *s = mps__slot(c, slot);
	struct mps_link_reply *rep = (struct mps_link_reply *)s->data;
	size_t ni = j ? strnlen(j->info, MPS_JIT_LOG_BYTES - 1) : 0, ne = j ? strnlen(j->error, MPS_JIT_LOG_BYTES - 1) : 0;
	size_t fi = j ? step_start(j->info, ni, j->info_mark, j->info_sum) : 0;
	size_t fe = j ? step_start(j->error, ne, j->error_mark, j->error_sum) : 0;

	memset(rep, 0, sizeof(*rep));
	if (j) {
		ni -= fi;
		ne -= fe;
		rep->info_len = (uint32_t)ni;
		rep->error_len = (uint32_t)ne;
		memcpy(rep->text, j->info + fi, ni);
		memcpy(rep->text + ni, j->error + fe, ne);
		for (unsigned int i = 0; i < j->n; i++) {
			if (j->opt[i] == CU_JIT_WALL_TIME) {
				uint32_t bits = (uint32_t)(uintptr_t)j->val[i];

				memcpy(&rep->wall_ms, &bits, sizeof(rep->wall_ms));
			} else if (j->opt[i] == CU_JIT_THREADS_PER_BLOCK) {
				rep->threads = (uint32_t)(uintptr_t)j->val[i];
			}
		}
	}
	s->len = (uint32_t)(sizeof(*rep) + ni + ne);
	mps__reply(c, slot, r);
}
