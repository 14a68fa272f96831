// SPDX-License-Identifier: MIT
/*
 * Host functions in stream order (cuLaunchHostFunc, cuStreamAddCallback),
 * run in the client process, never in the server's.
 *
 * HOSTFN_SETUP gives the server the client's notification pipe and a
 * pinned region of MPS_HOSTFN_SLOTS words (wire.h). HOSTFN queues two
 * things on the client's stream: a host function of the server's own that
 * writes a note (slot, sequence number) into the pipe, then a wait until
 * the slot's word reaches the sequence number. The driver's thread that
 * runs the note never blocks (a pipe holds far more notes than there are
 * slots), so one client's slow callback holds only its own stream; the
 * wait is the GPU's own, so no server thread waits either.
 *
 * In a stream capture or a graph (cuGraphAddHostNode) the slot is the
 * graph's for good and the function becomes two nodes: the note, whose
 * host function first adds one to the slot's word, and a wait until the
 * word is 0 again; the client takes one off once the function has run
 * (mps__hostfn_nodes). The word counts the runs in flight, so when one
 * slot is in flight twice at once (a staging buffer's copy twice in one
 * graph, two executable graphs of one graph launched on two streams) no
 * wait ends before its own run has: each waits for every run the slot has
 * under way, the other's too (a store of the run's number, as a
 * stream's, let the first run's store end both waits). They are
 * one node of the graph, a child graph, as the driver's host node is one:
 * the program counts and links its nodes; cuGraphNodeGetType tells it a
 * host node (mps__hostfn_node_type, which knows the child by its note, and
 * a copy node through a staging buffer by the copy and the note).
 *
 * A client that dies inside a callback leaves its stream waiting: before
 * its streams are waited for, teardown writes every stream slot's last
 * sequence number into its word itself, and 0 into every graph's
 * (mps__hostfn_release) — over and over, from a thread of its own, while
 * graphs that count their runs may still run — and the streams drain. The pipe is closed once they have
 * (mps__hostfn_free), so no note is written to a closed descriptor.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/atomics.h"
#include "common/log.h"
#include "common/wire.h"
#include "server/driver.h"
#include "server/forward.h"
#include "server/server.h"
#include "server/streams.h"

struct note_job {
	int fd;
	bool kept;                        /* a graph's: lives until the client leaves */
	uint32_t *word;                   /* a graph's: its slot's word, which counts its runs in flight */
	struct mps_hostfn_note note;
	struct note_job *next;            /* in mps_hostfn.kept */
};

#define SLOT_WORDS (MPS_HOSTFN_SLOTS / 64)

/* The graph slots an executable graph may run: those of the graph it was
 * made from, and of every graph it was updated from since. */
struct exec_slots {
	CUgraphExec exec;
	uint64_t bits[SLOT_WORDS];
};

struct mps_hostfn {
	struct mps_shost *h;              /* the region of the words, kept until the client leaves */
	uint32_t *words;                  /* in the server's mapping of it */
	CUdeviceptr dp;                   /* the first word, as the GPU sees it */
	int fd;                           /* the pipe's write end */
	uint32_t last[MPS_HOSTFN_SLOTS];  /* the last sequence number queued, per slot */
	bool graphed[MPS_HOSTFN_SLOTS];   /* a graph's slot: its word counts its runs in flight */
	struct note_job *kept;            /* the graphs' notes */
	pthread_t releaser;               /* at teardown, while graphs may still wait */
	int releasing;                    /* atomic: 1 while the releaser runs */
	bool has_releaser;
	struct exec_slots *execs;         /* the client's executable graphs that hold slots */
	size_t nexecs, cap_execs;
	bool untracked;                   /* an executable graph went unrecorded: no slot is dead */
};

/* On the driver's thread, in stream order: tell the client. */
static void CUDA_CB notify(void *arg)
{
	struct note_job *j = arg;
	ssize_t n;

	/* One more run in flight: the wait that follows ends once the
	 * client has taken it off (top of the file). */
	if (j->word)
		mps_fetch_add(j->word, 1);
	do
		n = write(j->fd, &j->note, sizeof(j->note));
	while (n < 0 && errno == EINTR);
	/* A client that has gone has closed the read end: EPIPE, and teardown
	 * releases the wait that follows. Anything else leaves a stream
	 * waiting for a function that will never run: said. */
	if (n != (ssize_t)sizeof(j->note) && (n >= 0 || errno != EPIPE))
		mps_log_warn("a host function's note (slot %u) not written to fd %d: %s", j->note.slot, j->fd,
			     n < 0 ? strerror(errno) : "short write");
	else
		mps_log_debug("host function note: slot %u seq %u to fd %d", j->note.slot, j->note.seq, j->fd);
	if (!j->kept)
		free(j);
}

