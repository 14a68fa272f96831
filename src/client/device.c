// SPDX-License-Identifier: MIT
/*
 * Initialisation, versions, devices and error strings. Everything about the
 * devices came in the server's welcome (names, UUIDs, memory, PCI ids and
 * every attribute the driver answered), so these calls never leave the
 * process: cudart and the frameworks ask for hundreds of attributes at start.
 * Error names and descriptions come from the server's driver, once per code,
 * so they read exactly as the real driver's; a few built-in ones cover the
 * cases where there is no server to ask.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <cudaTypedefs.h>

#include "client/api.h"
#include "client/client.h"
#include "client/exports/exports.h"
#include "common/atomics.h"
#include "common/log.h"
#include "common/visible.h"

#define MAX_CODE 1024

static int initialized;   /* atomic: cuInit was called */

struct errtext {
	const char *name;
	const char *desc;
};

static struct errtext *errcache[MAX_CODE];   /* set once per code (atomic) */

static const struct {
	CUresult code;
	const char *name;
	const char *desc;
} builtin[] = {
	{ CUDA_SUCCESS, "CUDA_SUCCESS", "no error" },
	{ CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument" },
	{ CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory" },
	{ CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error" },
	{ CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected" },
	{ CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal" },
	{ CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context" },
	{ CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle" },
	{ CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found" },
	{ CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready" },
	{ CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported" },
	{ CUDA_ERROR_MPS_CONNECTION_FAILED, "CUDA_ERROR_MPS_CONNECTION_FAILED",
	  "MPS client failed to connect to the MPS control daemon or the MPS server" },
	{ CUDA_ERROR_MPS_RPC_FAILURE, "CUDA_ERROR_MPS_RPC_FAILURE",
	  "the remote procedural call between the MPS server and the MPS client failed" },
	{ CUDA_ERROR_MPS_SERVER_NOT_READY, "CUDA_ERROR_MPS_SERVER_NOT_READY",
	  "MPS server is not ready to accept new MPS client requests" },
	{ CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED, "CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED",
	  "the hardware resources required to support device connections have been exhausted" },
	{ CUDA_ERROR_MPS_MAX_CLIENTS_REACHED, "CUDA_ERROR_MPS_MAX_CLIENTS_REACHED",
	  "the hardware resources required to create MPS client have been exhausted" },
	{ CUDA_ERROR_MPS_CLIENT_TERMINATED, "CUDA_ERROR_MPS_CLIENT_TERMINATED",
	  "the MPS client has been terminated by the server" },
	{ CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error" },
	/* The faults a server may end its clients with (server/fault.h): asked
	 * for once the server is gone, so they must be known here. */
	{ CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered" },
	{ CUDA_ERROR_LAUNCH_TIMEOUT, "CUDA_ERROR_LAUNCH_TIMEOUT", "the launch timed out and was terminated" },
	{ CUDA_ERROR_ASSERT, "CUDA_ERROR_ASSERT", "device-side assert triggered" },
	{ CUDA_ERROR_HARDWARE_STACK_ERROR, "CUDA_ERROR_HARDWARE_STACK_ERROR", "hardware stack error" },
	{ CUDA_ERROR_ILLEGAL_INSTRUCTION, "CUDA_ERROR_ILLEGAL_INSTRUCTION", "an illegal instruction was encountered" },
	{ CUDA_ERROR_MISALIGNED_ADDRESS, "CUDA_ERROR_MISALIGNED_ADDRESS", "misaligned address" },
	{ CUDA_ERROR_INVALID_ADDRESS_SPACE, "CUDA_ERROR_INVALID_ADDRESS_SPACE",
	  "operation not supported on global/shared address space" },
	{ CUDA_ERROR_INVALID_PC, "CUDA_ERROR_INVALID_PC", "invalid program counter" },
	{ CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure" },
	{ CUDA_ERROR_ECC_UNCORRECTABLE, "CUDA_ERROR_ECC_UNCORRECTABLE", "uncorrectable ECC error encountered" },
};

static const struct mps_wire_device *dev_info(CUdevice d)
{
	if (d < 0 || d >= mps_conn.ndev)
		return NULL;
	return &mps_conn.welcome->dev[d];
}

/* Whether every comma-separated entry of v is a GPU's UUID ("GPU-..."). */
static bool only_uuids(const char *v)
{
	bool any = false;

	for (;;) {
		v += strspn(v, " \t");
		if (strncasecmp(v, "GPU-", 4))
			return false;
		any = true;
		v = strchr(v, ',');
		if (!v)
			return any;
		v++;
	}
}

/* NVIDIA_VISIBLE_DEVICES where it still has to be applied. In a container
 * that reaches the GPUs only through openmps, all of it. Where the
 * container has the driver's device nodes, NVIDIA's toolkit chose those
 * nodes from it, but the server serves every GPU of the node, so the
 * container would see them all: UUIDs (what Kubernetes' device plugins
 * pass) still name the GPUs it was given and are applied; indexes are the
 * host's, which mean nothing here, and are left alone, as the driver
 * leaves them. */
static const char *container_devices(void)
{
	const char *v = getenv("NVIDIA_VISIBLE_DEVICES");

	if (!v)
		return NULL;
	return access("/dev/nvidiactl", F_OK) != 0 || only_uuids(v) ? v : NULL;
}

/* The devices a CDI spec of openmps gave the container: the values of its
 * OPENMPS_CDI_DEVICE_* variables (one per device, so that several combine),
 * comma-separated in buf; NULL when there are none. */
#define CDI_DEVICE_VAR "OPENMPS_CDI_DEVICE_"
static const char *cdi_devices(char *buf, size_t len)
{
	extern char **environ;
	size_t used = 0;

	for (char **e = environ; e && *e; e++) {
		const char *eq = strchr(*e, '=');
		size_t n;

		if (strncmp(*e, CDI_DEVICE_VAR, strlen(CDI_DEVICE_VAR)) || !eq)
			continue;
		n = strlen(eq + 1);
		if (used + n + 2 > len)
			break;
		if (used)
			buf[used++] = ',';
		memcpy(buf + used, eq + 1, n + 1);
		used += n;
	}
	return used ? buf : NULL;
}

int mps__select_devices(void)
{
	char given[(MPS_MAX_DEVICES + MPS_MAX_VDEVICES) * 48];
	const char *cdi = cdi_devices(given, sizeof(given));
	/* OPENMPS_VISIBLE_DEVICES first: a virtual device's UUID there leaves
	 * CUDA_VISIBLE_DEVICES to name its GPU, for frameworks that read that
	 * one against NVML's devices (PyTorch's device count). */
	const char *visible = getenv("OPENMPS_VISIBLE_DEVICES") ? getenv("OPENMPS_VISIBLE_DEVICES") :
								  getenv("CUDA_VISIBLE_DEVICES");
	struct mps_welcome *w = mps_conn.welcome;
	struct mps_msg_devices q;
	struct mps_wire_device *keep;
	struct mps_call call;
	CUresult r;
	int n;

	memset(&q, 0, sizeof(q));
	/* Among the devices a container was given: by a CDI spec of ours, which
	 * stand in for NVIDIA_VISIBLE_DEVICES (the spec sets that to "void" for
	 * NVIDIA's runtime), else by NVIDIA_VISIBLE_DEVICES (container_devices()). */
	if (cdi)
		n = mps_visible_select_given(cdi, visible, getenv("CUDA_DEVICE_ORDER"), w->dev, w->ndev, w->nvirt,
					     q.map);
	else
		n = mps_visible_select_in(container_devices(), visible, getenv("CUDA_DEVICE_ORDER"), w->dev, w->ndev,
					  w->nvirt, q.map);
	mps_conn.devices_named_twice = n < 0;
	if (n < 0)
		n = 0;
	q.count = (uint32_t)n;
	r = mps__call(MPS_OP_DEVICES, 0, &q.hdr, sizeof(q), NULL, 0, &call);
	mps__call_end(&call);
	if (r != CUDA_SUCCESS)
		return -EPROTO;
	/* The program's device i is the server's map[i], from here on. */
	keep = malloc((size_t)(n ? n : 1) * sizeof(*keep));
	if (!keep)
		return -ENOMEM;
	for (int i = 0; i < n; i++) {
		keep[i] = w->dev[q.map[i]];
		/* A virtual device is a slice of the server's device base - 1. */
		mps_conn.server_index[i] = q.map[i] < w->ndev ? q.map[i] : (uint8_t)(keep[i].base - 1);
	}
	memcpy(w->dev, keep, (size_t)n * sizeof(*keep));
	free(keep);
	mps_conn.ndev = n;
	if (n < w->ndev)
		mps_log_debug("openmps: %d of the server's %d devices are visible", n, (int)w->ndev);
	return n;
}

static CUresult ready(void)
{
	return mps_load_acquire(&initialized) ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}

static CUresult init(unsigned int flags)
{
	if (flags)
		return CUDA_ERROR_INVALID_VALUE;
	if (mps_conn.ndev == 0)   /* CUDA_VISIBLE_DEVICES left none, or named one twice */
		return mps_conn.devices_named_twice ? CUDA_ERROR_INVALID_DEVICE : CUDA_ERROR_NO_DEVICE;
	mps_store_release(&initialized, 1);
	return CUDA_SUCCESS;
}

static CUresult driver_get_version(int *v)
{
	if (!v)
		return CUDA_ERROR_INVALID_VALUE;
	*v = mps_conn.welcome->driver_version;
	return CUDA_SUCCESS;
}

static CUresult device_get(CUdevice *d, int ordinal)
{
	CUresult r = ready();

	if (r != CUDA_SUCCESS)
		return r;
	if (!d)
		return CUDA_ERROR_INVALID_VALUE;
	if (ordinal < 0 || ordinal >= mps_conn.ndev)
		return CUDA_ERROR_INVALID_DEVICE;
	*d = ordinal;
	return CUDA_SUCCESS;
}

static CUresult device_get_count(int *n)
{
	CUresult r = ready();

	if (r != CUDA_SUCCESS)
		return r;
	if (!n)
		return CUDA_ERROR_INVALID_VALUE;
	*n = mps_conn.ndev;
	return CUDA_SUCCESS;
}

/* Common front of the per-device queries. */
static CUresult dev_query(CUdevice d, const void *out, const struct mps_wire_device **w)
{
	CUresult r = ready();

	if (r != CUDA_SUCCESS)
		return r;
	if (!out)
		return CUDA_ERROR_INVALID_VALUE;
	*w = dev_info(d);
	return *w ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

static CUresult device_get_name(char *name, int len, CUdevice d)
{
	const struct mps_wire_device *w;
	CUresult r = dev_query(d, name, &w);

	if (r != CUDA_SUCCESS)
		return r;
	if (len <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	snprintf(name, (size_t)len, "%.*s", (int)sizeof(w->name), w->name);
	return CUDA_SUCCESS;
}

static CUresult device_get_uuid(CUuuid *uuid, CUdevice d)
{
	const struct mps_wire_device *w;
	CUresult r = dev_query(d, uuid, &w);

	if (r == CUDA_SUCCESS)
		memcpy(uuid->bytes, w->uuid, sizeof(uuid->bytes));
	return r;
}

static CUresult device_total_mem(size_t *bytes, CUdevice d)
{
	const struct mps_wire_device *w;
	CUresult r = dev_query(d, bytes, &w);

	if (r == CUDA_SUCCESS)
		*bytes = (size_t)w->total_mem;
	return r;
}

static CUresult device_get_attribute(int *v, CUdevice_attribute a, CUdevice d)
{
	const struct mps_wire_device *w;
	CUresult r = dev_query(d, v, &w);

	if (r != CUDA_SUCCESS)
		return r;
	if ((unsigned int)a >= MPS_WIRE_ATTRS || !(w->attr_ok[a / 8] & (1u << (a % 8))))
		return CUDA_ERROR_INVALID_VALUE;
	*v = w->attr[a];
	/* Managed memory on the device is the CPU's only while the device's
	 * work is done (migrate.c). */
	if (a == CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS && mps__migrate_on())
		*v = 0;
	/* The SMs of its share (the server keeps the word current). */
	if (a == CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT) {
		uint32_t sms = mps_load_relaxed(&mps_conn.region->sm_count[mps_conn.server_index[d]]);

		if (sms && sms < (uint32_t)*v)
			*v = (int)sms;
	}
	return CUDA_SUCCESS;
}

/* The per-TPC maps of the current context's device, as the server's driver
 * makes them (server/ops_exports.c), for slot 4 of the private table
 * 1734dc26 (exports/driver.c). Two malloc()ed copies. */
CUresult mps__server_tpc_maps(uint8_t **a, uint8_t **b)
{
	struct mps_msg q = { 0 };
	struct mps_call call;
	uint64_t na, nb;
	uint32_t h;
	CUresult r;

	r = mps__cur_handle(&h);
	if (r != CUDA_SUCCESS)
		return r;
	r = mps__call(MPS_OP_TPC_MAPS, h, &q, sizeof(q), NULL, 0, &call);
	if (r == CUDA_SUCCESS) {
		na = call.s->val[0];
		nb = call.s->val[1];
		if (!na || !nb || na + nb != call.s->len || na + nb > MPS_SLOT_DATA) {
			r = CUDA_ERROR_UNKNOWN;   /* a malformed reply */
		} else {
			*a = malloc(na);
			*b = malloc(nb);
			if (*a && *b) {
				memcpy(*a, call.s->data, na);
				memcpy(*b, call.s->data + na, nb);
			} else {
				free(*a);
				free(*b);
				*a = *b = NULL;
				r = CUDA_ERROR_OUT_OF_MEMORY;
			}
		}
	}
	mps__call_end(&call);
	return r;
}

static CUresult device_get_pci_bus_id(char *id, int len, CUdevice d)
{
	const struct mps_wire_device *w;
	CUresult r = dev_query(d, id, &w);

	if (r != CUDA_SUCCESS)
		return r;
	if (len <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	snprintf(id, (size_t)len, "%.*s", (int)sizeof(w->pci_bus_id), w->pci_bus_id);
	return CUDA_SUCCESS;
}

/* Parses "[domain:]bus:device[.function]" (hex), as the driver accepts. */
static int parse_bus_id(const char *s, unsigned int *dom, unsigned int *bus, unsigned int *dev)
{
	unsigned int a, b, c;
	int n = 0;

	if (sscanf(s, "%x:%x:%x%n", &a, &b, &c, &n) == 3 && (s[n] == 0 || s[n] == '.')) {
		*dom = a;
		*bus = b;
		*dev = c;
		return 0;
	}
	if (sscanf(s, "%x:%x%n", &b, &c, &n) == 2 && (s[n] == 0 || s[n] == '.')) {
		*dom = 0;
		*bus = b;
		*dev = c;
		return 0;
	}
	return -EINVAL;
}

static CUresult device_get_by_pci_bus_id(CUdevice *d, const char *id)
{
	unsigned int dom, bus, dv;
	CUresult r = ready();

	if (r != CUDA_SUCCESS)
		return r;
	if (!d || !id || parse_bus_id(id, &dom, &bus, &dv) < 0)
		return CUDA_ERROR_INVALID_VALUE;
	for (int i = 0; i < mps_conn.ndev; i++) {
		const struct mps_wire_device *w = dev_info(i);

		if ((unsigned int)w->attr[CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID] == dom &&
		    (unsigned int)w->attr[CU_DEVICE_ATTRIBUTE_PCI_BUS_ID] == bus &&
		    (unsigned int)w->attr[CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID] == dv) {
			*d = i;
			return CUDA_SUCCESS;
		}
	}
	return CUDA_ERROR_INVALID_DEVICE;
}

static CUresult device_compute_capability(int *major, int *minor, CUdevice d)
{
	const struct mps_wire_device *w;
	CUresult r = dev_query(d, major, &w);

	if (r != CUDA_SUCCESS)
		return r;
	if (!minor)
		return CUDA_ERROR_INVALID_VALUE;
	*major = w->attr[CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR];
	*minor = w->attr[CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR];
	return CUDA_SUCCESS;
}

static CUresult device_can_access_peer(int *can, CUdevice d, CUdevice peer)
{
	const struct mps_wire_device *w;
	CUresult r = dev_query(d, can, &w);

	if (r != CUDA_SUCCESS)
		return r;
	if (!dev_info(peer))
		return CUDA_ERROR_INVALID_DEVICE;
	*can = mps__peer_capable(d, peer);
	return CUDA_SUCCESS;
}

/* The server enabled peer access between its devices' contexts where the
 * driver allows it (server/device.c), once, for every client. */
int mps__peer_capable(CUdevice d, CUdevice peer)
{
	const struct mps_wire_device *w = dev_info(d);

	if (!w || !dev_info(peer) || d == peer)
		return 0;
	return (w->peers >> mps_conn.server_index[peer]) & 1;
}

/* The name and description of code: from the cache, the server, or the
 * built-in table. NULL if the code is unknown. */
static const struct errtext *error_text(CUresult code)
{
	struct mps_msg_error_string q = { .code = (int32_t)code };
	struct errtext *t, *none = NULL;
	struct mps_call call;
	size_t a;

	if ((unsigned int)code < MAX_CODE && (t = mps_load_acquire(&errcache[code])))
		return t;
	if (mps__mode() == MPS_MODE_SERVER &&
	    mps__call(MPS_OP_ERROR_STRING, 0, &q.hdr, sizeof(q), NULL, 0, &call) == CUDA_SUCCESS &&
	    call.s->len >= 2 && call.s->len <= MPS_SLOT_DATA && call.s->data[call.s->len - 1] == 0 &&
	    (a = strnlen((char *)call.s->data, call.s->len)) < call.s->len - 1) {
		t = malloc(sizeof(*t));
		if (t) {
			t->name = strdup((char *)call.s->data);
			t->desc = strdup((char *)call.s->data + a + 1);
		}
		mps__call_end(&call);
		if (t && t->name && t->desc) {
			if ((unsigned int)code < MAX_CODE && !mps_cas(&errcache[code], &none, t)) {
				free((void *)t->name);
				free((void *)t->desc);
				free(t);
				return errcache[code];
			}
			return t;
		}
		if (t) {
			free((void *)t->name);
			free((void *)t->desc);
			free(t);
		}
		return NULL;
	}
	mps__call_end(&call);
	for (size_t i = 0; i < sizeof(builtin) / sizeof(builtin[0]); i++) {
		if (builtin[i].code == code) {
			static struct errtext bt[sizeof(builtin) / sizeof(builtin[0])];

			bt[i].name = builtin[i].name;
			bt[i].desc = builtin[i].desc;
			return &bt[i];
		}
	}
	return NULL;
}

const char *mps__error_name(CUresult r)
{
	const struct errtext *t = error_text(r);

	return t && t->name ? t->name : "an unknown code";
}

static CUresult get_error_name(CUresult code, const char **s)
{
	const struct errtext *t;

	if (!s)
		return CUDA_ERROR_INVALID_VALUE;
	t = error_text(code);
	*s = t ? t->name : NULL;
	return t ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static CUresult get_error_string(CUresult code, const char **s)
{
	const struct errtext *t;

	if (!s)
		return CUDA_ERROR_INVALID_VALUE;
	t = error_text(code);
	*s = t ? t->desc : NULL;
	return t ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* Hooks for the export tables (exports.h). */
int mps__driver_version(void)
{
	return mps_conn.welcome ? mps_conn.welcome->driver_version : 0;
}

int mps__device_count(void)
{
	return mps_conn.welcome ? mps_conn.ndev : 0;
}

int mps__device_identity(int ordinal, CUuuid *uuid, int *pci_domain, int *pci_bus, int *pci_device)
{
	const struct mps_wire_device *w = mps_conn.welcome ? dev_info(ordinal) : NULL;

	if (!w)
		return -ENODEV;
	memcpy(uuid->bytes, w->uuid, sizeof(uuid->bytes));
	*pci_domain = w->attr[CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID];
	*pci_bus = w->attr[CU_DEVICE_ATTRIBUTE_PCI_BUS_ID];
	*pci_device = w->attr[CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID];
	return 0;
}

const struct mps_impl mps__device_api[] = {
	MPS_IMPL(cuInit, init),
	MPS_IMPL(cuDriverGetVersion, driver_get_version),
	MPS_IMPL(cuDeviceGet, device_get),
	MPS_IMPL(cuDeviceGetCount, device_get_count),
	MPS_IMPL(cuDeviceGetName, device_get_name),
	MPS_IMPL(cuDeviceGetUuid, device_get_uuid),
	MPS_IMPL(cuDeviceGetUuid_v2, device_get_uuid),
	MPS_IMPL(cuDeviceTotalMem_v2, device_total_mem),
	MPS_IMPL(cuDeviceGetAttribute, device_get_attribute),
	MPS_IMPL(cuDeviceGetPCIBusId, device_get_pci_bus_id),
	MPS_IMPL(cuDeviceGetByPCIBusId, device_get_by_pci_bus_id),
	MPS_IMPL_PFN(cuDeviceComputeCapability, PFN_cuDeviceComputeCapability_v2000, device_compute_capability),
	MPS_IMPL(cuDeviceCanAccessPeer, device_can_access_peer),
	MPS_IMPL(cuGetErrorName, get_error_name),
	MPS_IMPL(cuGetErrorString, get_error_string),
	MPS_IMPL_END
};
