// SPDX-License-Identifier: MIT
/*
 * The limits a client's environment asks for itself, as under NVIDIA MPS:
 * CUDA_MPS_ACTIVE_THREAD_PERCENTAGE (a percentage), CUDA_MPS_CLIENT_PRIORITY
 * (0 normal, 1 below normal), CUDA_MPS_PINNED_DEVICE_MEM_LIMIT
 * ("0=1G,1=512M": devices by this process's ordinal or by UUID, or one size
 * for every device) and CUDA_MPS_SM_PARTITION (the name of an SM partition
 * the control daemon defines with sm_partition add). They are sent once, right after the devices are
 * chosen; the server keeps each only where it lowers its own setting. A
 * value that cannot be read is logged and left out.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/client.h"
#include "common/log.h"
#include "common/memvalue.h"
#include "common/visible.h"

/* The program's ordinal of the device a limit names, or -1. */
static int device_named(const char *name, size_t len)
{
	char uuid[MPS_UUID_TEXT];
	char *end;
	long v;

	if (len >= 4 && !strncasecmp(name, "GPU-", 4)) {
		for (int i = 0; i < mps_conn.ndev; i++) {
			mps_uuid_text(uuid, mps_conn.welcome->dev[i].uuid);
			if (len - 4 == strlen(uuid) && !strncasecmp(uuid, name + 4, len - 4))
				return i;
		}
		return -1;
	}
	v = strtol(name, &end, 10);
	return end == name + len && len && v >= 0 && v < mps_conn.ndev ? (int)v : -1;
}

/* CUDA_MPS_PINNED_DEVICE_MEM_LIMIT into limit[]: 0, or -1 if unreadable. */
static int mem_limits(const char *text, uint64_t *limit)
{
	char item[128];

	while (*text) {
		size_t n = strcspn(text, ",");
		char *eq;
		uint64_t bytes;
		int d;

		if (n == 0 || n >= sizeof(item))
			return -1;
		memcpy(item, text, n);
		item[n] = 0;
		text += n + (text[n] == ',');
		eq = strchr(item, '=');
		if (!eq) {   /* one size for every device */
			if (mps_parse_mem_value(item, &bytes) < 0)
				return -1;
			for (int i = 0; i < mps_conn.ndev; i++)
				limit[i] = bytes;
			continue;
		}
		d = device_named(item, (size_t)(eq - item));
		if (d < 0 || mps_parse_mem_value(eq + 1, &bytes) < 0)
			return -1;
		limit[d] = bytes;
	}
	return 0;
}

int mps__send_limits(void)
{
	const char *pct = getenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE");
	const char *prio = getenv("CUDA_MPS_CLIENT_PRIORITY");
	const char *mem = getenv("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT");
	const char *part = getenv("CUDA_MPS_SM_PARTITION");
	struct mps_msg_client_limits q;
	struct mps_call call;
	CUresult r;

	memset(&q, 0, sizeof(q));
	q.priority = -1;
	if (pct && *pct) {
		char *end;
		double v = strtod(pct, &end);

		if (*end || !(v > 0 && v <= 100))
			mps_log_warn("openmps: CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=%s is not a percentage; ignored", pct);
		else
			q.thread_pct = (uint32_t)(v * 100 + 0.5) ? (uint32_t)(v * 100 + 0.5) : 1;
	}
	if (prio && *prio) {
		if (strcmp(prio, "0") && strcmp(prio, "1"))
			mps_log_warn("openmps: CUDA_MPS_CLIENT_PRIORITY=%s is not 0 or 1; ignored", prio);
		else
			q.priority = prio[0] - '0';
	}
	if (mem && *mem && mem_limits(mem, q.mem_limit) < 0) {
		mps_log_warn("openmps: CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=%s cannot be read; ignored", mem);
		memset(q.mem_limit, 0, sizeof(q.mem_limit));
	}
	if (part && *part) {
		size_t n = strlen(part);

		if (n >= sizeof(q.sm_partition) || strspn(part, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
							     "0123456789-_") != n)
			mps_log_warn("openmps: CUDA_MPS_SM_PARTITION=%s is not a partition name; ignored", part);
		else
			memcpy(q.sm_partition, part, n + 1);
	}
	if (!q.thread_pct && q.priority < 0 && !mem && !q.sm_partition[0])
		return 0;
	r = mps__call(MPS_OP_CLIENT_LIMITS, 0, &q.hdr, sizeof(q), NULL, 0, &call);
	mps__call_end(&call);
	return r == CUDA_SUCCESS ? 0 : -1;
}
