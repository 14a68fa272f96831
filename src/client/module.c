// SPDX-License-Identifier: MIT
/*
 * Modules, libraries, kernels and functions. The program hands the driver
 * an image by pointer only (PTX text, a cubin ELF, a fatbin, or a fatbin
 * wrapper); its length is read from its own headers here, and the image is
 * uploaded through the ring in pieces, one upload at a time, then loaded by
 * the server.
 *
 * A function or kernel handle carries the parameter layout the server sent
 * (offset and size of each parameter), which launch.c uses to pack
 * arguments. Lookups by name are cached per module, as the driver returns
 * the same handle for the same name; cuFuncGetParamInfo and
 * cuKernelGetParamInfo are answered from that layout, attributes by
 * funcattr.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client/api.h"
#include "client/client.h"
#include "client/exports/exports.h"
#include "common/atomics.h"
#include "common/image.h"
#include "common/log.h"

#define UPLOAD_PIECE         (60u * 1024u)

static pthread_mutex_t upload_lock = PTHREAD_MUTEX_INITIALIZER;  /* one upload at a time */

struct fatbin_wrapper {
	uint32_t magic;
	uint32_t version;
	const void *data;
	void *filename_or_fatbins;
};

/* The bytes an image spans, read from its headers, a wrapper unwrapped
 * first; 0 if unrecognisable. */
static size_t image_size(const void **image)
{
	const uint8_t *p = *image;
	uint32_t magic;

	memcpy(&magic, p, sizeof(magic));
	if (magic == MPS_FATBIN_WRAPPER_MAGIC) {
		*image = ((const struct fatbin_wrapper *)(const void *)p)->data;
		p = *image;
	}
	return mps_image_extent(p, SIZE_MAX);
}

/* For diagnosing images the driver will not take: with OPENMPS_DUMP_IMAGES
 * set to a folder, every image is written there as it is uploaded. */
static void dump_image(int kind, const void *image, size_t size)
{
	static int seq;
	const char *dir = getenv("OPENMPS_DUMP_IMAGES");
	char path[4096];
	uint32_t magic = 0;
	FILE *f;

	memcpy(&magic, image, size < 4 ? size : 4);
	mps_log_debug("openmps: loading a %s image of %zu bytes (magic %#x)", kind == MPS_MODULE ? "module" : "library",
		      size, magic);
	if (!dir || !*dir)
		return;
	snprintf(path, sizeof(path), "%s/image-%d-%03d.%s", dir, (int)getpid(), mps_fetch_add(&seq, 1),
		 kind == MPS_MODULE ? "module" : "library");
	f = fopen(path, "wb");
	if (f) {
		fwrite(image, 1, size, f);
		fclose(f);
	}
}

CUresult mps__upload_call(uint16_t op, uint32_t ctx, const void *data, size_t size, struct mps_msg *hdr, size_t len,
			  struct mps_call *call)
{
	CUresult r = CUDA_SUCCESS;

	pthread_mutex_lock(&upload_lock);
	for (size_t off = 0; r == CUDA_SUCCESS && (off < size || off == 0); off += UPLOAD_PIECE) {
		size_t n = size - off < UPLOAD_PIECE ? size - off : UPLOAD_PIECE;
		struct mps_msg_blob b = { .total = size, .bytes = (uint32_t)n };

		b.hdr.flags = off == 0 ? MPS_BLOB_RESET : 0;
		r = mps__post(MPS_OP_BLOB_APPEND, ctx, &b.hdr, sizeof(b), (const uint8_t *)data + off, n);
		if (n == 0)
			break;
	}
	if (r == CUDA_SUCCESS) {
		r = mps__call(op, ctx, hdr, len, NULL, 0, call);
	} else {
		call->slot = -1;
		call->s = NULL;
	}
	pthread_mutex_unlock(&upload_lock);
	return r;
}

/* Uploads and loads an image; its JIT options (n of them) go along, and
 * its logs and wall time come back into the program's values. */
