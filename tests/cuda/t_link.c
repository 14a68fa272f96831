// SPDX-License-Identifier: MIT
/*
 * The JIT linker: the kernels' PTX linked with cuLinkCreate, cuLinkAddData
 * and cuLinkComplete (with info and error logs, the wall time and an
 * optimization level), the image loaded with cuModuleLoadData and its vadd
 * run on random floats, checked exactly; the same from a file with
 * cuLinkAddFile; text that is not PTX refused with the error log saying
 * something and the link still usable; a missing file, a null input and a
 * null output refused; the linked image staying readable and unchanged
 * until cuLinkDestroy.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

static uint64_t rng;

/* Loads the image and runs its vadd on random floats, checked exactly. */
static void run_vadd(const void *image, const char *what)
{
	CUmodule m;
	CUfunction f;

	REQUIRE_CU(cuModuleLoadData(&m, image));
	REQUIRE_CU(cuModuleGetFunction(&f, m, "vadd"));
	t_run_vadd(f, &rng, what);
	REQUIRE_CU(cuModuleUnload(m));
}

int main(int argc, char **argv)
{
	static char info[4096], error[4096];
	CUjit_option opts[] = { CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, CU_JIT_ERROR_LOG_BUFFER,
				CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, CU_JIT_WALL_TIME, CU_JIT_OPTIMIZATION_LEVEL };
	void *vals[6];
	char path[] = "/tmp/t_link-XXXXXX";
	char *ptx, *copy;
	CUlinkState st, st2;
	void *image;
	size_t size;
	float wall;
	FILE *f;
	int fd;

	t_init(argc, argv);
	rng = t_rng(1);
	t_primary(t_device());
	ptx = t_ptx();

	vals[0] = info;
	vals[1] = (void *)(uintptr_t)sizeof(info);
	vals[2] = error;
	vals[3] = (void *)(uintptr_t)sizeof(error);
	vals[4] = NULL;
	vals[5] = (void *)(uintptr_t)3;
	memset(info, 0x55, sizeof(info));
	memset(error, 0x55, sizeof(error));
	REQUIRE_CU(cuLinkCreate(6, opts, vals, &st));
	REQUIRE_CU(cuLinkAddData(st, CU_JIT_INPUT_PTX, ptx, strlen(ptx) + 1, "kernels.ptx", 0, NULL, NULL));
	REQUIRE_CU(cuLinkComplete(st, &image, &size));
	CHECK(image && size > 0, "cuLinkComplete gave no image (%zu bytes)", size);
	CHECK((size_t)(uintptr_t)vals[1] <= sizeof(info), "info log size %zu past its buffer", (size_t)(uintptr_t)vals[1]);
	CHECK((size_t)(uintptr_t)vals[3] <= sizeof(error), "error log size %zu past its buffer",
	      (size_t)(uintptr_t)vals[3]);
	CHECK((size_t)(uintptr_t)vals[1] == 0 || memchr(info, 0, sizeof(info)), "the info log is not terminated");
	memcpy(&wall, &vals[4], sizeof(wall));
	CHECK(wall >= 0 && wall < 600000, "wall time %f ms", (double)wall);
	/* The image is the program's to read until cuLinkDestroy. */
	copy = malloc(size);
	if (!copy)
		check_stop();
	memcpy(copy, image, size);
	run_vadd(image, "vadd from the linked image");
	CHECK(!memcmp(copy, image, size), "the linked image changed before cuLinkDestroy");
	REQUIRE_CU(cuLinkDestroy(st));
	run_vadd(copy, "vadd from a copy of the linked image");
	free(copy);

	/* From a file, with no options at all. */
	fd = mkstemp(path);
	if (fd < 0 || !(f = fdopen(fd, "w")) || fputs(ptx, f) < 0 || fclose(f) != 0) {
		check_fail(__FILE__, __LINE__, NULL, "cannot write %s", path);
		check_stop();
	}
	REQUIRE_CU(cuLinkCreate(0, NULL, NULL, &st2));
	REQUIRE_CU(cuLinkAddFile(st2, CU_JIT_INPUT_PTX, path, 0, NULL, NULL));
	REQUIRE_CU(cuLinkComplete(st2, &image, &size));
	run_vadd(image, "vadd linked from a file");
	REQUIRE_CU(cuLinkDestroy(st2));
	unlink(path);

	/* Not PTX: refused, the error log says why, the link goes on. */
	vals[1] = (void *)(uintptr_t)sizeof(info);
	vals[3] = (void *)(uintptr_t)sizeof(error);
	error[0] = 0;
	REQUIRE_CU(cuLinkCreate(6, opts, vals, &st));
	{
		static const char junk[] = "this is not PTX at all\n";
		CUresult r = cuLinkAddData(st, CU_JIT_INPUT_PTX, (void *)junk, sizeof(junk), "junk.ptx", 0, NULL, NULL);

		CHECK(r == CUDA_ERROR_INVALID_PTX || r == CUDA_ERROR_INVALID_IMAGE,
		      "text that is not PTX: %s, want CUDA_ERROR_INVALID_PTX or CUDA_ERROR_INVALID_IMAGE", t_errname(r));
	}
	CHECK((size_t)(uintptr_t)vals[3] > 1 && error[0], "the error log says nothing about the bad input");
	REQUIRE_CU(cuLinkAddData(st, CU_JIT_INPUT_PTX, ptx, strlen(ptx) + 1, "kernels.ptx", 0, NULL, NULL));
	REQUIRE_CU(cuLinkComplete(st, &image, &size));
	run_vadd(image, "vadd linked after a refused input");
	/* The driver (580) answers a missing file with INVALID_VALUE here. */
	CHECK_CU(cuLinkAddFile(st, CU_JIT_INPUT_PTX, "/nonexistent/t_link.ptx", 0, NULL, NULL),
		 CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(cuLinkAddData(st, CU_JIT_INPUT_PTX, NULL, 10, "null", 0, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
	REQUIRE_CU(cuLinkDestroy(st));
	CHECK_CU(cuLinkCreate(0, NULL, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
	free(ptx);
	return t_finish();
}
