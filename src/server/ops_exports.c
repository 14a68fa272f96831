// SPDX-License-Identifier: MIT
/*
 * What the server answers for the private export tables the client library
 * serves (src/client/exports*.c) when only a context can answer it.
 *
 * cuBLASLt's per-TPC maps (slot 4 of table 1734dc26): the driver makes them
 * for the current context's device, in two buffers it mallocs, and its slot
 * 13 frees them with free(). The client asks the driver loaded in its own
 * process first; that driver has no context there, and when it cannot
 * answer the client asks here (MPS_OP_TPC_MAPS): the call is made with the
 * client's context's device bound, both buffers are copied into the reply,
 * and slot 13 frees them. The driver does not say how long they are: one
 * entry per TPC fits what was traced (buffers of 57 to 72 bytes for 132
 * SMs, two per TPC), so each copy is as long as malloc_usable_size says
 * the buffer is, with the bytes past half the SM count zeroed rather than
 * handing out what the heap left there.
 */
#include <malloc.h>
#include <stdint.h>
#include <string.h>

#include "server/driver.h"
#include "server/server.h"

#define MAP_MAX (MPS_SLOT_DATA / 2)

typedef CUresult (*maps_fn)(uint8_t **, uint8_t **);
typedef CUresult (*free_maps_fn)(uint8_t *, uint8_t *);

/* The driver's table, its slots 4 and 13; CUDA_ERROR_NOT_SUPPORTED if it
 * has none. */
static CUresult maps_slots(maps_fn *make, free_maps_fn *release)
{
	static const uint8_t id[16] = { 0x17, 0x34, 0xdc, 0x26, 0x80, 0x0d, 0x47, 0x45,
					0x87, 0x26, 0xc0, 0xf1, 0xe7, 0xdd, 0x8b, 0xca };
	const void *const *t = NULL;
	CUuuid u;

	if (!mps_drv.cuGetExportTable)
		return CUDA_ERROR_NOT_SUPPORTED;
	memcpy(u.bytes, id, sizeof(id));
	if (mps_drv.cuGetExportTable((const void **)&t, &u) != CUDA_SUCCESS || !t ||
	    (uintptr_t)t[0] < 14 * sizeof(void *) || (uintptr_t)t[0] > 4096 || !t[4] || !t[13])
		return CUDA_ERROR_NOT_SUPPORTED;
	*make = (maps_fn)(uintptr_t)t[4];
	*release = (free_maps_fn)(uintptr_t)t[13];
	return CUDA_SUCCESS;
}

void mps__op_tpc_maps(struct mps_client *c, const struct mps_msg *m)
{
	struct mps_slot *s = mps__slot(c, m->slot);
	struct mps_sctx *x = mps__msg_ctx(c, m);
	free_maps_fn release = NULL;
	maps_fn make = NULL;
	uint8_t *a = NULL, *b = NULL;
	size_t na, nb;
	CUresult r;

	if (!x) {
		mps__reply(c, m->slot, CUDA_ERROR_INVALID_CONTEXT);
		return;
	}
	r = maps_slots(&make, &release);
	if (r == CUDA_SUCCESS)
		r = mps__bind_device(c, x->device);
	if (r == CUDA_SUCCESS)
		r = make(&a, &b);
	if (r == CUDA_SUCCESS && (!a || !b))
		r = CUDA_ERROR_UNKNOWN;
	if (r == CUDA_SUCCESS) {
		int sms = 0;
		size_t tpcs;

		if (mps_drv.cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
						 mps_srv.dev[x->device].dev) != CUDA_SUCCESS || sms <= 0)
			sms = 2 * MAP_MAX;
		tpcs = ((size_t)sms + 1) / 2;
		na = malloc_usable_size(a);
		nb = malloc_usable_size(b);
		na = na < MAP_MAX ? na : MAP_MAX;
		nb = nb < MAP_MAX ? nb : MAP_MAX;
		memset(s->data, 0, na + nb);
		memcpy(s->data, a, na < tpcs ? na : tpcs);
		memcpy(s->data + na, b, nb < tpcs ? nb : tpcs);
		s->val[0] = na;
		s->val[1] = nb;
		s->len = (uint32_t)(na + nb);
		release(a, b);
	}
	mps__reply(c, m->slot, r);
}
