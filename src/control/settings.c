// SPDX-License-Identifier: MIT
/*
 * The settings a server hands its new clients — active thread percentage,
 * pinned device memory limits, client priority, SM partitions — as the
 * control commands and the daemon's environment give them: parsing, showing
 * in NVIDIA's forms ("25.0", "10G", "512M"), and sending them down a
 * server's channel.
 *
 * The daemon keeps one set of defaults (copied into each server it starts)
 * and one set per server. Memory limits are kept by the device as the user
 * named it — an ordinal or a UUID — because the daemon itself never opens
 * the driver and may not know the devices yet; the server resolves the name
 * against its own devices. Once the daemon has heard the device list from a
 * server, an ordinal and the matching UUID name the same limit.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/visible.h"
#include "control/control.h"

void mps_settings_init(struct mps_settings *s)
{
	memset(s, 0, sizeof(*s));
	s->thread_pct = 10000;
}

int mps_parse_percentage(const char *text, int *hundredths)
{
	const char *p = text;
	char *end;
	double v;

	/* Plain decimal only: digits, at most one point (no sign, exponent,
	 * hexadecimal, inf or nan, which strtod would take). */
	while (isdigit((unsigned char)*p))
		p++;
	if (*p == '.')
		p++;
	while (isdigit((unsigned char)*p))
		p++;
	if (*p || p == text || !strcmp(text, "."))
		return -EINVAL;
	errno = 0;
	v = strtod(text, &end);
	if (errno || *end || !isfinite(v) || v <= 0.0 || v > 100.0)
		return -EINVAL;
	*hundredths = (int)(v * 100.0 + 0.5);
	/* Below the smallest step (0.01) it would mean 0: no SMs at all. */
	return *hundredths < 1 ? -EINVAL : 0;
}

int mps_parse_priority(const char *text, int *prio)
{
	if (!strcmp(text, "0") || !strcmp(text, "1")) {
		*prio = text[0] - '0';
		return 0;
	}
	return -EINVAL;
}

static int hexval(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	ch = (char)tolower((unsigned char)ch);
	return ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
}

int mps_parse_device(const char *text, char *out, size_t outlen)
{
	static const int group_end[] = { 8, 12, 16, 20 };
	char hex[33];
	size_t n = 0, o;
	const char *p;

	if (isdigit((unsigned char)text[0])) {
		char *end;
		long v = strtol(text, &end, 10);

		if (*end || v < 0 || v >= MPS_MAX_DEVICES || (mps_daemon.devices_known && v >= mps_daemon.ndev))
			return -EINVAL;
		snprintf(out, outlen, "%ld", v);
		return 0;
	}
	/* A UUID: three letters, a dash, 32 hex digits with dashes anywhere. */
	if (strlen(text) < 4 || !isalpha((unsigned char)text[0]) || !isalpha((unsigned char)text[1]) ||
	    !isalpha((unsigned char)text[2]) || text[3] != '-')
		return -EINVAL;
	for (p = text + 4; *p; p++) {
		if (*p == '-')
			continue;
		if (hexval(*p) < 0 || n == 32)
			return -EINVAL;
		hex[n++] = (char)tolower((unsigned char)*p);
	}
	if (n != 32 || outlen < 4 + 32 + 4 + 1)
		return -EINVAL;
	for (o = 0; o < 3; o++)
		out[o] = (char)toupper((unsigned char)text[o]);
	out[o++] = '-';
	for (size_t i = 0, g = 0; i < 32; i++) {
		if (g < 4 && i == (size_t)group_end[g]) {
			out[o++] = '-';
			g++;
		}
		out[o++] = hex[i];
	}
	out[o] = 0;
	return 0;
}

void mps_format_percentage(char *buf, size_t len, int hundredths)
{
	int tenths = (hundredths + 5) / 10;

	snprintf(buf, len, "%d.%d", tenths / 10, tenths % 10);
}

