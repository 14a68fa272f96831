// SPDX-License-Identifier: MIT
/*
 * The control language, in the words NVIDIA's daemon uses, so scripts
 * written for nvidia-cuda-mps-control keep working. Each command line gets
 * one reply (possibly empty); a malformed one gets an error line and the
 * daemon goes on.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "control/control.h"

#define ARGS_MAX 8

static void out(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void out(char *buf, size_t len, const char *fmt, ...)
{
	size_t used = strlen(buf);
	va_list ap;

	if (used >= len - 1)
		return;
	va_start(ap, fmt);
	vsnprintf(buf + used, len - used, fmt, ap);
	va_end(ap);
}

static int parse_pid(const char *s, pid_t *pid)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v <= 0 || v > 0x7fffffff)
		return -1;
	*pid = (pid_t)v;
	return 0;
}

static void cmd_quit(int argc, char **argv, char *o, size_t ol)
{
	if (argc > 1 && !(argc == 3 && !strcmp(argv[1], "-t"))) {
		out(o, ol, "Error: usage: quit [-t timeout]\n");
		return;
	}
	mps_daemon.quitting = true;
	mps_servers_quit_all();
}

static void cmd_get_server_list(int argc, char **argv, char *o, size_t ol)
{
	(void)argv;
	if (argc != 1) {
		out(o, ol, "Error: get_server_list takes no arguments\n");
		return;
	}
	for (struct mps_server_rec *s = mps_daemon.servers; s; s = s->next)
		if (s->state != MPS_SERVER_STOPPING)
			out(o, ol, "%d\n", (int)s->pid);
}

static struct mps_server_rec *server_arg(int argc, char **argv, char *o, size_t ol)
{
	struct mps_server_rec *s;
	pid_t pid;

	if (argc != 2 || parse_pid(argv[1], &pid) < 0) {
		out(o, ol, "Error: usage: %s <server PID>\n", argv[0]);
		return NULL;
	}
	s = mps_server_by_pid(pid);
	if (!s)
		out(o, ol, "Error: no server with PID %d\n", (int)pid);
	return s;
}

static void cmd_get_server_status(int argc, char **argv, char *o, size_t ol)
{
	struct mps_server_rec *s = server_arg(argc, argv, o, ol);

	if (s)
		out(o, ol, "%s\n", mps_server_state_name(s->state));
}

static void cmd_get_client_list(int argc, char **argv, char *o, size_t ol)
{
	struct mps_server_rec *s = server_arg(argc, argv, o, ol);

	if (!s)
		return;
	for (struct mps_server_client *c = s->clients; c; c = c->next)
		out(o, ol, "%d\n", (int)c->pid);
}

static const struct {
	const char *name;
	void (*fn)(int argc, char **argv, char *out, size_t outlen);
} commands[] = {
	{ "quit", cmd_quit },
	{ "get_server_list", cmd_get_server_list },
	{ "get_server_status", cmd_get_server_status },
	{ "get_client_list", cmd_get_client_list },
};

void mps_command(const char *line, uid_t uid, char *o, size_t ol)
{
	char buf[MPS_CMD_MAX + 1], *argv[ARGS_MAX + 1], *save = NULL;
	int argc = 0;

	(void)uid;
	snprintf(buf, sizeof(buf), "%s", line);
	for (char *t = strtok_r(buf, " \t\r", &save); t; t = strtok_r(NULL, " \t\r", &save)) {
		if (argc == ARGS_MAX) {
			out(o, ol, "Error: too many arguments\n");
			return;
		}
		argv[argc++] = t;
	}
	argv[argc] = NULL;
	if (argc == 0)
		return;
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		if (!strcmp(argv[0], commands[i].name)) {
			commands[i].fn(argc, argv, o, ol);
			return;
		}
	}
	out(o, ol, "Error: unknown command '%s'\n", argv[0]);
}