static CUresult upload_and_load(int kind, const void *image, CUmodule *out_mod, CUlibrary *out_lib, unsigned int n,
				CUjit_option *opts, void **vals)
{
	struct mps_msg_module_load q = { .kind = (uint32_t)kind };
	size_t info_cap = mps__jit_cap(n, opts, vals, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES);
	size_t error_cap = mps__jit_cap(n, opts, vals, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES);
	struct mps_module *m;
	struct mps_call call;
	size_t size;
	uint32_t h;
	CUresult r;

	if (!image)
		return CUDA_ERROR_INVALID_VALUE;
	/* A module belongs to the current context; a library to none, so it
	 * loads from a thread that has no context yet (cudart loads its
	 * kernels lazily from whichever thread first needs them). */
	r = mps__cur_handle(&h);
	if (r != CUDA_SUCCESS) {
		if (kind == MPS_MODULE)
			return r;
		h = 0;
		r = CUDA_SUCCESS;
	}
	size = image_size(&image);
	if (!size || !image)
		return CUDA_ERROR_INVALID_IMAGE;
	/* A module load leaves out the options it cannot pass (a program's
	 * load should not fail for a symbol table it asks about), where a link
	 * refuses them. */
	r = mps__jit_pack(q.opts, &q.nopts, n, opts, vals, false, false);
	if (r != CUDA_SUCCESS)
		return r;
	dump_image(kind, image, size);
	mps__devout_scan(image, size, h);
	m = calloc(1, sizeof(*m));
	if (!m)
		return CUDA_ERROR_OUT_OF_MEMORY;
	pthread_mutex_init(&m->lock, NULL);
	q.size = size;
	r = mps__upload_call(MPS_OP_MODULE_LOAD, h, image, size, &q.hdr, sizeof(q), &call);
	mps__jit_outputs(opts, vals, n, info_cap, error_cap, &call);
	if (r == CUDA_SUCCESS) {
		m->handle = (uint32_t)call.s->val[0];
		m->kind = kind;
		m->ctx = mps__ctx_cur();
		m->magic = MPS_MAGIC_MODULE;
		if (out_mod)
			*out_mod = (CUmodule)m;
		if (out_lib)
			*out_lib = (CUlibrary)m;
	} else {
		pthread_mutex_destroy(&m->lock);
		free(m);
	}
	mps__call_end(&call);
	return r;
}

CUresult mps__module_load_image(CUmodule *out, const void *image)
{
	return upload_and_load(MPS_MODULE, image, out, NULL, 0, NULL, NULL);
}

static CUresult module_load_data(CUmodule *mod, const void *image)
{
	if (!mod)
		return CUDA_ERROR_INVALID_VALUE;
	return upload_and_load(MPS_MODULE, image, mod, NULL, 0, NULL, NULL);
}

static CUresult module_load_data_ex(CUmodule *mod, const void *image, unsigned int n, CUjit_option *opts, void **vals)
{
	if (!mod || (n && (!opts || !vals)))
		return CUDA_ERROR_INVALID_VALUE;
	return upload_and_load(MPS_MODULE, image, mod, NULL, n, opts, vals);
}

static CUresult module_load_fat_binary(CUmodule *mod, const void *image)
{
	return module_load_data(mod, image);
}

