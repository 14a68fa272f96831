// SPDX-License-Identifier: MIT
/*
 * The JIT linker, run in the server for the client (wire.h: MPS_OP_LINK_*).
 * A link is an object of the client's (objects.h, MPS_H_LINK) holding the
 * driver's CUlinkState together with everything the driver may write into
 * for as long as the state lives: the option arrays, the info and error
 * log buffers, the wall time. Only options that are plain numbers come from
 * the client; the logs and the wall time are the server's, and every step
 * answers with them (struct mps_link_reply) for the client to hand on. The
 * linked image goes back in a memfd; the driver's copy lives until the link
 * is destroyed, by the client or with it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/log.h"
#include "common/sock.h"
#include "server/driver.h"
#include "server/objects.h"
#include "server/server.h"

#define LOG_BYTES 3072   /* each log; both fit a reply slot */
#define OWN_OPTS 5       /* the logs, their sizes, the wall time */

struct slink {
	CUlinkState st;
	unsigned int n;
	CUjit_option opt[MPS_LINK_OPTS + OWN_OPTS];
	void *val[MPS_LINK_OPTS + OWN_OPTS];
	char info[LOG_BYTES], error[LOG_BYTES];
};

_Static_assert(sizeof(struct mps_link_reply) + 2 * LOG_BYTES <= MPS_SLOT_DATA, "both logs fit a reply");

/* Options whose value is a plain number, which the client may pass through;
 * per_input: those cuLinkAddData takes (compiler options only). */
static bool plain_option(uint32_t o, bool per_input)
{
	switch (o) {
	case CU_JIT_TARGET_FROM_CUCONTEXT:
	case CU_JIT_TARGET:
		return !per_input;
	case CU_JIT_MAX_REGISTERS:
	case CU_JIT_THREADS_PER_BLOCK:
	case CU_JIT_OPTIMIZATION_LEVEL:
	case CU_JIT_FALLBACK_STRATEGY:
	case CU_JIT_GENERATE_DEBUG_INFO:
	case CU_JIT_LOG_VERBOSE:
	case CU_JIT_GENERATE_LINE_INFO:
	case CU_JIT_CACHE_MODE:
	case CU_JIT_FTZ:
	case CU_JIT_PREC_DIV:
	case CU_JIT_PREC_SQRT:
	case CU_JIT_FMA:
	case CU_JIT_OPTIMIZE_UNUSED_DEVICE_VARIABLES:
	case CU_JIT_POSITION_INDEPENDENT_CODE:
	case CU_JIT_MIN_CTA_PER_SM:
	case CU_JIT_MAX_THREADS_PER_BLOCK:
	case CU_JIT_OVERRIDE_DIRECTIVE_VALUES:
	case CU_JIT_SPLIT_COMPILE:
		return true;
	default:
		return false;
	}
}

/* The message's options into opt/val: every one a plain number, at most
 * MPS_LINK_OPTS. Returns how many, or -1. */
static int take_options(const struct mps_msg_link *q, bool per_input, CUjit_option *opt, void **val)
{
	if (q->nopts > MPS_LINK_OPTS)
		return -1;
	for (uint32_t i = 0; i < q->nopts; i++) {
		if (!plain_option(q->opts[i].opt, per_input))
			return -1;
		opt[i] = (CUjit_option)q->opts[i].opt;
		val[i] = (void *)(uintptr_t)q->opts[i].value;
	}
	return (int)q->nopts;
}

/* The logs, the wall time and the threads per block so far, into the reply. */
static void answer(struct mps_client *c, uint32_t slot, const struct slink *l, CUresult r)
{
	struct mps_slot *s = mps__slot(c, slot);
	struct mps_link_reply *rep = (struct mps_link_reply *)s->data;
	size_t ni = l ? strnlen(l->info, LOG_BYTES - 1) : 0, ne = l ? strnlen(l->error, LOG_BYTES - 1) : 0;

	memset(rep, 0, sizeof(*rep));
	if (l) {
		rep->info_len = (uint32_t)ni;
		rep->error_len = (uint32_t)ne;
		memcpy(rep->text, l->info, ni);
		memcpy(rep->text + ni, l->error, ne);
		for (unsigned int i = 0; i < l->n; i++) {
			if (l->opt[i] == CU_JIT_WALL_TIME) {
				float ms;
				uint32_t bits = (uint32_t)(uintptr_t)l->val[i];

				memcpy(&ms, &bits, sizeof(ms));
				rep->wall_ms = ms;
			} else if (l->opt[i] == CU_JIT_THREADS_PER_BLOCK) {
				rep->threads = (uint32_t)(uintptr_t)l->val[i];
			}
		}
	}
	s->len = (uint32_t)(sizeof(*rep) + ni + ne);
	mps__reply(c, slot, r);
}

static struct mps_sobj *link_get(struct mps_client *c, const struct mps_msg_link *q)
{
	struct mps_sobj *o = mps_obj_get(c, MPS_H_LINK, q->link);

	return o && mps__bind_device(c, o->device) == CUDA_SUCCESS ? o : NULL;
}

