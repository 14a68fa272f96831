// SPDX-License-Identifier: MIT
/*
 * The server-wide table behind ipc.h: a list of exports, searched by the
 * handle's 64 bytes (opens) or by the allocation or event (frees), under
 * one mutex. Driver calls happen outside the lock; an entry that the last
 * close leaves orphaned is taken out under the lock and freed after.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>

#include "common/log.h"
#include "server/driver.h"
#include "server/ipc.h"
#include "server/placement.h"
#include "server/server.h"

enum { IPC_MEM = 1, IPC_EVENT, IPC_POOL, IPC_POOL_PTR };

_Static_assert(sizeof(CUipcMemHandle) == MPS_IPC_HANDLE_SIZE && sizeof(CUipcEventHandle) == MPS_IPC_HANDLE_SIZE,
	       "the wire carries the driver's handles as they are");

struct export {
	uint8_t handle[64];
	uint8_t kind;
	bool orphan;         /* its exporter freed it or left */
	int device;
	uint32_t exporter;   /* the client's id */
	uint64_t base, size; /* memory, a pool's pointer */
	CUevent ev;          /* event */
	CUmemoryPool pool;   /* pool */
	int opens;           /* views other clients have open */
	struct export *next;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct export *exports;   /* under lock */

static struct export *by_handle(int kind, const void *handle)
{
	for (struct export *e = exports; e; e = e->next)
		if (e->kind == kind && !memcmp(e->handle, handle, 64))
			return e;
	return NULL;
}

static void unlink_export(struct export *x)
{
	for (struct export **p = &exports; *p; p = &(*p)->next) {
		if (*p == x) {
			*p = x->next;
			return;
		}
	}
}

