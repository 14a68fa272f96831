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
#include "server/jit.h"
#include "server/objects.h"
#include "server/server.h"

struct slink {
	CUlinkState st;
	unsigned inputs;      /* added so far */
	struct mps_jit jit;   /* the driver writes into it while the link lives */
};

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

	if (!x) {
		mps_jit_answer(c, m->slot, NULL, CUDA_ERROR_INVALID_CONTEXT);
		return;
	}
	if (!mps_drv.cuLinkCreate_v2) {
		mps_jit_answer(c, m->slot, NULL, CUDA_ERROR_NOT_SUPPORTED);
		return;
	}
	l = calloc(1, sizeof(*l));
	if (!l) {
		mps_jit_answer(c, m->slot, NULL, CUDA_ERROR_OUT_OF_MEMORY);
		return;
	}
	if (mps_jit_init(&l->jit, q->opts, q->nopts) < 0) {
		free(l);
		mps_jit_answer(c, m->slot, NULL, CUDA_ERROR_INVALID_VALUE);
		return;
	}
	r = mps__bind_device(c, x->device);
	if (r == CUDA_SUCCESS)
		r = mps_drv.cuLinkCreate_v2(l->jit.n, l->jit.opt, l->jit.val, &l->st);
	if (r != CUDA_SUCCESS) {
		mps_jit_answer(c, m->slot, &l->jit, r);
		free(l);
		return;
	}
	o = mps_obj_add(c, MPS_H_LINK, l, x->device, 0);
	if (!o) {
		mps_drv.cuLinkDestroy(l->st);
		free(l);
		mps_jit_answer(c, m->slot, NULL, CUDA_ERROR_OUT_OF_MEMORY);
		return;
	}
	mps__slot(c, m->slot)->val[0] = o->handle;
	mps_jit_answer(c, m->slot, &l->jit, CUDA_SUCCESS);
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
		mps_jit_answer(c, m->slot, NULL, CUDA_ERROR_INVALID_HANDLE);
		return;
	}
	n = mps_jit_options(q->opts, q->nopts, true, opt, val);
	if (!data || n < 0 || q->type >= CU_JIT_NUM_INPUT_TYPES) {
		free(data);
		mps_jit_answer(c, m->slot, &l->jit, !data ? CUDA_ERROR_INVALID_IMAGE : CUDA_ERROR_INVALID_VALUE);
		return;
	}
	memcpy(name, q->name, sizeof(name));
	name[sizeof(name) - 1] = 0;
	mps_jit_step(&l->jit);
	r = mps_drv.cuLinkAddData_v2(l->st, (CUjitInputType)q->type, data, (size_t)q->size, name[0] ? name : NULL,
				     (unsigned int)n, n ? opt : NULL, n ? val : NULL);
	free(data);   /* the driver keeps no reference to an input */
	if (r == CUDA_SUCCESS)
		l->inputs++;
	mps_jit_answer(c, m->slot, &l->jit, r);
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
		mps_jit_answer(c, m->slot, NULL, CUDA_ERROR_INVALID_HANDLE);
		return;
	}
	/* A link of nothing is not asked of the driver: on an H200 (driver
	 * 580) completing one in the server, with its log buffers, was
	 * followed by an abort inside the JIT compiler at the server's next
	 * cuLinkCreate, which ends every client. (A process of its own
	 * making the same calls without log buffers did not abort.) */
	if (!l->inputs) {
		mps_jit_answer(c, m->slot, &l->jit, CUDA_ERROR_INVALID_IMAGE);
		return;
	}
	mps_jit_step(&l->jit);
	r = mps_drv.cuLinkComplete(l->st, &image, &size);
	if (r == CUDA_SUCCESS && (!image || !size))
		r = CUDA_ERROR_INVALID_IMAGE;
	if (r != CUDA_SUCCESS) {
		mps_jit_answer(c, m->slot, &l->jit, r);
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
	mps_jit_answer(c, m->slot, &l->jit, r);
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
