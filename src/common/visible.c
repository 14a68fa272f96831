// SPDX-License-Identifier: MIT
/*
 * CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER, read as visible.h says. Pure
 * string work over the devices' UUIDs and PCI bus ids, so it is tested on
 * its own (tests/unit/test_visible.c) and checked on a GPU against the real
 * driver's reading.
 */
#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/visible.h"

/* The devices in enumeration order: the server's, or by PCI bus id. */
static void enumeration(const char *order, const struct mps_wire_device *devs, int ndev, uint8_t *idx)
{
	for (int i = 0; i < ndev; i++)
		idx[i] = (uint8_t)i;
	if (!order || strcmp(order, "PCI_BUS_ID"))
		return;
	for (int i = 1; i < ndev; i++) {   /* a handful of devices: insertion sort */
		uint8_t v = idx[i];
		int j = i;

		while (j > 0 && strcasecmp(devs[idx[j - 1]].pci_bus_id, devs[v].pci_bus_id) > 0) {
			idx[j] = idx[j - 1];
			j--;
		}
		idx[j] = v;
	}
}

void mps_vdev_uuid(const uint8_t *phys, const char *name, uint8_t *out)
{
	uint64_t h = 0xcbf29ce484222325ull, g;

	for (const char *p = name; *p; p++)
		h = (h ^ (uint8_t)*p) * 0x100000001b3ull;
	g = (h ^ 0x9e3779b97f4a7c15ull) * 0x100000001b3ull;
	for (int i = 0; i < 8; i++) {
		out[i] = (uint8_t)(phys[i] ^ (uint8_t)(h >> (8 * i)));
		out[8 + i] = (uint8_t)(phys[8 + i] ^ (uint8_t)(g >> (8 * i)));
	}
	out[6] = (uint8_t)((out[6] & 0x0f) | 0x80);   /* version 8: made, not the hardware's */
	out[8] = (uint8_t)((out[8] & 0x3f) | 0x80);
}

int mps_uuid_parse(const char *text, uint8_t *out)
{
	int n = 0;

	if (!strncasecmp(text, "GPU-", 4))
		text += 4;
	for (; *text && n < 32; text++) {
		int v;

		if (*text == '-')
			continue;
		if (!isxdigit((unsigned char)*text))
			return -EINVAL;
		v = isdigit((unsigned char)*text) ? *text - '0' : (tolower((unsigned char)*text) - 'a' + 10);
		if (n % 2 == 0)
			out[n / 2] = (uint8_t)(v << 4);
		else
			out[n / 2] |= (uint8_t)v;
		n++;
	}
	return n == 32 && !*text ? 0 : -1;
}

void mps_uuid_text(char *out, const uint8_t *uuid)
{
	snprintf(out, MPS_UUID_TEXT, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", uuid[0],
		 uuid[1], uuid[2], uuid[3], uuid[4], uuid[5], uuid[6], uuid[7], uuid[8], uuid[9], uuid[10], uuid[11],
		 uuid[12], uuid[13], uuid[14], uuid[15]);
}

/* Whether the entry (after "GPU-", up to its end) is a prefix of the UUID
 * written as the driver writes it. */
static bool uuid_prefix(const char *e, size_t len, const uint8_t *uuid)
{
	char s[MPS_UUID_TEXT];

	mps_uuid_text(s, uuid);
	return len > 0 && len <= strlen(s) && !strncasecmp(e, s, len);
}

/* The server's index of the device one entry names, or -1. A list is of
 * UUIDs or of ordinals, as its first entry is: the other kind ends it.
 * UUIDs name virtual devices too (devs[ndev .. nall)); ordinals only
 * physical ones. */
static int entry(const char *e, size_t len, bool uuids, const uint8_t *idx, const struct mps_wire_device *devs,
		 int ndev, int nall)
{
	unsigned long v = 0;
	size_t i = 0;
	int found = -1;

	while (len && isspace((unsigned char)*e)) {
		e++;
		len--;
	}
	while (len && isspace((unsigned char)e[len - 1]))
		len--;
	if (uuids != (len >= 4 && !strncmp(e, "GPU-", 4)))
		return -1;
	if (uuids) {
		for (int d = 0; d < nall; d++) {
			if (!uuid_prefix(e + 4, len - 4, devs[d].uuid))
				continue;
			if (found >= 0)
				return -1;   /* ambiguous */
			found = d;
		}
		return found;
	}
	while (i < len && isdigit((unsigned char)e[i]) && v <= (unsigned long)ndev)
		v = v * 10 + (unsigned long)(e[i++] - '0');
	if (i == 0 || v >= (unsigned long)ndev)
		return -1;
	return idx[v];
}

