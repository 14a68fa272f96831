// SPDX-License-Identifier: MIT
/*
 * Soak: many clients doing mixed, checked work for a while, under chaos.
 *
 * OPENMPS_SOAK_CLIENTS workers (default 8) loop on verified work: random
 * words through a kernel on a stream of their own, an event, a pinned host
 * buffer, a pool allocation, each result compared, and every eighth round a
 * pinned host allocation made and freed. Meanwhile a chaos loop,
 * for OPENMPS_SOAK_SECONDS (default 15), every 100 to 300 ms either
 * SIGKILLs a random worker, has the daemon terminate_client one, or starts
 * a client in a fault domain of its own that faults the GPU (at most one
 * every OPENMPS_SOAK_FAULT_MS, default 0: a real GPU recovers from each
 * fault in its own time); every worker that goes is replaced. An idle anchor client holds the shared server from
 * start to end.
 *
 * At the end: no worker ever saw a wrong word or an error other than its
 * own termination; the shared server is the one there was at the start, and
 * after the last worker left its open descriptors and threads are what they
 * were with the anchor alone, and the device's free memory is back where it
 * was after a warm-up (one second of twice as many workers at once, before
 * the chaos), give or take what the driver keeps for good: about half a MiB
 * for each driver stream the server ever held at once beyond the warm-up's
 * peak (get_metrics' openmps_server_streams_peak; measured on an H200,
 * driver 580: the driver never gives back a context's memory for its most
 * streams alive at once) and 2 MiB it keeps the first time a stream that
 * waits on another's unfinished work is destroyed; the daemon answers.
 * Prints the counts: clients, verified rounds, kills, terminations, faults,
 * the streams peaks. When the server keeps a thread it did not
 * have before, the report says what each of its threads waits for, and
 * runs $OPENMPS_SOAK_DIAG with the server's pid (tests/gpu/faults.sh sets
 * it to a debugger's backtraces where there is one).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../cuda/common.h"

#define MAX_WORKERS 64
#define WORDS 8192
#define ONCE (2ll << 20)           /* kept at a first destroy of a waiting stream */
#define PER_STREAM (512ll << 10)    /* kept for each stream of the highest count */

enum { WORKER_TERMINATED = 12 };

static volatile sig_atomic_t stopping;

static void on_term(int sig)
{
	(void)sig;
	stopping = 1;
}

/* One worker: verified rounds until SIGTERM (T_PASS), its termination by
 * the daemon (WORKER_TERMINATED), or anything wrong (T_FAIL). Writes its
 * round count to `report` at the end. */
