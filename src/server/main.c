// SPDX-License-Identifier: MIT
/*
 * openmps-server: one per user, started by openmps-control. It loads the real
 * driver (or the library OPENMPS_DRIVER names), makes each GPU's primary
 * context current-able, and serves clients the daemon hands over on its
 * channel, on a pool of service threads (sched.c).
 *
 * The main thread only waits: on the channel (new clients, quit), on every
 * client socket (a hangup means the client is gone: start its teardown), and
 * on SIGTERM/SIGINT (quit), and for a GPU fault (fault.h: the server
 * exits). To quit it marks every client dead and keeps handling hangups
 * until the last client has been torn down.
 *
 * Before the driver is initialised the CUDA_MPS_* variables are removed from
 * our own environment, so NVIDIA's driver in this process never tries to
 * become a client of an NVIDIA MPS daemon, and so is CUDA_LOG_FILE, which
 * names a client's error log.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "common/atomics.h"
#include "common/env.h"
#include "common/log.h"
#include "common/memvalue.h"
#include "common/version.h"
#include "server/control.h"
#include "server/crash.h"
#include "server/device.h"
#include "server/devout.h"
#include "server/driver.h"
#include "server/fault.h"
#include "server/main.h"
#include "server/sched.h"
#include "server/placement.h"
#include "server/replay.h"
#include "server/server.h"

struct mps_server mps_srv = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.channel = -1,
	.thread_pct = 10000,
};

static int epfd = -1;

/* epoll tags that are not clients. */
static char tag_channel, tag_signal, tag_fault;

int mps_main_watch(struct mps_client *c)
{
	struct epoll_event ev = { .events = EPOLLRDHUP | EPOLLHUP, .data.ptr = c };

	if (epoll_ctl(epfd, EPOLL_CTL_ADD, c->sock, &ev) < 0)
		return -errno;
	return 0;
}

void mps_main_unwatch(struct mps_client *c)
{
	epoll_ctl(epfd, EPOLL_CTL_DEL, c->sock, NULL);
	mps_client_put(c);
}

static void scrub_environment(void)
{
	extern char **environ;

	for (;;) {
		char name[256];
		int found = 0;

		for (char **e = environ; e && *e; e++) {
			if (!strncmp(*e, "CUDA_MPS_", 9)) {
				size_t n = strcspn(*e, "=");

				if (n >= sizeof(name))
					n = sizeof(name) - 1;
				memcpy(name, *e, n);
				name[n] = 0;
				found = 1;
				break;
			}
		}
		if (!found)
			break;
		unsetenv(name);
	}
	/* CUDA_LOG_FILE is a client's: each logs its own calls (the client
	 * library's error log). The server's driver would write its own
	 * probing and every client's refused calls into that file. */
	unsetenv("CUDA_LOG_FILE");
	/* Each client stream gets its own hardware queue where possible, or
	 * kernels of different clients serialise behind each other. */
	setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
}

/* The host memory this server may use: physical memory, or less where a
 * cgroup (v2 or v1) limits it. */
static uint64_t host_memory(void)
{
	static const char *const files[] = { "/sys/fs/cgroup/memory.max",
					     "/sys/fs/cgroup/memory/memory.limit_in_bytes" };
	long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
	uint64_t mem = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;

	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		unsigned long long v;
		FILE *f = fopen(files[i], "r");

		if (!f)
			continue;
		if (fscanf(f, "%llu", &v) == 1 && v > 0 && (!mem || v < mem))
			mem = v;
		fclose(f);
	}
	return mem;
}

/* A memory size from the environment in the control daemon's form ("8G",
 * "512M", "0" for none), else def. */
static uint64_t env_mem(const char *name, uint64_t def)
{
	const char *v = getenv(name);
	uint64_t x;

	if (!v || !*v)
		return def;
	if (mps_parse_mem_value(v, &x) < 0) {
		mps_log_warn("ignoring %s=%s (want a size such as 512M or 8G, or 0 for no limit)", name, v);
		return def;
	}
	return x;
}

/* Pinned host memory is allocated by the server for its clients: by
 * default one client may pin half the host's memory, all together three
 * quarters. */
static void host_limits(void)
{
	uint64_t mem = host_memory();

	mps_srv.host_limit = env_mem("OPENMPS_PINNED_HOST_LIMIT", mem / 2);
	mps_srv.host_pool.limit = env_mem("OPENMPS_PINNED_HOST_TOTAL", mem / 4 * 3);
	mps_log_info("Pinned host memory limit: %llu MiB per client, %llu MiB for all clients (0: none)",
		     (unsigned long long)(mps_srv.host_limit >> 20), (unsigned long long)(mps_srv.host_pool.limit >> 20));
}

static void report_failed(const char *why)
{
	struct mps_chan m;

	memset(&m, 0, sizeof(m));
	m.op = MPS_CHAN_FAILED;
	snprintf(m.text, sizeof(m.text), "%s", why);
	mps_control_send(&m);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: openmps-server --channel FD | --version\n"
		   "Started by openmps-control; not meant to be run by hand.\n");
}