void mps_format_mem_value(char *buf, size_t len, uint64_t bytes)
{
	if (bytes && bytes % (1ull << 30) == 0)
		snprintf(buf, len, "%lluG", (unsigned long long)(bytes >> 30));
	else
		snprintf(buf, len, "%lluM", (unsigned long long)((bytes + (1ull << 20) - 1) >> 20));
}

/* Do two device names name the same device? */
static bool same_device(const char *a, const char *b)
{
	int x, y;

	if (!strcmp(a, b))
		return true;
	x = mps_device_ordinal(a);
	y = mps_device_ordinal(b);
	return x >= 0 && x == y;
}

uint64_t mps_settings_memlimit(const struct mps_settings *s, const char *dev)
{
	/* The last one set wins, as when the server applies them in order. */
	for (int i = s->nmem - 1; i >= 0; i--)
		if (same_device(s->mem[i].dev, dev))
			return s->mem[i].bytes;
	return 0;
}

int mps_settings_set_memlimit(struct mps_settings *s, const char *dev, uint64_t bytes)
{
	int n = 0;

	for (int i = 0; i < s->nmem; i++)
		if (!same_device(s->mem[i].dev, dev))
			s->mem[n++] = s->mem[i];
	s->nmem = n;
	if (n == MPS_MEMLIMITS_MAX)
		return -ENOSPC;
	snprintf(s->mem[n].dev, sizeof(s->mem[n].dev), "%s", dev);
	s->mem[n].bytes = bytes;
	s->nmem++;
	return 0;
}