static int worker(unsigned id, int report)
{
	uint64_t rng = t_rng(100 + id);
	uint32_t *in, *out;
	CUfunction affine;
	CUdeviceptr d, p;
	CUstream s;
	CUevent ev;
	CUresult r = CUDA_SUCCESS;
	int n = WORDS;
	long rounds = 0;

	CUcontext ctx;
	CUmodule mod;
	char *ptx = t_ptx();

	signal(SIGTERM, on_term);
	/* Terminated as it starts is as good as terminated later. */
	const char *step = "cuInit";
	if ((r = cuInit(0)) != CUDA_SUCCESS || (step = "cuDevicePrimaryCtxRetain",
	    (r = cuDevicePrimaryCtxRetain(&ctx, 0)) != CUDA_SUCCESS) ||
	    (step = "cuCtxSetCurrent", (r = cuCtxSetCurrent(ctx)) != CUDA_SUCCESS) ||
	    (step = "cuModuleLoadData", (r = cuModuleLoadData(&mod, ptx)) != CUDA_SUCCESS) ||
	    (step = "cuModuleGetFunction", (r = cuModuleGetFunction(&affine, mod, "affine_u32")) != CUDA_SUCCESS) ||
	    (step = "cuStreamCreate", (r = cuStreamCreate(&s, CU_STREAM_NON_BLOCKING)) != CUDA_SUCCESS) ||
	    (step = "cuEventCreate", (r = cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING)) != CUDA_SUCCESS) ||
	    (step = "cuMemAllocHost", (r = cuMemAllocHost((void **)&in, 2 * WORDS * 4)) != CUDA_SUCCESS) ||
	    (step = "cuMemAlloc", (r = cuMemAlloc(&d, WORDS * 4)) != CUDA_SUCCESS)) {
		if (r == CUDA_ERROR_MPS_CLIENT_TERMINATED)
			return WORKER_TERMINATED;
		fprintf(stderr, "s_soak: worker %u: %s from %s while setting up\n", id, t_errname(r), step);
		return T_FAIL;
	}
	free(ptx);
	out = in + WORDS;
	while (!stopping) {
		uint32_t mul = (uint32_t)t_rand(&rng) | 1, add = (uint32_t)t_rand(&rng);
		void *args[] = { &d, &mul, &add, &n };

		t_fill_u32(in, WORDS, &rng);
		if ((r = cuMemcpyHtoDAsync(d, in, WORDS * 4, s)) != CUDA_SUCCESS ||
		    (r = t_launch(affine, WORDS / 256, 256, s, args)) != CUDA_SUCCESS ||
		    (r = cuMemAllocAsync(&p, WORDS * 4, s)) != CUDA_SUCCESS ||
		    (r = cuMemcpyDtoDAsync(p, d, WORDS * 4, s)) != CUDA_SUCCESS ||
		    (r = cuMemcpyDtoHAsync(out, p, WORDS * 4, s)) != CUDA_SUCCESS ||
		    (r = cuMemFreeAsync(p, s)) != CUDA_SUCCESS || (r = cuEventRecord(ev, s)) != CUDA_SUCCESS ||
		    (r = cuEventSynchronize(ev)) != CUDA_SUCCESS)
			break;
		for (int i = 0; i < WORDS; i++)
			if (!CHECK(out[i] == in[i] * mul + add, "worker %u: word %d wrong in round %ld", id, i, rounds))
				return T_FAIL;
		/* Pinned host memory comes and goes too (its answer carries a
		 * descriptor: a termination may land in between). */
		if (rounds % 8 == 7) {
			uint32_t *h;

			if ((r = cuMemAllocHost((void **)&h, 4096)) != CUDA_SUCCESS)
				break;
			h[1023] = mul;
			if (!CHECK(h[1023] == mul, "worker %u: pinned host memory lost a write", id))
				return T_FAIL;
			if ((r = cuMemFreeHost(h)) != CUDA_SUCCESS)
				break;
		}
		rounds++;
	}
	if (write(report, &rounds, sizeof(rounds)) != sizeof(rounds)) {
		/* The parent counts what it gets. */
	}
	if (r == CUDA_ERROR_MPS_CLIENT_TERMINATED)
		return WORKER_TERMINATED;
	if (r != CUDA_SUCCESS) {
		fprintf(stderr, "s_soak: worker %u: %s after %ld rounds\n", id, t_errname(r), rounds);
		return T_FAIL;
	}
	return T_PASS;
}

/* A client in a fault domain of its own that faults its GPU context. */
static void faulter(void)
{
	unsigned int *bad = (unsigned int *)(uintptr_t)0x40, v = 1;
	void *args[] = { &bad, &v };

	setenv("OPENMPS_FAULT_DOMAIN", "own", 1);
	t_primary(t_device());
	if (t_launch(t_func(t_module(), "store_at"), 1, 1, NULL, args) == CUDA_SUCCESS)
		cuCtxSynchronize();
	_exit(0);
}

/* One control command to the daemon; its reply in buf. */
static int command(const char *line, char *buf, size_t size)
{
	const char *dir = getenv("CUDA_MPS_PIPE_DIRECTORY");
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	ssize_t n;
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	snprintf(a.sun_path, sizeof(a.sun_path), "%s/openmps.sock", dir ? dir : "/tmp/openmps");
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || write(fd, line, strlen(line)) < 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	n = read(fd, buf, size - 1);
	close(fd);
	if (n < 0)
		return -1;
	buf[n] = 0;
	return 0;
}

/* The shared server's pid (the first one listed), or -1. */
static pid_t shared_server(void)
{
	char buf[256];

	if (command("get_server_list", buf, sizeof(buf)) < 0 || !buf[0])
		return -1;
	return (pid_t)atoi(buf);
}

/* How many servers the daemon lists. */
static int servers(void)
{
	char buf[512];
	int n = 0;

	if (command("get_server_list", buf, sizeof(buf)) < 0)
		return -1;
	for (char *p = buf; *p; p++)
		n += *p == '\n' || (!p[1] && *p != '\n');
	return n;
}