/* The physical device behind entry d of devs. */
static int physical(const struct mps_wire_device *devs, int ndev, int d)
{
	return d < ndev ? d : (int)devs[d].base - 1;
}

int mps_visible_select(const char *visible, const char *order, const struct mps_wire_device *devs, int ndev,
		       int nvirt, uint8_t *map)
{
	uint8_t idx[MPS_MAX_DEVICES];
	bool uuids;
	int n = 0;

	if (ndev > MPS_MAX_DEVICES)
		ndev = MPS_MAX_DEVICES;
	if (nvirt < 0 || nvirt > MPS_MAX_VDEVICES)
		nvirt = 0;
	enumeration(order, devs, ndev, idx);
	if (!visible) {
		memcpy(map, idx, (size_t)ndev);
		return ndev;
	}
	uuids = !strncmp(visible + strspn(visible, " \t"), "GPU-", 4);
	for (const char *p = visible; *p;) {
		size_t len = strcspn(p, ",");
		int d = entry(p, len, uuids, idx, devs, ndev, ndev + nvirt);

		if (d < 0 || physical(devs, ndev, d) < 0 || physical(devs, ndev, d) >= ndev)
			break;
		/* A device named twice, a virtual one included (two slices of a
		 * GPU, or a slice and the GPU). */
		for (int k = 0; k < n; k++)
			if (physical(devs, ndev, map[k]) == physical(devs, ndev, d))
				return -EEXIST;
		if (n == MPS_MAX_DEVICES)
			break;
		map[n++] = (uint8_t)d;
		p += len;
		if (*p == ',')
			p++;
	}
	return n;
}

/* Whether entry [p, p + len) is one the toolkit takes: an index (digits
 * only) or a GPU UUID or prefix ("GPU-" and hex digits and dashes); MIG
 * instances ("MIG-", "0:1") are not GPUs openmps can give. */
static bool container_entry(const char *p, size_t len)
{
	size_t i = 0;
	bool uuid = len > 4 && !strncasecmp(p, "GPU-", 4);

	if (uuid)
		i = 4;
	if (i == len)
		return false;
	for (; i < len; i++)
		if (!(uuid ? isxdigit((unsigned char)p[i]) || p[i] == '-' : isdigit((unsigned char)p[i])))
			return false;
	return true;
}

/* Bit i for each of ndev (at most MPS_MAX_DEVICES) devices. */
static uint32_t every(int ndev)
{
	return (1u << ndev) - 1;
}

/* Bit i: the container was given the server's device i (NVIDIA_VISIBLE_DEVICES). */
static uint32_t container_set(const char *v, const struct mps_wire_device *devs, int ndev)
{
	uint32_t set = 0;

	if (!v || !strcmp(v, "all"))
		return every(ndev);
	if (!*v || !strcmp(v, "none") || !strcmp(v, "void"))
		return 0;
	/* Entry by entry (indexes and UUIDs may mix), each naming one device
	 * (indexes are NVML's: PCI bus order); where one names none the
	 * toolkit refuses the container, and it gets none. */
	for (const char *p = v; *p;) {
		size_t len = strcspn(p, ",");
		char one[64];
		uint8_t map[MPS_MAX_DEVICES];
		const char *e = p;
		size_t elen = len;

		while (elen && (*e == ' ' || *e == '\t'))
			e++, elen--;
		while (elen && (e[elen - 1] == ' ' || e[elen - 1] == '\t'))
			elen--;
		if (elen) {
			if (elen >= sizeof(one) || !container_entry(e, elen))
				return 0;
			memcpy(one, e, elen);
			one[elen] = 0;
			if (mps_visible_select(one, "PCI_BUS_ID", devs, ndev, 0, map) != 1)
				return 0;
			set |= 1u << map[0];
		} else if (p[len] == ',') {
			return 0;   /* an empty entry before another */
		}
		p += len;
		if (*p == ',')
			p++;
	}
	return set;
}

