// SPDX-License-Identifier: MIT
/*
 * openmps-control: a drop-in for nvidia-cuda-mps-control.
 *   -d   run as a daemon
 *   -f   run in the foreground
 *   (no flag)  send the commands on standard input to the running daemon
 * The pipe and log directories come from CUDA_MPS_PIPE_DIRECTORY (default
 * /tmp/openmps) and CUDA_MPS_LOG_DIRECTORY (default /var/log/openmps).
 */
#include <stdio.h>
#include <string.h>

#include "control/control.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: openmps-control [-d | -f | -h]\n"
		"  -d   start the control daemon in the background\n"
		"  -f   start the control daemon in the foreground\n"
		"  -h   print this help\n"
		"With no option, reads control commands from standard input and sends them\n"
		"to the running daemon, e.g.  echo get_server_list | openmps-control\n"
		"Environment: CUDA_MPS_PIPE_DIRECTORY (default /tmp/openmps),\n"
		"             CUDA_MPS_LOG_DIRECTORY (default /var/log/openmps)\n");
}

int main(int argc, char **argv)
{
	if (argc == 1)
		return mps_ui_run();
	if (argc == 2 && !strcmp(argv[1], "-d"))
		return mps_daemon_run(false);
	if (argc == 2 && !strcmp(argv[1], "-f"))
		return mps_daemon_run(true);
	if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		usage(stdout);
		return 0;
	}
	fprintf(stderr, "openmps-control: invalid option '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
