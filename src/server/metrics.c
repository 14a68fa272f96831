// SPDX-License-Identifier: MIT
/*
 * See metrics.h. The numbers are the ones the server keeps anyway: the
 * memory account's bytes and peak per device, the messages handled, and
 * counters the service threads bump as they go (launches, bytes copied
 * each way, calls answered with an error). They are read here, on the main
 * thread, with relaxed loads under the client-list lock.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/atomics.h"
#include "server/gpuwake.h"
#include "server/metrics.h"
#include "server/placement.h"
#include "server/replay.h"
#include "server/sched.h"
#include "server/server.h"
#include "server/smshare.h"
#include "server/vdevice.h"

/* A label value as the format wants it: backslash, quote and newline escaped. */
static void label(char *out, size_t size, const char *in)
{
	size_t n = 0;

	for (; *in && n + 3 < size; in++) {
		if (*in == '\\' || *in == '"') {
			out[n++] = '\\';
			out[n++] = *in;
		} else if (*in == '\n') {
			out[n++] = '\\';
			out[n++] = 'n';
		} else {
			out[n++] = *in;
		}
	}
	out[n] = 0;
}

/* Each live client's GPU time samples that finished since its last launch,
 * read first: the list lock is never held across a driver call. */
static void collect_gpu_time(void)
{
	struct mps_client **v = NULL;
	size_t n = 0, cap = 0;

	pthread_mutex_lock(&mps_srv.lock);
	for (struct mps_client *c = mps_srv.clients; c; c = c->next) {
		if (mps_load_relaxed(&c->dead))
			continue;
		if (n == cap) {
			struct mps_client **nv = realloc(v, (cap = cap ? 2 * cap : 16) * sizeof(*v));

			if (!nv)
				break;
			v = nv;
		}
		mps_fetch_add(&c->refs, 1);
		v[n++] = c;
	}
	pthread_mutex_unlock(&mps_srv.lock);
	for (size_t i = 0; i < n; i++) {
		mps_gputime_collect(v[i], false);
		mps_client_put(v[i]);
	}
	free(v);
}