void mps__op_link_create(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_link *q = (const void *)m;
	struct mps_sctx *x = mps__msg_ctx(c, m);
	struct mps_sobj *o;
	struct slink *l;
	CUresult r;
	int n;

	if (!x) {
		answer(c, m->slot, NULL, CUDA_ERROR_INVALID_CONTEXT);
		return;
	}
	if (!mps_drv.cuLinkCreate_v2) {
		answer(c, m->slot, NULL, CUDA_ERROR_NOT_SUPPORTED);
		return;
	}
	l = calloc(1, sizeof(*l));
	if (!l) {
		answer(c, m->slot, NULL, CUDA_ERROR_OUT_OF_MEMORY);
		return;
	}
	n = take_options(q, false, l->opt, l->val);
	if (n < 0) {
		free(l);
		answer(c, m->slot, NULL, CUDA_ERROR_INVALID_VALUE);
		return;
	}
	l->opt[n] = CU_JIT_INFO_LOG_BUFFER;
	l->val[n++] = l->info;
	l->opt[n] = CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES;
	l->val[n++] = (void *)(uintptr_t)LOG_BYTES;
	l->opt[n] = CU_JIT_ERROR_LOG_BUFFER;
	l->val[n++] = l->error;
	l->opt[n] = CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES;
	l->val[n++] = (void *)(uintptr_t)LOG_BYTES;
	l->opt[n] = CU_JIT_WALL_TIME;
	l->val[n++] = NULL;
	l->n = (unsigned int)n;
	r = mps__bind_device(c, x->device);
	if (r == CUDA_SUCCESS)
		r = mps_drv.cuLinkCreate_v2(l->n, l->opt, l->val, &l->st);
	if (r != CUDA_SUCCESS) {
		answer(c, m->slot, l, r);
		free(l);
		return;
	}
	o = mps_obj_add(c, MPS_H_LINK, l, x->device, 0);
	if (!o) {
		mps_drv.cuLinkDestroy(l->st);
		free(l);
		answer(c, m->slot, NULL, CUDA_ERROR_OUT_OF_MEMORY);
		return;
	}
	mps__slot(c, m->slot)->val[0] = o->handle;
	answer(c, m->slot, l, CUDA_SUCCESS);
}

void mps__op_link_add(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_link *q = (const void *)m;
	uint8_t *data = mps__upload_take(c, q->size);
	CUjit_option opt[MPS_LINK_OPTS];
	void *val[MPS_LINK_OPTS];
	struct mps_sobj *o = link_get(c, q);
	struct slink *l = o ? o->real : NULL;
	char name[sizeof(q->name)];
	CUresult r;
	int n;

	if (!l) {
		free(data);
		answer(c, m->slot, NULL, CUDA_ERROR_INVALID_HANDLE);
		return;
	}
	n = take_options(q, true, opt, val);
	if (!data || n < 0 || q->type >= CU_JIT_NUM_INPUT_TYPES) {
		free(data);
		answer(c, m->slot, l, !data ? CUDA_ERROR_INVALID_IMAGE : CUDA_ERROR_INVALID_VALUE);
		return;
	}
	memcpy(name, q->name, sizeof(name));
	name[sizeof(name) - 1] = 0;
	r = mps_drv.cuLinkAddData_v2(l->st, (CUjitInputType)q->type, data, (size_t)q->size, name[0] ? name : NULL,
				     (unsigned int)n, n ? opt : NULL, n ? val : NULL);
	free(data);   /* the driver keeps no reference to an input */
	answer(c, m->slot, l, r);
}

void mps__op_link_complete(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_link *q = (const void *)m;
	struct mps_fdmsg fm = { .magic = MPS_FDMSG_MAGIC, .region = MPS_FD_LINK };
	struct mps_sobj *o = link_get(c, q);
	struct slink *l = o ? o->real : NULL;
	void *image = NULL;
	size_t size = 0;
	CUresult r;
	int fd;

	if (!l) {
		answer(c, m->slot, NULL, CUDA_ERROR_INVALID_HANDLE);
		return;
	}
	r = mps_drv.cuLinkComplete(l->st, &image, &size);
	if (r == CUDA_SUCCESS && (!image || !size))
		r = CUDA_ERROR_INVALID_IMAGE;
	if (r != CUDA_SUCCESS) {
		answer(c, m->slot, l, r);
		return;
	}
	fd = memfd_create("openmps-link", MFD_CLOEXEC);
	if (fd < 0 || write(fd, image, size) != (ssize_t)size) {
		mps_log_warn("client %d: cannot pass on a linked image of %zu bytes: %s", (int)c->pid, size,
			     strerror(errno));
		r = CUDA_ERROR_OUT_OF_MEMORY;
	} else {
		fm.size = size;
		if (mps_sock_send(c->sock, &fm, sizeof(fm), fd) < 0)
			r = CUDA_ERROR_OUT_OF_MEMORY;   /* the client is going */
	}
	if (fd >= 0)
		close(fd);
	mps__slot(c, m->slot)->val[0] = size;
	answer(c, m->slot, l, r);
}

void mps__op_link_destroy(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_link *q = (const void *)m;

	if (!mps_obj_get(c, MPS_H_LINK, q->link)) {
		mps__reply(c, m->slot, CUDA_ERROR_INVALID_HANDLE);
		return;
	}
	mps_obj_del(c, q->link, true);
	mps__reply(c, m->slot, CUDA_SUCCESS);
}

CUresult mps__link_release(void *link)
{
	struct slink *l = link;
	CUresult r = mps_drv.cuLinkDestroy ? mps_drv.cuLinkDestroy(l->st) : CUDA_SUCCESS;

	free(l);
	return r;
}