int mps_visible_select_in(const char *container, const char *visible, const char *order,
			  const struct mps_wire_device *devs, int ndev, int nvirt, uint8_t *map)
{
	struct mps_wire_device *sub;
	uint8_t back[MPS_MAX_DEVICES + MPS_MAX_VDEVICES], pos[MPS_MAX_DEVICES];
	uint32_t set;
	int m = 0, mv = 0, n;

	if (ndev > MPS_MAX_DEVICES)
		ndev = MPS_MAX_DEVICES;
	if (nvirt < 0 || nvirt > MPS_MAX_VDEVICES)
		nvirt = 0;
	set = container_set(container, devs, ndev);
	if (set == every(ndev))
		return mps_visible_select(visible, order, devs, ndev, nvirt, map);
	sub = malloc((size_t)(ndev + nvirt + 1) * sizeof(*sub));
	if (!sub)
		return 0;
	/* The container's GPUs in the server's order, then their slices. */
	for (int i = 0; i < ndev; i++) {
		if (!(set & (1u << i)))
			continue;
		pos[i] = (uint8_t)m;
		back[m] = (uint8_t)i;
		sub[m++] = devs[i];
	}
	for (int j = 0; j < nvirt; j++) {
		const struct mps_wire_device *v = &devs[ndev + j];

		if (!v->base || v->base > (uint32_t)ndev || !(set & (1u << (v->base - 1))))
			continue;
		back[m + mv] = (uint8_t)(ndev + j);
		sub[m + mv] = *v;
		sub[m + mv].base = pos[v->base - 1] + 1u;
		mv++;
	}
	n = mps_visible_select(visible, order, sub, m, mv, map);
	for (int i = 0; i < n; i++)
		map[i] = back[map[i]];
	free(sub);
	return n;
}

/* The index in devs of the device whose whole UUID entry [e, e + len)
 * names, or -1. */
static int given_entry(const char *e, size_t len, const struct mps_wire_device *devs, int nall)
{
	char one[64];
	uint8_t u[16];

	while (len && isspace((unsigned char)*e))
		e++, len--;
	while (len && isspace((unsigned char)e[len - 1]))
		len--;
	if (len < 5 || len >= sizeof(one) || strncasecmp(e, "GPU-", 4))
		return -1;
	memcpy(one, e, len);
	one[len] = 0;
	if (mps_uuid_parse(one, u) < 0)
		return -1;
	for (int d = 0; d < nall; d++)
		if (!memcmp(devs[d].uuid, u, 16))
			return d;
	return -1;
}

int mps_visible_select_given(const char *given, const char *visible, const char *order,
			     const struct mps_wire_device *devs, int ndev, int nvirt, uint8_t *map)
{
	bool is_given[MPS_MAX_DEVICES + MPS_MAX_VDEVICES] = { false };
	struct mps_wire_device sub[MPS_MAX_DEVICES + MPS_MAX_VDEVICES];
	uint8_t back[MPS_MAX_DEVICES + MPS_MAX_VDEVICES], pos[MPS_MAX_DEVICES];
	int nall, m = 0, mv = 0, n;

	if (ndev > MPS_MAX_DEVICES)
		ndev = MPS_MAX_DEVICES;
	if (nvirt < 0 || nvirt > MPS_MAX_VDEVICES)
		nvirt = 0;
	nall = ndev + nvirt;
	for (const char *p = given; *p;) {
		size_t len = strcspn(p, ",");
		int d;

		if (len) {
			d = given_entry(p, len, devs, nall);
			if (d < 0 || physical(devs, ndev, d) < 0 || physical(devs, ndev, d) >= ndev)
				return 0;
			is_given[d] = true;
		}
		p += len;
		if (*p == ',')
			p++;
	}
	/* The given devices stand as the program's GPUs: the GPUs, then the
	 * slices (each as a device of its own), in the server's order. */
	memset(pos, 0xff, sizeof(pos));
	for (int d = 0; d < nall && m < MPS_MAX_DEVICES; d++) {
		if (!is_given[d])
			continue;
		if (d < ndev)
			pos[d] = (uint8_t)m;
		back[m] = (uint8_t)d;
		sub[m] = devs[d];
		sub[m++].base = 0;
	}
	/* The given GPUs' other slices, which their UUIDs select. */
	for (int d = ndev; d < nall; d++) {
		int g = physical(devs, ndev, d);

		if (is_given[d] || g < 0 || g >= ndev || pos[g] == 0xff)
			continue;
		back[m + mv] = (uint8_t)d;
		sub[m + mv] = devs[d];
		sub[m + mv].base = pos[g] + 1u;
		mv++;
	}
	n = mps_visible_select(visible, order, sub, m, mv, map);
	for (int i = 0; i < n; i++) {
		map[i] = back[map[i]];
		for (int k = 0; k < i; k++)
			if (physical(devs, ndev, map[k]) == physical(devs, ndev, map[i]))
				return -EEXIST;
	}
	return n;
}