int mps_metrics_write(int fd)
{
	uint64_t dev_bytes[MPS_MAX_DEVICES] = { 0 }, ops = 0, trips = 0, fences = 0;
	struct mps_sched_stats ss;
	struct mps_replay_counts rc;
	uint64_t placed, placed_bytes, fallbacks;
	uint64_t looks, gpu_wakes;
	char comm[160];
	int server = (int)getpid(), n = 0;
	FILE *f;

	fd = dup(fd);
	f = fd >= 0 ? fdopen(fd, "w") : NULL;
	if (!f) {
		if (fd >= 0)
			close(fd);
		return -errno;
	}
	collect_gpu_time();
	pthread_mutex_lock(&mps_srv.lock);
	for (struct mps_client *c = mps_srv.clients; c; c = c->next) {
		char id[600];
		int k;

		n++;
		label(comm, sizeof(comm), c->comm);
		k = snprintf(id, sizeof(id), "server=\"%d\",pid=\"%d\",id=\"%u\",comm=\"%s\"", server, (int)c->pid,
			     c->id, comm);
		/* Its pod and container where its cgroup shows them (pod.h):
		 * hex and dashes only, nothing to escape. */
		if (c->pod_uid[0] && k > 0 && (size_t)k < sizeof(id))
			k += snprintf(id + k, sizeof(id) - (size_t)k, ",pod_uid=\"%s\"", c->pod_uid);
		if (c->container_id[0] && k > 0 && (size_t)k < sizeof(id))
			snprintf(id + k, sizeof(id) - (size_t)k, ",container_id=\"%s\"", c->container_id);
		ops += mps_load_relaxed(&c->ops);
		trips += mps_load_relaxed(&c->trips);
		fences += mps_load_relaxed(&c->fences);
		fprintf(f, "openmps_client_calls_total{%s} %llu\n", id, (unsigned long long)mps_load_relaxed(&c->ops));
		fprintf(f, "openmps_client_round_trips_total{%s} %llu\n", id,
			(unsigned long long)mps_load_relaxed(&c->trips));
		fprintf(f, "openmps_client_synchronizes_answered_total{%s} %llu\n", id,
			(unsigned long long)mps_load_relaxed(&c->fences));
		fprintf(f, "openmps_client_kernels_total{%s} %llu\n", id,
			(unsigned long long)mps_load_relaxed(&c->stats.launches));
		fprintf(f, "openmps_client_copy_bytes_total{%s,direction=\"h2d\"} %llu\n", id,
			(unsigned long long)mps_load_relaxed(&c->stats.h2d));
		fprintf(f, "openmps_client_copy_bytes_total{%s,direction=\"d2h\"} %llu\n", id,
			(unsigned long long)mps_load_relaxed(&c->stats.d2h));
		fprintf(f, "openmps_client_copy_bytes_total{%s,direction=\"d2d\"} %llu\n", id,
			(unsigned long long)mps_load_relaxed(&c->stats.d2d));
		fprintf(f, "openmps_client_errors_total{%s} %llu\n", id,
			(unsigned long long)mps_load_relaxed(&c->stats.errors));
		fprintf(f, "openmps_client_gpu_seconds_total{%s} %.6f\n", id, mps_load_relaxed(&c->gpu.ns) / 1e9);
		fprintf(f, "openmps_client_pinned_host_bytes{%s} %llu\n", id,
			(unsigned long long)mps_load_relaxed(&c->mem.host_bytes));
		for (int d = 0; d < mps_srv.ndev; d++) {
			uint64_t b = mps_load_relaxed(&c->mem.bytes[d]), p = mps_load_relaxed(&c->mem.peak[d]);
			uint64_t lim = mps_load_relaxed(&c->mem.limit[d]);

			if (!p && !lim)
				continue;   /* never used the device, no limit there */
			dev_bytes[d] += b;
			fprintf(f, "openmps_client_memory_bytes{%s,device=\"%d\"} %llu\n", id, d, (unsigned long long)b);
			fprintf(f, "openmps_client_memory_peak_bytes{%s,device=\"%d\"} %llu\n", id, d,
				(unsigned long long)p);
			if (lim)
				fprintf(f, "openmps_client_memory_limit_bytes{%s,device=\"%d\"} %llu\n", id, d,
					(unsigned long long)lim);
		}
		fprintf(f, "openmps_client_priority{%s} %d\n", id, mps_load_relaxed(&c->priority));
		fprintf(f, "openmps_client_active_thread_percentage{%s} %.1f\n", id,
			mps_load_relaxed(&c->thread_pct) / 100.0);
		for (int d = 0; d < mps_srv.ndev; d++)
			fprintf(f, "openmps_client_sms{%s,device=\"%d\"} %u\n", id, d,
				mps_sm_client_count(c, d));
		mps_vdev_client_metrics(f, c, id);
	}
	ops += mps_srv.gone_ops;
	trips += mps_srv.gone_trips;
	fences += mps_srv.gone_fences;
	pthread_mutex_unlock(&mps_srv.lock);
	fprintf(f, "openmps_server_clients{server=\"%d\"} %d\n", server, n);
	/* Every message the server took since it started, of clients here and gone. */
	fprintf(f, "openmps_server_calls_total{server=\"%d\"} %llu\n", server, (unsigned long long)ops);
	fprintf(f, "openmps_server_round_trips_total{server=\"%d\"} %llu\n", server, (unsigned long long)trips);
	/* Synchronizes the clients answered themselves (streams.h: fences). */
	fprintf(f, "openmps_server_synchronizes_answered_total{server=\"%d\"} %llu\n", server,
		(unsigned long long)fences);
	/* The service threads: their CPU, the part spent running messages (the
	 * rest is looking for work and waking), and the driver's launch calls
	 * inside that part. */
	mps_sched_stats(&ss);
	fprintf(f, "openmps_server_service_cpu_seconds_total{server=\"%d\"} %.6f\n", server, ss.cpu_ns / 1e9);
	fprintf(f, "openmps_server_serving_seconds_total{server=\"%d\"} %.6f\n", server, ss.serve_ns / 1e9);
	fprintf(f, "openmps_server_launch_seconds_total{server=\"%d\"} %.6f\n", server, ss.launch_ns / 1e9);
	fprintf(f, "openmps_server_launches_total{server=\"%d\"} %llu\n", server, (unsigned long long)ss.launches);
	fprintf(f, "openmps_server_turns_total{server=\"%d\"} %llu\n", server, (unsigned long long)ss.turns);
	fprintf(f, "openmps_server_wakeups_total{server=\"%d\"} %llu\n", server, (unsigned long long)ss.wakeups);
	fprintf(f, "openmps_server_replays_total{server=\"%d\"} %llu\n", server, (unsigned long long)ss.replays);
	fprintf(f, "openmps_server_replayed_kernels_total{server=\"%d\"} %llu\n", server,
		(unsigned long long)ss.replayed);
	fprintf(f, "openmps_server_replay_seconds_total{server=\"%d\"} %.6f\n", server, ss.replay_ns / 1e9);
	fprintf(f, "openmps_server_replay_node_updates_total{server=\"%d\"} %llu\n", server,
		(unsigned long long)ss.replay_updates);
	fprintf(f, "openmps_server_replay_update_seconds_total{server=\"%d\"} %.6f\n", server,
		ss.replay_update_ns / 1e9);
	fprintf(f, "openmps_server_poll_seconds_total{server=\"%d\"} %.6f\n", server, ss.poll_ns / 1e9);
	/* Where the time running messages went, by operation (those seen);
	 * each family's samples together, as the exposition format wants. */
	for (unsigned int op = 0; op < MPS_OP_STATS; op++)
		if (ss.op_n[op] && mps_sched_op_name(op))
			fprintf(f, "openmps_server_op_calls_total{server=\"%d\",op=\"%s\"} %llu\n", server,
				mps_sched_op_name(op), (unsigned long long)ss.op_n[op]);
	for (unsigned int op = 0; op < MPS_OP_STATS; op++)
		if (ss.op_n[op] && mps_sched_op_name(op))
			fprintf(f, "openmps_server_op_seconds_total{server=\"%d\",op=\"%s\"} %.6f\n", server,
				mps_sched_op_name(op), ss.op_ns[op] / 1e9);
	mps_gpuwake_stats(&looks, &gpu_wakes);
	fprintf(f, "openmps_server_gpu_sleeper_looks_total{server=\"%d\"} %llu\n", server, (unsigned long long)looks);
	fprintf(f, "openmps_server_gpu_sleeper_wakes_total{server=\"%d\"} %llu\n", server,
		(unsigned long long)gpu_wakes);
	mps_replay_stats(&rc);
	fprintf(f, "openmps_server_replay_holds_ended_total{server=\"%d\",why=\"time\"} %llu\n", server,
		(unsigned long long)rc.expired);
	fprintf(f, "openmps_server_replay_holds_ended_total{server=\"%d\",why=\"other\"} %llu\n", server,
		(unsigned long long)rc.let_go);
	{
		const struct { const char *why; uint64_t n; } runs[] = {
			{ "new", rc.learned }, { "seen", rc.seen }, { "too_long", rc.too_long },
			{ "dropped", rc.dropped }, { "built", rc.built },
			{ "unbuilt", rc.unbuilt },
			{ "over_limit", rc.over_limit },
		};

		for (unsigned int i = 0; i < sizeof(runs) / sizeof(runs[0]); i++)
			fprintf(f, "openmps_server_replay_chunks_total{server=\"%d\",why=\"%s\"} %llu\n", server,
				runs[i].why, (unsigned long long)runs[i].n);
	}
	mps_place_stats(&placed, &placed_bytes, &fallbacks);
	fprintf(f, "openmps_server_placed_allocations_total{server=\"%d\"} %llu\n", server, (unsigned long long)placed);
	fprintf(f, "openmps_server_placed_bytes{server=\"%d\"} %llu\n", server, (unsigned long long)placed_bytes);
	fprintf(f, "openmps_server_placement_fallbacks_total{server=\"%d\"} %llu\n", server,
		(unsigned long long)fallbacks);
	fprintf(f, "openmps_server_placed_reservations_total{server=\"%d\"} %llu\n", server,
		(unsigned long long)mps_place_reserve_stats());
	mps_place_host_stats(&placed, &fallbacks);
	fprintf(f, "openmps_server_placed_host_mappings_total{server=\"%d\"} %llu\n", server,
		(unsigned long long)placed);
	fprintf(f, "openmps_server_host_placement_fallbacks_total{server=\"%d\"} %llu\n", server,
		(unsigned long long)fallbacks);
	for (int d = 0; d < mps_srv.ndev; d++) {
		fprintf(f, "openmps_server_memory_bytes{server=\"%d\",device=\"%d\"} %llu\n", server, d,
			(unsigned long long)dev_bytes[d]);
		fprintf(f, "openmps_server_streams{server=\"%d\",device=\"%d\"} %u\n", server, d,
			mps_load_relaxed(&mps_srv.dev[d].streams));
		fprintf(f, "openmps_server_streams_peak{server=\"%d\",device=\"%d\"} %u\n", server, d,
			mps_load_relaxed(&mps_srv.dev[d].streams_peak));
		fprintf(f, "openmps_server_green_contexts{server=\"%d\",device=\"%d\"} %u\n", server, d,
			mps_sm_greens(d));
	}
	mps_sm_partition_metrics(f, server);
	mps_vdev_metrics(f, server);
	return fclose(f) == 0 ? 0 : -EIO;
}
