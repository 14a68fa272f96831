// SPDX-License-Identifier: MIT
/*
 * The stand-in's one lock and its one condition variable (see standin.h for
 * why one of each is enough). The condition is broadcast on every change a
 * waiter might be waiting for: an operation completed, a record was reached,
 * a stream thread exited, a context changed state or was killed. Waiters
 * always re-check their own predicate, so a wake-up meant for someone else
 * costs a loop iteration and nothing more.
 */
#include "standin.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t progress = PTHREAD_COND_INITIALIZER;

void mps__lock(void)
{
	pthread_mutex_lock(&lock);
}

void mps__unlock(void)
{
	pthread_mutex_unlock(&lock);
}

void mps__wait(void)
{
	pthread_cond_wait(&progress, &lock);
}

void mps__wait_on(pthread_cond_t *cond)
{
	pthread_cond_wait(cond, &lock);
}

void mps__progress(void)
{
	pthread_cond_broadcast(&progress);
}