int main(int argc, char **argv)
{
	struct epoll_event ev;
	sigset_t sigs;
	int sfd, quitting = 0;

	mps_log_init("Server", 2);
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--channel") && i + 1 < argc) {
			mps_srv.channel = atoi(argv[++i]);
		} else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(argv[i], "--version") || !strcmp(argv[i], "-V")) {
			printf("openmps-server %s (wire protocol %d)\n", OPENMPS_VERSION, MPS_WIRE_VERSION);
			return 0;
		} else {
			fprintf(stderr, "openmps-server: unknown argument '%s'\n", argv[i]);
			usage(stderr);
			return 2;
		}
	}
	if (mps_srv.channel < 0) {
		usage(stderr);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	signal(SIGHUP, SIG_IGN);   /* the daemon reopens our log (logrotate signals it) */
	mps_crash_install();
	scrub_environment();
	mps_srv.spin_ns = (uint64_t)mps_env_long("OPENMPS_SPIN_US", 100, 0, 1000000) * 1000;
	mps_srv.max_clients = (int)mps_env_long("OPENMPS_MAX_CLIENTS", 1024, 1, 65536);
	mps_gputime_init();
	mps_replay_init();
	host_limits();
	mps_devout_init();   /* before the driver: what it prints for kernels goes to the clients */

	if (mps_driver_load() < 0) {
		report_failed(getenv("OPENMPS_DRIVER") ? "cannot load the CUDA driver OPENMPS_DRIVER names"
						       : "cannot load the CUDA driver (is the NVIDIA driver installed? "
							 "OPENMPS_DRIVER can name it, or the stand-in)");
		return 1;
	}
	mps_log_info("Server starting on driver %s", mps_drv.path);
	mps_srv.gpu_replies = mps_env_long("OPENMPS_GPU_REPLIES", 1, 0, 1) && mps_drv.cuStreamWriteValue32_v2 &&
			      mps_drv.cuMemHostGetDevicePointer;
	{
		char why[160], text[200];

		if (mps_devices_init(why, sizeof(why)) < 0) {
			snprintf(text, sizeof(text), "cannot initialise the CUDA devices: %s", why);
			report_failed(text);
			return 1;
		}
	}
	mps_place_init();
	/* The server is on every client's path: when the CPUs are all busy, a
	 * service thread that waits for its turn holds up every client it
	 * serves. Ahead of them by default, where the system allows it (the
	 * threads made from here on inherit it). */
	{
		int nice = (int)mps_env_long("OPENMPS_SERVER_NICE", -5, -20, 19);

		if (setpriority(PRIO_PROCESS, 0, nice) < 0)
			mps_log_info("running at the default priority (nice %d not allowed: %s)", nice, strerror(errno));
	}
	if (mps_sched_start() < 0) {
		report_failed("cannot start the service threads");
		return 1;
	}

	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	sfd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK);
	epfd = epoll_create1(EPOLL_CLOEXEC);
	if (epfd < 0 || sfd < 0) {
		report_failed("cannot set up the event loop");
		return 1;
	}
	ev.events = EPOLLIN;
	ev.data.ptr = &tag_channel;
	epoll_ctl(epfd, EPOLL_CTL_ADD, mps_srv.channel, &ev);
	ev.data.ptr = &tag_signal;
	epoll_ctl(epfd, EPOLL_CTL_ADD, sfd, &ev);
	ev.data.ptr = &tag_fault;
	if (mps_fault_init() < 0 || epoll_ctl(epfd, EPOLL_CTL_ADD, mps_fault_init_fd(), &ev) < 0) {
		report_failed("cannot set up the fault watch");
		return 1;
	}

	mps_control_report_ready();
	mps_log_info("Server ready: %d device(s), spin %llu us, replies stored by the %s", mps_srv.ndev,
		     (unsigned long long)(mps_srv.spin_ns / 1000), mps_srv.gpu_replies ? "GPU" : "server");

	for (;;) {
		struct epoll_event evs[64];
		int n;

		/* Quitting, or draining (shutdown_server): done when the last
		 * client has been torn down. The count drops on a teardown thread,
		 * so look again every 100 ms rather than wait for an event. */
		if (quitting || mps_srv.draining) {
			pthread_mutex_lock(&mps_srv.lock);
			n = mps_srv.nclients;
			pthread_mutex_unlock(&mps_srv.lock);
			if (n == 0) {
				if (!quitting)
					mps_log_info("the last client has left: shutting down");
				break;
			}
		}
		n = epoll_wait(epfd, evs, 64, quitting || mps_srv.draining ? 100 : -1);
		for (int i = 0; i < n; i++) {
			void *tag = evs[i].data.ptr;

			if (tag == &tag_fault) {
				mps_fault_finish();
			} else if (tag == &tag_channel) {
				if (mps_control_handle(mps_srv.channel) < 0 && !quitting) {
					quitting = 1;
					epoll_ctl(epfd, EPOLL_CTL_DEL, mps_srv.channel, NULL);
					mps_client_kill_all();
				}
			} else if (tag == &tag_signal) {
				struct signalfd_siginfo si;

				while (read(sfd, &si, sizeof(si)) == sizeof(si))
					mps_log_info("received signal %u", si.ssi_signo);
				if (!quitting) {
					quitting = 1;
					mps_client_kill_all();
				}
			} else {
				struct mps_client *c = tag;

				mps_client_kill(c, NULL);
				mps_main_unwatch(c);
			}
		}
	}
	mps_sched_stop();
	mps_devices_release();
	mps_log_info("Server exited with status 0");
	return 0;
}
