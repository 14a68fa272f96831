// SPDX-License-Identifier: MIT
/*
 * OPENMPS_CALL_STATS=PATH: what each driver function the program called
 * cost on the wire. For every function it counts the calls the program
 * made, the messages those calls sent to the server, how many of them
 * waited for a reply (round trips) and how long those waits took in all
 * (µs: the server's and the GPU's share of a request's time, as the
 * program saw it); at exit it writes the table to
 * PATH.<pid>. A function with calls and no messages was answered here in
 * the client; one with messages and no round trips never waited.
 *
 * Messages are charged to the outermost driver call the sending thread is
 * in (trace.c knows it); messages sent outside any (from the private
 * export tables, or the library's own threads) go on a line of their own.
 * A last line counts the naps taken through waits for the GPU (conn.c),
 * how many of them ended after the GPU's store, and their time.
 * openmps_call_stats_mark() writes the table at points of the program's
 * choosing as well. bench/calltable.py reads these files. With the
 * variable unset nothing is counted and the dispatch table points straight
 * at the functions.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/client.h"
#include "client/gen/symbols.h"
#include "common/atomics.h"
#include "common/clock.h"

#define OUTSIDE MPS_NSYMS   /* the row of messages sent outside any driver call */

static int on = -1;          /* -1: not read yet */
static const char *path;
static uint64_t calls[MPS_NSYMS + 1];
static uint64_t messages[MPS_NSYMS + 1];
static uint64_t trips[MPS_NSYMS + 1];
static uint64_t waited_ns[MPS_NSYMS + 1];
static uint64_t naps, naps_over, nap_ns;   /* conn.c's naps through GPU waits */

/* Writes the table to PATH.<pid>, or PATH.<pid>.<label>. */
static void write_table_as(const char *label)
{
	char name[4096];
	uint64_t total_m = 0, total_t = 0;
	FILE *f;

	if (label)
		snprintf(name, sizeof(name), "%s.%d.%s", path, (int)getpid(), label);
	else
		snprintf(name, sizeof(name), "%s.%d", path, (int)getpid());
	f = fopen(name, "w");
	if (!f)
		return;
	fprintf(f, "# openmps call stats, pid %d: calls messages round_trips wait_us function\n", (int)getpid());
	for (int i = 0; i <= MPS_NSYMS; i++) {
		uint64_t c = mps_load_relaxed(&calls[i]), m = mps_load_relaxed(&messages[i]);
		uint64_t t = mps_load_relaxed(&trips[i]), w = mps_load_relaxed(&waited_ns[i]) / 1000;

		total_m += m;
		total_t += t;
		if (c || m)
			fprintf(f, "%llu %llu %llu %llu %s\n", (unsigned long long)c, (unsigned long long)m,
				(unsigned long long)t, (unsigned long long)w,
				i == OUTSIDE ? "(outside driver calls)" : mps__sym_names[i]);
	}
	fprintf(f, "# total: %llu messages, %llu round trips\n", (unsigned long long)total_m,
		(unsigned long long)total_t);
	fprintf(f, "# naps: %llu, %llu overslept, %llu us\n", (unsigned long long)mps_load_relaxed(&naps),
		(unsigned long long)mps_load_relaxed(&naps_over), (unsigned long long)mps_load_relaxed(&nap_ns) / 1000);
	fclose(f);
}

static void write_table(void)
{
	write_table_as(NULL);
}

/* For a program (a benchmark) that wants the counts at points of its own,
 * after its warm-up say: writes them now to PATH.<pid>.<label> (a label of
 * letters, digits, '-' and '_'). Nothing without OPENMPS_CALL_STATS. */
__attribute__((visibility("default"))) void openmps_call_stats_mark(const char *label);
void openmps_call_stats_mark(const char *label)
{
	if (!mps__stats_on() || !label || !*label || strlen(label) > 64 ||
	    label[strspn(label, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_")])
		return;
	write_table_as(label);
}

bool mps__stats_on(void)
{
	int o = mps_load_relaxed(&on);

	if (o < 0) {
		const char *v = getenv("OPENMPS_CALL_STATS");
		int expect = -1;

		o = v && *v ? 1 : 0;
		if (mps_cas(&on, &expect, o) && o) {
			path = v;
			atexit(write_table);
		}
		o = mps_load_relaxed(&on);
	}
	return o == 1;
}

void mps__stats_call(int idx)
{
	if (mps_load_relaxed(&on) == 1 && idx >= 0 && idx < MPS_NSYMS)
		mps_fetch_add(&calls[idx], 1);
}

/* The row the calling thread's messages go on, or -1 when not counting. */
static int row(void)
{
	int idx;

	if (!mps__stats_on())
		return -1;
	idx = mps__trace_current();
	return idx < 0 || idx >= MPS_NSYMS ? OUTSIDE : idx;
}

void mps__stats_message(void)
{
	int i = row();

	if (i >= 0)
		mps_fetch_add(&messages[i], 1);
}

void mps__stats_round_trip(void)
{
	int i = row();

	if (i >= 0)
		mps_fetch_add(&trips[i], 1);
}

/* A wait for the server's (or the GPU's) reply, begun at start, is over
 * (the clock is read only while counting). */
void mps__stats_waited(uint64_t start)
{
	int i = mps_load_relaxed(&on) == 1 ? row() : -1;

	if (i >= 0)
		mps_fetch_add(&waited_ns[i], mps_now_ns() - start);
}

void mps__stats_nap(uint64_t ns, bool overslept)
{
	if (mps_load_relaxed(&on) != 1)
		return;
	mps_fetch_add(&naps, 1);
	mps_fetch_add(&naps_over, overslept);
	mps_fetch_add(&nap_ns, ns);
}