int mps_settings_from_env(struct mps_settings *s, char *why, size_t whylen)
{
	const char *pct = getenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE");
	const char *mem = getenv("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT");
	char buf[1024], dev[64];

	if (pct && *pct && mps_parse_percentage(pct, &s->thread_pct) < 0) {
		snprintf(why, whylen, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=%s is not a percentage in (0, 100]", pct);
		return -EINVAL;
	}
	if (!mem || !*mem)
		return 0;
	if (snprintf(buf, sizeof(buf), "%s", mem) >= (int)sizeof(buf)) {
		snprintf(why, whylen, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT is too long");
		return -EINVAL;
	}
	for (char *save = NULL, *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(item, '=');
		uint64_t bytes;

		if (!eq)
			goto bad;
		*eq = 0;
		if (mps_parse_device(item, dev, sizeof(dev)) < 0 || mps_parse_mem_value(eq + 1, &bytes) < 0 ||
		    mps_settings_set_memlimit(s, dev, bytes) < 0)
			goto bad;
	}
	return 0;
bad:
	snprintf(why, whylen, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=%s is not a list like 0=1G,1=512M", mem);
	return -EINVAL;
}

void mps_settings_send_threads(struct mps_server_rec *srv)
{
	struct mps_chan m = { .op = MPS_CHAN_SET_THREADS, .value = srv->settings.thread_pct };

	mps_server_send(srv, &m);
}

void mps_settings_send_priority(struct mps_server_rec *srv)
{
	struct mps_chan m = { .op = MPS_CHAN_SET_PRIORITY, .value = srv->settings.priority };

	mps_server_send(srv, &m);
}

void mps_settings_send_memlimit(struct mps_server_rec *srv, const char *dev, uint64_t bytes)
{
	struct mps_chan m = { .op = MPS_CHAN_SET_MEMLIMIT, .arg = bytes };

	snprintf(m.text, sizeof(m.text), "%s", dev);
	mps_server_send(srv, &m);
}

void mps_settings_send_all(struct mps_server_rec *srv)
{
	mps_settings_send_threads(srv);
	mps_settings_send_priority(srv);
	for (int i = 0; i < srv->settings.nmem; i++)
		mps_settings_send_memlimit(srv, srv->settings.mem[i].dev, srv->settings.mem[i].bytes);
	for (int i = 0; i < mps_daemon.npart; i++)
		mps_partition_send(srv, &mps_daemon.part[i], false);
	for (int i = 0; i < mps_daemon.nvdev; i++)
		mps_vdevice_send(srv, &mps_daemon.vdev[i], false);
}

bool mps_partition_name_used(const char *name)
{
	for (int i = 0; i < mps_daemon.npart; i++)
		if (!strcmp(mps_daemon.part[i].name, name))
			return true;
	for (int i = 0; i < mps_daemon.nvdev; i++)
		if (!strcmp(mps_daemon.vdev[i].name, name))
			return true;
	return false;
}

void mps_vdevice_send(struct mps_server_rec *srv, const struct mps_vdevice *v, bool remove)
{
	struct mps_chan m = { .op = MPS_CHAN_VDEVICE, .value = remove ? 0 : v->sms ? v->sms : -v->parts,
			      .arg = v->mem };

	snprintf(m.comm, sizeof(m.comm), "%s", v->name);
	snprintf(m.text, sizeof(m.text), "%s", v->dev);
	mps_server_send(srv, &m);
}

static void vdevice_send_all(const struct mps_vdevice *v, bool remove)
{
	for (struct mps_server_rec *s = mps_daemon.servers; s; s = s->next)
		if (s->chan >= 0)
			mps_vdevice_send(s, v, remove);
}

/* ---- layouts: what fits on a device ---------------------------------- */

/* The SM groups a definition takes: a 1/parts slice, or SMS rounded to
 * groups as the server does (at least one). */
static int groups_of(const struct mps_device_info *d, int sms, int parts)
{
	int k;

	if (parts > 0)
		return d->sm_groups / parts;
	k = (sms + d->group_sms / 2) / d->group_sms;
	return k < 1 ? 1 : k;
}

/* The memory a virtual device asks of device d: a 1/parts slice's share,
 * or what it names (0: none of its own). */
static uint64_t mem_of(const struct mps_device_info *d, const struct mps_vdevice *v)
{
	return v->parts > 0 ? d->total_mem / (uint64_t)v->parts : v->mem;
}

/* What the definitions on one device take, leaving out the names a skip
 * function says to (a definition being redefined), and their names for a
 * message: all of them (SMs), the virtual devices' (memory). */
struct taken {
	int groups;
	uint64_t mem;
	char names[256], vnames[256];
};

static void add_name(char *list, size_t size, const char *name)
{
	size_t n = strlen(list);

	if (n + 1 < size)
		snprintf(list + n, size - n, "%s%s", n ? ", " : "", name);
}

static void taken(int ord, bool (*skip)(const char *name, const void *arg), const void *arg, struct taken *t)
{
	const struct mps_device_info *d = &mps_daemon.dev[ord];

	memset(t, 0, sizeof(*t));
	for (int i = 0; i < mps_daemon.npart; i++) {
		const struct mps_partition *p = &mps_daemon.part[i];

		if (mps_device_ordinal(p->dev) != ord || skip(p->name, arg))
			continue;
		t->groups += groups_of(d, p->sms, 0);
		add_name(t->names, sizeof(t->names), p->name);
	}
	for (int i = 0; i < mps_daemon.nvdev; i++) {
		const struct mps_vdevice *v = &mps_daemon.vdev[i];

		if (mps_device_ordinal(v->dev) != ord || skip(v->name, arg))
			continue;
		t->groups += groups_of(d, v->sms, v->parts);
		t->mem += mem_of(d, v);
		add_name(t->names, sizeof(t->names), v->name);
		add_name(t->vnames, sizeof(t->vnames), v->name);
	}
}

/* The device's ordinal if the daemon knows its layout, else -1. */
static int known_layout(const char *dev)
{
	int ord = mps_device_ordinal(dev);

	if (!mps_daemon.devices_known || ord < 0 || ord >= mps_daemon.ndev)
		return -1;
	return mps_daemon.dev[ord].sm_groups > 0 && mps_daemon.dev[ord].group_sms > 0 ? ord : -1;
}

static bool same_name(const char *name, const void *arg)
{
	return !strcmp(name, arg);
}

int mps_layout_check(const char *name, const char *dev, int sms, uint64_t mem, char *why, size_t len)
{
	int ord = known_layout(dev);
	const struct mps_device_info *d;
	uint64_t free_mem;
	struct taken t;

	if (ord < 0)
		return 0;
	d = &mps_daemon.dev[ord];
	taken(ord, same_name, name, &t);
	if (groups_of(d, sms, 0) > d->sm_groups - t.groups) {
		snprintf(why, len, "%d SMs do not fit on device %d: %d of its %d SMs (groups of %d) are free%s%s%s",
			 sms, ord, (d->sm_groups - t.groups) * d->group_sms, d->sm_groups * d->group_sms, d->group_sms,
			 t.groups ? " (taken: " : "", t.names, t.groups ? ")" : "");
		return -ENOSPC;
	}
	free_mem = d->total_mem - (t.mem < d->total_mem ? t.mem : d->total_mem);
	if (mem > free_mem) {
		snprintf(why, len, "%llu MiB do not fit on device %d: %llu of its %llu MiB are free%s%s%s",
			 (unsigned long long)(mem >> 20), ord, (unsigned long long)(free_mem >> 20),
			 (unsigned long long)(d->total_mem >> 20), t.mem ? " (taken: " : "", t.mem ? t.vnames : "",
			 t.mem ? ")" : "");
		return -ENOSPC;
	}
	return 0;
}

struct split_names {
	int dev, n;
};

/* vgpuD-i for i < n: the slices a split (re)defines. */
static bool split_slice(const char *name, const void *arg)
{
	const struct split_names *sn = arg;
	char want[MPS_PARTITION_NAME];

	for (int i = 0; i < sn->n; i++) {
		snprintf(want, sizeof(want), "vgpu%d-%d", sn->dev, i);
		if (!strcmp(name, want))
			return true;
	}
	return false;
}

int mps_layout_check_split(const char *dev, int n, char *why, size_t len)
{
	struct split_names sn = { .dev = known_layout(dev), .n = n };
	const struct mps_device_info *d;
	struct taken t;

	if (sn.dev < 0)
		return 0;
	d = &mps_daemon.dev[sn.dev];
	if (d->sm_groups / n < 1) {
		snprintf(why, len, "device %d has %d SM groups (of %d SMs); it cannot be split in %d", sn.dev,
			 d->sm_groups, d->group_sms, n);
		return -ENOSPC;
	}
	taken(sn.dev, split_slice, &sn, &t);
	if (t.groups) {
		snprintf(why, len, "device %d already holds %s; remove %s first", sn.dev, t.names,
			 strchr(t.names, ',') ? "them" : "it");
		return -ENOSPC;
	}
	return 0;
}

int mps_vdevice_set(const struct mps_vdevice *nv)
{
	struct mps_vdevice *v = NULL;

	if (!mps_partition_name_ok(nv->name) || (nv->sms < 1 && nv->parts < 2))
		return -EINVAL;
	for (int i = 0; i < mps_daemon.nvdev; i++)
		if (!strcmp(mps_daemon.vdev[i].name, nv->name))
			v = &mps_daemon.vdev[i];
	if (!v) {
		if (mps_partition_name_used(nv->name))
			return -EEXIST;
		if (mps_daemon.nvdev == MPS_VDEVICES_MAX)
			return -ENOSPC;
		v = &mps_daemon.vdev[mps_daemon.nvdev++];
	}
	*v = *nv;
	vdevice_send_all(v, false);
	mps_cdi_refresh();
	return 0;
}

void mps_vdevice_uuid(const struct mps_vdevice *v, char *out, size_t len)
{
	const char *phys = NULL;
	uint8_t pu[16], vu[16];
	char text[MPS_UUID_TEXT];
	char *end;
	long ord = strtol(v->dev, &end, 10);

	if (!*end && end != v->dev)
		phys = mps_daemon.devices_known && ord >= 0 && ord < mps_daemon.ndev ? mps_daemon.dev[ord].uuid : NULL;
	else
		phys = v->dev;
	if (!phys || mps_uuid_parse(phys, pu) < 0) {
		snprintf(out, len, "-");
		return;
	}
	mps_vdev_uuid(pu, v->name, vu);
	mps_uuid_text(text, vu);
	snprintf(out, len, "GPU-%s", text);
}

int mps_vdevice_sms(const struct mps_vdevice *v)
{
	int ord = known_layout(v->dev);

	return ord < 0 ? 0 : groups_of(&mps_daemon.dev[ord], v->sms, v->parts) * mps_daemon.dev[ord].group_sms;
}

uint64_t mps_vdevice_mem(const struct mps_vdevice *v)
{
	int ord = mps_device_ordinal(v->dev);
	uint64_t total, mem;

	if (!mps_daemon.devices_known || ord < 0 || ord >= mps_daemon.ndev)
		return 0;
	total = mps_daemon.dev[ord].total_mem;
	mem = mem_of(&mps_daemon.dev[ord], v);
	return !mem || mem > total ? total : mem;
}

int mps_vdevice_remove(const char *name)
{
	for (int i = 0; i < mps_daemon.nvdev; i++) {
		if (strcmp(mps_daemon.vdev[i].name, name))
			continue;
		vdevice_send_all(&mps_daemon.vdev[i], true);
		mps_daemon.vdev[i] = mps_daemon.vdev[--mps_daemon.nvdev];
		mps_cdi_refresh();
		return 0;
	}
	return -ENOENT;
}

bool mps_partition_name_ok(const char *name)
{
	size_t n = strlen(name);

	if (!n || n >= MPS_PARTITION_NAME || !strcmp(name, "none"))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)name[i]) && name[i] != '-' && name[i] != '_')
			return false;
	return true;
}

