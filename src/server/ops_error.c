// SPDX-License-Identifier: MIT
/*
 * Error names and descriptions, from the driver that runs the work, so a
 * client prints exactly what the real driver would.
 */
#include <string.h>

#include "server/driver.h"
#include "server/server.h"

void mps__op_error_string(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_error_string *q = (const void *)m;
	struct mps_slot *s = mps__slot(c, m->slot);
	const char *name = NULL, *desc = NULL;
	CUresult r;
	size_t a, b;

	r = mps_drv.cuGetErrorName((CUresult)q->code, &name);
	if (r == CUDA_SUCCESS)
		r = mps_drv.cuGetErrorString((CUresult)q->code, &desc);
	if (r != CUDA_SUCCESS || !name || !desc) {
		mps__reply(c, m->slot, r != CUDA_SUCCESS ? r : CUDA_ERROR_INVALID_VALUE);
		return;
	}
	a = strnlen(name, 256);
	b = strnlen(desc, MPS_SLOT_DATA - a - 2);
	memcpy(s->data, name, a);
	s->data[a] = 0;
	memcpy(s->data + a + 1, desc, b);
	s->data[a + 1 + b] = 0;
	s->len = (uint32_t)(a + b + 2);
	mps__reply(c, m->slot, CUDA_SUCCESS);
}
