// SPDX-License-Identifier: MIT
/*
 * Pageable host memory in graphs: a copy node, or a copy captured from a
 * stream, whose host side is the program's pageable memory (a heap buffer,
 * a local variable). The server cannot reach those pages when the graph
 * runs, long after the call; so the copy goes through a staging buffer of
 * pinned memory, and a host function run in this process in stream order
 * (hostfn.c) moves the bytes between the staging buffer and the program's
 * pages: ahead of the copy to the device, after the copy to the host. Each
 * launch thus copies what the pages hold when it runs, and the program
 * reads what it copied once the launch is done, as natively (the driver
 * stages pageable memory in graphs too). The program's pages are never
 * moved or pinned: a page of the calling thread's own stack is as good as
 * any.
 *
 * A staging buffer and its host function's slot (kept for good, as a
 * graph's host function's is) serve every graph that copies the same bytes
 * of the same memory the same way, for the life of the process: a loop
 * that captures the same copy into a local variable every round uses one.
 *
 * A copy node made so is one node of its graph (a child graph of the copy
 * and the host function; the server calls it a copy node), whose
 * parameters the program reads back as it gave them. A captured copy is
 * two nodes of the capture's graph, the copy and the host function.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "client/api.h"
#include "client/client.h"

static struct {
	pthread_mutex_t lock;
	struct mps_gstage **v;
	size_t n, cap;
} stages = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* Moves the box's rows between the program's pages and the staging
 * buffer (runs on the host function thread, in stream order). */
static void CUDA_CB move_rows(void *arg)
{
	const struct mps_gstage *g = arg;

	for (uint64_t z = 0; z < g->depth; z++) {
		for (uint64_t y = 0; y < g->rows; y++) {
			uint64_t off = ((g->z + z) * g->height + g->y + y) * g->pitch + g->x - g->start;

			if (g->to_host)
				memcpy(g->host + off, g->buf + off, (size_t)g->width);
			else
				memcpy(g->buf + off, g->host + off, (size_t)g->width);
		}
	}
}

static bool same(const struct mps_gstage *a, const struct mps_gstage *b)
{
	return a->to_host == b->to_host && a->host == b->host && a->span == b->span && a->start == b->start &&
	       a->x == b->x && a->y == b->y && a->z == b->z && a->pitch == b->pitch && a->height == b->height &&
	       a->width == b->width && a->rows == b->rows && a->depth == b->depth;
}

CUresult mps__gstage_get(const struct mps_gstage *want, struct mps_gstage **out)
{
	struct mps_gstage *g = NULL;
	void *buf = NULL;
	CUresult r;

	if (!want->span || !want->width || !want->rows || !want->depth || want->span > SIZE_MAX)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&stages.lock);
	for (size_t i = 0; i < stages.n; i++) {
		if (same(stages.v[i], want)) {
			*out = stages.v[i];
			pthread_mutex_unlock(&stages.lock);
			return CUDA_SUCCESS;
		}
	}
	if (stages.n == stages.cap) {
		size_t cap = stages.cap ? stages.cap * 2 : 16;
		struct mps_gstage **v = realloc(stages.v, cap * sizeof(*v));

		if (!v) {
			r = CUDA_ERROR_OUT_OF_MEMORY;
			goto fail;
		}
		stages.v = v;
		stages.cap = cap;
	}
	g = malloc(sizeof(*g));
	if (!g) {
		r = CUDA_ERROR_OUT_OF_MEMORY;
		goto fail;
	}
	*g = *want;
	r = mps__host_region((size_t)g->span, &g->region, &buf);
	if (r != CUDA_SUCCESS)
		goto fail;
	g->buf = buf;
	r = mps__hostfn_keep(move_rows, g, &g->slot, &g->seq);
	if (r != CUDA_SUCCESS)
		goto fail;   /* the region stays the library's, unused */
	mps__hostfn_pin(g->slot);
	stages.v[stages.n++] = g;
	pthread_mutex_unlock(&stages.lock);
	*out = g;
	return CUDA_SUCCESS;
fail:
	pthread_mutex_unlock(&stages.lock);
	free(g);
	return r;
}

CUresult mps__gstage_linear(bool to_host, void *host, size_t n, struct mps_gstage **out)
{
	struct mps_gstage want = {
		.to_host = to_host, .host = host, .span = n, .pitch = n, .height = 1, .width = n, .rows = 1, .depth = 1,
	};

	return mps__gstage_get(&want, out);
}
