// SPDX-License-Identifier: MIT
/*
 * The one private export table the server asks its driver for: 1734dc26,
 * whose slot 4 mallocs two maps with an entry per TPC of the current
 * context's device and slot 13 frees them (docs/EXPORT-TABLES.md). Like
 * the real one is suspected to, slot 4 needs a current context: in a
 * client process, which loads the stand-in as its "real driver" but makes
 * no context in it, it fails, and the client asks the server instead —
 * the path the tests then take. Entry i of the first map is i % 4, of the
 * second i / 4, over SI_SM_COUNT / 2 entries. Every other id is unknown.
 */
#include <stdlib.h>
#include <string.h>

#include "standin.h"

static CUresult tpc_maps(uint8_t **a, uint8_t **b)
{
	struct si_context *ctx;
	CUresult rc;
	int n = SI_SM_COUNT / 2;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!a || !b)
		return CUDA_ERROR_INVALID_VALUE;
	mps__lock();
	rc = mps__ctx_current(&ctx);
	mps__unlock();
	if (rc != CUDA_SUCCESS)
		return rc;
	*a = malloc((size_t)n);
	*b = malloc((size_t)n);
	if (!*a || !*b) {
		free(*a);
		free(*b);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	for (int i = 0; i < n; i++) {
		(*a)[i] = (uint8_t)(i % 4);
		(*b)[i] = (uint8_t)(i / 4);
	}
	return CUDA_SUCCESS;
}

static CUresult free_tpc_maps(uint8_t *a, uint8_t *b)
{
	free(a);
	free(b);
	return CUDA_SUCCESS;
}

static CUresult other_slot(void)
{
	return CUDA_ERROR_NOT_SUPPORTED;
}

#define O (const void *)other_slot
static const void *const table_1734dc26[17] = {
	(const void *)(uintptr_t)(17 * sizeof(void *)), O, O, O, (const void *)tpc_maps, O, O, O, O, O, O, O, O,
	(const void *)free_tpc_maps, O, O, O,
};
#undef O

CU_API CUresult cuGetExportTable(const void **table, const CUuuid *id)
{
	static const uint8_t id_1734dc26[16] = { 0x17, 0x34, 0xdc, 0x26, 0x80, 0x0d, 0x47, 0x45,
						 0x87, 0x26, 0xc0, 0xf1, 0xe7, 0xdd, 0x8b, 0xca };

	if (!table || !id)
		return CUDA_ERROR_INVALID_VALUE;
	if (memcmp(id->bytes, id_1734dc26, 16)) {
		*table = NULL;
		return CUDA_ERROR_INVALID_VALUE;
	}
	*table = table_1734dc26;
	return CUDA_SUCCESS;
}
