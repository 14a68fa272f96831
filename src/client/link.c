// SPDX-License-Identifier: MIT
/*
 * The JIT linker: cuLinkCreate, cuLinkAddData, cuLinkAddFile, cuLinkComplete
 * and cuLinkDestroy. The linking runs in the server (server/ops_link.c), in
 * the client's context there; an input is uploaded as a module's image is,
 * a file read here first (the server may not see the program's files). Of
 * the program's options, those that are plain numbers go to the server; the
 * output ones stay here, since the driver's rules say the program's value
 * array lives as long as the link: after every step the server's logs,
 * wall time and threads per block are written where the program asked
 * (log buffers up to the sizes it gave at creation, and the sizes then say
 * how much was written, as the driver does). The linked image is copied
 * here and lives until cuLinkDestroy.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "client/api.h"
#include "client/client.h"

struct mps_link {
	uint32_t magic;            /* MPS_MAGIC_LINK */
	uint32_t handle;           /* the server's */
	unsigned int n;            /* the program's options, kept for the outputs */
	CUjit_option *opts;
	void **vals;
	size_t info_cap, error_cap;   /* its log buffers' sizes at creation */
	void *image;               /* the linked image, once complete */
};

static struct mps_link *link_of(CUlinkState state)
{
	struct mps_link *l = (struct mps_link *)state;

	return l && l->magic == MPS_MAGIC_LINK ? l : NULL;
}

