// SPDX-License-Identifier: MIT
/*
 * The control daemon: sets up the pipe and log directories, makes sure it is
 * the only daemon on its pipe directory (a lock file, as NVIDIA's daemon),
 * listens on its sockets, and runs one event loop over the sockets, the
 * servers' channels, the connections and the signals.
 *
 * Files in the pipe directory: openmps.sock (0666: CUDA clients and control
 * UIs), openmps-privileged.sock (0755, only when the daemon runs as root:
 * root's control UI, the only way to run root-only commands, as NVIDIA's
 * control_privileged), openmps-control.lock (held with flock while the daemon
 * runs; never removed, so two daemons can never lock different files) and
 * openmps-control.pid. The socket is not named "control": NVIDIA's client
 * runtime must never take ours for its daemon.
 *
 * Nothing here blocks: connections and channels are non-blocking, a peer
 * that never speaks or never reads costs only its buffers.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/paths.h"
#include "common/sock.h"
#include "control/control.h"

struct mps_daemon mps_daemon = {
	.lock_fd = -1,
	.listen_fd = -1,
	.priv_fd = -1,
	.epfd = -1,
	.spare_fd = -1,
	.server_log_fd = -1,
	.waiting_tail = &mps_daemon.waiting,
	.next_req = 1,
	.cdi_version = MPS_CDI_VERSION,
};

/* epoll tags that are not servers or connections. */
static int tag_listen = MPS_TAG_OTHER, tag_priv = MPS_TAG_OTHER, tag_signal = MPS_TAG_OTHER;

uint64_t mps_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void mps_daemon_watch(int fd, void *tag, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = tag };

	if (epoll_ctl(mps_daemon.epfd, EPOLL_CTL_MOD, fd, &ev) < 0 && errno == ENOENT)
		epoll_ctl(mps_daemon.epfd, EPOLL_CTL_ADD, fd, &ev);
}

void mps_daemon_unwatch(int fd)
{
	epoll_ctl(mps_daemon.epfd, EPOLL_CTL_DEL, fd, NULL);
}

static int mkdir_p(const char *path, mode_t mode)
{
	char buf[4096];

	if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
		return -ENAMETOOLONG;
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(buf, mode) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(buf, mode) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

static void find_server_exe(void)
{
	const char *env = getenv("OPENMPS_SERVER");
	char self[4096 - sizeof("/openmps-server")];
	ssize_t n;

	if (env && *env) {
		snprintf(mps_daemon.server_exe, sizeof(mps_daemon.server_exe), "%s", env);
		return;
	}
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n > 0) {
		self[n] = 0;
		char *slash = strrchr(self, '/');

		if (slash) {
			*slash = 0;
			snprintf(mps_daemon.server_exe, sizeof(mps_daemon.server_exe), "%s/openmps-server", self);
			return;
		}
	}
	snprintf(mps_daemon.server_exe, sizeof(mps_daemon.server_exe), "openmps-server");
}

static int open_log(const char *name, int *fd)
{
	char path[4096];

	if (mps_path_join(path, sizeof(path), mps_daemon.log_dir, name) < 0)
		return -ENAMETOOLONG;
	*fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	return *fd < 0 ? -errno : 0;
}

/* Directories, settings, log files and the single-instance lock. Prints to
 * stderr: this runs before the daemon detaches. */
/* Takes the daemon lock. A daemon that was just told to quit removes its pid
 * file a moment before it lets the lock go, so `quit` followed at once by a
 * new start must not be refused: while the pid file is absent the holder is
 * on its way out (or still starting), and the lock is retried for up to two
 * seconds. With the pid file there, another daemon runs: refuse at once. */
static int take_lock(void)
{
	for (int i = 0; i < 200; i++) {
		if (flock(mps_daemon.lock_fd, LOCK_EX | LOCK_NB) == 0)
			return 0;
		if (errno != EWOULDBLOCK)
			return -errno;
		if (access(mps_daemon.pid_path, F_OK) == 0)
			return -EWOULDBLOCK;
		usleep(10000);
	}
	return -EWOULDBLOCK;
}

/* Makes *path absolute (in buf), for a path that exists. */
static int absolute(const char **path, char *buf)
{
	if ((*path)[0] == '/')
		return 0;
	if (!realpath(*path, buf))
		return -errno;
	*path = buf;
	return 0;
}

