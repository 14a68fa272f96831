// SPDX-License-Identifier: MIT
/*
 * Stream capture. A client's stream is a private stream of the server's
 * context, so capturing it is the driver's own capture of that stream: the
 * launches, copies, memsets and event records the client queues on it while
 * it captures become nodes of the capture graph, cross-stream waits join
 * other streams to it, and the graph that ends it becomes one of the
 * client's objects (objects.h).
 *
 * The server always captures in relaxed mode: its threads serve many clients,
 * and a global-mode capture would forbid every client's allocations, not only
 * the capturing one's. The client library applies the mode's rules to its
 * own threads instead (client/capture.c).
 *
 * While a client captures, the server must not put work of its own on a
 * capturing stream, or make one of its streams wait on one (it would join
 * the capture): mps_stream_capturing() tells, and streams.c, the copies and
 * the synchronizes ask it (only while the client has a capture going, so it
 * costs nothing otherwise).
 */
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "server/driver.h"
#include "server/forward.h"
#include "server/server.h"
#include "server/streams.h"

bool mps_stream_capturing(struct mps_client *c, struct mps_sstream *st)
{
	CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;

	if (!c->captures || !mps_drv.cuStreamIsCapturing)
		return false;
	return mps_drv.cuStreamIsCapturing(st->s, &status) == CUDA_SUCCESS && status != CU_STREAM_CAPTURE_STATUS_NONE;
}

/* A stream the client may capture: one of its own, not the legacy stream
 * (the driver refuses capture there too), its device bound. */
static struct mps_sstream *capture_stream(struct mps_client *c, const struct mps_msg *m, uint32_t h, CUresult *r)
{
	struct mps_sstream *st;

	if (!h) {
		*r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
		return NULL;
	}
	st = mps_stream_resolve(c, NULL, h, r);
	if (!st)
		return NULL;
	*r = mps__bind_device(c, st->ctx->device);
	return *r == CUDA_SUCCESS ? st : NULL;
}