CUresult mps__jit_pack(struct mps_link_opt *out, uint32_t *nout, unsigned int n, const CUjit_option *opts,
		       void *const *vals, bool per_input, bool strict)
{
	if (n && (!opts || !vals))
		return CUDA_ERROR_INVALID_VALUE;
	*nout = 0;
	for (unsigned int i = 0; i < n; i++) {
		uint32_t o = (uint32_t)opts[i];

		/* The server's own: the logs, their sizes, the wall time. */
		if (o == CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES || o == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
			continue;
		if (o == CU_JIT_WALL_TIME || o == CU_JIT_INFO_LOG_BUFFER || o == CU_JIT_ERROR_LOG_BUFFER) {
			if (per_input)
				return CUDA_ERROR_INVALID_VALUE;
			continue;
		}
		if (mps_jit_plain(o, per_input) && *nout < MPS_LINK_OPTS) {
			out[*nout].opt = o;
			out[*nout].value = (uint64_t)(uintptr_t)vals[i];
			(*nout)++;
			continue;
		}
		/* A target for one input, an option that carries a pointer into
		 * the program (symbol tables, kernel names), one this library
		 * does not know, or one too many. */
		if (!strict) {
			mps__unsupported("a JIT option that cannot reach the server (left out)");
			continue;
		}
		if (per_input && (o == CU_JIT_TARGET || o == CU_JIT_TARGET_FROM_CUCONTEXT))
			return CUDA_ERROR_INVALID_VALUE;
		if (o >= (uint32_t)CU_JIT_NUM_OPTIONS || *nout == MPS_LINK_OPTS)
			return CUDA_ERROR_INVALID_VALUE;
		mps__unsupported("a JIT symbol, kernel-name or LTO option");
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	return CUDA_SUCCESS;
}

/* One log from the server into the program's buffer of cap bytes (NUL
 * included); returns the bytes written, NUL included, 0 if none. */
static size_t put_log(void *buf, size_t cap, const char *text, size_t len)
{
	if (!buf || !cap)
		return 0;
	if (len > cap - 1)
		len = cap - 1;
	memcpy(buf, text, len);
	((char *)buf)[len] = 0;
	return len ? len + 1 : 0;
}

void mps__jit_outputs(const CUjit_option *opts, void **vals, unsigned int n, size_t info_cap, size_t error_cap,
		      const struct mps_call *call)
{
	const struct mps_slot *s = call->slot >= 0 ? call->s : NULL;
	const struct mps_link_reply *rep = s ? (const void *)s->data : NULL;
	size_t info = 0, error = 0;

	if (!n || !s || s->len < sizeof(*rep) || rep->info_len + rep->error_len > s->len - sizeof(*rep))
		return;
	for (unsigned int i = 0; i < n; i++) {
		if (opts[i] == CU_JIT_INFO_LOG_BUFFER)
			info = put_log(vals[i], info_cap, rep->text, rep->info_len);
		else if (opts[i] == CU_JIT_ERROR_LOG_BUFFER)
			error = put_log(vals[i], error_cap, rep->text + rep->info_len, rep->error_len);
	}
	for (unsigned int i = 0; i < n; i++) {
		if (opts[i] == CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES)
			vals[i] = (void *)(uintptr_t)info;
		else if (opts[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
			vals[i] = (void *)(uintptr_t)error;
		else if (opts[i] == CU_JIT_WALL_TIME)
			memcpy(&vals[i], &rep->wall_ms, sizeof(rep->wall_ms));
		else if (opts[i] == CU_JIT_THREADS_PER_BLOCK && rep->threads)
			vals[i] = (void *)(uintptr_t)rep->threads;
	}
}

size_t mps__jit_cap(unsigned int n, const CUjit_option *opts, void *const *vals, CUjit_option size_opt)
{
	for (unsigned int i = 0; i < n; i++)
		if (opts[i] == size_opt)
			return (size_t)(uintptr_t)vals[i];
	return 0;
}

static CUresult link_create(unsigned int n, CUjit_option *opts, void **vals, CUlinkState *out)
{
	struct mps_msg_link q = { 0 };
	struct mps_call call;
	struct mps_link *l;
	uint32_t ctx;
	CUresult r;

	if (!out)
		return CUDA_ERROR_INVALID_VALUE;
	r = mps__cur_handle(&ctx);
	if (r != CUDA_SUCCESS)
		return r;
	r = mps__jit_pack(q.opts, &q.nopts, n, opts, vals, false, true);
	if (r != CUDA_SUCCESS)
		return r;
	l = calloc(1, sizeof(*l));
	if (!l)
		return CUDA_ERROR_OUT_OF_MEMORY;
	l->n = n;
	l->opts = opts;
	l->vals = vals;
	l->info_cap = mps__jit_cap(n, opts, vals, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES);
	l->error_cap = mps__jit_cap(n, opts, vals, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES);
	r = mps__call(MPS_OP_LINK_CREATE, ctx, &q.hdr, sizeof(q), NULL, 0, &call);
	mps__jit_outputs(opts, vals, n, l->info_cap, l->error_cap, &call);
	if (r == CUDA_SUCCESS) {
		l->handle = (uint32_t)call.s->val[0];
		l->magic = MPS_MAGIC_LINK;
		*out = (CUlinkState)l;
	} else {
		free(l);
	}
	mps__call_end(&call);
	return r;
}

static CUresult link_add(struct mps_link *l, CUjitInputType type, const void *data, size_t size, const char *name,
			 unsigned int n, CUjit_option *opts, void **vals)
{
	struct mps_msg_link q = { .link = l->handle, .type = (uint32_t)type, .size = size };
	struct mps_call call;
	uint32_t ctx = 0;
	CUresult r;

	if (!data || !size || (unsigned int)type >= (unsigned int)CU_JIT_NUM_INPUT_TYPES)
		return CUDA_ERROR_INVALID_VALUE;
	r = mps__jit_pack(q.opts, &q.nopts, n, opts, vals, true, true);
	if (r != CUDA_SUCCESS)
		return r;
	if (name)
		strncpy(q.name, name, sizeof(q.name) - 1);
	mps__cur_handle(&ctx);
	r = mps__upload_call(MPS_OP_LINK_ADD, ctx, data, size, &q.hdr, sizeof(q), &call);
	mps__jit_outputs(l->opts, l->vals, l->n, l->info_cap, l->error_cap, &call);
	mps__call_end(&call);
	return r;
}

static CUresult link_add_data(CUlinkState state, CUjitInputType type, void *data, size_t size, const char *name,
			      unsigned int n, CUjit_option *opts, void **vals)
{
	struct mps_link *l = link_of(state);

	if (!l)
		return CUDA_ERROR_INVALID_HANDLE;
	return link_add(l, type, data, size, name, n, opts, vals);
}

static CUresult link_add_file(CUlinkState state, CUjitInputType type, const char *path, unsigned int n,
			      CUjit_option *opts, void **vals)
{
	struct mps_link *l = link_of(state);
	size_t size = 0;
	void *buf;
	CUresult r;

	if (!l)
		return CUDA_ERROR_INVALID_HANDLE;
	/* A file that cannot be read is CUDA_ERROR_INVALID_VALUE here, as the
	 * driver (580) answers, where cuModuleLoad says FILE_NOT_FOUND. */
	r = mps__read_file(path, &buf, &size);
	if (r == CUDA_ERROR_FILE_NOT_FOUND || r == CUDA_ERROR_INVALID_IMAGE)
		return CUDA_ERROR_INVALID_VALUE;
	if (r != CUDA_SUCCESS)
		return r;
	/* PTX text goes with its NUL, as cuLinkAddData wants it. */
	r = link_add(l, type, buf, type == CU_JIT_INPUT_PTX ? size + 1 : size, path, n, opts, vals);
	free(buf);
	return r;
}

static CUresult link_complete(CUlinkState state, void **image, size_t *size)
{
	struct mps_link *l = link_of(state);
	struct mps_msg_link q = { 0 };
	struct mps_call call;
	uint64_t got = 0;
	void *copy = NULL;
	uint32_t ctx = 0;
	CUresult r;
	int fd = -1;

	if (!l)
		return CUDA_ERROR_INVALID_HANDLE;
	if (!image || !size)
		return CUDA_ERROR_INVALID_VALUE;
	q.link = l->handle;
	mps__cur_handle(&ctx);
	/* The image's fd arrives on the socket just before the reply. */
	pthread_mutex_lock(&mps_conn.fd_lock);
	r = mps__call(MPS_OP_LINK_COMPLETE, ctx, &q.hdr, sizeof(q), NULL, 0, &call);
	if (r == CUDA_SUCCESS)
		fd = mps__recv_fd(MPS_FD_LINK, &got);
	pthread_mutex_unlock(&mps_conn.fd_lock);
	mps__jit_outputs(l->opts, l->vals, l->n, l->info_cap, l->error_cap, &call);
	if (r == CUDA_SUCCESS && (fd < 0 || !got || got != call.s->val[0]))
		r = fd < 0 ? mps__ended_or(CUDA_ERROR_INVALID_IMAGE) : CUDA_ERROR_INVALID_IMAGE;
	mps__call_end(&call);
	if (r == CUDA_SUCCESS && !(copy = malloc((size_t)got)))
		r = CUDA_ERROR_OUT_OF_MEMORY;
	if (r == CUDA_SUCCESS && pread(fd, copy, (size_t)got, 0) != (ssize_t)got)
		r = CUDA_ERROR_INVALID_IMAGE;
	if (fd >= 0)
		close(fd);
	if (r != CUDA_SUCCESS) {
		free(copy);
		return r;
	}
	free(l->image);
	l->image = copy;
	*image = copy;
	*size = (size_t)got;
	return CUDA_SUCCESS;
}

static CUresult link_destroy(CUlinkState state)
{
	struct mps_link *l = link_of(state);
	struct mps_msg_link q = { 0 };
	struct mps_call call;
	CUresult r;

	if (!l)
		return CUDA_ERROR_INVALID_HANDLE;
	q.link = l->handle;
	r = mps__call(MPS_OP_LINK_DESTROY, 0, &q.hdr, sizeof(q), NULL, 0, &call);
	mps__call_end(&call);
	l->magic = MPS_MAGIC_DEAD;
	free(l->image);
	free(l);
	return r;
}

const struct mps_impl mps__link_api[] = {
	MPS_IMPL(cuLinkCreate, link_create),
	MPS_IMPL(cuLinkCreate_v2, link_create),
	MPS_IMPL(cuLinkAddData, link_add_data),
	MPS_IMPL(cuLinkAddData_v2, link_add_data),
	MPS_IMPL(cuLinkAddFile, link_add_file),
	MPS_IMPL(cuLinkAddFile_v2, link_add_file),
	MPS_IMPL(cuLinkComplete, link_complete),
	MPS_IMPL(cuLinkDestroy, link_destroy),
	MPS_IMPL_END
};