CUresult mps__read_file(const char *path, void **buf, size_t *size)
{
	struct stat st;
	int fd;
	ssize_t n;

	if (!path)
		return CUDA_ERROR_INVALID_VALUE;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return CUDA_ERROR_FILE_NOT_FOUND;
	if (fstat(fd, &st) < 0 || st.st_size <= 0) {
		close(fd);
		return CUDA_ERROR_INVALID_IMAGE;
	}
	*buf = calloc(1, (size_t)st.st_size + 1);   /* a NUL after PTX text */
	if (!*buf) {
		close(fd);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	n = read(fd, *buf, (size_t)st.st_size);
	close(fd);
	if (n != st.st_size) {
		free(*buf);
		return CUDA_ERROR_FILE_NOT_FOUND;
	}
	if (size)
		*size = (size_t)st.st_size;
	return CUDA_SUCCESS;
}

static CUresult module_load(CUmodule *mod, const char *path)
{
	void *buf;
	CUresult r;

	if (!mod)
		return CUDA_ERROR_INVALID_VALUE;
	r = mps__read_file(path, &buf, NULL);
	if (r == CUDA_SUCCESS) {
		r = upload_and_load(MPS_MODULE, buf, mod, NULL, 0, NULL, NULL);
		free(buf);
	}
	return r;
}

#define FUNC_BUCKETS 1024u

/* Functions and kernels by their server handle, for the calls that name
 * them back (a graph's kernel nodes). */
static pthread_mutex_t funcs_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mps_func *funcs[FUNC_BUCKETS];

static uint32_t func_bucket(uint32_t handle)
{
	return (handle * 2654435761u) >> 22 & (FUNC_BUCKETS - 1);
}

static void func_register(struct mps_func *f)
{
	pthread_mutex_lock(&funcs_lock);
	f->hnext = funcs[func_bucket(f->handle)];
	funcs[func_bucket(f->handle)] = f;
	pthread_mutex_unlock(&funcs_lock);
}

static void func_unregister(struct mps_func *f)
{
	pthread_mutex_lock(&funcs_lock);
	for (struct mps_func **pp = &funcs[func_bucket(f->handle)]; *pp; pp = &(*pp)->hnext) {
		if (*pp == f) {
			*pp = f->hnext;
			break;
		}
	}
	pthread_mutex_unlock(&funcs_lock);
}

struct mps_func *mps__func_by_handle(uint32_t handle)
{
	struct mps_func *f;

	pthread_mutex_lock(&funcs_lock);
	for (f = funcs[func_bucket(handle)]; f && f->handle != handle; f = f->hnext)
		;
	pthread_mutex_unlock(&funcs_lock);
	return f;
}

static struct mps_module *module_arg(const void *h, int kind)
{
	struct mps_module *m = mps__obj(h, MPS_MAGIC_MODULE);

	return m && m->kind == kind ? m : NULL;
}

static CUresult unload(struct mps_module *m)
{
	CUresult r;

	r = mps__call_handle(MPS_OP_MODULE_UNLOAD, 0, m->handle);
	mps__devmem_forget(NULL, m);
	mps__mvar_forget(m);
	m->magic = MPS_MAGIC_DEAD;
	while (m->funcs) {
		struct mps_func *f = m->funcs;

		m->funcs = f->next;
		while (f->per_ctx) {
			struct mps_func *g = f->per_ctx;

			f->per_ctx = g->per_ctx;
			func_unregister(g);
			mps__func_view_drop(g);
			mps__fattr_drop(g);
			g->magic = MPS_MAGIC_DEAD;
			free(g->param);
			free(g);
		}
		func_unregister(f);
		mps__func_view_drop(f);
		mps__fattr_drop(f);
		f->magic = MPS_MAGIC_DEAD;
		free(f->name);
		free(f->param);
		free(f);
	}
	pthread_mutex_destroy(&m->lock);
	free(m);
	return r;
}

static CUresult module_unload(CUmodule mod)
{
	struct mps_module *m = module_arg(mod, MPS_MODULE);

	return m ? unload(m) : CUDA_ERROR_INVALID_HANDLE;
}

/* Sets q's name length. A name too long for one message (64 KiB) names no
 * symbol that exists: CUDA_ERROR_NOT_FOUND, without asking. */
static CUresult name_fits(const char *name, struct mps_msg_get_symbol *q)
{
	size_t n = strnlen(name, MPS_SYMBOL_MAX + 1);

	if (n == 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (n > MPS_SYMBOL_MAX)
		return CUDA_ERROR_NOT_FOUND;
	q->name_len = (uint32_t)n;
	return CUDA_SUCCESS;
}

/* Builds a function from a GET_FUNCTION reply. */
static struct mps_func *func_from_reply(const struct mps_slot *s, struct mps_module *m, bool is_kernel)
{
	const struct mps_func_info *info = (const void *)s->data;
	struct mps_func *f;

	if (s->len < sizeof(*info) || info->nparams > MPS_FUNC_PARAMS_MAX ||
	    s->len != sizeof(*info) + info->nparams * 4 || info->arg_size > MPS_ARGS_MAX)
		return NULL;
	f = calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	f->param = malloc((info->nparams ? info->nparams : 1) * 2 * sizeof(uint16_t));
	if (!f->param) {
		free(f);
		return NULL;
	}
	memcpy(f->param, s->data + sizeof(*info), info->nparams * 4);
	f->nparams = info->nparams;
	f->arg_size = info->arg_size;
	f->max_threads = info->max_threads;
	f->handle = (uint32_t)s->val[0];
	f->is_kernel = is_kernel;
	f->mod = m;
	f->magic = MPS_MAGIC_FUNC;
	func_register(f);
	return f;
}

static CUresult get_symbol(struct mps_module *m, const char *name, int kind, struct mps_func **out)
{
	struct mps_msg_get_symbol q = { .kind = (uint32_t)kind, .parent = m->handle };
	struct mps_call call;
	struct mps_func *f;
	uint32_t h = 0;
	CUresult r;

	if (!name)
		return CUDA_ERROR_INVALID_VALUE;
	r = name_fits(name, &q);
	if (r != CUDA_SUCCESS)
		return r;
	pthread_mutex_lock(&m->lock);
	for (f = m->funcs; f; f = f->next) {
		if (!strcmp(f->name, name)) {
			pthread_mutex_unlock(&m->lock);
			*out = f;
			return CUDA_SUCCESS;
		}
	}
	if (m->ctx)
		mps__ctx_handle(m->ctx, &h);
	else
		mps__cur_handle(&h);
	r = mps__call(MPS_OP_GET_FUNCTION, h, &q.hdr, sizeof(q), name, q.name_len + 1, &call);
	if (r == CUDA_SUCCESS) {
		f = func_from_reply(call.s, m, kind == MPS_KERNEL_OF_LIBRARY);
		if (f)
			f->name = strdup(name);
		if (!f || !f->name) {
			if (f) {
				func_unregister(f);
				free(f->param);
				free(f);
			}
			r = CUDA_ERROR_OUT_OF_MEMORY;
		} else {
			f->next = m->funcs;
			m->funcs = f;
			*out = f;
		}
	}
	mps__call_end(&call);
	pthread_mutex_unlock(&m->lock);
	return r;
}

static CUresult module_get_function(CUfunction *pf, CUmodule mod, const char *name)
{
	struct mps_module *m = module_arg(mod, MPS_MODULE);
	struct mps_func *f;
	CUresult r;

	if (!pf)
		return CUDA_ERROR_INVALID_VALUE;
	if (!m)
		return CUDA_ERROR_INVALID_HANDLE;
	r = get_symbol(m, name, MPS_FUNC_OF_MODULE, &f);
	if (r == CUDA_SUCCESS)
		*pf = (CUfunction)f;
	return r;
}

/* The module's functions by name from the server, each then got as
 * cuModuleGetFunction gets it. The names are copied out of the reply before
 * the lookups, which need reply slots of their own. */
CUresult mps__module_functions(CUmodule mod, CUfunction *fns, unsigned int max, unsigned int *count)
{
	struct mps_module *m = module_arg(mod, MPS_MODULE);
	struct mps_msg_module_funcs q = { .first = 0 };
	unsigned int got = 0, total = 0;
	uint32_t h = 0;

	if (!m)
		return CUDA_ERROR_INVALID_HANDLE;
	if (!count || (max && !fns))
		return CUDA_ERROR_INVALID_VALUE;
	if (m->ctx)
		mps__ctx_handle(m->ctx, &h);
	q.module = m->handle;
	do {
		unsigned int names = 0;
		struct mps_call call;
		size_t len = 0;
		char *buf = NULL;
		const char *p;
		CUresult r;

		q.max_names = max - got;
		r = mps__call(MPS_OP_MODULE_FUNCS, h, &q.hdr, sizeof(q), NULL, 0, &call);
		if (r == CUDA_SUCCESS) {
			total = (unsigned int)call.s->val[0];
			names = (unsigned int)call.s->val[1];
			len = call.s->len <= MPS_SLOT_DATA ? call.s->len : 0;
			buf = malloc(len + 1);
			if (buf) {
				memcpy(buf, call.s->data, len);
				buf[len] = 0;   /* a malformed reply still ends in a NUL */
			} else {
				r = CUDA_ERROR_OUT_OF_MEMORY;
			}
		}
		mps__call_end(&call);
		p = buf;
		for (unsigned int i = 0; r == CUDA_SUCCESS && i < names; i++) {
			struct mps_func *f;

			if (p >= buf + len) {
				r = CUDA_ERROR_INVALID_VALUE;   /* fewer names than it said */
				break;
			}
			r = get_symbol(m, p, MPS_FUNC_OF_MODULE, &f);
			if (r == CUDA_SUCCESS && got < max)
				fns[got++] = (CUfunction)f;
			p += strlen(p) + 1;
		}
		free(buf);
		if (r != CUDA_SUCCESS)
			return r;
		if (names == 0 && got < max && q.first < total)
			return CUDA_ERROR_NOT_SUPPORTED;   /* a name too long for a reply */
		q.first += names;
	} while (got < max && q.first < total);
	*count = total;
	return CUDA_SUCCESS;
}

static CUresult module_get_function_count(unsigned int *count, CUmodule mod)
{
	if (!count)
		return CUDA_ERROR_INVALID_VALUE;
	return mps__module_functions(mod, NULL, 0, count);
}

static CUresult module_enumerate_functions(CUfunction *fns, unsigned int n, CUmodule mod)
{
	unsigned int count = 0;

	if (!fns)
		return CUDA_ERROR_INVALID_VALUE;
	return mps__module_functions(mod, fns, n, &count);
}

static CUresult get_global(struct mps_module *m, int kind, CUdeviceptr *dptr, size_t *bytes, const char *name)
{
	struct mps_msg_get_symbol q = { .kind = (uint32_t)kind, .parent = m->handle };
	struct mps_call call;
	uint32_t h = 0;
	CUresult r;

	if (!name)
		return CUDA_ERROR_INVALID_VALUE;
	r = name_fits(name, &q);
	if (r != CUDA_SUCCESS)
		return r;
	mps__cur_handle(&h);
	r = mps__call(MPS_OP_GET_GLOBAL, h, &q.hdr, sizeof(q), name, q.name_len + 1, &call);
	if (r == CUDA_SUCCESS) {
		uint64_t p = call.s->val[0], size = call.s->val[1];
		bool managed = call.s->val[2];

		if (size)
			mps__devmem_add(p, size, m->ctx, m);
		/* A __managed__ variable: the program's CPU uses it here, from
		 * the value the server read (when it fits the reply). */
		if (managed && size)
			r = mps__mvar_add(p, (size_t)size, m, call.s->len == size ? call.s->data : NULL, h);
		mps__call_end(&call);
		if (r != CUDA_SUCCESS)
			return r;
		if (dptr)
			*dptr = (CUdeviceptr)p;
		if (bytes)
			*bytes = (size_t)size;
		return CUDA_SUCCESS;
	}
	mps__call_end(&call);
	return r;
}

static CUresult module_get_global(CUdeviceptr *dptr, size_t *bytes, CUmodule mod, const char *name)
{
	struct mps_module *m = module_arg(mod, MPS_MODULE);

	return m ? get_global(m, MPS_GLOBAL_OF_MODULE, dptr, bytes, name) : CUDA_ERROR_INVALID_HANDLE;
}

static CUresult module_get_loading_mode(CUmoduleLoadingMode *mode)
{
	const char *v = getenv("CUDA_MODULE_LOADING");

	if (!mode)
		return CUDA_ERROR_INVALID_VALUE;
	*mode = v && !strcmp(v, "EAGER") ? CU_MODULE_EAGER_LOADING : CU_MODULE_LAZY_LOADING;
	return CUDA_SUCCESS;
}

static CUresult library_load_data(CUlibrary *lib, const void *code, CUjit_option *jo, void **jv, unsigned int njo,
				  CUlibraryOption *lo, void **lv, unsigned int nlo)
{
	if (!lib || !code)
		return CUDA_ERROR_INVALID_VALUE;
	/* cudart passes option counts with NULL arrays; the driver takes that
	 * as no options, and so do we. */
	if (!jo || !jv) {
		if (njo)
			mps_log_debug("openmps: cuLibraryLoadData: %u JIT options without arrays (%p, %p)", njo,
				      (void *)jo, (void *)jv);
		njo = 0;
	}
	if (!lo || !lv) {
		if (nlo)
			mps_log_debug("openmps: cuLibraryLoadData: %u library options without arrays (%p, %p)", nlo,
				      (void *)lo, (void *)lv);
		nlo = 0;
	}
	for (unsigned int i = 0; i < nlo; i++)
		mps_log_debug("openmps: cuLibraryLoadData library option %d = %p", (int)lo[i], lv[i]);
	for (unsigned int i = 0; i < njo; i++)
		mps_log_debug("openmps: cuLibraryLoadData JIT option %d = %p", (int)jo[i], jv[i]);
	return upload_and_load(MPS_LIBRARY, code, NULL, lib, njo, jo, jv);
}

static CUresult library_load_from_file(CUlibrary *lib, const char *path, CUjit_option *jo, void **jv,
				       unsigned int njo, CUlibraryOption *lo, void **lv, unsigned int nlo)
{
	void *buf;
	CUresult r;

	if (!lib)
		return CUDA_ERROR_INVALID_VALUE;
	r = mps__read_file(path, &buf, NULL);
	if (r == CUDA_SUCCESS) {
		r = library_load_data(lib, buf, jo, jv, njo, lo, lv, nlo);
		free(buf);
	}
	return r;
}

static CUresult library_unload(CUlibrary lib)
{
	struct mps_module *m = module_arg(lib, MPS_LIBRARY);

	return m ? unload(m) : CUDA_ERROR_INVALID_HANDLE;
}

static CUresult library_get_kernel(CUkernel *pk, CUlibrary lib, const char *name)
{
	struct mps_module *m = module_arg(lib, MPS_LIBRARY);
	struct mps_func *f;
	CUresult r;

	if (!pk)
		return CUDA_ERROR_INVALID_VALUE;
	if (!m)
		return CUDA_ERROR_INVALID_HANDLE;
	r = get_symbol(m, name, MPS_KERNEL_OF_LIBRARY, &f);
	if (r == CUDA_SUCCESS)
		*pk = (CUkernel)f;
	return r;
}

static CUresult library_get_global(CUdeviceptr *dptr, size_t *bytes, CUlibrary lib, const char *name)
{
	struct mps_module *m = module_arg(lib, MPS_LIBRARY);

	return m ? get_global(m, MPS_GLOBAL_OF_LIBRARY, dptr, bytes, name) : CUDA_ERROR_INVALID_HANDLE;
}

static CUresult library_get_managed(CUdeviceptr *dptr, size_t *bytes, CUlibrary lib, const char *name)
{
	struct mps_module *m = module_arg(lib, MPS_LIBRARY);

	return m ? get_global(m, MPS_MANAGED_OF_LIBRARY, dptr, bytes, name) : CUDA_ERROR_INVALID_HANDLE;
}

struct mps_func *mps__func(const void *h)
{
	struct mps_func *f = mps__obj(h, MPS_MAGIC_FUNC);

	return f ? f : mps__func_of_view(h);
}

static struct mps_func *func_arg(const void *h)
{
	return mps__func(h);
}

static CUresult kernel_get_function(CUfunction *pf, CUkernel kernel)
{
	struct mps_func *k = func_arg(kernel), *f;
	struct mps_msg_get_symbol q = { .kind = MPS_FUNC_OF_KERNEL };
	struct mps_ctx *ctx = mps__ctx_cur();
	struct mps_call call;
	uint32_t h;
	CUresult r;

	if (!pf)
		return CUDA_ERROR_INVALID_VALUE;
	if (!k || !k->is_kernel)
		return CUDA_ERROR_INVALID_HANDLE;
	r = mps__cur_handle(&h);
	if (r != CUDA_SUCCESS)
		return r;
	pthread_mutex_lock(&k->mod->lock);
	for (f = k->per_ctx; f; f = f->per_ctx) {
		if (f->ctx == ctx) {
			pthread_mutex_unlock(&k->mod->lock);
			*pf = (CUfunction)f;
			return CUDA_SUCCESS;
		}
	}
	q.parent = k->handle;
	r = mps__call(MPS_OP_GET_FUNCTION, h, &q.hdr, sizeof(q), NULL, 0, &call);
	if (r == CUDA_SUCCESS) {
		f = func_from_reply(call.s, k->mod, false);
		if (f) {
			f->ctx = ctx;
			f->name = NULL;
			f->per_ctx = k->per_ctx;
			k->per_ctx = f;
			*pf = (CUfunction)f;
		} else {
			r = CUDA_ERROR_OUT_OF_MEMORY;
		}
	}
	mps__call_end(&call);
	pthread_mutex_unlock(&k->mod->lock);
	return r;
}

static CUresult param_info(struct mps_func *f, size_t i, size_t *off, size_t *size)
{
	if (!f)
		return CUDA_ERROR_INVALID_HANDLE;
	if (i >= f->nparams)
		return CUDA_ERROR_INVALID_VALUE;
	if (off)
		*off = f->param[2 * i];
	if (size)
		*size = f->param[2 * i + 1];
	return CUDA_SUCCESS;
}

static CUresult func_get_param_info(CUfunction hf, size_t i, size_t *off, size_t *size)
{
	return param_info(func_arg(hf), i, off, size);
}

static CUresult kernel_get_param_info(CUkernel k, size_t i, size_t *off, size_t *size)
{
	return param_info(func_arg(k), i, off, size);
}

static CUresult name_of(struct mps_func *f, const char **name)
{
	if (!name)
		return CUDA_ERROR_INVALID_VALUE;
	if (!f)
		return CUDA_ERROR_INVALID_HANDLE;
	/* A function got from a kernel shares the kernel's name. */
	if (!f->name) {
		for (struct mps_func *k = f->mod->funcs; k; k = k->next)
			for (struct mps_func *g = k->per_ctx; g; g = g->per_ctx)
				if (g == f)
					f = k;
	}
	*name = f->name;
	return f->name ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

static CUresult func_get_name(const char **name, CUfunction hf)
{
	return name_of(func_arg(hf), name);
}

static CUresult kernel_get_name(const char **name, CUkernel k)
{
	return name_of(func_arg(k), name);
}

static CUresult kernel_get_library(CUlibrary *lib, CUkernel k)
{
	struct mps_func *f = func_arg(k);

	if (!lib)
		return CUDA_ERROR_INVALID_VALUE;
	if (!f || !f->is_kernel)
		return CUDA_ERROR_INVALID_HANDLE;
	*lib = (CUlibrary)f->mod;
	return CUDA_SUCCESS;
}

static CUresult func_get_module(CUmodule *mod, CUfunction hf)
{
	struct mps_func *f = func_arg(hf);

	if (!mod)
		return CUDA_ERROR_INVALID_VALUE;
	if (!f || f->is_kernel || f->mod->kind != MPS_MODULE)
		return CUDA_ERROR_INVALID_HANDLE;
	*mod = (CUmodule)f->mod;
	return CUDA_SUCCESS;
}

static CUresult func_is_loaded(CUfunctionLoadingState *state, CUfunction hf)
{
	if (!state)
		return CUDA_ERROR_INVALID_VALUE;
	if (!func_arg(hf))
		return CUDA_ERROR_INVALID_HANDLE;
	*state = CU_FUNCTION_LOADING_STATE_LOADED;
	return CUDA_SUCCESS;
}

static CUresult func_load(CUfunction hf)
{
	return func_arg(hf) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

const struct mps_impl mps__module_api[] = {
	MPS_IMPL(cuModuleLoadData, module_load_data),
	MPS_IMPL(cuModuleLoadDataEx, module_load_data_ex),
	MPS_IMPL(cuModuleLoadFatBinary, module_load_fat_binary),
	MPS_IMPL(cuModuleLoad, module_load),
	MPS_IMPL(cuModuleUnload, module_unload),
	MPS_IMPL(cuModuleGetFunction, module_get_function),
	MPS_IMPL(cuModuleGetFunctionCount, module_get_function_count),
	MPS_IMPL(cuModuleEnumerateFunctions, module_enumerate_functions),
	MPS_IMPL(cuModuleGetGlobal_v2, module_get_global),
	MPS_IMPL(cuModuleGetLoadingMode, module_get_loading_mode),
	MPS_IMPL(cuLibraryLoadData, library_load_data),
	MPS_IMPL(cuLibraryLoadFromFile, library_load_from_file),
	MPS_IMPL(cuLibraryUnload, library_unload),
	MPS_IMPL(cuLibraryGetKernel, library_get_kernel),
	MPS_IMPL(cuLibraryGetGlobal, library_get_global),
	MPS_IMPL(cuLibraryGetManaged, library_get_managed),
	MPS_IMPL(cuKernelGetFunction, kernel_get_function),
	MPS_IMPL(cuKernelGetParamInfo, kernel_get_param_info),
	MPS_IMPL(cuKernelGetName, kernel_get_name),
	MPS_IMPL(cuKernelGetLibrary, kernel_get_library),
	MPS_IMPL(cuFuncGetParamInfo, func_get_param_info),
	MPS_IMPL(cuFuncGetName, func_get_name),
	MPS_IMPL(cuFuncGetModule, func_get_module),
	MPS_IMPL(cuFuncIsLoaded, func_is_loaded),
	MPS_IMPL(cuFuncLoad, func_load),
	MPS_IMPL_END
};
