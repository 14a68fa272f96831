// SPDX-License-Identifier: MIT
/*
 * See vdevice.h. The table is the main thread's to change and the service
 * threads' to read (a welcome, a device selection, metrics), under its own
 * lock; nothing else is taken while it is held except smshare's device
 * lock (for a slice's SM count) and its partition-name lock, both leaves
 * (docs/ARCHITECTURE.md, "Locks").
 */
#include <pthread.h>
#include <stdbool.h>
#include <string.h>

#include "common/atomics.h"
#include "common/log.h"
#include "common/visible.h"
#include "server/server.h"
#include "server/smshare.h"
#include "server/vdevice.h"

struct vdev {
	char name[MPS_SM_PARTITION_NAME];   /* "": free slot */
	int name_id;
	int dev;
	uint64_t mem;                       /* bytes */
	uint8_t uuid[16];
	unsigned int clients;
};

static pthread_mutex_t vlock = PTHREAD_MUTEX_INITIALIZER;
static struct vdev vdevs[MPS_MAX_VDEVICES];

static struct vdev *find(const char *name)
{
	for (unsigned int i = 0; i < MPS_MAX_VDEVICES; i++)
		if (vdevs[i].name[0] && !strcmp(vdevs[i].name, name))
			return &vdevs[i];
	return NULL;
}

void mps_vdev_set(const char *name, int dev, unsigned int sms, uint64_t mem, unsigned int parts)
{
	uint64_t total = mps_srv.dev[dev].info.total_mem;
	unsigned int gsms, ngroups;
	struct vdev *v;
	char uuid[MPS_UUID_TEXT];

	gsms = mps_sm_group_sms(dev, &ngroups);
	if (parts) {
		/* Whole groups each, so that every slice fits beside the others. */
		sms = gsms ? ngroups / parts * gsms : 0;
		mem = total / parts;
	}
	if (!mem || mem > total)
		mem = total;
	pthread_mutex_lock(&vlock);
	v = find(name);
	for (unsigned int i = 0; !v && i < MPS_MAX_VDEVICES; i++)
		if (!vdevs[i].name[0])
			v = &vdevs[i];
	if (!v) {
		pthread_mutex_unlock(&vlock);
		mps_log_warn("virtual device %s ignored: there are %u already", name, MPS_MAX_VDEVICES);
		return;
	}
	snprintf(v->name, sizeof(v->name), "%s", name);
	v->name_id = mps_sm_name_id(name, true);
	v->dev = dev;
	v->mem = mem;
	mps_vdev_uuid(mps_srv.dev[dev].info.uuid, name, v->uuid);
	pthread_mutex_unlock(&vlock);
	if (sms)
		mps_sm_partition_set(dev, name, sms, false);
	mps_uuid_text(uuid, v->uuid);
	mps_log_info("virtual device %s (GPU-%s): %u SMs and %llu MiB of device %d", name, uuid,
		     mps_sm_partition_sms(dev, name), (unsigned long long)(mem >> 20), dev);
}

void mps_vdev_remove(const char *name)
{
	struct vdev *v;

	pthread_mutex_lock(&vlock);
	v = find(name);
	if (v)
		memset(v, 0, sizeof(*v));   /* clients that chose it keep what they have */
	pthread_mutex_unlock(&vlock);
	if (v) {
		mps_sm_partition_remove(name);
		mps_log_info("virtual device %s removed", name);
	}
}

int mps_vdev_welcome(struct mps_client *c, struct mps_wire_device *out)
{
	int n = 0;

	pthread_mutex_lock(&vlock);
	for (unsigned int i = 0; i < MPS_MAX_VDEVICES; i++) {
		const struct vdev *v = &vdevs[i];
		struct mps_wire_device *w = &out[n];
		unsigned int sms;

		if (!v->name[0] || v->dev >= mps_srv.ndev)
			continue;
		*w = mps_srv.dev[v->dev].info;
		memcpy(w->uuid, v->uuid, sizeof(w->uuid));
		w->total_mem = v->mem;
		sms = mps_sm_partition_sms(v->dev, v->name);
		if (sms)
			w->attr[CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT] = (int32_t)sms;
		w->base = (uint32_t)v->dev + 1;
		c->vwelcome[n] = (struct mps_vpick){ .name = v->name_id, .dev = v->dev, .mem = v->mem };
		n++;
	}
	c->nvwelcome = (unsigned int)n;
	pthread_mutex_unlock(&vlock);
	return n;
}

int mps_vdev_select(struct mps_client *c, unsigned int v)
{
	const struct mps_vpick *p;

	if (v >= c->nvwelcome)
		return -1;
	p = &c->vwelcome[v];
	c->vpart[p->dev] = p->name;
	{
		uint64_t lim = mps_load_relaxed(&c->mem.limit[p->dev]);

		mps_store_relaxed(&c->mem.limit[p->dev], lim && lim < p->mem ? lim : p->mem);
	}
	c->vused |= 1u << v;
	pthread_mutex_lock(&vlock);
	for (unsigned int i = 0; i < MPS_MAX_VDEVICES; i++)
		if (vdevs[i].name[0] && vdevs[i].name_id == p->name)
			vdevs[i].clients++;
	pthread_mutex_unlock(&vlock);
	mps_log_info("client %d: virtual device %s on device %d", (int)c->pid,
		     mps_sm_name_of(p->name), p->dev);
	return p->dev;
}

void mps_vdev_release(struct mps_client *c)
{
	pthread_mutex_lock(&vlock);
	for (unsigned int v = 0; v < c->nvwelcome; v++) {
		if (!(c->vused & (1u << v)))
			continue;
		for (unsigned int i = 0; i < MPS_MAX_VDEVICES; i++)
			if (vdevs[i].name[0] && vdevs[i].name_id == c->vwelcome[v].name && vdevs[i].clients)
				vdevs[i].clients--;
	}
	c->vused = 0;
	pthread_mutex_unlock(&vlock);
}

void mps_vdev_client_metrics(FILE *f, const struct mps_client *c, const char *id)
{
	for (unsigned int v = 0; v < c->nvwelcome; v++)
		if (c->vused & (1u << v))
			fprintf(f, "openmps_client_vdevice{%s,device=\"%d\",vdevice=\"%s\"} 1\n", id, c->vwelcome[v].dev,
				mps_sm_name_of(c->vwelcome[v].name));
}

void mps_vdev_metrics(FILE *f, int server)
{
	pthread_mutex_lock(&vlock);
	for (unsigned int i = 0; i < MPS_MAX_VDEVICES; i++) {
		const struct vdev *v = &vdevs[i];
		char uuid[MPS_UUID_TEXT];

		if (!v->name[0])
			continue;
		mps_uuid_text(uuid, v->uuid);
		fprintf(f, "openmps_server_vdevice_sms{server=\"%d\",device=\"%d\",vdevice=\"%s\",uuid=\"GPU-%s\"} %u\n",
			server, v->dev, v->name, uuid, mps_sm_partition_sms(v->dev, v->name));
		fprintf(f, "openmps_server_vdevice_memory_bytes{server=\"%d\",device=\"%d\",vdevice=\"%s\"} %llu\n",
			server, v->dev, v->name, (unsigned long long)v->mem);
		fprintf(f, "openmps_server_vdevice_clients{server=\"%d\",device=\"%d\",vdevice=\"%s\"} %u\n", server,
			v->dev, v->name, v->clients);
	}
	pthread_mutex_unlock(&vlock);
}