static int setup(void)
{
	static char pipe_abs[PATH_MAX], log_abs[PATH_MAX];
	char why[512];
	int fd, r;

	mps_daemon.pipe_dir = mps_pipe_dir();
	mps_daemon.log_dir = mps_log_dir();
	mps_settings_init(&mps_daemon.defaults);
	if (mps_settings_from_env(&mps_daemon.defaults, why, sizeof(why)) < 0) {
		fprintf(stderr, "openmps-control: %s\n", why);
		return -EINVAL;
	}
	/* A socket's path has at most 107 bytes: refuse before making anything. */
	if (strlen(mps_daemon.pipe_dir) + 1 + strlen(MPS_PRIV_SOCKET) > 107) {
		fprintf(stderr, "openmps-control: the pipe directory %s is too long: its sockets' paths would have %zu "
				"bytes, and a socket's path has at most 107 (set CUDA_MPS_PIPE_DIRECTORY to a shorter one)\n",
			mps_daemon.pipe_dir, strlen(mps_daemon.pipe_dir) + 1 + strlen(MPS_PRIV_SOCKET));
		return -ENAMETOOLONG;
	}
	r = mkdir_p(mps_daemon.pipe_dir, 0755);
	if (r < 0) {
		fprintf(stderr, "openmps-control: cannot create the pipe directory %s: %s "
				"(set CUDA_MPS_PIPE_DIRECTORY to a writable directory)\n",
			mps_daemon.pipe_dir, strerror(-r));
		return r;
	}
	/* The daemon runs from / once detached: relative paths would move. */
	if (r == 0)
		r = absolute(&mps_daemon.pipe_dir, pipe_abs);
	if (r < 0) {
		fprintf(stderr, "openmps-control: cannot use the pipe directory %s: %s\n", mps_daemon.pipe_dir, strerror(-r));
		return r;
	}
	r = mkdir_p(mps_daemon.log_dir, 0755);
	if (r == 0)
		r = absolute(&mps_daemon.log_dir, log_abs);
	if (r == 0)
		r = open_log("control.log", &fd);
	if (r == 0)
		r = open_log("server.log", &mps_daemon.server_log_fd);
	if (r < 0) {
		fprintf(stderr, "openmps-control: cannot write the log directory %s: %s "
				"(set CUDA_MPS_LOG_DIRECTORY to a writable directory)\n",
			mps_daemon.log_dir, strerror(-r));
		return r;
	}
	mps_log_init("Control", fd);
	if (mps_path_join(mps_daemon.lock_path, sizeof(mps_daemon.lock_path), mps_daemon.pipe_dir,
			  "openmps-control.lock") < 0 ||
	    mps_path_join(mps_daemon.pid_path, sizeof(mps_daemon.pid_path), mps_daemon.pipe_dir,
			  "openmps-control.pid") < 0 ||
	    mps_path_join(mps_daemon.priv_path, sizeof(mps_daemon.priv_path), mps_daemon.pipe_dir,
			  MPS_PRIV_SOCKET) < 0 ||
	    mps_path_join(mps_daemon.sock_path, sizeof(mps_daemon.sock_path), mps_daemon.pipe_dir,
			  MPS_DAEMON_SOCKET) < 0 ||
	    strlen(mps_daemon.priv_path) >= 108) {
		fprintf(stderr, "openmps-control: the pipe directory path %s is too long\n", mps_daemon.pipe_dir);
		return -ENAMETOOLONG;
	}
	mps_daemon.lock_fd = open(mps_daemon.lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (mps_daemon.lock_fd < 0) {
		r = -errno;
		fprintf(stderr, "openmps-control: cannot open %s: %s (set CUDA_MPS_PIPE_DIRECTORY to a directory of yours)\n",
			mps_daemon.lock_path, strerror(-r));
		return r;
	}
	r = take_lock();
	if (r == -EWOULDBLOCK) {
		fprintf(stderr, "An instance of this daemon is already running\n");
		mps_log_warn("An instance of this daemon is already running");
		return r;
	}
	if (r < 0) {
		fprintf(stderr, "openmps-control: cannot lock %s: %s\n", mps_daemon.lock_path, strerror(-r));
		return r;
	}
	find_server_exe();
	return 0;
}

static void write_pid(void)
{
	FILE *f = fopen(mps_daemon.pid_path, "w");

	if (f) {
		fprintf(f, "%d\n", (int)getpid());
		fclose(f);
	}
}

static void cleanup(void)
{
	if (mps_daemon.listen_fd >= 0) {
		close(mps_daemon.listen_fd);
		unlink(mps_daemon.sock_path);
	}
	if (mps_daemon.priv_fd >= 0) {
		close(mps_daemon.priv_fd);
		unlink(mps_daemon.priv_path);
	}
	unlink(mps_daemon.pid_path);
	/* The lock file stays: removing it would let a second daemon lock a new
	 * file while a third still holds the old one. */
	if (mps_daemon.lock_fd >= 0)
		close(mps_daemon.lock_fd);
}

/* A crash: what a new daemon would trip over goes first (unlink is safe in
 * a signal handler), then the signal does what it would have. */
static void on_crash(int sig)
{
	if (mps_daemon.listen_fd >= 0)
		unlink(mps_daemon.sock_path);
	if (mps_daemon.priv_fd >= 0)
		unlink(mps_daemon.priv_path);
	unlink(mps_daemon.pid_path);
	signal(sig, SIG_DFL);
	raise(sig);
}

static void catch_crashes(void)
{
	static const int sigs[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT };
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_crash;
	sa.sa_flags = SA_RESETHAND;
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaction(sigs[i], &sa, NULL);
}

static int open_sockets(void)
{
	mps_daemon.listen_fd = mps_sock_listen(mps_daemon.sock_path, 0666);
	if (mps_daemon.listen_fd < 0) {
		fprintf(stderr, "openmps-control: cannot listen on %s: %s\n", mps_daemon.sock_path,
			strerror(-mps_daemon.listen_fd));
		return mps_daemon.listen_fd;
	}
	if (geteuid() != 0) {
		unlink(mps_daemon.priv_path);   /* a root daemon's leftover */
		return 0;
	}
	/* Root-owned and not writable by others: only root can connect. */
	mps_daemon.priv_fd = mps_sock_listen(mps_daemon.priv_path, 0755);
	if (mps_daemon.priv_fd < 0) {
		fprintf(stderr, "openmps-control: cannot listen on %s: %s\n", mps_daemon.priv_path,
			strerror(-mps_daemon.priv_fd));
		return mps_daemon.priv_fd;
	}
	return 0;
}

/* Detaches into the background. The parent returns to the shell only when
 * the daemon is ready (logs written, pid file there, signals set up) — or
 * fails if the daemon died first — so a script that runs `openmps-control -d`
 * and goes on finds it fully started. Returns the fd to signal readiness on. */
static int detach(void)
{
	int ready[2], devnull;
	pid_t pid;
	char c;

	if (pipe2(ready, O_CLOEXEC) < 0) {
		perror("openmps-control: pipe");
		cleanup();
		exit(1);
	}
	pid = fork();
	if (pid < 0) {
		perror("openmps-control: fork");
		cleanup();
		exit(1);
	}
	if (pid > 0) {
		/* The parent: the lock and the sockets stay with the child. */
		close(ready[1]);
		_exit(read(ready[0], &c, 1) == 1 && c == 'r' ? 0 : 1);
	}
	close(ready[0]);
	setsid();
	if (chdir("/") < 0) {
		/* Not fatal: we only need it not to pin a mount. */
	}
	devnull = open("/dev/null", O_RDWR);
	if (devnull >= 0) {
		dup2(devnull, 0);
		dup2(devnull, 1);
		dup2(devnull, 2);
		if (devnull > 2)
			close(devnull);
	}
	return ready[1];
}

/* Each connection and each server costs an fd: take all the system allows. */
static void raise_fd_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/* SIGHUP (logrotate's signal): the logs are opened again at their paths;
 * the servers get the new server.log. */
static void reopen_logs(void)
{
	int c = -1, s = -1;

	if (open_log("control.log", &c) < 0 || open_log("server.log", &s) < 0) {
		mps_log_error("SIGHUP: cannot reopen the logs in %s: %s", mps_daemon.log_dir, strerror(errno));
		if (c >= 0)
			close(c);
		return;
	}
	/* Onto the same fds, so nothing ever writes to a closed one. */
	dup2(c, mps_log_fd());
	dup2(s, mps_daemon.server_log_fd);
	close(c);
	close(s);
	mps_log_info("received SIGHUP: logs reopened");
	mps_servers_send_log();
}

static void on_signals(int sfd)
{
	struct signalfd_siginfo si;

	while (read(sfd, &si, sizeof(si)) == sizeof(si)) {
		if (si.ssi_signo == SIGHUP) {
			reopen_logs();
		} else if (si.ssi_signo == SIGCHLD) {
			int status;
			pid_t pid;

			while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
				mps_server_reaped(pid, status);
		} else if (!mps_daemon.quitting) {
			mps_log_info("received signal %u: quitting", si.ssi_signo);
			mps_daemon.quitting = true;
			mps_servers_stop_all(MPS_STOP_FORCE);
		}
	}
}

int mps_daemon_run(bool foreground)
{
	int sfd, ready_fd = -1;
	sigset_t sigs;

	if (setup() < 0)
		return 1;
	mps_daemon.foreground = foreground;
	if (open_sockets() < 0) {
		cleanup();
		return 1;
	}
	if (!foreground)
		ready_fd = detach();
	raise_fd_limit();
	write_pid();
	catch_crashes();
	mps_log_info("Starting control daemon using socket %s", mps_daemon.sock_path);
	mps_log_info("To connect CUDA applications to this daemon, set env CUDA_MPS_PIPE_DIRECTORY=%s",
		     mps_daemon.pipe_dir);
	if (mps_daemon.priv_fd >= 0)
		mps_log_info("Root-only commands are taken on %s", mps_daemon.priv_path);
	if (mps_daemon.multiuser)
		mps_log_info("Multi-user mode: one server, running as root, serves every user");
	else if (mps_daemon.exclusive)
		mps_log_info("Exclusive mode: one user's server at a time");

	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGCHLD);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGHUP);
	sigaddset(&sigs, SIGQUIT);
	sigaddset(&sigs, SIGUSR1);
	sigaddset(&sigs, SIGUSR2);
	sigprocmask(SIG_BLOCK, &sigs, NULL);
	sfd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK);
	mps_daemon.epfd = epoll_create1(EPOLL_CLOEXEC);
	mps_daemon.spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (sfd < 0 || mps_daemon.epfd < 0) {
		mps_log_error("cannot set up the event loop: %s", strerror(errno));
		cleanup();
		return 1;
	}
	mps_daemon_watch(mps_daemon.listen_fd, &tag_listen, EPOLLIN);
	if (mps_daemon.priv_fd >= 0)
		mps_daemon_watch(mps_daemon.priv_fd, &tag_priv, EPOLLIN);
	mps_daemon_watch(sfd, &tag_signal, EPOLLIN);
	/* OPENMPS_CDI_SPEC: the spec names the GPUs, which a server tells. */
	if (mps_daemon.cdi_path[0] && mps_servers_probe_devices() < 0)
		mps_log_error("cannot start a server to list the devices for the CDI spec %s", mps_daemon.cdi_path);
	/* Ready: the parent may go back to the shell now. */
	if (ready_fd >= 0) {
		if (write(ready_fd, "r", 1) != 1) {
			/* The parent is gone; nothing to tell. */
		}
		close(ready_fd);
	}

	while (!mps_daemon.quitting || mps_servers_running()) {
		struct epoll_event evs[64];
		int timeout = mps_conn_tick(), t = mps_servers_tick(), n;

		if (t >= 0 && (timeout < 0 || t < timeout))
			timeout = t;
		/* Quitting: look at the servers every 100 ms. */
		if (mps_daemon.quitting && (timeout < 0 || timeout > 100))
			timeout = 100;
		n = epoll_wait(mps_daemon.epfd, evs, 64, timeout);
		for (int i = 0; i < n; i++) {
			void *tag = evs[i].data.ptr;

			if (tag == &tag_listen)
				mps_conn_accept(mps_daemon.listen_fd, false);
			else if (tag == &tag_priv)
				mps_conn_accept(mps_daemon.priv_fd, true);
			else if (tag == &tag_signal)
				on_signals(sfd);
			else if (*(int *)tag == MPS_TAG_SERVER)
				mps_server_channel_event(tag, evs[i].events);
			else
				mps_conn_event(tag, evs[i].events);
		}
		/* Only now: a later event of this batch may name what went. */
		mps_conn_collect();
		mps_servers_collect();
	}
	mps_conn_close_all();
	mps_log_info("Exit");
	cleanup();
	return 0;
}