static int count_dir(pid_t pid, const char *what)
{
	char path[64];
	struct dirent *e;
	int n = 0;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, what);
	d = opendir(path);
	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}


/* The first line of a file, without its newline, into buf; false (and
 * buf empty) if there is none. */
static bool first_line(const char *path, char *buf, size_t size)
{
	FILE *f = fopen(path, "r");
	bool got = f && fgets(buf, (int)size, f);

	if (f)
		fclose(f);
	if (!got)
		buf[0] = 0;
	buf[strcspn(buf, "\n")] = 0;
	return got;
}

static int by_name(const void *a, const void *b)
{
	return strcmp((const char *)a, (const char *)b);
}

/* The names of pid's threads, sorted and joined by spaces, into out: what
 * a report shows when their number changed (the server names its own;
 * the driver's have names of their own). */
static void thread_names(pid_t pid, char *out, size_t size)
{
	static char names[256][16];
	char path[320];
	struct dirent *e;
	size_t n = 0, used = 0;
	DIR *d;

	out[0] = 0;
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	if (!d)
		return;
	while ((e = readdir(d)) && n < 256) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%s/comm", (int)pid, e->d_name);
		n += first_line(path, names[n], sizeof(names[n]));
	}
	closedir(d);
	qsort(names, n, sizeof(names[0]), by_name);
	for (size_t i = 0; i < n && used + 18 < size; i++)
		used += (size_t)snprintf(out + used, size - used, "%s%s", i ? " " : "", names[i]);
}

/* What the server's threads are doing, for a report of a leaked one: where
 * each sleeps in the kernel and, for teardown threads, readable to root,
 * the kernel stack; then $OPENMPS_SOAK_DIAG, if set, is run with the
 * server's pid as its last argument (a debugger's backtraces, say). */
static void show_threads(pid_t pid)
{
	const char *diag = getenv("OPENMPS_SOAK_DIAG");
	char path[320], name[32], wchan[256], cmd[512];
	struct dirent *e;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	while (d && (e = readdir(d))) {
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%s/comm", (int)pid, e->d_name);
		first_line(path, name, sizeof(name));
		snprintf(path, sizeof(path), "/proc/%d/task/%s/wchan", (int)pid, e->d_name);
		first_line(path, wchan, sizeof(wchan));
		printf("s_soak: thread %s %s waits in %s\n", e->d_name, name, wchan);
		if (strcmp(name, "omps-teardown") == 0) {
			char line[256];

			snprintf(path, sizeof(path), "/proc/%d/task/%s/stack", (int)pid, e->d_name);
			f = fopen(path, "r");
			while (f && fgets(line, sizeof(line), f))
				printf("s_soak:   %s", line);
			if (f)
				fclose(f);
		}
	}
	if (d)
		closedir(d);
	if (diag && *diag) {
		snprintf(cmd, sizeof(cmd), "%s %d", diag, (int)pid);
		fflush(stdout);
		if (system(cmd) != 0)
			printf("s_soak: %s did not succeed\n", cmd);
	}
}

/* The memory lines of the daemon's metrics (what the servers account for). */
static void print_memory_metrics(void)
{
	static char buf[65536];

	if (command("get_metrics", buf, sizeof(buf)) < 0)
		return;
	for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n"))
		if (strstr(line, "memory_bytes{"))
			printf("s_soak: metrics: %s\n", line);
}

static long env_num(const char *name, long def, long lo, long hi)
{
	const char *v = getenv(name);
	long x = v ? strtol(v, NULL, 10) : def;

	return x < lo ? lo : x > hi ? hi : x;
}

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

struct slot {
	pid_t pid;
	unsigned id;
};

/* Waits until the server's descriptors and threads have not changed for a
 * second (the teardown of clients that just left is over; at most 15 s)
 * and says how many there are. */
static void settle(pid_t srv, int *fds, int *threads)
{
	int same = 0;

	*fds = count_dir(srv, "fd");
	*threads = count_dir(srv, "task");
	for (int i = 0; i < 150 && same < 10; i++) {
		int f, t;

		usleep(100 * 1000);
		f = count_dir(srv, "fd");
		t = count_dir(srv, "task");
		same = f == *fds && t == *threads ? same + 1 : 0;
		*fds = f;
		*threads = t;
	}
}

/* nworkers workers for a second, all at once, then stopped; each must
 * end well. */
