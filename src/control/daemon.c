// SPDX-License-Identifier: MIT
/*
 * The control daemon: sets up the pipe and log directories, makes sure it is
 * the only daemon on its pipe directory (a lock file, as MPS), listens on
 * the socket clients and control UIs connect to, and runs one event loop.
 *
 * A connection says what it is with its first packet: a CUDA client sends a
 * struct mps_hello, and is handed to its user's server (servers.c); anything
 * else is a control UI sending one command line per packet, answered with
 * one packet each (commands.c). Nothing here blocks: a connection that
 * never speaks costs an fd until its peer goes.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/log.h"
#include "common/paths.h"
#include "common/sock.h"
#include "control/control.h"

struct mps_daemon mps_daemon = { .lock_fd = -1, .listen_fd = -1, .epfd = -1, .server_log_fd = -1 };

/* epoll tags that are not servers or connections. */
static char tag_listen, tag_signal;

/* A connection that has not said what it is yet, or a control UI. */
struct conn {
	int tag;                    /* MPS_TAG_CONN */
	int fd;
	bool is_ui;
	struct ucred cred;
};

void mps_daemon_watch(int fd, void *tag)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP, .data.ptr = tag };

	epoll_ctl(mps_daemon.epfd, EPOLL_CTL_ADD, fd, &ev);
}

void mps_daemon_watch_out(int fd, void *tag, bool out)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP | (out ? EPOLLOUT : 0), .data.ptr = tag };

	epoll_ctl(mps_daemon.epfd, EPOLL_CTL_MOD, fd, &ev);
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

/* Directories, log files and the single-instance lock. Prints to stderr:
 * this runs before the daemon detaches. */
