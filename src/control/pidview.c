// SPDX-License-Identifier: MIT
/*
 * What a caller from another PID namespace than the daemon's (a container,
 * a pod) sees of the clients: those of its own PID namespace, each under the
 * PID it has there, and no other. Every listing that names clients (ps,
 * get_client_list, get_device_client_list, vdevice list, get_metrics) asks
 * here, so one pod learns nothing of another's processes, command lines or
 * figures, and its own processes appear as it knows them (what NVML's
 * process list in the pod is built from). A caller of the daemon's own
 * namespace sees every client under its host PID, as before. A namespace
 * that cannot be read (the process left, or a daemon that is not root
 * looking at another user's process) hides the client; a caller whose own
 * namespace cannot be read sees none.
 *
 * A client is told to be in the caller's namespace by the inode of
 * /proc/PID/ns/pid; its PID there is the last entry of the NSpid line of
 * /proc/PID/status (the innermost namespace's, which is the caller's).
 * Clients in namespaces nested below the caller's are not shown.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "control/control.h"

/* The inode of process pid's PID namespace, or 0. */
static unsigned long long ns_inode(pid_t pid)
{
	char path[64], link[64], *open_br;
	ssize_t n;

	if (pid <= 0)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)pid);
	n = readlink(path, link, sizeof(link) - 1);
	if (n <= 0)
		return 0;
	link[n] = 0;
	open_br = strchr(link, '[');
	return open_br ? strtoull(open_br + 1, NULL, 10) : 0;
}

/* Process pid's PID in its innermost namespace, or 0. */
static pid_t inner_pid(pid_t pid)
{
	char path[64], line[256];
	long last = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		char *save = NULL;

		if (strncmp(line, "NSpid:", 6))
			continue;
		for (char *t = strtok_r(line + 6, " \t\n", &save); t; t = strtok_r(NULL, " \t\n", &save))
			last = strtol(t, NULL, 10);
		break;
	}
	fclose(f);
	return last > 0 && last <= 0x7fffffff ? (pid_t)last : 0;
}

void mps_pidview_init(struct mps_cmd *cmd, pid_t caller)
{
	cmd->pidns = cmd->foreign ? ns_inode(caller) : 0;
}

bool mps_pidview_sees(const struct mps_cmd *cmd, pid_t pid, pid_t *shown)
{
	pid_t p;

	if (!cmd->foreign) {
		*shown = pid;
		return true;
	}
	if (!cmd->pidns || ns_inode(pid) != cmd->pidns || !(p = inner_pid(pid)))
		return false;
	*shown = p;
	return true;
}

/* A metrics line's client, its `pid="N"` label (the one after server's;
 * a command name's quotes come escaped, so a `,pid="` inside it is not
 * one): shown as the caller sees it, or the line left out. Lines without
 * one pass unchanged. */
void mps_pidview_metrics_line(struct mps_cmd *cmd, const char *l, size_t n)
{
	const char *end = l + n, *brace = memchr(l, '{', n), *label, *quote;
	pid_t shown;

	label = brace ? memmem(brace, (size_t)(end - brace), ",pid=\"", 6) : NULL;
	quote = label ? memchr(label + 6, '"', (size_t)(end - label - 6)) : NULL;
	if (!quote || !cmd->foreign) {
		mps_out(cmd, "%.*s\n", (int)n, l);
		return;
	}
	if (!mps_pidview_sees(cmd, (pid_t)atoi(label + 6), &shown))
		return;
	mps_out(cmd, "%.*s%d%.*s\n", (int)(label + 6 - l), l, (int)shown, (int)(end - quote), quote);
}
