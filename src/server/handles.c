// SPDX-License-Identifier: MIT
/*
 * See handles.h. Entry 0 is never used, so 0 is never a valid handle and can
 * mean "none" (or the legacy stream) on the wire. Free entries form a list
 * threaded through next_free.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "server/handles.h"

void mps_handles_init(struct mps_handles *t)
{
	memset(t, 0, sizeof(*t));
}

void mps_handles_free(struct mps_handles *t)
{
	free(t->e);
	memset(t, 0, sizeof(*t));
}

static int grow(struct mps_handles *t)
{
	uint32_t ncap = t->cap ? t->cap * 2 : 64;
	struct mps_handle_entry *ne;

	if (ncap > MPS_HANDLES_MAX)
		ncap = MPS_HANDLES_MAX;
	if (ncap <= t->cap)
		return -ENOSPC;
	ne = realloc(t->e, (size_t)ncap * sizeof(*ne));
	if (!ne)
		return -ENOMEM;
	memset(ne + t->cap, 0, (size_t)(ncap - t->cap) * sizeof(*ne));
	t->e = ne;
	/* Entry 0 stays reserved; thread the new entries onto the free list. */
	for (uint32_t i = ncap - 1; i >= (t->cap ? t->cap : 1); i--) {
		ne[i].next_free = t->free_head;
		t->free_head = i;
	}
	t->cap = ncap;
	return 0;
}

uint32_t mps_handle_new(struct mps_handles *t, int type, void *obj)
{
	struct mps_handle_entry *e;
	uint32_t i;

	if (!t->free_head && grow(t) < 0)
		return 0;
	i = t->free_head;
	e = &t->e[i];
	t->free_head = e->next_free;
	e->obj = obj;
	e->type = (uint8_t)type;
	e->gen++;
	t->used++;
	return i << 8 | e->gen;
}

void *mps_handle_get(struct mps_handles *t, uint32_t handle, int type)
{
	uint32_t i = handle >> 8;
	struct mps_handle_entry *e;

	if (i == 0 || i >= t->cap)
		return NULL;
	e = &t->e[i];
	if (e->type != type || e->gen != (uint8_t)handle)
		return NULL;
	return e->obj;
}

void mps_handle_del(struct mps_handles *t, uint32_t handle)
{
	uint32_t i = handle >> 8;
	struct mps_handle_entry *e;

	if (i == 0 || i >= t->cap)
		return;
	e = &t->e[i];
	if (!e->type || e->gen != (uint8_t)handle)
		return;
	e->obj = NULL;
	e->type = 0;
	e->next_free = t->free_head;
	t->free_head = i;
	t->used--;
}

void mps_handles_foreach(struct mps_handles *t, int type, void (*fn)(void *obj, void *arg), void *arg)
{
	for (uint32_t i = 1; i < t->cap; i++)
		if (t->e[i].type == type)
			fn(t->e[i].obj, arg);
}