static int setup(void)
{
	char path[4096];
	int fd, r;

	mps_daemon.pipe_dir = mps_pipe_dir();
	mps_daemon.log_dir = mps_log_dir();
	r = mkdir_p(mps_daemon.pipe_dir, 0755);
	if (r < 0) {
		fprintf(stderr, "openmps-control: cannot create the pipe directory %s: %s\n", mps_daemon.pipe_dir,
			strerror(-r));
		return -1;
	}
	r = mkdir_p(mps_daemon.log_dir, 0755);
	if (r < 0 || mps_path_join(path, sizeof(path), mps_daemon.log_dir, "control.log") < 0 ||
	    (fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644)) < 0) {
		fprintf(stderr, "openmps-control: cannot write the log directory %s: %s "
				"(set CUDA_MPS_LOG_DIRECTORY to a writable directory)\n",
			mps_daemon.log_dir, strerror(r < 0 ? -r : errno));
		return -1;
	}
	mps_log_init("Control", fd);
	if (mps_path_join(path, sizeof(path), mps_daemon.log_dir, "server.log") < 0 ||
	    (mps_daemon.server_log_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644)) < 0) {
		fprintf(stderr, "openmps-control: cannot write %s: %s\n", path, strerror(errno));
		return -1;
	}
	if (mps_path_join(mps_daemon.lock_path, sizeof(mps_daemon.lock_path), mps_daemon.pipe_dir,
			  "openmps-control.lock") < 0 ||
	    mps_path_join(mps_daemon.pid_path, sizeof(mps_daemon.pid_path), mps_daemon.pipe_dir,
			  "openmps-control.pid") < 0 ||
	    mps_path_join(mps_daemon.sock_path, sizeof(mps_daemon.sock_path), mps_daemon.pipe_dir,
			  MPS_DAEMON_SOCKET) < 0) {
		fprintf(stderr, "openmps-control: the pipe directory path is too long\n");
		return -1;
	}
	mps_daemon.lock_fd = open(mps_daemon.lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (mps_daemon.lock_fd < 0) {
		fprintf(stderr, "openmps-control: cannot open %s: %s\n", mps_daemon.lock_path, strerror(errno));
		return -1;
	}
	if (flock(mps_daemon.lock_fd, LOCK_EX | LOCK_NB) < 0) {
		fprintf(stderr, "An instance of this daemon is already running\n");
		mps_log_warn("An instance of this daemon is already running");
		return -1;
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
	unlink(mps_daemon.pid_path);
	if (mps_daemon.lock_fd >= 0) {
		unlink(mps_daemon.lock_path);
		close(mps_daemon.lock_fd);
	}
}

static void conn_close(struct conn *c)
{
	mps_daemon_unwatch(c->fd);
	close(c->fd);
	free(c);
}

static void ui_command(struct conn *c, const char *line)
{
	char *out = malloc(64 * 1024);

	if (!out)
		return;
	out[0] = 0;
	mps_log_info("Cmd:%s", line);
	mps_command(line, c->cred.uid, out, 64 * 1024);
	mps_sock_send(c->fd, out, strlen(out), -1);
	free(out);
}

/* The first or a later packet on a connection. */
static void conn_readable(struct conn *c)
{
	char buf[MPS_CMD_MAX + sizeof(struct mps_hello)];
	struct mps_hello h;
	ssize_t n;
	int sfd;

	n = mps_sock_recv(c->fd, buf, sizeof(buf) - 1, NULL);
	if (n == -EAGAIN || n == -EINTR)
		return;
	if (n == -EMSGSIZE) {
		const char *err = "Error: command too long\n";

		mps_sock_send(c->fd, err, strlen(err), -1);
		return;
	}
	if (n <= 0) {
		conn_close(c);
		return;
	}
	if (!c->is_ui && (size_t)n == sizeof(h) && ((struct mps_hello *)buf)->magic == MPS_HELLO_MAGIC) {
		/* A CUDA client: its connection goes to its user's server. */
		memcpy(&h, buf, sizeof(h));
		h.comm[sizeof(h.comm) - 1] = 0;
		sfd = c->fd;
		mps_daemon_unwatch(sfd);
		mps_server_route_client(sfd, &c->cred, &h);
		free(c);
		return;
	}
	c->is_ui = true;
	buf[n] = 0;
	buf[strcspn(buf, "\n")] = 0;
	ui_command(c, buf);
}

int mps_daemon_run(bool foreground)
{
	struct epoll_event ev;
	sigset_t sigs;
	int sfd;

	if (setup() < 0)
		return 1;
	mps_daemon.foreground = foreground;
	mps_daemon.listen_fd = mps_sock_listen(mps_daemon.sock_path, 0666);
	if (mps_daemon.listen_fd < 0) {
		fprintf(stderr, "openmps-control: cannot listen on %s: %s\n", mps_daemon.sock_path,
			strerror(-mps_daemon.listen_fd));
		cleanup();
		return 1;
	}
	if (!foreground) {
		pid_t pid = fork();

		if (pid < 0) {
			perror("openmps-control: fork");
			cleanup();
			return 1;
		}
		if (pid > 0)
			_exit(0);   /* the parent returns to the shell; the lock stays with the child */
		setsid();
		if (chdir("/") < 0) {
			/* Not fatal: we only need it not to pin a mount. */
		}
		int devnull = open("/dev/null", O_RDWR);

		if (devnull >= 0) {
			dup2(devnull, 0);
			dup2(devnull, 1);
			dup2(devnull, 2);
			if (devnull > 2)
				close(devnull);
		}
	}
	write_pid();
	mps_log_info("Starting control daemon %s (pipe directory %s)", foreground ? "in the foreground" : "",
		     mps_daemon.pipe_dir);

	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGCHLD);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigprocmask(SIG_BLOCK, &sigs, NULL);
	sfd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK);
	mps_daemon.epfd = epoll_create1(EPOLL_CLOEXEC);
	if (sfd < 0 || mps_daemon.epfd < 0) {
		mps_log_error("cannot set up the event loop: %s", strerror(errno));
		cleanup();
		return 1;
	}
	ev.events = EPOLLIN;
	ev.data.ptr = &tag_listen;
	epoll_ctl(mps_daemon.epfd, EPOLL_CTL_ADD, mps_daemon.listen_fd, &ev);
	ev.data.ptr = &tag_signal;
	epoll_ctl(mps_daemon.epfd, EPOLL_CTL_ADD, sfd, &ev);

	while (!mps_daemon.quitting || mps_servers_running()) {
		struct epoll_event evs[64];
		int n = epoll_wait(mps_daemon.epfd, evs, 64, mps_daemon.quitting ? 100 : -1);

		for (int i = 0; i < n; i++) {
			void *tag = evs[i].data.ptr;

			if (tag == &tag_listen) {
				int fd;

				while ((fd = mps_sock_accept(mps_daemon.listen_fd)) >= 0) {
					struct conn *c = calloc(1, sizeof(*c));

					if (!c || mps_sock_peercred(fd, &c->cred) < 0) {
						free(c);
						close(fd);
						continue;
					}
					c->tag = MPS_TAG_CONN;
					c->fd = fd;
					mps_daemon_watch(fd, c);
				}
			} else if (tag == &tag_signal) {
				struct signalfd_siginfo si;

				while (read(sfd, &si, sizeof(si)) == sizeof(si)) {
					if (si.ssi_signo == SIGCHLD) {
						int status;
						pid_t pid;

						while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
							mps_server_reaped(pid, status);
					} else if (!mps_daemon.quitting) {
						mps_log_info("received signal %u: quitting", si.ssi_signo);
						mps_daemon.quitting = true;
						mps_servers_quit_all();
					}
				}
			} else if (*(int *)tag == MPS_TAG_SERVER) {
				mps_server_channel_event(tag, evs[i].events);
			} else {
				conn_readable(tag);
			}
		}
	}
	mps_log_info("Exit");
	cleanup();
	return 0;
}