/* The shared server's openmps_server_streams_peak on device 0, or -1. */
static long streams_peak(pid_t srv)
{
	static char buf[65536];
	char key[96];
	char *at;

	snprintf(key, sizeof(key), "openmps_server_streams_peak{server=\"%d\",device=\"0\"} ", (int)srv);
	if (command("get_metrics", buf, sizeof(buf)) < 0 || !(at = strstr(buf, key)))
		return -1;
	return strtol(at + strlen(key), NULL, 10);
}

static void warm_up(int nworkers)
{
	pid_t pids[2 * MAX_WORKERS];
	int sink[2], st;
	long r;

	REQUIRE(pipe(sink) == 0, "pipe");
	fcntl(sink[0], F_SETFL, O_NONBLOCK);
	for (int i = 0; i < nworkers; i++) {
		pids[i] = fork();
		if (pids[i] == 0)
			_exit(worker(1000 + (unsigned)i, sink[1]));
	}
	usleep(1000 * 1000);
	for (int i = 0; i < nworkers; i++)
		kill(pids[i], SIGTERM);
	for (int i = 0; i < nworkers; i++) {
		if (waitpid(pids[i], &st, 0) == pids[i] && WIFEXITED(st) && WEXITSTATUS(st) != T_PASS)
			check_fail(__FILE__, __LINE__, NULL, "warm-up worker %d ended with status %d", i, WEXITSTATUS(st));
	}
	while (read(sink[0], &r, sizeof(r)) == sizeof(r))
		;
	close(sink[0]);
	close(sink[1]);
}

