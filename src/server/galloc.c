// SPDX-License-Identifier: MIT
/*
 * Graph allocations across launches. An allocation node's address is fixed
 * for as long as its graph, or an executable graph made from it, lives; the
 * memory behind it exists from each launch until it is freed, by a free
 * node or by cuMemFree / cuMemFreeAsync outside the graph, and the next
 * launch brings it back at the same address. Inside one graph the driver
 * gives a later allocation the address of one freed before it. The
 * client's account (memacct.h) holds a range only while the memory is the
 * client's, so a free takes the range away at once, as any free does; here
 * each executable graph keeps its allocation and free nodes, read from the
 * driver's graph when it is made and put in an order that keeps every
 * dependency, and works out then what the graph leaves at each address
 * (the last node there decides), so that its launch leaves the account as
 * the graph leaves memory: what it allocates and does not free is the client's again
 * (charged against its limit first: a launch past the limit is refused),
 * what it frees is not. A free node in another graph may name an
 * allocation freed for the moment: the address is the client's while an
 * executable graph of its own brings it back.
 * Owned by the client's service thread, like the account.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "server/driver.h"
#include "server/forward.h"
#include "server/galloc.h"
#include "server/server.h"
#include "server/streams.h"

/* An address an executable graph's allocation or free nodes name: as the
 * walk notes each node, then, once the walk is done, one per address with
 * what the graph leaves there. */
struct galloc {
	CUgraphExec exec;
	uint64_t base;
	uint64_t size;       /* of its allocation at base; 0: it only frees there */
	int device;
	bool live;           /* allocated when the graph has run (the last node there allocates) */
};

struct mps_gallocs {
	struct galloc *v;
	size_t n, cap;
};

static int note(struct mps_client *c, CUgraphExec exec, uint64_t base, uint64_t size, int device)
{
	struct mps_gallocs *ga = c->gallocs;

	if (!ga && !(ga = c->gallocs = calloc(1, sizeof(*ga))))
		return -1;
	if (ga->n == ga->cap) {
		size_t cap = ga->cap ? 2 * ga->cap : 8;
		struct galloc *v = realloc(ga->v, cap * sizeof(*v));

		if (!v)
			return -1;
		ga->v = v;
		ga->cap = cap;
	}
	ga->v[ga->n++] = (struct galloc){ exec, base, size, device, size != 0 };
	return 0;
}

/* The nodes noted from [from, ga->n), in the graph's order, made one entry
 * per address: the last node there decides whether it is live, the
 * allocation there gives its size. */
static void settle(struct mps_gallocs *ga, size_t from)
{
	size_t w = from;

	for (size_t i = from; i < ga->n; i++) {
		const struct galloc a = ga->v[i];   /* its slot may be written below */
		size_t k;

		for (k = from; k < w && ga->v[k].base != a.base; k++)
			;
		if (k == w)
			ga->v[w++] = (struct galloc){ a.exec, a.base, 0, -1, false };
		ga->v[k].live = a.size != 0;
		if (a.size) {
			ga->v[k].size = a.size > ga->v[k].size ? a.size : ga->v[k].size;
			ga->v[k].device = a.device;
		}
	}
	ga->n = w;
}

struct order {
	CUgraphNode node;
	size_t index;
};

static int by_node(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t)((const struct order *)a)->node, y = (uintptr_t)((const struct order *)b)->node;

	return x < y ? -1 : x > y;
}

static size_t index_of(const struct order *sorted, size_t n, CUgraphNode node)
{
	struct order key = { node, 0 };
	const struct order *o = bsearch(&key, sorted, n, sizeof(*sorted), by_node);

	return o ? o->index : SIZE_MAX;
}

static CUresult note_node(struct mps_client *c, CUgraphExec exec, CUgraphNode node, int depth);

/* The allocation and free nodes of g and of the graphs inside it, in an
 * order that keeps every dependency: the driver gives a graph's later
 * allocation the address of one it freed before, so the order says which
 * of them holds the address when the graph has run. */
