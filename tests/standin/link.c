// SPDX-License-Identifier: MIT
/*
 * The JIT linker: cuLinkCreate, cuLinkAddData, cuLinkAddFile, cuLinkComplete
 * and cuLinkDestroy. The stand-in has no code to link; its "image" is PTX
 * text, so linking checks each input as PTX (mps__ptx_parse, the way a
 * module load does) and joins them: the first input whole, the later ones
 * without their .version, .target and .address_size lines, which the
 * result has once. Inputs of another kind than PTX text (a real cubin, a
 * library) are CUDA_ERROR_INVALID_IMAGE, as for a module load.
 *
 * Like the driver, it writes what it has to say into the log buffers given
 * to cuLinkCreate (the info log one line per input, the error log why an
 * input was refused), sets their sizes to what was written and the wall
 * time to 0, and keeps the linked image until cuLinkDestroy.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "standin.h"

struct si_link {
	uintptr_t handle;
	struct si_context *ctx;
	unsigned int n;          /* the program's options, kept for the outputs */
	CUjit_option *opts;
	void **vals;
	size_t info_cap, error_cap;
	char info[1024], error[1024];
	char *text;              /* the inputs so far */
	size_t len;
	int inputs;
	char *image;             /* once complete */
};

static size_t cap_of(const struct si_link *l, CUjit_option size_opt)
{
	for (unsigned int i = 0; i < l->n; i++)
		if (l->opts[i] == size_opt)
			return (size_t)(uintptr_t)l->vals[i];
	return 0;
}