int main(int argc, char **argv)
{
	int nworkers = (int)env_num("OPENMPS_SOAK_CLIENTS", 8, 1, MAX_WORKERS);
	double secs = (double)env_num("OPENMPS_SOAK_SECONDS", 15, 1, 86400), end;
	double fault_gap = (double)env_num("OPENMPS_SOAK_FAULT_MS", 0, 0, 3600000) / 1000, next_fault = 0;
	int report[2], anchor_go[2], fds0, threads0, fds1, threads1, st;
	static char names0[4096], names1[4096];
	long kills = 0, terms = 0, faults = 0, started = 0, rounds = 0, r;
	struct slot w[MAX_WORKERS];
	long long before, after, kept;
	long peak0, peak1;
	uint64_t rng;
	pid_t anchor, srv, srv_end;
	unsigned next_id = 0;
	char buf[512];

	t_init(argc, argv);
	rng = t_rng(42);
	if (pipe(report) < 0 || pipe(anchor_go) < 0)
		return T_FAIL;
	fcntl(report[0], F_SETFL, O_NONBLOCK);

	/* The anchor: holds the shared server, idle, until told to go. */
	anchor = fork();
	if (anchor == 0) {
		char c;

		close(anchor_go[1]);
		t_primary(t_device());
		if (read(anchor_go[0], &c, 1) < 0) {
			/* Told or orphaned: either way, done. */
		}
		_exit(0);
	}
	close(anchor_go[0]);
	usleep(300 * 1000);
	srv = shared_server();
	REQUIRE(srv > 0, "no shared server");
	/* The baseline is taken after the workers' kind of work has run once:
	 * the driver grows a context to what its load asks (channels for
	 * concurrent streams, say) and keeps it; what the soak must show is
	 * that churning clients costs nothing beyond that. */
	warm_up(2 * nworkers);
	settle(srv, &fds0, &threads0);
	peak0 = streams_peak(srv);
	before = t_free_memory();
	REQUIRE(before > 0, "cannot read the device's free memory");
	settle(srv, &fds0, &threads0);
	thread_names(srv, names0, sizeof(names0));

	for (int i = 0; i < nworkers; i++) {
		w[i].id = next_id++;
		w[i].pid = fork();
		if (w[i].pid == 0)
			_exit(worker(w[i].id, report[1]));
		started++;
	}
	end = now_s() + secs;
	while (now_s() < end && !check_failures()) {
		int k = (int)(t_rand(&rng) % (uint64_t)nworkers), action = (int)(t_rand(&rng) % 3);
		pid_t got;

		usleep((useconds_t)(100 + t_rand(&rng) % 200) * 1000);
		/* Reap and replace whoever went. */
		while ((got = waitpid(-1, &st, WNOHANG)) > 0) {
			for (int i = 0; i < nworkers; i++) {
				if (w[i].pid != got)
					continue;
				if (WIFEXITED(st) && WEXITSTATUS(st) != T_PASS && WEXITSTATUS(st) != WORKER_TERMINATED)
					check_fail(__FILE__, __LINE__, NULL, "worker %u ended with status %d", w[i].id, WEXITSTATUS(st));
				w[i].id = next_id++;
				w[i].pid = fork();
				if (w[i].pid == 0)
					_exit(worker(w[i].id, report[1]));
				started++;
			}
		}
		if (action == 0) {
			kill(w[k].pid, SIGKILL);
			kills++;
		} else if (action == 1) {
			snprintf(buf, sizeof(buf), "terminate_client %d %d", (int)srv, (int)w[k].pid);
			if (command(buf, buf, sizeof(buf)) == 0 && strncmp(buf, "Error", 5))
				terms++;
		} else if (now_s() >= next_fault) {
			pid_t f = fork();

			if (f == 0)
				faulter();
			faults++;
			next_fault = now_s() + fault_gap;
		}
	}

	/* Stop: every worker, then the anchor alone holds the server. */
	for (int i = 0; i < nworkers; i++)
		kill(w[i].pid, SIGTERM);
	for (int i = 0; i < nworkers; i++) {
		if (waitpid(w[i].pid, &st, 0) != w[i].pid)
			continue;
		if (WIFEXITED(st) && WEXITSTATUS(st) != T_PASS && WEXITSTATUS(st) != WORKER_TERMINATED)
			check_fail(__FILE__, __LINE__, NULL, "worker %u ended with status %d", w[i].id, WEXITSTATUS(st));
	}
	usleep(500 * 1000);   /* the last faulters */
	while (waitpid(-1, &st, WNOHANG) > 0)
		;
	while (read(report[0], &r, sizeof(r)) == sizeof(r))
		rounds += r;
	/* Teardown of the last ones runs on the server's threads: let it. */
	for (int i = 0; i < 50; i++) {
		fds1 = count_dir(srv, "fd");
		threads1 = count_dir(srv, "task");
		if (fds1 <= fds0 && threads1 <= threads0)
			break;
		usleep(100 * 1000);
	}
	srv_end = shared_server();
	CHECK(srv_end == srv, "the shared server changed (%d, then %d): a fault in another domain reached it", (int)srv,
	      (int)srv_end);
	CHECK(fds1 == fds0, "the server has %d descriptors open, %d with the anchor alone before", fds1, fds0);
	if (!CHECK(threads1 == threads0, "the server has %d threads, %d with the anchor alone before", threads1,
		   threads0)) {
		thread_names(srv, names1, sizeof(names1));
		printf("s_soak: server threads before: %s\ns_soak: server threads after:  %s\n", names0, names1);
		show_threads(srv);
	}
	REQUIRE(write(anchor_go[1], "g", 1) == 1, "pipe");
	waitpid(anchor, &st, 0);
	/* The last faulters' servers end on their own time (a real GPU takes a
	 * while to tear down a context that faulted): wait for the shared
	 * server to be the only one, then for the memory. */
	for (int i = 0; i < 300 && servers() > 1; i++)
		usleep(100 * 1000);
	CHECK(servers() == 1, "%d servers left after the soak, only the shared one expected", servers());
	peak1 = streams_peak(srv);
	kept = ONCE + (peak1 > peak0 ? (peak1 - peak0) * PER_STREAM : 0);
	for (int i = 0; i < 50; i++) {
		after = t_free_memory();
		if (after >= before - kept)
			break;
		usleep(100 * 1000);
	}
	if (!CHECK(after >= before - kept, "free device memory %lld, %lld before the soak (driver streams at most %ld, "
		   "%ld in the warm-up)", after, before, peak1, peak0))
		print_memory_metrics();
	CHECK(command("get_server_list", buf, sizeof(buf)) == 0, "the daemon does not answer");
	printf("s_soak: %.0f s, %ld clients (%d at a time), %ld verified rounds, %ld kills, %ld terminations, %ld "
	       "faults; server descriptors %d -> %d, threads %d -> %d, free memory %lld -> %lld, most driver streams at "
	       "once %ld (warm-up %ld)\n",
	       secs, started, nworkers, rounds, kills, terms, faults, fds0, fds1, threads0, threads1, before, after, peak1,
	       peak0);
	return check_failures() ? T_FAIL : T_PASS;
}
