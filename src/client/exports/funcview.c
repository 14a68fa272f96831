// SPDX-License-Identifier: MIT
/*
 * Function views: a handle for a function that a library may read as the
 * driver's own function object. cuFFT gets its kernels' functions through
 * slot 7 of the private table 6e163fbe (exports/tools.c), never through
 * cuModuleGetFunction; public notes of a project that serves that slot
 * report that cuFFT then reads fields of the object. So the handle handed
 * to it is a view: 0x500 zeroed bytes with the values the driver's object
 * was seen to hold where it holds them, and, in words at the end that only
 * this file reads, the function it stands for.
 *
 *   +0x000  u32 1, u32 1        as in every object traced on driver 580.159
 *   +0x008  the function's name (the driver's holds a pointer here, which it
 *           also passes to slot 7's callback)
 *   +0x010  13                  as traced
 *   +0x018  1                   as traced
 *   +0x028  0x80, +0x370 u32 2, +0x480 0: what those public notes put there
 *
 * Every entry point that takes a function accepts its view too (mps__func
 * in module.c asks mps__func_of_view). Views live in chunks that are never
 * freed, so telling a view from any other pointer is a range check that
 * never touches memory it does not own; a view whose function was unloaded
 * names no function any more and is reused for the next one.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "client/client.h"
#include "client/exports/exports.h"
#include "common/atomics.h"

#define VIEW_SIZE        0x500u
#define VIEWS_PER_CHUNK  64u
#define MAX_CHUNKS       256u    /* 16384 views at once */
#define VIEW_FUNC        (VIEW_SIZE - 8u)   /* our words: the function */

_Static_assert(VIEW_FUNC > 0x488, "our words must not overlap the driver-like ones");

static pthread_mutex_t views_lock = PTHREAD_MUTEX_INITIALIZER;  /* creating, dropping */
static uint8_t *chunks[MAX_CHUNKS];     /* written before nchunks counts them */
static uint32_t nchunks;
static uint32_t used_in_last;           /* views taken from the newest chunk */
static uint8_t *free_views;             /* dropped views, linked through VIEW_FUNC - 8 */

static struct mps_func **func_word(uint8_t *view)
{
	return (struct mps_func **)(void *)(view + VIEW_FUNC);
}

static uint8_t **free_link(uint8_t *view)
{
	return (uint8_t **)(void *)(view + VIEW_FUNC - 8);
}

/* A fresh or dropped view, zeroed; NULL when none can be had. Under views_lock. */
static uint8_t *take_view(void)
{
	uint8_t *v;

	if (free_views) {
		v = free_views;
		free_views = *free_link(v);
		memset(v, 0, VIEW_SIZE);
		return v;
	}
	if (!nchunks || used_in_last == VIEWS_PER_CHUNK) {
		if (nchunks == MAX_CHUNKS)
			return NULL;
		v = calloc(VIEWS_PER_CHUNK, VIEW_SIZE);
		if (!v)
			return NULL;
		chunks[nchunks] = v;
		/* Publishes the chunk pointer before the count that covers it. */
		mps_store_release(&nchunks, nchunks + 1);
		used_in_last = 0;
	}
	return chunks[nchunks - 1] + (size_t)used_in_last++ * VIEW_SIZE;
}

static void fill(uint8_t *v, struct mps_func *f)
{
	uint32_t one = 1, two = 2;
	const char *name = NULL;
	uint64_t w;

	memcpy(v + 0x000, &one, 4);
	memcpy(v + 0x004, &one, 4);
	w = cuFuncGetName(&name, (CUfunction)f) == CUDA_SUCCESS ? (uint64_t)(uintptr_t)name : 0;
	memcpy(v + 0x008, &w, 8);
	w = 13;
	memcpy(v + 0x010, &w, 8);
	w = 1;
	memcpy(v + 0x018, &w, 8);
	w = 0x80;
	memcpy(v + 0x028, &w, 8);
	memcpy(v + 0x370, &two, 4);
}

void *mps__func_view(CUfunction hf)
{
	struct mps_func *f = mps__func(hf);
	uint8_t *v;

	if (!f)
		return NULL;
	pthread_mutex_lock(&views_lock);
	v = f->view;
	if (!v) {
		v = take_view();
		if (v) {
			fill(v, f);
			/* The function is named only once the view is filled. */
			mps_store_release(func_word(v), f);
			f->view = v;
		}
	}
	pthread_mutex_unlock(&views_lock);
	return v;
}

struct mps_func *mps__func_of_view(const void *h)
{
	uint32_t n = mps_load_acquire(&nchunks);

	for (uint32_t i = 0; i < n; i++) {
		uintptr_t base = (uintptr_t)chunks[i], p = (uintptr_t)h;

		if (p >= base && p < base + (uintptr_t)VIEWS_PER_CHUNK * VIEW_SIZE && (p - base) % VIEW_SIZE == 0)
			return mps_load_acquire(func_word((uint8_t *)p));
	}
	return NULL;
}

void mps__func_view_drop(struct mps_func *f)
{
	uint8_t *v;

	pthread_mutex_lock(&views_lock);
	v = f->view;
	if (v) {
		f->view = NULL;
		mps_store_release(func_word(v), (struct mps_func *)NULL);
		memset(v + 0x008, 0, 8);   /* the name goes with the function */
		*free_link(v) = free_views;
		free_views = v;
	}
	pthread_mutex_unlock(&views_lock);
}
