// SPDX-License-Identifier: MIT
/*
 * `openmps-control` with no flag: reads commands from standard input, one a
 * line, sends each to the daemon and prints its reply, as
 * `echo get_server_list | nvidia-cuda-mps-control` does.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/paths.h"
#include "common/sock.h"
#include "control/control.h"

int mps_ui_run(void)
{
	char path[4096], line[MPS_CMD_MAX + 2];
	char *reply;
	int fd, status = 0;

	if (mps_path_join(path, sizeof(path), mps_pipe_dir(), MPS_DAEMON_SOCKET) < 0) {
		fprintf(stderr, "openmps-control: the pipe directory path is too long\n");
		return 1;
	}
	fd = mps_sock_connect(path);
	if (fd < 0) {
		fprintf(stderr, "Cannot find the openmps control daemon at %s (%s)\n", path, strerror(-fd));
		return 1;
	}
	reply = malloc(64 * 1024 + 1);
	if (!reply) {
		close(fd);
		return 1;
	}
	while (fgets(line, sizeof(line), stdin)) {
		size_t n = strcspn(line, "\n");
		ssize_t got;

		if (n > MPS_CMD_MAX) {
			fprintf(stderr, "Error: command too long (%d characters at most)\n", MPS_CMD_MAX);
			status = 1;
			/* Skip the rest of the line. */
			while (!strchr(line, '\n') && fgets(line, sizeof(line), stdin))
				;
			continue;
		}
		line[n] = 0;
		if (n == 0)
			continue;
		if (mps_sock_send(fd, line, n, -1) < 0) {
			fprintf(stderr, "openmps-control: lost the daemon\n");
			status = 1;
			break;
		}
		got = mps_sock_recv(fd, reply, 64 * 1024, NULL);
		if (got < 0) {
			fprintf(stderr, "openmps-control: lost the daemon\n");
			status = 1;
			break;
		}
		if (got == 0)
			break;   /* the daemon quit */
		reply[got] = 0;
		fputs(reply, stdout);
		if (!strncmp(reply, "Error", 5))
			status = 1;
	}
	free(reply);
	close(fd);
	return status;
}