/* The logs so far into the program's buffers and sizes. */
static void outputs(struct si_link *l)
{
	float zero = 0;

	for (unsigned int i = 0; i < l->n; i++) {
		const char *text = NULL;
		size_t cap = 0;

		if (l->opts[i] == CU_JIT_INFO_LOG_BUFFER) {
			text = l->info;
			cap = l->info_cap;
		} else if (l->opts[i] == CU_JIT_ERROR_LOG_BUFFER) {
			text = l->error;
			cap = l->error_cap;
		} else if (l->opts[i] == CU_JIT_WALL_TIME) {
			memcpy(&l->vals[i], &zero, sizeof(zero));
		}
		if (text && cap && l->vals[i])
			snprintf(l->vals[i], cap, "%s", text);
	}
	for (unsigned int i = 0; i < l->n; i++) {
		if (l->opts[i] == CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES)
			l->vals[i] = (void *)(uintptr_t)(l->info[0] && l->info_cap ?
						      strnlen(l->info, l->info_cap - 1) + 1 : 0);
		else if (l->opts[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
			l->vals[i] = (void *)(uintptr_t)(l->error[0] && l->error_cap ?
						      strnlen(l->error, l->error_cap - 1) + 1 : 0);
	}
}

static void say(char *log, size_t size, const char *fmt, const char *name, size_t n)
{
	size_t used = strlen(log);

	if (used < size)
		snprintf(log + used, size - used, fmt, name, n);
}

CU_API CUresult cuLinkCreate_v2(unsigned int numOptions, CUjit_option *options, void **optionValues,
				CUlinkState *stateOut)
{
	struct si_context *ctx;
	struct si_link *l;
	CUresult rc;

	if (!mps__initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!stateOut || (numOptions && (!options || !optionValues)))
		return CUDA_ERROR_INVALID_VALUE;
	for (unsigned int i = 0; i < numOptions; i++)
		if ((unsigned int)options[i] >= (unsigned int)CU_JIT_NUM_OPTIONS)
			return CUDA_ERROR_INVALID_VALUE;
	mps__lock();
	rc = mps__ctx_enter(&ctx);
	mps__unlock();
	if (rc != CUDA_SUCCESS)
		return rc;
	l = calloc(1, sizeof(*l));
	if (!l)
		return CUDA_ERROR_OUT_OF_MEMORY;
	l->ctx = ctx;
	l->n = numOptions;
	l->opts = options;
	l->vals = optionValues;
	l->info_cap = cap_of(l, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES);
	l->error_cap = cap_of(l, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES);
	mps__lock();
	l->handle = mps__handle_add(SI_H_LINK, l);
	mps__unlock();
	if (!l->handle) {
		free(l);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	outputs(l);
	*stateOut = (CUlinkState)l->handle;
	return CUDA_SUCCESS;
}

/* The link behind a handle, else NULL. Each link is used by one thread at
 * a time, as the driver asks of its callers. */
static struct si_link *link_get(CUlinkState state)
{
	struct si_link *l;

	mps__lock();
	l = mps__handle_get((uintptr_t)state, SI_H_LINK);
	mps__unlock();
	return l;
}

CU_API CUresult cuLinkAddData_v2(CUlinkState state, CUjitInputType type, void *data, size_t size, const char *name,
				 unsigned int numOptions, CUjit_option *options, void **optionValues)
{
	struct si_link *l = link_get(state);
	struct si_image img;
	char *text, *more;
	size_t n;
	int err;

	(void)options;
	(void)optionValues;
	if (!l)
		return CUDA_ERROR_INVALID_HANDLE;
	if (!data || !size || (unsigned int)type >= (unsigned int)CU_JIT_NUM_INPUT_TYPES)
		return CUDA_ERROR_INVALID_VALUE;
	if (!name)
		name = "input";
	(void)numOptions;
	text = strndup(data, size);
	if (!text)
		return CUDA_ERROR_OUT_OF_MEMORY;
	err = mps__ptx_parse(text, &img);
	if (err < 0) {
		say(l->error, sizeof(l->error), "stand-in linker: %s is not PTX the stand-in reads (%zu bytes)\n", name,
		    size);
		outputs(l);
		free(text);
		return err == -ENOEXEC ? CUDA_ERROR_INVALID_IMAGE : CUDA_ERROR_INVALID_PTX;
	}
	mps__ptx_release(&img);
	n = strlen(text);
	more = realloc(l->text, l->len + n + 2);
	if (!more) {
		free(text);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	l->text = more;
	/* Line by line; a later input without the directives the result has
	 * once. */
	for (const char *line = text; *line;) {
		const char *eol = strchr(line, '\n'), *t = line;
		size_t len = eol ? (size_t)(eol - line) + 1 : strlen(line);

		while (*t == ' ' || *t == '\t')
			t++;
		if (!l->inputs || (strncmp(t, ".version", 8) && strncmp(t, ".target", 7) && strncmp(t, ".address_size", 13))) {
			memcpy(l->text + l->len, line, len);
			l->len += len;
		}
		line += len;
	}
	l->text[l->len++] = '\n';
	l->text[l->len] = 0;
	l->inputs++;
	say(l->info, sizeof(l->info), "stand-in linker: %s, %zu bytes of PTX\n", name, size);
	outputs(l);
	free(text);
	return CUDA_SUCCESS;
}

CU_API CUresult cuLinkAddFile_v2(CUlinkState state, CUjitInputType type, const char *path, unsigned int numOptions,
				 CUjit_option *options, void **optionValues)
{
	FILE *f;
	char *buf = NULL;
	size_t size = 0, cap = 0, n;
	CUresult rc;

	if (!link_get(state))
		return CUDA_ERROR_INVALID_HANDLE;
	if (!path)
		return CUDA_ERROR_INVALID_VALUE;
	f = fopen(path, "rb");
	if (!f)
		return CUDA_ERROR_FILE_NOT_FOUND;
	do {
		char *more;

		if (size + 4096 + 1 > cap) {
			cap = (size + 4096 + 1) * 2;
			more = realloc(buf, cap);
			if (!more) {
				free(buf);
				fclose(f);
				return CUDA_ERROR_OUT_OF_MEMORY;
			}
			buf = more;
		}
		n = fread(buf + size, 1, 4096, f);
		size += n;
	} while (n > 0);
	fclose(f);
	if (!size) {
		free(buf);
		return CUDA_ERROR_INVALID_IMAGE;
	}
	buf[size] = 0;
	rc = cuLinkAddData_v2(state, type, buf, size + 1, path, numOptions, options, optionValues);
	free(buf);
	return rc;
}

CU_API CUresult cuLinkComplete(CUlinkState state, void **cubinOut, size_t *sizeOut)
{
	struct si_link *l = link_get(state);

	if (!l)
		return CUDA_ERROR_INVALID_HANDLE;
	if (!cubinOut || !sizeOut)
		return CUDA_ERROR_INVALID_VALUE;
	if (!l->inputs) {
		say(l->error, sizeof(l->error), "stand-in linker: %s%zu inputs to link\n", "", (size_t)0);
		outputs(l);
		return CUDA_ERROR_INVALID_VALUE;
	}
	free(l->image);
	l->image = strdup(l->text);
	if (!l->image)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*cubinOut = l->image;
	*sizeOut = l->len + 1;
	return CUDA_SUCCESS;
}

CU_API CUresult cuLinkDestroy(CUlinkState state)
{
	struct si_link *l = link_get(state);

	if (!l)
		return CUDA_ERROR_INVALID_HANDLE;
	mps__lock();
	mps__handle_remove(l->handle);
	mps__unlock();
	free(l->text);
	free(l->image);
	free(l);
	return CUDA_SUCCESS;
}
