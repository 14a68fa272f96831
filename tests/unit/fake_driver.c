// SPDX-License-Identifier: MIT
//
// A stand-in for the real driver's own private tables, for test_exports:
// built as a libcuda.so.1 of its own that the client library loads through
// OPENMPS_DRIVER (src/client/exports/driver.c). It has cuInit and
// cuGetExportTable and three tables, 1734dc26, 69a28e9f and da9151d3, of
// the sizes driver 580.159 reports; the slots the client forwards to
// record what they were called with (fake_driver_record) and return values
// a test can recognise, every other slot returns 999.
//
// FAKE_DRIVER_MAPS_FAIL=1 makes 1734dc26[4] fail with
// CUDA_ERROR_INVALID_CONTEXT.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>

#define EXPORT __attribute__((visibility("default")))

struct fake_driver_record {
	int inits;
	int table;            /* which table's slot was called last */
	int slot;
	uint64_t arg[8];      /* six registers and two stack words */
	int maps_made, maps_freed;
};

EXPORT struct fake_driver_record fake_driver_record;

EXPORT CUresult cuInit(unsigned int flags)
{
	(void)flags;
	fake_driver_record.inits++;
	return CUDA_SUCCESS;
}

static uint64_t other(void)
{
	return 999;
}

/* A slot taking eight arguments, two of them on the stack. */
#define RECORDER(name, t, s, ret) \
	static uint64_t name(uint64_t a0, uint64_t a1, uint64_t a2, uint64_t a3, uint64_t a4, uint64_t a5, \
			     uint64_t s0, uint64_t s1) \
	{ \
		uint64_t v[8] = { a0, a1, a2, a3, a4, a5, s0, s1 }; \
		fake_driver_record.table = (t); \
		fake_driver_record.slot = (s); \
		memcpy(fake_driver_record.arg, v, sizeof(v)); \
		return (ret); \
	}

RECORDER(nvml_19, 0x69a2, 19, 0)
RECORDER(nvml_21, 0x69a2, 21, 0x7f0000001234ull)
RECORDER(nvml_24, 0x69a2, 24, 0)
RECORDER(nvml_25, 0x69a2, 25, 0)
RECORDER(jit_1, 0xda91, 1, 0xfeedface00000001ull)
RECORDER(jit_2, 0xda91, 2, 0)
RECORDER(jit_3, 0xda91, 3, 0)
RECORDER(jit_4, 0xda91, 4, 0)
RECORDER(jit_6, 0xda91, 6, 0)

/* 1734dc26: [4] mallocs two maps, entry i being i % 8 and i / 8 over 66
 * entries; [13] frees them. */
static CUresult maps(uint8_t **a, uint8_t **b)
{
	const char *fail = getenv("FAKE_DRIVER_MAPS_FAIL");

	if (fail && *fail == '1')
		return CUDA_ERROR_INVALID_CONTEXT;
	*a = malloc(66);
	*b = malloc(66);
	for (int i = 0; i < 66; i++) {
		(*a)[i] = (uint8_t)(i % 8);
		(*b)[i] = (uint8_t)(i / 8);
	}
	fake_driver_record.maps_made++;
	return CUDA_SUCCESS;
}

static CUresult free_maps(uint8_t *a, uint8_t *b)
{
	free(a);
	free(b);
	fake_driver_record.maps_freed++;
	return CUDA_SUCCESS;
}

static const void *t1734[17], *t69a2[34], *tda91[7];

static void fill(const void **t, int n)
{
	t[0] = (const void *)(uintptr_t)(n * sizeof(void *));
	for (int i = 1; i < n; i++)
		t[i] = (const void *)other;
}

EXPORT CUresult cuGetExportTable(const void **table, const CUuuid *id)
{
	static const uint8_t i1734[4] = { 0x17, 0x34, 0xdc, 0x26 }, i69a2[4] = { 0x69, 0xa2, 0x8e, 0x9f },
			     ida91[4] = { 0xda, 0x91, 0x51, 0xd3 };

	if (!table || !id)
		return CUDA_ERROR_INVALID_VALUE;
	fill(t1734, 17);
	t1734[4] = (const void *)maps;
	t1734[13] = (const void *)free_maps;
	fill(t69a2, 34);
	t69a2[19] = (const void *)nvml_19;
	t69a2[21] = (const void *)nvml_21;
	t69a2[24] = (const void *)nvml_24;
	t69a2[25] = (const void *)nvml_25;
	fill(tda91, 7);
	tda91[1] = (const void *)jit_1;
	tda91[2] = (const void *)jit_2;
	tda91[3] = (const void *)jit_3;
	tda91[4] = (const void *)jit_4;
	tda91[6] = (const void *)jit_6;
	*table = NULL;
	if (!memcmp(id->bytes, i1734, 4))
		*table = t1734;
	else if (!memcmp(id->bytes, i69a2, 4))
		*table = t69a2;
	else if (!memcmp(id->bytes, ida91, 4))
		*table = tda91;
	return *table ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
