// SPDX-License-Identifier: MIT
/*
 * See driver.h.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>

#include "common/driver_path.h"
#include "common/log.h"
#include "server/driver.h"

#define STR(x)  #x
#define XSTR(x) STR(x)

struct mps_driver mps_drv;

int mps_driver_load(void)
{
	char err[512];

	mps_drv.lib = mps_driver_open(err, sizeof(err), mps_drv.path, sizeof(mps_drv.path));
	if (!mps_drv.lib) {
		mps_log_error("%s", err);
		return -ENOENT;
	}
#define MPS_DRIVER_LOOKUP(name) \
	mps_drv.name = (__typeof__(&name))dlsym(mps_drv.lib, XSTR(name)); \
	if (!mps_drv.name) { \
		mps_log_error("the driver %s lacks %s", mps_drv.path, XSTR(name)); \
		return -ENOSYS; \
	}
	MPS_DRIVER_API(MPS_DRIVER_LOOKUP)
#undef MPS_DRIVER_LOOKUP
#define MPS_DRIVER_LOOKUP_OPT(name) \
	mps_drv.name = (__typeof__(&name))dlsym(mps_drv.lib, XSTR(name));
	MPS_DRIVER_OPT(MPS_DRIVER_LOOKUP_OPT)
	MPS_DRIVER_FWD(MPS_DRIVER_LOOKUP_OPT)
#undef MPS_DRIVER_LOOKUP_OPT
	return 0;
}

const char *mps_driver_errname(CUresult r)
{
	const char *s = NULL;

	if (mps_drv.cuGetErrorName && mps_drv.cuGetErrorName(r, &s) == CUDA_SUCCESS && s)
		return s;
	return "unknown CUDA error";
}