void mps_partition_send(struct mps_server_rec *srv, const struct mps_partition *p, bool remove)
{
	struct mps_chan m = { .op = MPS_CHAN_SM_PARTITION, .value = remove ? 0 : p->sms, .arg = p->lend };

	snprintf(m.comm, sizeof(m.comm), "%s", p->name);
	snprintf(m.text, sizeof(m.text), "%s", p->dev);
	mps_server_send(srv, &m);
}

static void partition_send_all(const struct mps_partition *p, bool remove)
{
	for (struct mps_server_rec *s = mps_daemon.servers; s; s = s->next)
		if (s->chan >= 0)
			mps_partition_send(s, p, remove);
}

int mps_partition_set(const char *name, const char *dev, int sms, bool lend)
{
	struct mps_partition *p = NULL;

	if (!mps_partition_name_ok(name) || sms < 1)
		return -EINVAL;
	for (int i = 0; i < mps_daemon.npart; i++)
		if (!strcmp(mps_daemon.part[i].name, name))
			p = &mps_daemon.part[i];
	/* Redefined: each server takes the new definition in place of the old
	 * (server/control.c removes a partition before placing it). */
	if (!p) {
		if (mps_partition_name_used(name))
			return -EEXIST;   /* a virtual device's */
		if (mps_daemon.npart == MPS_PARTITIONS_MAX)
			return -ENOSPC;
		p = &mps_daemon.part[mps_daemon.npart++];
	}
	snprintf(p->name, sizeof(p->name), "%s", name);
	snprintf(p->dev, sizeof(p->dev), "%s", dev);
	p->sms = sms;
	p->lend = lend;
	partition_send_all(p, false);
	return 0;
}

int mps_partition_remove(const char *name)
{
	for (int i = 0; i < mps_daemon.npart; i++) {
		if (strcmp(mps_daemon.part[i].name, name))
			continue;
		partition_send_all(&mps_daemon.part[i], true);
		mps_daemon.part[i] = mps_daemon.part[--mps_daemon.npart];
		return 0;
	}
	return -ENOENT;
}