void mps__op_hostfn_setup(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_hostfn_setup *q = (const void *)m;
	int fd = mps__take_fd(c);   /* first, whatever the answer: it must not linger */
	const size_t bytes = MPS_HOSTFN_SLOTS * sizeof(uint32_t);
	struct mps_hostfn *hf = NULL;
	struct mps_shost *h;
	CUresult r = CUDA_ERROR_INVALID_VALUE;
	int d = mps__cur_device();

	h = mps__host_get(c, q->region);
	if (fd < 0 || c->hostfn || !h || q->offset % sizeof(uint32_t) || q->offset > h->size ||
	    h->size - q->offset < bytes)
		goto out;
	if (!mps_drv.cuLaunchHostFunc || !mps_drv.cuStreamWaitValue32) {
		r = CUDA_ERROR_NOT_SUPPORTED;
		goto out;
	}
	hf = calloc(1, sizeof(*hf));
	if (!hf) {
		r = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	r = mps__bind_device(c, d < 0 ? 0 : d);
	if (r != CUDA_SUCCESS)
		goto out;
	hf->words = (uint32_t *)((uint8_t *)h->addr + q->offset);
	r = mps_drv.cuMemHostGetDevicePointer(&hf->dp, hf->words, 0);
	if (r != CUDA_SUCCESS)
		goto out;
	for (uint32_t i = 0; i < MPS_HOSTFN_SLOTS; i++)
		mps_store_relaxed(&hf->words[i], 0);
	/* The words must outlive any stream that waits on them: the client
	 * may free the region, the pages stay (as a graph's). */
	h->graphed = true;
	hf->h = h;
	hf->fd = fd;
	fd = -1;
	c->hostfn = hf;
	hf = NULL;
out:
	free(hf);
	if (fd >= 0)
		close(fd);
	mps__reply(c, m->slot, r);
}

/* Lets every wait of the client's go: once for a stream's (the word only
 * grows), again and again for a graph's, whose runs add to its word, until
 * the streams have drained. */
static void release_all(struct mps_hostfn *hf)
{
	for (uint32_t i = 0; i < MPS_HOSTFN_SLOTS; i++)
		if (hf->last[i])
			mps_store_release(&hf->words[i], hf->graphed[i] ? 0 : hf->last[i]);
}

static void *releaser(void *arg)
{
	struct mps_hostfn *hf = arg;
	const struct timespec pause = { .tv_nsec = 500 * 1000 };

	pthread_setname_np(pthread_self(), "omps-hostfn");
	while (mps_load_acquire(&hf->releasing)) {
		release_all(hf);
		nanosleep(&pause, NULL);
	}
	return NULL;
}

void mps__hostfn_release(struct mps_client *c)
{
	struct mps_hostfn *hf = c->hostfn;

	if (!hf)
		return;
	release_all(hf);
	if (hf->kept) {
		mps_store_release(&hf->releasing, 1);
		hf->has_releaser = pthread_create(&hf->releaser, NULL, releaser, hf) == 0;
		if (!hf->has_releaser)
			mps_log_warn("client %d: no thread to release its graphs' host functions", (int)c->pid);
	}
}

void mps__hostfn_free(struct mps_client *c)
{
	struct mps_hostfn *hf = c->hostfn;

	if (!hf)
		return;
	if (hf->has_releaser) {
		mps_store_release(&hf->releasing, 0);
		pthread_join(hf->releaser, NULL);
	}
	while (hf->kept) {
		struct note_job *j = hf->kept;

		hf->kept = j->next;
		free(j);
	}
	close(hf->fd);
	free(hf->execs);
	free(hf);
	c->hostfn = NULL;
}

/* The host function's two nodes, in order, in graph g (empty). */
static CUresult body(struct mps_hostfn *hf, CUgraph g, int device, uint32_t slot, struct note_job *j)
{
	CUstreamBatchMemOpParams op;
	CUDA_BATCH_MEM_OP_NODE_PARAMS bp;
	CUDA_HOST_NODE_PARAMS hp = { .fn = notify, .userData = j };
	CUgraphNode note, wait;
	CUresult r;

	r = mps_drv.cuGraphAddHostNode(&note, g, NULL, 0, &hp);
	if (r != CUDA_SUCCESS)
		return r;
	memset(&op, 0, sizeof(op));
	op.waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
	op.waitValue.address = hf->dp + slot * sizeof(uint32_t);
	op.waitValue.value = 0;   /* no run of the slot's in flight */
	op.waitValue.flags = CU_STREAM_WAIT_VALUE_EQ;
	memset(&bp, 0, sizeof(bp));
	bp.ctx = mps_srv.dev[device].primary;
	bp.count = 1;
	bp.paramArray = &op;
	return mps_drv.cuGraphAddBatchMemOpNode(&wait, g, &note, 1, &bp);
}

/* The child graph of the host function kept in slot (seq) in *sub. */
static CUresult host_sub(struct mps_client *c, int device, uint32_t slot, uint32_t seq, CUgraph *sub)
{
	struct mps_hostfn *hf = c->hostfn;
	struct note_job *j;
	CUresult r;

	*sub = NULL;
	if (!hf || slot >= MPS_HOSTFN_SLOTS || !seq || (hf->last[slot] && !hf->graphed[slot]))
		return CUDA_ERROR_INVALID_VALUE;
	if (!mps_drv.cuGraphAddHostNode || !mps_drv.cuGraphAddBatchMemOpNode || !mps_drv.cuGraphAddChildGraphNode ||
	    !mps_drv.cuGraphCreate || !mps_drv.cuGraphDestroy)
		return CUDA_ERROR_NOT_SUPPORTED;
	j = calloc(1, sizeof(*j));
	if (!j)
		return CUDA_ERROR_OUT_OF_MEMORY;
	j->fd = hf->fd;
	j->kept = true;
	j->word = &hf->words[slot];
	j->note.slot = slot;
	j->note.seq = seq;
	j->next = hf->kept;
	hf->kept = j;
	hf->graphed[slot] = true;
	hf->last[slot] = seq;
	mps_log_debug("client %d: a graph's host function in slot %u (seq %u)", (int)c->pid, slot, seq);
	r = mps_drv.cuGraphCreate(sub, 0);
	if (r != CUDA_SUCCESS)
		return r;
	r = body(hf, *sub, device, slot, j);
	if (r != CUDA_SUCCESS) {
		mps_drv.cuGraphDestroy(*sub);
		*sub = NULL;
	}
	return r;
}

CUresult mps__hostfn_nodes(struct mps_client *c, CUgraph g, const CUgraphNode *deps, size_t ndeps, int device,
			   uint32_t slot, uint32_t seq, CUgraphNode *node)
{
	CUgraph sub;
	CUresult r = host_sub(c, device, slot, seq, &sub);

	/* One node to the program, as the driver's host node is: a child
	 * graph (the driver copies it into the node). */
	if (r != CUDA_SUCCESS)
		return r;
	r = mps_drv.cuGraphAddChildGraphNode(node, g, deps, ndeps, sub);
	mps_drv.cuGraphDestroy(sub);
	return r;
}

CUresult mps__hostfn_exec_node(struct mps_client *c, CUgraphExec exec, CUgraphNode node, int device, uint32_t slot,
			       uint32_t seq)
{
	CUgraphNodeType type;
	CUgraph sub;
	CUresult r;

	if (!mps__hostfn_node_type(node, &type) || type != CU_GRAPH_NODE_TYPE_HOST)
		return CUDA_ERROR_INVALID_VALUE;
	r = host_sub(c, device, slot, seq, &sub);
	if (r != CUDA_SUCCESS)
		return r;
	/* The same two nodes: the driver takes them into the executable
	 * graph's copy of the node, and the slot counts as the graph's. */
	r = mps__hook_cuGraphExecChildGraphNodeSetParams(c, exec, node, sub);
	mps_drv.cuGraphDestroy(sub);
	return r;
}

/* The note of a host function's child graph sub (its one root, the note
 * node), or NULL if sub is another graph. */
static const struct note_job *note_of(CUgraph sub)
{
	CUDA_HOST_NODE_PARAMS hp;
	CUgraphNodeType type;
	CUgraphNode root;
	size_t n = 1;

	if (mps_drv.cuGraphGetRootNodes(sub, &root, &n) == CUDA_SUCCESS && n == 1 &&
	    mps_drv.cuGraphNodeGetType(root, &type) == CUDA_SUCCESS && type == CU_GRAPH_NODE_TYPE_HOST &&
	    mps_drv.cuGraphHostNodeGetParams && mps_drv.cuGraphHostNodeGetParams(root, &hp) == CUDA_SUCCESS &&
	    hp.fn == notify)
		return hp.userData;
	return NULL;
}

/* The child graph of node, if it is one. */
static bool child_of(CUgraphNode node, CUgraph *sub)
{
	CUgraphNodeType type;

	return mps_drv.cuGraphNodeGetType && mps_drv.cuGraphChildGraphNodeGetGraph && mps_drv.cuGraphGetRootNodes &&
	       mps_drv.cuGraphGetNodes && mps_drv.cuGraphNodeGetType(node, &type) == CUDA_SUCCESS &&
	       type == CU_GRAPH_NODE_TYPE_GRAPH && mps_drv.cuGraphChildGraphNodeGetGraph(node, sub) == CUDA_SUCCESS;
}

bool mps__hostfn_node_type(CUgraphNode node, CUgraphNodeType *type)
{
	CUgraphNode nodes[2];
	CUgraphNodeType t[2];
	CUgraph sub, inner;
	size_t n = 2;

	if (!child_of(node, &sub))
		return false;
	if (note_of(sub)) {
		*type = CU_GRAPH_NODE_TYPE_HOST;
		return true;
	}
	/* A copy through a staging buffer: the copy and a host function. */
	if (mps_drv.cuGraphGetNodes(sub, nodes, &n) != CUDA_SUCCESS || n != 2 ||
	    mps_drv.cuGraphNodeGetType(nodes[0], &t[0]) != CUDA_SUCCESS ||
	    mps_drv.cuGraphNodeGetType(nodes[1], &t[1]) != CUDA_SUCCESS)
		return false;
	for (int i = 0; i < 2; i++) {
		if (t[i] == CU_GRAPH_NODE_TYPE_MEMCPY && child_of(nodes[1 - i], &inner) && note_of(inner)) {
			*type = CU_GRAPH_NODE_TYPE_MEMCPY;
			return true;
		}
	}
	return false;
}

/* Every slot a graph may run, into bits: each host function's child graph
 * names its slot in its note; other child graphs are looked into. A node
 * whose graphs cannot be seen (a conditional node's bodies), a graph too
 * deep or an error makes every slot count: a slot is given back only when
 * it is certainly out of use. */
static void graph_slots(CUgraph g, uint64_t *bits, int depth)
{
	const struct note_job *j;
	CUgraphNode *nodes = NULL;
	CUgraphNodeType type;
	size_t n = 0;
	CUgraph sub;

	if (depth > 16 || !mps_drv.cuGraphGetNodes || !mps_drv.cuGraphNodeGetType ||
	    !mps_drv.cuGraphChildGraphNodeGetGraph || !mps_drv.cuGraphGetRootNodes ||
	    mps_drv.cuGraphGetNodes(g, NULL, &n) != CUDA_SUCCESS ||
	    (n && !(nodes = malloc(n * sizeof(*nodes)))) || (n && mps_drv.cuGraphGetNodes(g, nodes, &n) != CUDA_SUCCESS))
		goto all;
	for (size_t i = 0; i < n; i++) {
		if (mps_drv.cuGraphNodeGetType(nodes[i], &type) != CUDA_SUCCESS)
			goto all;
		if (type == CU_GRAPH_NODE_TYPE_CONDITIONAL)
			goto all;
		if (type != CU_GRAPH_NODE_TYPE_GRAPH)
			continue;
		if (mps_drv.cuGraphChildGraphNodeGetGraph(nodes[i], &sub) != CUDA_SUCCESS)
			goto all;
		j = note_of(sub);
		if (!j)
			graph_slots(sub, bits, depth + 1);
		else if (j->note.slot < MPS_HOSTFN_SLOTS)
			bits[j->note.slot / 64] |= 1ull << (j->note.slot % 64);
	}
	free(nodes);
	return;
all:
	free(nodes);
	memset(bits, 0xff, SLOT_WORDS * sizeof(*bits));
}

static struct exec_slots *exec_find(struct mps_hostfn *hf, CUgraphExec exec)
{
	for (size_t i = 0; i < hf->nexecs; i++)
		if (hf->execs[i].exec == exec)
			return &hf->execs[i];
	return NULL;
}

void mps__hostfn_exec_adds(struct mps_client *c, CUgraphExec exec, CUgraph g)
{
	struct mps_hostfn *hf = c->hostfn;
	struct exec_slots *e;

	if (!hf || !g)
		return;   /* no host function yet: nothing a graph can hold */
	e = exec_find(hf, exec);
	if (!e) {
		if (hf->nexecs == hf->cap_execs) {
			size_t cap = hf->cap_execs ? 2 * hf->cap_execs : 16;
			struct exec_slots *v = realloc(hf->execs, cap * sizeof(*v));

			if (!v) {
				/* Unknown, it cannot be told apart: no slot is
				 * given back from now on. */
				mps_log_warn("client %d: out of memory tracking a graph's host functions", (int)c->pid);
				hf->untracked = true;
				return;
			}
			hf->execs = v;
			hf->cap_execs = cap;
		}
		e = &hf->execs[hf->nexecs++];
		memset(e, 0, sizeof(*e));
		e->exec = exec;
	}
	graph_slots(g, e->bits, 0);
}

void mps__hostfn_exec_gone(struct mps_client *c, CUgraphExec exec)
{
	struct mps_hostfn *hf = c->hostfn;
	struct exec_slots *e = hf ? exec_find(hf, exec) : NULL;

	if (e)
		*e = hf->execs[--hf->nexecs];
}

struct live_walk {
	struct mps_client *c;
	uint64_t *bits;
};

static void graph_live(void *obj, void *arg)
{
	const struct mps_sobj *o = obj;
	struct live_walk *w = arg;

	graph_slots((CUgraph)o->real, w->bits, 0);
}

/* Graphs still being captured are not in the table until the capture ends. */
static void captures_live(void *obj, void *arg)
{
	struct mps_sctx *x = obj;
	struct live_walk *w = arg;
	CUstreamCaptureStatus status;
	CUgraph g;

	for (struct mps_sstream *st = x->streams; st; st = st->next) {
		if (!mps_stream_capturing(w->c, st))
			continue;
		g = NULL;
		if (mps_drv.cuStreamGetCaptureInfo_v3(st->s, &status, NULL, &g, NULL, NULL, NULL) != CUDA_SUCCESS)
			memset(w->bits, 0xff, SLOT_WORDS * sizeof(*w->bits));
		else if (status == CU_STREAM_CAPTURE_STATUS_ACTIVE && g)
			graph_slots(g, w->bits, 0);
	}
}

void mps__op_hostfn_dead(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_hostfn_dead *q = (const void *)m;
	struct mps_slot *s = mps__slot(c, m->slot);
	const struct mps_hostfn_slotseq *pairs = (const void *)(q + 1);
	struct mps_hostfn *hf = c->hostfn;
	uint64_t live[SLOT_WORDS] = { 0 }, *dead = (uint64_t *)s->data;
	struct live_walk w = { .c = c, .bits = live };

	_Static_assert(SLOT_WORDS * sizeof(uint64_t) <= MPS_SLOT_DATA, "the bitmap fits a reply");
	if (!hf || q->n > MPS_HOSTFN_SLOTS || m->len < sizeof(*q) + (size_t)q->n * sizeof(*pairs)) {
		mps__reply(c, m->slot, CUDA_ERROR_INVALID_VALUE);
		return;
	}
	/* Without these every slot would count as held (graph_slots). */
	if (hf->untracked || !mps_drv.cuGraphHostNodeGetParams || !mps_drv.cuStreamGetCaptureInfo_v3) {
		memset(dead, 0, SLOT_WORDS * sizeof(*dead));
		s->len = SLOT_WORDS * sizeof(*dead);
		mps__reply(c, m->slot, CUDA_SUCCESS);
		return;
	}
	mps_handles_foreach(&c->handles, MPS_H_GRAPH, graph_live, &w);
	mps_handles_foreach(&c->handles, MPS_H_CTX, captures_live, &w);
	for (size_t i = 0; i < hf->nexecs; i++)
		for (unsigned k = 0; k < SLOT_WORDS; k++)
			live[k] |= hf->execs[i].bits[k];
	memset(dead, 0, SLOT_WORDS * sizeof(*dead));
	for (uint32_t i = 0; i < q->n; i++) {
		uint32_t slot = pairs[i].slot;

		/* Dead: a graph's slot, its node made with the number the
		 * client gave last (none of its messages still to come), and
		 * nothing of the client's holding it. */
		if (slot < MPS_HOSTFN_SLOTS && hf->graphed[slot] && hf->last[slot] == pairs[i].seq &&
		    !(live[slot / 64] & (1ull << (slot % 64))))
			dead[slot / 64] |= 1ull << (slot % 64);
	}
	s->len = SLOT_WORDS * sizeof(*dead);
	mps__reply(c, m->slot, CUDA_SUCCESS);
}

/* A host function on a capturing stream: its nodes added to the capture's
 * graph after the stream's current dependencies, which they become. */
static CUresult captured(struct mps_client *c, struct mps_sstream *st, uint32_t slot, uint32_t seq)
{
	CUstreamCaptureStatus status;
	const CUgraphNode *deps = NULL;
	size_t ndeps = 0;
	CUgraphNode last;
	CUgraph g = NULL;
	CUresult r;

	if (!mps_drv.cuStreamGetCaptureInfo_v3 || !mps_drv.cuStreamUpdateCaptureDependencies_v2)
		return CUDA_ERROR_NOT_SUPPORTED;
	r = mps_drv.cuStreamGetCaptureInfo_v3(st->s, &status, NULL, &g, &deps, NULL, &ndeps);
	if (r == CUDA_SUCCESS && status != CU_STREAM_CAPTURE_STATUS_ACTIVE)
		r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
	if (r == CUDA_SUCCESS)
		r = mps__hostfn_nodes(c, g, deps, ndeps, st->ctx->device, slot, seq, &last);
	if (r == CUDA_SUCCESS)
		r = mps_drv.cuStreamUpdateCaptureDependencies_v2(st->s, &last, NULL, 1,
								 CU_STREAM_SET_CAPTURE_DEPENDENCIES);
	return r;
}

void mps__op_hostfn(struct mps_client *c, const struct mps_msg *m)
{
	const struct mps_msg_hostfn *q = (const void *)m;
	struct mps_hostfn *hf = c->hostfn;
	struct mps_sstream *st;
	struct note_job *j;
	CUresult r;

	if (!hf || q->slot >= MPS_HOSTFN_SLOTS) {
		mps__defer_error(c, CUDA_ERROR_INVALID_VALUE, "cuLaunchHostFunc");
		return;
	}
	st = mps_stream_for_work(c, m, q->stream, &r);
	if (!st) {
		mps__defer_error(c, r, "cuLaunchHostFunc");
		return;
	}
	if (mps_stream_capturing(c, st) || (q->flags & MPS_HOSTFN_CAPTURED)) {
		/* Only a slot the client gave for good may be captured: a
		 * stream's wait would hold a sequence number that every launch
		 * after the first finds passed. */
		r = !(q->flags & MPS_HOSTFN_CAPTURED) ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
			: !mps_stream_capturing(c, st) ? CUDA_ERROR_INVALID_VALUE
			: captured(c, st, q->slot, q->seq);
		mps__defer_error(c, r, "cuLaunchHostFunc");
		return;
	}
	if (hf->graphed[q->slot]) {
		mps__defer_error(c, CUDA_ERROR_INVALID_VALUE, "cuLaunchHostFunc");
		return;
	}
	j = calloc(1, sizeof(*j));
	if (!j) {
		mps__defer_error(c, CUDA_ERROR_OUT_OF_MEMORY, "cuLaunchHostFunc");
		return;
	}
	j->fd = hf->fd;
	j->note.slot = q->slot;
	j->note.seq = q->seq;
	r = mps_drv.cuLaunchHostFunc(st->s, notify, j);
	if (r != CUDA_SUCCESS) {
		free(j);
		mps__defer_error(c, r, "cuLaunchHostFunc");
		return;
	}
	hf->last[q->slot] = q->seq;
	r = mps_drv.cuStreamWaitValue32(st->s, hf->dp + q->slot * sizeof(uint32_t), q->seq,
					CU_STREAM_WAIT_VALUE_GEQ);
	mps__defer_error(c, r, "cuLaunchHostFunc");
}
