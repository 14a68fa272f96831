// SPDX-License-Identifier: MIT
//
// Context-local storage (see client/exports/cls.h): a singly linked list of
// (ctx, key) -> (value, dtor) entries under one mutex.
//
// A list is enough: each library that uses the store keeps about one key per
// context, so a process holds a handful of entries, and a scan of a few
// nodes costs less than the lock around it. New entries go at the head, so
// a context's destructors run newest first: state registered later (cuBLAS
// on top of cudart) is torn down before what it may depend on.
//
// Destruction is two-phase: unlink the context's entries under the lock,
// then run their destructors after releasing it. A destructor may therefore
// call put/get/delete (or the driver) without deadlocking, and no other
// thread can reach an entry once it has been unlinked, so each destructor
// runs exactly once.
#include "client/exports/cls.h"

#include <pthread.h>
#include <stdlib.h>

#include "client/exports/exports.h"

struct cls_entry {
	struct cls_entry *next;
	CUcontext ctx;
	void *key;
	void *value;
	mps_cls_dtor dtor;
};

// Guards cls_head and every entry reachable from it. A leaf lock: nothing
// else is taken while it is held.
static pthread_mutex_t cls_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cls_entry *cls_head;

// Resolves a NULL ctx to the current one. Called without cls_lock held, as
// the hook may take the context code's own locks.
static CUresult resolve(CUcontext *ctx)
{
	if (!*ctx)
		*ctx = mps__ctx_current();
	return *ctx ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

// Returns the link that points at (ctx, key)'s entry, or at the terminating
// NULL when there is none. Caller holds cls_lock.
static struct cls_entry **find(CUcontext ctx, void *key)
{
	struct cls_entry **link = &cls_head;
	while (*link && ((*link)->ctx != ctx || (*link)->key != key))
		link = &(*link)->next;
	return link;
}

CUresult mps__cls_put(CUcontext ctx, void *key, void *value, mps_cls_dtor dtor)
{
	CUresult rc = resolve(&ctx);
	if (rc != CUDA_SUCCESS)
		return rc;

	// Allocated before locking so the critical section stays short; freed
	// again if the pair already exists.
	struct cls_entry *fresh = malloc(sizeof(*fresh));
	if (!fresh)
		return CUDA_ERROR_OUT_OF_MEMORY;

	pthread_mutex_lock(&cls_lock);
	struct cls_entry *e = *find(ctx, key);
	if (e) {
		e->value = value;
		e->dtor = dtor;
	} else {
		*fresh = (struct cls_entry){
			.next = cls_head, .ctx = ctx, .key = key, .value = value, .dtor = dtor,
		};
		cls_head = fresh;
		fresh = NULL;
	}
	pthread_mutex_unlock(&cls_lock);
	free(fresh);
	return CUDA_SUCCESS;
}

CUresult mps__cls_delete(CUcontext ctx, void *key)
{
	CUresult rc = resolve(&ctx);
	if (rc != CUDA_SUCCESS)
		return rc;

	pthread_mutex_lock(&cls_lock);
	struct cls_entry **link = find(ctx, key);
	struct cls_entry *e = *link;
	if (e)
		*link = e->next;
	pthread_mutex_unlock(&cls_lock);
	free(e);
	return CUDA_SUCCESS;
}

CUresult mps__cls_get(void **value, CUcontext ctx, void *key)
{
	if (!value)
		return CUDA_ERROR_INVALID_VALUE;
	CUresult rc = resolve(&ctx);
	if (rc != CUDA_SUCCESS)
		return rc;

	pthread_mutex_lock(&cls_lock);
	struct cls_entry *e = *find(ctx, key);
	if (e)
		*value = e->value;
	pthread_mutex_unlock(&cls_lock);
	return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

void mps__cls_context_destroyed(CUcontext ctx)
{
	if (!ctx)
		return;

	// Phase 1: unlink, keeping head-to-tail (newest-first) order.
	struct cls_entry *doomed = NULL, **tail = &doomed;
	pthread_mutex_lock(&cls_lock);
	for (struct cls_entry **link = &cls_head; *link;) {
		struct cls_entry *e = *link;
		if (e->ctx != ctx) {
			link = &e->next;
			continue;
		}
		*link = e->next;
		e->next = NULL;
		*tail = e;
		tail = &e->next;
	}
	pthread_mutex_unlock(&cls_lock);

	// Phase 2: the entries are private to this thread now.
	while (doomed) {
		struct cls_entry *e = doomed;
		doomed = e->next;
		if (e->dtor)
			e->dtor(ctx, e->key, e->value);
		free(e);
	}
}
