// SPDX-License-Identifier: MIT
/*
 * openmps-control: a drop-in for nvidia-cuda-mps-control.
 *   -d   run as a daemon            -f   run in the foreground
 *   (no flag)  send the commands on standard input to the running daemon
 * With -d or -f:
 *   -multiuser-server   one server, running as root, serves every user
 *   --exclusive-users   one user's server at a time, as NVIDIA's daemon
 *                       (also OPENMPS_EXCLUSIVE_USERS=1)
 * docs/CONTROL.md describes the commands, files and variables.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/paths.h"
#include "common/version.h"
#include "common/wire.h"
#include "control/control.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: openmps-control [-d | -f] [-multiuser-server] [--exclusive-users]\n"
		"       openmps-control            (commands on standard input)\n"
		"       openmps-control -h | --version\n"
		"  -d                   start the control daemon in the background\n"
		"  -f                   start the control daemon in the foreground\n"
		"  -multiuser-server    one server, running as root, serves every user (needs root;\n"
		"                       also -M)\n"
		"  --exclusive-users    one user's server at a time: other users' clients wait\n"
		"                       until its clients have left (NVIDIA's behaviour)\n"
		"  -h, --help           print this help\n"
		"  --version            print the version\n"
		"With no option, reads control commands from standard input and sends them\n"
		"to the running daemon, e.g.  echo get_server_list | openmps-control\n"
		"Environment: CUDA_MPS_PIPE_DIRECTORY (default %s),\n"
		"             CUDA_MPS_LOG_DIRECTORY (default %s),\n"
		"             CUDA_MPS_ACTIVE_THREAD_PERCENTAGE, CUDA_MPS_PINNED_DEVICE_MEM_LIMIT,\n"
		"             OPENMPS_EXCLUSIVE_USERS=1, OPENMPS_SHARE_NAMESPACES=1 (clients of other\n"
		"             network namespaces may share servers), OPENMPS_SERVER (the server program),\n"
		"             OPENMPS_DRIVER (the driver library the servers use, if not in the usual\n"
		"             places; the software stand-in's on a machine without a GPU)\n"
		"Run as %s (a link made by make install MPS_NAMES=1), it takes\n"
		"NVIDIA's default directories, %s and %s.\n",
		mps_pipe_default(), mps_log_default(), MPS_NVIDIA_CONTROL, MPS_NVIDIA_PIPE_DIR, MPS_NVIDIA_LOG_DIR);
}

static int bad(const char *fmt, const char *arg)
{
	fprintf(stderr, "openmps-control: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\n");
	usage(stderr);
	return 2;
}

/* A switch in the environment: on when set to anything but "" or "0". */
static bool env_on(const char *name)
{
	const char *v = getenv(name);

	return v && *v && strcmp(v, "0");
}

/* A setting from the environment, checked, into dst: 0 (also when unset or
 * empty), or -1 after saying why it was refused. */
static int env_checked(const char *name, int (*check)(const char *, char *, size_t), char *dst, size_t len)
{
	const char *v = getenv(name);
	char why[4200];

	if (!v || !*v)
		return 0;
	if (check(v, why, sizeof(why)) < 0) {
		fprintf(stderr, "openmps-control: %s: %s\n", name, why);
		return -1;
	}
	snprintf(dst, len, "%s", v);
	return 0;
}

int main(int argc, char **argv)
{
	int mode = 0;   /* 'd', 'f' or 0 */
	bool options = false;

	{
		const char *base = strrchr(argv[0], '/');

		if (!strcmp(base ? base + 1 : argv[0], MPS_NVIDIA_CONTROL))
			mps_paths_nvidia_defaults();
	}
	if (argc == 1)
		return mps_ui_run();
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(a, "--version") || !strcmp(a, "-V")) {
			printf("openmps-control %s (wire protocol %d)\n", OPENMPS_VERSION, MPS_WIRE_VERSION);
			return 0;
		} else if (!strcmp(a, "-d") || !strcmp(a, "-f")) {
			if (mode)
				return bad(mode == a[1] ? "give %s once" : "give one of -d and -f, not both (%s)",
					   mode == a[1] ? a : "-d -f");
			mode = a[1];
		} else if (!strcmp(a, "-multiuser-server") || !strcmp(a, "--multiuser-server") || !strcmp(a, "-M")) {
			mps_daemon.multiuser = true;
			options = true;
		} else if (!strcmp(a, "--exclusive-users") || !strcmp(a, "-exclusive-users")) {
			mps_daemon.exclusive = true;
			options = true;
		} else {
			return bad("invalid option '%s'", a);
		}
	}
	if (!mode)
		return bad("%s", options ? "these options go with -d or -f" : "nothing to do");
	if (env_on("OPENMPS_EXCLUSIVE_USERS"))
		mps_daemon.exclusive = true;
	if (env_on("OPENMPS_SHARE_NAMESPACES"))
		mps_daemon.share_namespaces = true;
	if (env_checked("OPENMPS_CDI_SPEC", mps_cdi_path_check, mps_daemon.cdi_path, sizeof(mps_daemon.cdi_path)) < 0 ||
	    env_checked("OPENMPS_CDI_VERSION", mps_cdi_version_check, mps_daemon.cdi_version,
			sizeof(mps_daemon.cdi_version)) < 0)
		return 1;
	if (mps_daemon.multiuser && geteuid() != 0) {
		fprintf(stderr, "openmps-control: -multiuser-server needs the daemon to run as root "
				"(its server serves every user)\n");
		return 1;
	}
	return mps_daemon_run(mode == 'f');
}