/* Records an export (once per handle). */
static CUresult record(struct mps_client *c, int kind, const void *handle, int device, uint64_t base, uint64_t size,
		       void *obj)
{
	struct export *x;

	pthread_mutex_lock(&lock);
	x = by_handle(kind, handle);
	if (!x) {
		x = calloc(1, sizeof(*x));
		if (!x) {
			pthread_mutex_unlock(&lock);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
		memcpy(x->handle, handle, 64);
		x->kind = (uint8_t)kind;
		x->next = exports;
		exports = x;
	}
	x->exporter = c->id;
	x->device = device;
	x->base = base;
	x->size = size;
	if (kind == IPC_EVENT)
		x->ev = obj;
	else if (kind == IPC_POOL)
		x->pool = obj;
	x->orphan = false;
	pthread_mutex_unlock(&lock);
	return CUDA_SUCCESS;
}


/* A handle for memory placed by the server (placement.h), which the
 * driver makes none for: "openmps-placed", the base, and random bytes,
 * the same for every export of one allocation. Clients of this server open
 * it; anywhere else it names nothing. */
static CUresult export_placed(struct mps_client *c, int device, const struct mps_mrange *r, void *out)
{
	static const char magic[16] = "openmps-placed";
	uint8_t h[64];
	struct export *x;

	pthread_mutex_lock(&lock);
	for (x = exports; x; x = x->next)
		if (x->kind == IPC_MEM && x->base == r->base && !memcmp(x->handle, magic, sizeof(magic)))
			break;
	if (x)
		memcpy(h, x->handle, sizeof(h));
	pthread_mutex_unlock(&lock);
	if (!x) {
		memcpy(h, magic, sizeof(magic));
		memcpy(h + 16, &r->base, sizeof(r->base));
		if (getrandom(h + 24, sizeof(h) - 24, 0) != (ssize_t)(sizeof(h) - 24))
			return CUDA_ERROR_OPERATING_SYSTEM;
	}
	memcpy(out, h, sizeof(h));
	return record(c, IPC_MEM, h, device, r->base, r->size, NULL);
}

CUresult mps_ipc_export_mem(struct mps_client *c, uint64_t ptr, int device, void *out)
{
	const struct mps_mrange *r = mps_memacct_find(&c->mem, ptr);
	CUipcMemHandle h;
	uint64_t base;
	CUresult rc;

	/* Any address in the allocation names all of it, as on the driver. */
	if (!r || r->kind != MPS_MEM_DEVICE)
		return CUDA_ERROR_INVALID_VALUE;
	base = r->base;
	if (mps_place_is((CUdeviceptr)base))
		return export_placed(c, device, r, out);
	if (!mps_drv.cuIpcGetMemHandle)
		return CUDA_ERROR_NOT_SUPPORTED;
	rc = mps__bind_device(c, device);
	if (rc == CUDA_SUCCESS)
		rc = mps_drv.cuIpcGetMemHandle(&h, (CUdeviceptr)base);
	if (rc == CUDA_SUCCESS)
		rc = record(c, IPC_MEM, &h, device, base, r->size, NULL);
	if (rc == CUDA_SUCCESS)
		memcpy(out, &h, 64);
	return rc;
}

CUresult mps_ipc_export_event(struct mps_client *c, CUevent ev, int device, void *out)
{
	CUipcEventHandle h;
	CUresult rc;

	if (!mps_drv.cuIpcGetEventHandle)
		return CUDA_ERROR_NOT_SUPPORTED;
	rc = mps__bind_device(c, device);
	if (rc == CUDA_SUCCESS)
		rc = mps_drv.cuIpcGetEventHandle(&h, ev);
	if (rc == CUDA_SUCCESS)
		rc = record(c, IPC_EVENT, &h, device, 0, 0, ev);
	if (rc == CUDA_SUCCESS)
		memcpy(out, &h, 64);
	return rc;
}

/* Opens one of ours: true if the handle is this server's, with *rc the
 * answer and, on success, *out a copy of the export. As the driver: not in
 * the exporting process, not once it is freed. */
static bool claim(struct mps_client *c, int kind, const void *handle, struct export *out, CUresult *rc)
{
	struct export *x;

	pthread_mutex_lock(&lock);
	x = by_handle(kind, handle);
	if (x) {
		*rc = x->exporter == c->id ? CUDA_ERROR_INVALID_CONTEXT
		      : x->orphan	       ? CUDA_ERROR_INVALID_VALUE
					       : CUDA_SUCCESS;
		if (*rc == CUDA_SUCCESS) {
			x->opens++;
			*out = *x;
		}
	}
	pthread_mutex_unlock(&lock);
	return x != NULL;
}

CUresult mps_ipc_open_mem(struct mps_client *c, const void *handle, unsigned int flags, uint64_t *base,
			  uint64_t *size, int *device, bool *ours)
{
	CUipcMemHandle h;
	struct export x;
	CUdeviceptr p = 0, b = 0;
	size_t sz = 0;
	CUresult rc;

	if (claim(c, IPC_MEM, handle, &x, &rc)) {
		if (rc == CUDA_SUCCESS) {
			*base = x.base;
			*size = x.size;
			*device = x.device;
			*ours = true;
		}
		return rc;
	}
	if (!mps_drv.cuIpcOpenMemHandle || !mps_drv.cuIpcCloseMemHandle)
		return CUDA_ERROR_INVALID_VALUE;
	memcpy(&h, handle, 64);
	rc = mps_drv.cuIpcOpenMemHandle(&p, h, flags);
	if (rc != CUDA_SUCCESS)
		return rc;
	if (mps_drv.cuMemGetAddressRange(&b, &sz, p) != CUDA_SUCCESS || b != p) {
		mps_drv.cuIpcCloseMemHandle(p);
		return CUDA_ERROR_INVALID_VALUE;
	}
	*base = p;
	*size = sz;
	*device = mps__cur_device();
	*ours = false;
	return CUDA_SUCCESS;
}

CUresult mps_ipc_open_event(struct mps_client *c, const void *handle, CUevent *ev, bool *ours)
{
	CUipcEventHandle h;
	struct export x;
	CUresult rc;

	if (claim(c, IPC_EVENT, handle, &x, &rc)) {
		if (rc == CUDA_SUCCESS) {
			*ev = x.ev;
			*ours = true;
		}
		return rc;
	}
	if (!mps_drv.cuIpcOpenEventHandle)
		return CUDA_ERROR_INVALID_VALUE;
	memcpy(&h, handle, 64);
	*ours = false;
	return mps_drv.cuIpcOpenEventHandle(ev, h);
}

/* Whether x is the export of kind that base (memory: an allocation or a
 * pool's pointer) or obj (an event or a pool) names. */
static bool names(const struct export *x, int kind, uint64_t base, void *obj)
{
	switch (kind) {
	case IPC_MEM:
		return (x->kind == IPC_MEM || x->kind == IPC_POOL_PTR) && x->base == base;
	case IPC_EVENT:
		return x->kind == kind && x->ev == obj;
	default:
		return x->kind == kind && x->pool == obj;
	}
}

/* Drops one open of what kind/base/ev names; the entry, if that was the last
 * view of an orphan, for the caller to free. */
static struct export *release(int kind, uint64_t base, void *obj)
{
	struct export *gone = NULL;

	pthread_mutex_lock(&lock);
	for (struct export *x = exports; x; x = x->next) {
		if (names(x, kind, base, obj) && x->opens) {
			if (--x->opens == 0 && x->orphan) {
				unlink_export(x);
				gone = x;
			}
			break;
		}
	}
	pthread_mutex_unlock(&lock);
	return gone;
}

void mps_ipc_close_mem(struct mps_client *c, uint64_t base, bool ours)
{
	struct export *gone;

	if (!ours) {
		mps_drv.cuIpcCloseMemHandle((CUdeviceptr)base);
		return;
	}
	gone = release(IPC_MEM, base, NULL);
	if (gone) {
		/* The last view of memory its exporter freed: free it now. */
		if (mps__bind_device(c, gone->device) == CUDA_SUCCESS)
			mps_place_mem_free((CUdeviceptr)gone->base, false);   /* an importer's work may use it */
		free(gone);
	}
}

void mps_ipc_close_event(struct mps_client *c, CUevent ev, bool ours)
{
	struct export *gone;

	if (ours) {
		gone = release(IPC_EVENT, 0, ev);
		if (!gone)
			return;   /* the exporter's still */
		mps__bind_device(c, gone->device);
		free(gone);
	}
	mps_drv.cuEventDestroy(ev);
}

/* The exporter's free of what kind/base/ev names: true if it must wait. */
static bool orphan(struct mps_client *c, int kind, uint64_t base, void *obj)
{
	bool keep = false;

	pthread_mutex_lock(&lock);
	for (struct export *x = exports; x;) {
		struct export *next = x->next;

		if (names(x, kind, base, obj) && x->exporter == c->id && !x->orphan) {
			if (x->opens) {
				x->orphan = true;
				keep = true;
			} else {
				unlink_export(x);
				free(x);
			}
		}
		x = next;
	}
	pthread_mutex_unlock(&lock);
	return keep;
}

bool mps_ipc_orphan_mem(struct mps_client *c, uint64_t base)
{
	return orphan(c, IPC_MEM, base, NULL);
}

bool mps_ipc_orphan_event(struct mps_client *c, CUevent ev)
{
	return orphan(c, IPC_EVENT, 0, ev);
}

/* ---- memory pools ------------------------------------------------------ */

#define POOL_TOKEN_MAGIC "openmps-pool-v1"   /* 16 bytes with its NUL */

struct pool_token {
	char magic[16];
	uint8_t secret[48];
};

_Static_assert(sizeof(struct pool_token) == 64, "a token is an export's 64 bytes");

CUresult mps_ipc_export_pool(struct mps_client *c, CUmemoryPool pool, int device, int *fd_out)
{
	struct pool_token t;
	int fd = -1, drv = -1;
	CUresult rc;

	if (!mps_drv.cuMemPoolExportToShareableHandle)
		return CUDA_ERROR_NOT_SUPPORTED;
	/* The driver says whether the pool may be shared at all. */
	rc = mps__bind_device(c, device);
	if (rc == CUDA_SUCCESS)
		rc = mps_drv.cuMemPoolExportToShareableHandle(&drv, pool, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
	if (rc != CUDA_SUCCESS)
		return rc;
	close(drv);
	memset(&t, 0, sizeof(t));
	memcpy(t.magic, POOL_TOKEN_MAGIC, sizeof(t.magic));
	if (getrandom(t.secret, sizeof(t.secret), 0) != (ssize_t)sizeof(t.secret))
		return CUDA_ERROR_OPERATING_SYSTEM;
	fd = memfd_create("openmps-pool", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return CUDA_ERROR_OPERATING_SYSTEM;
	if (pwrite(fd, &t, sizeof(t), 0) != (ssize_t)sizeof(t) ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
		close(fd);
		return CUDA_ERROR_OPERATING_SYSTEM;
	}
	rc = record(c, IPC_POOL, &t, device, 0, 0, pool);
	if (rc != CUDA_SUCCESS) {
		close(fd);
		return rc;
	}
	*fd_out = fd;
	return CUDA_SUCCESS;
}

CUresult mps_ipc_import_pool(struct mps_client *c, int fd, CUmemoryPool *pool, int *device, bool *ours)
{
	struct pool_token t;
	struct export x;
	CUresult rc;

	if (pread(fd, &t, sizeof(t), 0) == (ssize_t)sizeof(t) && !memcmp(t.magic, POOL_TOKEN_MAGIC, sizeof(t.magic)) &&
	    claim(c, IPC_POOL, &t, &x, &rc)) {
		if (rc == CUDA_SUCCESS) {
			*pool = x.pool;
			*device = x.device;
			*ours = true;
		}
		return rc == CUDA_ERROR_INVALID_CONTEXT ? CUDA_ERROR_INVALID_VALUE : rc;
	}
	/* Another process's pool, on the driver. */
	if (!mps_drv.cuMemPoolImportFromShareableHandle)
		return CUDA_ERROR_NOT_SUPPORTED;
	*ours = false;
	*device = mps__cur_device() < 0 ? 0 : mps__cur_device();
	return mps_drv.cuMemPoolImportFromShareableHandle(pool, (void *)(uintptr_t)fd,
							 CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
}

void mps_ipc_close_pool(struct mps_client *c, CUmemoryPool pool, bool ours)
{
	struct export *gone;

	if (ours) {
		gone = release(IPC_POOL, 0, pool);
		if (!gone)
			return;   /* the exporter's still */
		mps__bind_device(c, gone->device);
		free(gone);
	}
	if (mps_drv.cuMemPoolDestroy)
		mps_drv.cuMemPoolDestroy(pool);
}

bool mps_ipc_orphan_pool(struct mps_client *c, CUmemoryPool pool)
{
	return orphan(c, IPC_POOL, 0, pool);
}

CUresult mps_ipc_export_pool_ptr(struct mps_client *c, uint64_t ptr, int device, void *out)
{
	const struct mps_mrange *r = mps_memacct_find(&c->mem, ptr);
	CUmemPoolPtrExportData d;
	CUresult rc;

	if (!r || r->kind != MPS_MEM_DEVICE || r->base != ptr)
		return CUDA_ERROR_INVALID_VALUE;
	if (!mps_drv.cuMemPoolExportPointer)
		return CUDA_ERROR_NOT_SUPPORTED;
	memset(&d, 0, sizeof(d));
	rc = mps__bind_device(c, device);
	if (rc == CUDA_SUCCESS)
		rc = mps_drv.cuMemPoolExportPointer(&d, (CUdeviceptr)ptr);
	if (rc == CUDA_SUCCESS)
		rc = record(c, IPC_POOL_PTR, &d, device, ptr, r->size, NULL);
	if (rc == CUDA_SUCCESS)
		memcpy(out, &d, 64);
	return rc;
}

CUresult mps_ipc_open_pool_ptr(struct mps_client *c, CUmemoryPool pool, const void *data, uint64_t *base,
			       uint64_t *size, int *device, bool *ours)
{
	CUmemPoolPtrExportData d;
	struct export x;
	CUdeviceptr p = 0, b = 0;
	size_t sz = 0;
	CUresult rc;

	if (claim(c, IPC_POOL_PTR, data, &x, &rc)) {
		if (rc == CUDA_SUCCESS) {
			*base = x.base;
			*size = x.size;
			*device = x.device;
			*ours = true;
		}
		return rc == CUDA_ERROR_INVALID_CONTEXT ? CUDA_ERROR_INVALID_VALUE : rc;
	}
	if (!mps_drv.cuMemPoolImportPointer)
		return CUDA_ERROR_NOT_SUPPORTED;
	memcpy(&d, data, sizeof(d));
	rc = mps_drv.cuMemPoolImportPointer(&p, pool, &d);
	if (rc != CUDA_SUCCESS)
		return rc;
	if (mps_drv.cuMemGetAddressRange(&b, &sz, p) != CUDA_SUCCESS || b != p) {
		mps_drv.cuMemFree(p);
		return CUDA_ERROR_INVALID_VALUE;
	}
	*base = p;
	*size = sz;
	*device = mps__cur_device();
	*ours = false;
	return CUDA_SUCCESS;
}

void mps_ipc_close_pool_ptr(struct mps_client *c, uint64_t base, bool ours)
{
	if (ours)
		mps_ipc_close_mem(c, base, true);
	else
		mps_drv.cuMemFree((CUdeviceptr)base);
}
