// SPDX-License-Identifier: MIT
/*
 * `openmps-control` with no flag: reads commands from standard input, one a
 * line, sends each to the daemon and prints its reply, as
 * `echo get_server_list | nvidia-cuda-mps-control` does. Root talks to the
 * daemon through its privileged socket when there is one (root-only
 * commands are taken only there); everyone else through openmps.sock.
 *
 * Exit status: 0 when every command succeeded, 1 when one failed (its
 * "Error: ..." line is printed like any reply) or the daemon could not be
 * reached.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/paths.h"
#include "common/reply.h"
#include "common/sock.h"
#include "control/control.h"

static int connect_daemon(void)
{
	char path[4096];
	int fd;

	if (geteuid() == 0 && mps_path_join(path, sizeof(path), mps_pipe_dir(), MPS_PRIV_SOCKET) == 0) {
		fd = mps_sock_connect(path);
		if (fd >= 0)
			return fd;
	}
	if (mps_path_join(path, sizeof(path), mps_pipe_dir(), MPS_DAEMON_SOCKET) < 0) {
		fprintf(stderr, "openmps-control: the pipe directory path is too long\n");
		return -1;
	}
	fd = mps_sock_connect(path);
	if (fd < 0)
		fprintf(stderr, "Cannot find the openmps control daemon at %s (%s)\n", path, strerror(-fd));
	return fd;
}

int mps_ui_run(void)
{
	char line[MPS_CMD_MAX + 2];
	char *reply;
	int fd, status = 0;

	fd = connect_daemon();
	if (fd < 0)
		return 1;
	while (fgets(line, sizeof(line), stdin)) {
		size_t n = strcspn(line, "\n");
		ssize_t got;

		if (n > MPS_CMD_MAX) {
			printf("Error: command too long (at most %d characters)\n", MPS_CMD_MAX);
			status = 1;
			/* Skip the rest of the line. */
			while (!strchr(line, '\n') && fgets(line, sizeof(line), stdin))
				;
			continue;
		}
		line[n] = 0;
		if (n > 0 && line[n - 1] == '\r')
			line[--n] = 0;
		if (line[strspn(line, " \t")] == 0)
			continue;
		if (mps_sock_send(fd, line, n, -1) < 0) {
			fprintf(stderr, "openmps-control: lost the daemon\n");
			status = 1;
			break;
		}
		got = mps_reply_recv(fd, &reply);
		if (got < 0) {
			fprintf(stderr, "openmps-control: lost the daemon\n");
			status = 1;
			break;
		}
		if (!reply)
			break;   /* the daemon quit */
		fputs(reply, stdout);
		fflush(stdout);
		if (!strncmp(reply, "Error", 5))
			status = 1;
		free(reply);
	}
	close(fd);
	return status;
}