static CUresult walk(struct mps_client *c, CUgraphExec exec, CUgraph g, int depth)
{
	CUgraphNode *nodes = NULL, *from = NULL, *to = NULL;
	size_t n = 0, ne = 0, head = 0, tail = 0;
	size_t *indeg = NULL, *queue = NULL, *first = NULL, *fill = NULL, *succ = NULL, *src = NULL, *dst = NULL;
	struct order *sorted = NULL;
	CUresult r;

	if (depth > 16)
		return CUDA_ERROR_INVALID_VALUE;
	r = mps_drv.cuGraphGetNodes(g, NULL, &n);
	if (r == CUDA_SUCCESS)
		r = mps_drv.cuGraphGetEdges_v2(g, NULL, NULL, NULL, &ne);
	if (r != CUDA_SUCCESS || n == 0)
		return r;
	nodes = malloc(n * sizeof(*nodes));
	sorted = malloc(n * sizeof(*sorted));
	indeg = calloc(n, sizeof(*indeg));
	queue = malloc(n * sizeof(*queue));
	first = calloc(n + 1, sizeof(*first));
	fill = malloc(n * sizeof(*fill));
	from = malloc((ne ? ne : 1) * sizeof(*from));
	to = malloc((ne ? ne : 1) * sizeof(*to));
	succ = malloc((ne ? ne : 1) * sizeof(*succ));
	src = malloc((ne ? ne : 1) * sizeof(*src));
	dst = malloc((ne ? ne : 1) * sizeof(*dst));
	if (!nodes || !sorted || !indeg || !queue || !first || !fill || !from || !to || !succ || !src || !dst) {
		r = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	r = mps_drv.cuGraphGetNodes(g, nodes, &n);
	if (r == CUDA_SUCCESS && ne)
		r = mps_drv.cuGraphGetEdges_v2(g, from, to, NULL, &ne);
	if (r != CUDA_SUCCESS)
		goto out;
	for (size_t i = 0; i < n; i++)
		sorted[i] = (struct order){ nodes[i], i };
	qsort(sorted, n, sizeof(*sorted), by_node);
	/* The edges by node index, each node's successors together. */
	for (size_t e = 0; e < ne; e++) {
		src[e] = index_of(sorted, n, from[e]);
		dst[e] = index_of(sorted, n, to[e]);
		if (src[e] == SIZE_MAX || dst[e] == SIZE_MAX) {
			r = CUDA_ERROR_INVALID_VALUE;
			goto out;
		}
		first[src[e] + 1]++;
		indeg[dst[e]]++;
	}
	for (size_t i = 0; i < n; i++) {
		first[i + 1] += first[i];
		fill[i] = first[i];
	}
	for (size_t e = 0; e < ne; e++)
		succ[fill[src[e]]++] = dst[e];
	for (size_t i = 0; i < n; i++)
		if (!indeg[i])
			queue[tail++] = i;
	while (head < tail && r == CUDA_SUCCESS) {
		size_t i = queue[head++];

		r = note_node(c, exec, nodes[i], depth);
		for (size_t k = first[i]; k < first[i + 1]; k++)
			if (--indeg[succ[k]] == 0)
				queue[tail++] = succ[k];
	}
	if (r == CUDA_SUCCESS && tail != n)
		r = CUDA_ERROR_INVALID_VALUE;   /* a cycle: the driver would not have instantiated it */
out:
	free(nodes);
	free(sorted);
	free(indeg);
	free(queue);
	free(first);
	free(fill);
	free(from);
	free(to);
	free(succ);
	free(src);
	free(dst);
	return r;
}

static CUresult note_node(struct mps_client *c, CUgraphExec exec, CUgraphNode node, int depth)
{
	CUDA_MEM_ALLOC_NODE_PARAMS p;
	CUgraphNodeType type;
	CUdeviceptr freed;
	CUgraph sub;
	CUresult r = mps_drv.cuGraphNodeGetType(node, &type);

	if (r != CUDA_SUCCESS)
		return r;
	switch (type) {
	case CU_GRAPH_NODE_TYPE_MEM_ALLOC:
		memset(&p, 0, sizeof(p));
		r = mps_drv.cuGraphMemAllocNodeGetParams(node, &p);
		if (r == CUDA_SUCCESS &&
		    note(c, exec, p.dptr, p.bytesize, mps__device_index(p.poolProps.location.id)) < 0)
			r = CUDA_ERROR_OUT_OF_MEMORY;
		return r;
	case CU_GRAPH_NODE_TYPE_MEM_FREE:
		r = mps_drv.cuGraphMemFreeNodeGetParams(node, &freed);
		if (r == CUDA_SUCCESS && note(c, exec, freed, 0, -1) < 0)
			r = CUDA_ERROR_OUT_OF_MEMORY;
		return r;
	case CU_GRAPH_NODE_TYPE_GRAPH:
		r = mps_drv.cuGraphChildGraphNodeGetGraph(node, &sub);
		return r == CUDA_SUCCESS ? walk(c, exec, sub, depth + 1) : r;
	default:
		return CUDA_SUCCESS;
	}
}

CUresult mps_galloc_exec_adds(struct mps_client *c, CUgraphExec exec, CUgraph g)
{
	size_t from;
	CUresult r;

	if (!c->graph_mem_devs)
		return CUDA_SUCCESS;   /* it never made a graph allocation */
	if (!mps_drv.cuGraphGetNodes || !mps_drv.cuGraphGetEdges_v2 || !mps_drv.cuGraphNodeGetType ||
	    !mps_drv.cuGraphMemAllocNodeGetParams || !mps_drv.cuGraphMemFreeNodeGetParams ||
	    !mps_drv.cuGraphChildGraphNodeGetGraph)
		return CUDA_ERROR_NOT_SUPPORTED;
	from = c->gallocs ? c->gallocs->n : 0;
	r = walk(c, exec, g, 0);
	if (r != CUDA_SUCCESS)
		mps_galloc_exec_gone(c, exec);
	else if (c->gallocs)
		settle(c->gallocs, from);
	return r;
}

void mps_galloc_exec_gone(struct mps_client *c, CUgraphExec exec)
{
	struct mps_gallocs *ga = c->gallocs;
	size_t k = 0;

	if (!ga)
		return;
	for (size_t i = 0; i < ga->n; i++)
		if (ga->v[i].exec != exec)
			ga->v[k++] = ga->v[i];
	ga->n = k;
}

/* Whether the client's account holds a's address as it stands. */
static bool held(struct mps_client *c, const struct galloc *a)
{
	const struct mps_mrange *rg = mps_memacct_find(&c->mem, a->base);

	return rg && rg->base == a->base;
}

CUresult mps_galloc_launch(struct mps_client *c, CUgraphExec exec, struct mps_sstream *st)
{
	struct mps_gallocs *ga = c->gallocs;
	size_t i;
	CUresult r;

	if (!ga || !ga->n)
		return mps_drv.cuGraphLaunch(exec, st->s);
	/* What the launch leaves allocated and the account lacks is charged
	 * first, against the client's limit: a launch the limit refuses does
	 * not run. */
	for (i = 0; i < ga->n; i++) {
		const struct galloc *a = &ga->v[i];

		if (a->exec == exec && a->live && !held(c, a) && mps_memacct_charge(&c->mem, a->device, a->size) < 0) {
			mps_log_info("client %d: graph launch refused: its allocation of %llu bytes is past its memory limit",
				     (int)c->pid, (unsigned long long)a->size);
			r = CUDA_ERROR_OUT_OF_MEMORY;
			goto uncharge;
		}
	}
	r = mps_drv.cuGraphLaunch(exec, st->s);
	if (r != CUDA_SUCCESS)
		goto uncharge;
	for (i = 0; i < ga->n; i++) {
		const struct galloc *a = &ga->v[i];

		if (a->exec != exec)
			continue;
		if (a->live && !held(c, a) &&
		    mps_memacct_add(&c->mem, a->base, a->size, MPS_MEM_DEVICE, a->device, st->ctx->handle) < 0) {
			mps_memacct_uncharge(&c->mem, a->device, a->size);
			mps_log_warn("client %d: graph allocation at %#llx not recorded", (int)c->pid,
				     (unsigned long long)a->base);
		} else if (!a->live && held(c, a)) {
			mps_memacct_remove(&c->mem, a->base, MPS_MEM_DEVICE, NULL);
		}
	}
	return CUDA_SUCCESS;
uncharge:
	while (i-- > 0) {
		const struct galloc *a = &ga->v[i];

		if (a->exec == exec && a->live && !held(c, a))
			mps_memacct_uncharge(&c->mem, a->device, a->size);
	}
	return r;
}

int mps_galloc_check(struct mps_client *c, uint64_t addr, uint64_t size)
{
	struct mps_gallocs *ga = c->gallocs;

	if (mps_memacct_check(&c->mem, addr, size) == 0)
		return 0;
	for (size_t i = 0; ga && i < ga->n; i++) {
		const struct galloc *a = &ga->v[i];

		if (a->size && addr >= a->base && addr - a->base <= a->size && size <= a->size - (addr - a->base))
			return 0;
	}
	return -1;
}

bool mps_galloc_known(struct mps_client *c, uint64_t base)
{
	struct mps_gallocs *ga = c->gallocs;

	for (size_t i = 0; ga && i < ga->n; i++)
		if (ga->v[i].base == base && ga->v[i].size)
			return true;
	return false;
}

void mps_galloc_free(struct mps_client *c)
{
	if (c->gallocs)
		free(c->gallocs->v);
	free(c->gallocs);
	c->gallocs = NULL;
}
