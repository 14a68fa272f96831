// SPDX-License-Identifier: MIT
/*
 * The GPUs the server serves: initialises the driver, reads every device's
 * identity and attributes once (they go to each client in its welcome, so
 * device queries never leave the client), and holds each device's primary
 * context for the life of the server.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

#include "common/log.h"
#include "server/device.h"
#include "server/driver.h"
#include "server/server.h"
#include "server/smshare.h"
#include "server/streams.h"

/* Peer access between every pair of devices that allows it, enabled once
 * for the server's contexts, in which every client's memory lives; each
 * device's record says which peers it reaches (the clients answer
 * cuDeviceCanAccessPeer from it). */
static void enable_peers(void)
{
	if (!mps_drv.cuDeviceCanAccessPeer || !mps_drv.cuCtxEnablePeerAccess)
		return;
	for (int i = 0; i < mps_srv.ndev; i++) {
		struct mps_device *d = &mps_srv.dev[i];

		mps_drv.cuCtxSetCurrent(d->primary);
		for (int j = 0; j < mps_srv.ndev; j++) {
			int can = 0;
			CUresult r;

			if (j == i || mps_drv.cuDeviceCanAccessPeer(&can, d->dev, mps_srv.dev[j].dev) != CUDA_SUCCESS ||
			    !can)
				continue;
			r = mps_drv.cuCtxEnablePeerAccess(mps_srv.dev[j].primary, 0);
			if (r == CUDA_SUCCESS || r == CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED)
				d->info.peers |= 1u << j;
			else
				mps_log_warn("peer access from device %d to %d: %s", i, j, mps_driver_errname(r));
		}
		if (d->info.peers)
			mps_log_info("Device %d reaches the memory of devices %#x directly", i, d->info.peers);
	}
	if (mps_srv.ndev)
		mps_drv.cuCtxSetCurrent(mps_srv.dev[0].primary);
}

static void CUDA_CB nothing(void *arg)
{
	(void)arg;
}

/* The driver runs host functions on a thread of its own that it starts the
 * first time one of its calls needs it: cuLaunchHostFunc, and also some
 * stream destructions (seen from cuStreamDestroy in a client's teardown).
 * One no-op host function per context at start makes that thread part of
 * the server from the beginning, so a client's teardown starts none and
 * the server's thread count stays what it was (a leak would show). */
static void start_host_function_thread(int dev)
{
	struct mps_device *d = &mps_srv.dev[dev];
	CUstream s;

	if (!mps_drv.cuLaunchHostFunc)
		return;
	mps_drv.cuCtxSetCurrent(d->primary);
	if (mps_stream_raw_new(dev, NULL, 0, &s) != CUDA_SUCCESS)
		return;
	if (mps_drv.cuLaunchHostFunc(s, nothing, NULL) == CUDA_SUCCESS)
		mps_drv.cuStreamSynchronize(s);
	mps_stream_raw_free(dev, s);
}

/* Logs why the devices could not be set up and puts it in why. Returns
 * -ENODEV. */
__attribute__((format(printf, 3, 4))) static int init_failed(char *why, size_t size, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, size, fmt, ap);
	va_end(ap);
	mps_log_error("%s", why);
	return -ENODEV;
}

int mps_devices_init(char *why, size_t size)
{
	CUresult r;
	int n;

	r = mps_drv.cuInit(0);
	if (r != CUDA_SUCCESS)
		return init_failed(why, size, "cuInit failed: %s", mps_driver_errname(r));
	mps_drv.cuDriverGetVersion(&mps_srv.driver_version);
	r = mps_drv.cuDeviceGetCount(&n);
	if (r != CUDA_SUCCESS || n <= 0)
		return init_failed(why, size, "no CUDA devices (%s)", mps_driver_errname(r));
	if (n > MPS_MAX_DEVICES) {
		mps_log_warn("serving the first %d of %d devices", MPS_MAX_DEVICES, n);
		n = MPS_MAX_DEVICES;
	}
	for (int i = 0; i < n; i++) {
		struct mps_device *d = &mps_srv.dev[i];
		struct mps_wire_device *w = &d->info;
		size_t total = 0;

		if ((r = mps_drv.cuDeviceGet(&d->dev, i)) != CUDA_SUCCESS ||
		    (r = mps_drv.cuDeviceGetName(w->name, sizeof(w->name), d->dev)) != CUDA_SUCCESS ||
		    (r = mps_drv.cuDeviceGetUuid((CUuuid *)w->uuid, d->dev)) != CUDA_SUCCESS ||
		    (r = mps_drv.cuDeviceTotalMem(&total, d->dev)) != CUDA_SUCCESS ||
		    (r = mps_drv.cuDeviceGetPCIBusId(w->pci_bus_id, sizeof(w->pci_bus_id), d->dev)) != CUDA_SUCCESS)
			return init_failed(why, size, "cannot query device %d: %s", i, mps_driver_errname(r));
		w->total_mem = total;
		for (int a = 0; a < MPS_WIRE_ATTRS; a++) {
			if (mps_drv.cuDeviceGetAttribute(&w->attr[a], (CUdevice_attribute)a, d->dev) == CUDA_SUCCESS)
				w->attr_ok[a / 8] |= (uint8_t)(1u << (a % 8));
			else
				w->attr[a] = 0;
		}
		mps_log_info("Creating server context on device %d (%s)", i, w->name);
		r = mps_drv.cuDevicePrimaryCtxRetain(&d->primary, d->dev);
		if (r != CUDA_SUCCESS)
			return init_failed(why, size, "cannot create the context on device %d: %s", i,
					   mps_driver_errname(r));
		if (i == 0) {
			mps_drv.cuCtxSetCurrent(d->primary);
			mps_drv.cuCtxGetStreamPriorityRange(&mps_srv.prio_least, &mps_srv.prio_greatest);
		}
	}
	mps_srv.ndev = n;
	for (int i = 0; i < n; i++) {
		start_host_function_thread(i);
		mps_drv.cuCtxSetCurrent(mps_srv.dev[i].primary);
		mps_limits_read(i);
		mps_limits_preset(i);
		mps_sm_init(i);
	}
	enable_peers();
	return 0;
}

void mps_devices_release(void)
{
	for (int i = 0; i < mps_srv.ndev; i++) {
		mps_log_info("Destroy server context on device %d (%s)", i, mps_srv.dev[i].info.name);
		mps_drv.cuDevicePrimaryCtxRelease(mps_srv.dev[i].dev);
	}
}