void mps__op_capture_begin(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_capture_begin *q = (const void *)m;
	const uint8_t *at = (const uint8_t *)(q + 1), *end = (const uint8_t *)m + m->len;
	const CUgraphEdgeData *edges = NULL;
	CUgraphNode *deps = NULL;
	struct mps_sstream *st;
	CUgraph graph = NULL;
	CUresult r;

	if (q->mode > CU_STREAM_CAPTURE_MODE_RELAXED) {
		r = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	st = capture_stream(c, m, q->stream, &r);
	if (!st)
		goto out;
	if (!mps_drv.cuStreamBeginCapture_v2) {
		r = CUDA_ERROR_NOT_SUPPORTED;
		goto out;
	}
	if (q->graph) {
		const void *wire;

		if (!mps__fwd_get(c, MPS_H_GRAPH, q->graph, (void **)&graph, &r))
			goto out;
		wire = mps__fwd_array(&at, end, q->ndeps, sizeof(uint32_t), &r);
		if (!wire)
			goto out;
		deps = mps__fwd_handles(c, MPS_H_NODE, wire, q->ndeps, &r);
		if (!deps)
			goto out;
		if ((m->flags & MPS_CAPTURE_EDGES) && !(edges = mps__fwd_array(&at, end, q->ndeps, sizeof(*edges), &r)))
			goto out;
	} else if (q->ndeps) {
		r = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	/* A synchronize still waiting for this stream gets its event outside
	 * the capture. */
	r = mps_comp_settle(c, st);
	if (r != CUDA_SUCCESS)
		goto out;
	if (graph) {
		r = mps_drv.cuStreamBeginCaptureToGraph ?
			    mps_drv.cuStreamBeginCaptureToGraph(st->s, graph, deps, edges, q->ndeps,
								CU_STREAM_CAPTURE_MODE_RELAXED) :
			    CUDA_ERROR_NOT_SUPPORTED;
	} else {
		r = mps_drv.cuStreamBeginCapture_v2(st->s, CU_STREAM_CAPTURE_MODE_RELAXED);
	}
	if (r == CUDA_SUCCESS) {
		st->capture_origin = true;
		c->captures++;
	}
out:
	free(deps);
	mps__reply(c, m->slot, r);
}

void mps__op_capture_end(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_handle *q = (const void *)m;
	struct mps_slot *s = mps__slot(c, m->slot);
	struct mps_sstream *st;
	CUgraph graph = NULL;
	CUresult r;

	s->val[0] = 0;
	st = capture_stream(c, m, q->handle, &r);
	if (!st)
		goto out;
	if (!mps_drv.cuStreamEndCapture) {
		r = CUDA_ERROR_NOT_SUPPORTED;
		goto out;
	}
	r = mps_drv.cuStreamEndCapture(st->s, &graph);
	/* These end the capture (the others leave it going: the wrong stream). */
	if (st->capture_origin && (r == CUDA_SUCCESS || r == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED ||
				   r == CUDA_ERROR_STREAM_CAPTURE_UNJOINED)) {
		st->capture_origin = false;
		c->captures--;
	}
	/* Captured into a graph of the client's (cuStreamBeginCaptureToGraph):
	 * that graph, by the handle it has; else a new graph, the client's. */
	if (r == CUDA_SUCCESS && graph && !(s->val[0] = mps_obj_find(c, MPS_H_GRAPH, graph)))
		r = mps__fwd_new(c, MPS_H_GRAPH, graph, 0, &s->val[0]);
out:
	mps__reply(c, m->slot, r);
}

void mps__op_capture_info(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_handle *q = (const void *)m;
	struct mps_slot *s = mps__slot(c, m->slot);
	CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
	const CUgraphEdgeData *edges = NULL;
	const CUgraphNode *deps = NULL;
	struct mps_sstream *st;
	cuuint64_t id = 0;
	CUgraph graph = NULL;
	size_t n = 0;
	uint32_t *h;
	CUresult r;

	memset(s->val, 0, sizeof(s->val));
	st = q->handle ? mps_stream_resolve(c, NULL, q->handle, &r) : mps_stream_for_work(c, m, 0, &r);
	if (!st)
		goto out;
	r = mps__bind_device(c, st->ctx->device);
	if (r != CUDA_SUCCESS)
		goto out;
	if (!mps_drv.cuStreamGetCaptureInfo_v3) {
		r = CUDA_ERROR_NOT_SUPPORTED;
		goto out;
	}
	r = mps_drv.cuStreamGetCaptureInfo_v3(st->s, &status, &id, &graph, &deps, &edges, &n);
	if (r != CUDA_SUCCESS)
		goto out;
	s->val[0] = status;
	s->val[1] = id;
	if (status != CU_STREAM_CAPTURE_STATUS_ACTIVE)
		goto out;
	if (n > MPS_CAPTURE_DEPS_MAX) {
		mps_log_warn("client %d: a capture with %zu open dependencies; at most %zu are reported", (int)c->pid,
			     n, (size_t)MPS_CAPTURE_DEPS_MAX);
		r = CUDA_ERROR_NOT_SUPPORTED;
		goto out;
	}
	/* The graph is the driver's until the capture ends (then the client's:
	 * op_capture_end adopts the same handle). */
	r = mps__fwd_handle_of(c, MPS_H_GRAPH, graph, 0, &s->val[2]);
	if (r != CUDA_SUCCESS)
		goto out;
	h = (uint32_t *)s->data;
	for (size_t i = 0; i < n; i++) {
		uint64_t nh = 0;

		r = mps__fwd_handle_of(c, MPS_H_NODE, deps[i], (uint32_t)s->val[2], &nh);
		if (r != CUDA_SUCCESS)
			goto out;
		h[i] = (uint32_t)nh;
	}
	if (edges)
		memcpy(s->data + ((n * 4 + 7) & ~(size_t)7), edges, n * sizeof(*edges));
	else
		memset(s->data + ((n * 4 + 7) & ~(size_t)7), 0, n * sizeof(*edges));
	s->val[3] = n;
out:
	mps__reply(c, m->slot, r);
}
