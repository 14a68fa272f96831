// SPDX-License-Identifier: MIT
/*
 * The control language, in the words NVIDIA's daemon uses, so scripts
 * written for nvidia-cuda-mps-control keep working: the command names and
 * arguments, the replies' forms ("25.0", "10G", server and client PIDs one
 * a line, "0" from terminate_client), setters that print nothing where
 * NVIDIA's print nothing. A malformed command gets one "Error: ..." line and
 * changes nothing.
 *
 * Who may run what. Commands that only read are open to every user. Commands
 * that change what the daemon or a server does are for the administrator:
 * when the daemon runs as root, only root through the privileged socket (as
 * NVIDIA's control_privileged); when it runs as a user, that user and root.
 * A user may also shut down its own server and terminate its own clients.
 * From another PID namespace than the daemon's (a container), only what
 * anyone may run (admin()).
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "common/log.h"
#include "common/visible.h"
#include "control/control.h"

#define ARGS_MAX        8
#define TERMINATE_MS    30000   /* the client's GPU work may take a while to finish */
#define DEVICES_MS      60000   /* a server's start on a real GPU takes seconds */

/* Appends to the reply, its buffer growing up to MPS_REPLY_CAP; from
 * what would go past that on, the reply is cut (and that logged). */
static void vout(struct mps_cmd *cmd, const char *fmt, va_list ap)
{
	size_t room = cmd->outlen - cmd->outused, cap = cmd->outlen;
	va_list again;
	char *more;
	int n;

	if (cmd->cut)
		return;
	va_copy(again, ap);
	n = vsnprintf(cmd->out + cmd->outused, room, fmt, ap);
	if (n >= 0 && (size_t)n >= room) {
		cmd->out[cmd->outused] = 0;   /* what did not fit goes */
		while (cap - cmd->outused <= (size_t)n)
			cap *= 2;
		if (cap > MPS_REPLY_CAP || !(more = realloc(cmd->out, cap))) {
			mps_log_warn("a reply was cut short at %zu bytes", cmd->outused);
			cmd->cut = true;
			n = -1;
		} else {
			cmd->out = more;
			cmd->outlen = cap;
			n = vsnprintf(cmd->out + cmd->outused, cap - cmd->outused, fmt, again);
		}
	}
	va_end(again);
	if (n > 0)
		cmd->outused += (size_t)n;
}

void mps_out(struct mps_cmd *cmd, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vout(cmd, fmt, ap);
	va_end(ap);
}

/* An error replaces whatever the command had written. */
void mps_err(struct mps_cmd *cmd, const char *fmt, ...)
{
	va_list ap;

	cmd->out[0] = 0;
	cmd->outused = 0;
	cmd->cut = false;
	va_start(ap, fmt);
	vout(cmd, fmt, ap);
	va_end(ap);
}

/* ------------------------------------------------------------------ */
/* Arguments */

static int parse_pid(const char *s, pid_t *pid)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v <= 0 || v > 0x7fffffff)
		return -EINVAL;
	*pid = (pid_t)v;
	return 0;
}

static int parse_uint(const char *s, unsigned long max, unsigned long *out)
{
	char *end;
	unsigned long v;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

static struct mps_server_rec *server_named(struct mps_cmd *cmd, const char *arg)
{
	struct mps_server_rec *s;
	pid_t pid;

	if (parse_pid(arg, &pid) < 0) {
		mps_err(cmd, "Error: '%s' is not a server PID\n", arg);
		return NULL;
	}
	s = mps_server_by_pid(pid);
	if (!s)
		mps_err(cmd, "Error: no server with PID %d\n", (int)pid);
	return s;
}

static const char *current_line;   /* the command mps_command() runs */

/* The command again, now that the devices are known (device_arg). */
static void rerun_done(struct mps_cmd *cmd, const struct mps_chan *answer, const char *failure)
{
	char *line = cmd->acc;

	(void)answer;
	cmd->acc = NULL;
	cmd->acc_len = 0;
	if (failure || !line || !mps_daemon.devices_known)
		mps_err(cmd, "Error: cannot check the device: %s\n", failure ? failure : "the devices are not known");
	else
		mps_command(line, cmd);
	free(line);
}

/* A device argument. While the daemon does not know the devices (no server
 * has run), a server is started to learn them and the command runs again
 * once they are known (-EAGAIN: it waits), so a device that does not exist
 * is refused as it would be later. Device 0 needs no asking. */
/* Whether UUID text dev (as mps_parse_device writes it) names one of the
 * devices the daemon knows, or one of their virtual devices. */
static bool uuid_known(const char *dev)
{
	char v[64];

	if (mps_device_ordinal(dev) >= 0)
		return true;
	for (int i = 0; i < mps_daemon.nvdev; i++) {
		mps_vdevice_uuid(&mps_daemon.vdev[i], v, sizeof(v));
		if (strlen(v) > 4 && !strcasecmp(v + 4, dev + 4))
			return true;
	}
	return false;
}

static int device_arg(struct mps_cmd *cmd, const char *arg, char *dev, size_t len)
{
	if (mps_parse_device(arg, dev, len) == 0) {
		if (mps_daemon.devices_known && !isdigit((unsigned char)dev[0]) && !uuid_known(dev)) {
			mps_err(cmd, "Error: '%s' is not a device (an ordinal below %d, or a device UUID)\n", arg,
				mps_daemon.ndev);
			return -EINVAL;
		}
		/* Device 0 is there wherever a server can run at all. */
		if (mps_daemon.devices_known || !current_line || cmd->wait != MPS_WAIT_NONE || !strcmp(dev, "0"))
			return 0;
		if (mps_servers_probe_devices() < 0 || !(cmd->acc = strdup(current_line)))
			return 0;   /* cannot learn them: taken as given, as before */
		cmd->wait = MPS_WAIT_DEVICES;
		cmd->wait_ms = DEVICES_MS;
		cmd->done = rerun_done;
		return -EAGAIN;
	}
	if (mps_daemon.devices_known)
		mps_err(cmd, "Error: '%s' is not a device (an ordinal below %d, or a device UUID)\n", arg,
			mps_daemon.ndev);
	else
		mps_err(cmd, "Error: '%s' is not a device (an ordinal, or a device UUID)\n", arg);
	return -EINVAL;
}

/* As device_arg, and the daemon learns the devices first even for device 0
 * (a virtual device's UUID is made from its GPU's). */
static int device_arg_known(struct mps_cmd *cmd, const char *arg, char *dev, size_t len)
{
	if (mps_parse_device(arg, dev, len) == 0 && !mps_daemon.devices_known && current_line &&
	    cmd->wait == MPS_WAIT_NONE && mps_servers_probe_devices() == 0 && (cmd->acc = strdup(current_line))) {
		cmd->wait = MPS_WAIT_DEVICES;
		cmd->wait_ms = DEVICES_MS;
		cmd->done = rerun_done;
		return -EAGAIN;
	}
	return device_arg(cmd, arg, dev, len);
}

static int percentage_arg(struct mps_cmd *cmd, const char *arg, int *hundredths)
{
	if (mps_parse_percentage(arg, hundredths) == 0)
		return 0;
	mps_err(cmd, "Error: '%s' is not a percentage (a decimal number from 0.01 to 100)\n", arg);
	return -EINVAL;
}

/* A number of SMs, 1 to 100000. */
static int sms_arg(struct mps_cmd *cmd, const char *arg, int *sms)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(arg, &end, 10);
	if (!errno && !*end && end != arg && v >= 1 && v <= 100000) {
		*sms = (int)v;
		return 0;
	}
	mps_err(cmd, "Error: '%s' is not a number of SMs\n", arg);
	return -EINVAL;
}

static int mem_arg(struct mps_cmd *cmd, const char *arg, uint64_t *bytes)
{
	if (mps_parse_mem_value(arg, bytes) == 0)
		return 0;
	mps_err(cmd, "Error: '%s' is not a memory size (an integer followed by M or G, e.g. 512M or 10G)\n", arg);
	return -EINVAL;
}

/* ------------------------------------------------------------------ */
/* Who may run what */

/* May the caller change what the daemon or any server does? Never from
 * another PID namespace: a container's root is root here too (without a
 * user namespace) and a CDI device gives it the pipe directory, privileged
 * socket and all, so only the daemon's own namespace changes settings;
 * containers keep every command anyone may run (health checks, lists). */
static bool admin(const struct mps_cmd *cmd)
{
	if (cmd->foreign)
		return false;
	if (geteuid() == 0)
		return cmd->privileged;
	return cmd->uid == geteuid() || cmd->uid == 0;
}

static void deny(struct mps_cmd *cmd, const char *name)
{
	if (cmd->foreign)
		mps_err(cmd, "Error: %s may not be run from another PID namespace than the daemon's "
			"(a container)\n", name);
	else if (geteuid() != 0)
		mps_err(cmd, "Error: %s may only be run by the daemon's user (uid %u) or root\n", name,
			(unsigned)geteuid());
	else if (cmd->uid == 0)
		mps_err(cmd, "Error: %s is a root-only command; it must come through %s\n", name, MPS_PRIV_SOCKET);
	else
		mps_err(cmd, "Error: %s is a root-only command\n", name);
}

/* Is s a server of the caller's own (not the shared multi-user one)? Not
 * from another PID namespace, as admin(): there every pod's root is uid 0,
 * and a pod could raise its own limits. */
static bool owns(const struct mps_cmd *cmd, const struct mps_server_rec *s)
{
	return !cmd->foreign && !mps_daemon.multiuser && s->uid == cmd->uid;
}

/* ------------------------------------------------------------------ */
/* Commands */

/* The usage line of the command being run (its entry in commands[]). */
static const char *cur_usage;
#define USAGE(cmd) mps_err(cmd, "Error: usage: %s\n", cur_usage)

static void cmd_quit(struct mps_cmd *cmd, int argc, char **argv)
{
	unsigned long secs = 0;

	if (argc != 1 && !(argc == 3 && !strcmp(argv[1], "-t"))) {
		USAGE(cmd);
		return;
	}
	if (argc == 3 && parse_uint(argv[2], 7 * 24 * 3600, &secs) < 0) {
		mps_err(cmd, "Error: '%s' is not a timeout in seconds\n", argv[2]);
		return;
	}
	mps_daemon.quitting = true;
	if (argc == 3 && secs > 0) {
		mps_daemon.quit_deadline = mps_now_ms() + secs * 1000;
		mps_servers_stop_all(MPS_STOP_DRAIN);
	} else {
		mps_servers_stop_all(MPS_STOP_FORCE);
	}
}

static void cmd_get_server_list(struct mps_cmd *cmd, int argc, char **argv)
{
	if (argc != 1) {
		USAGE(cmd);
		return;
	}
	for (struct mps_server_rec *s = mps_daemon.servers; s; s = s->next)
		mps_out(cmd, "%d\n", (int)s->pid);
}

static void cmd_get_server_status(struct mps_cmd *cmd, int argc, char **argv)
{
	struct mps_server_rec *s;

	if (argc != 2) {
		USAGE(cmd);
		return;
	}
	s = server_named(cmd, argv[1]);
	if (s)
		mps_out(cmd, "%s\n", mps_server_state_name(s->state));
}

static void start_done(struct mps_cmd *cmd, const struct mps_chan *answer, const char *failure)
{
	(void)answer;
	if (failure)
		mps_err(cmd, "Error: the server did not start: %s\n", failure);
}

static void cmd_start_server(struct mps_cmd *cmd, int argc, char **argv)
{
	struct mps_server_rec *s;
	unsigned long uid;
	int r;

	if (argc != 3 || strcmp(argv[1], "-uid")) {
		USAGE(cmd);
		return;
	}
	if (parse_uint(argv[2], 0xfffffffeul, &uid) < 0) {
		mps_err(cmd, "Error: '%s' is not a user id\n", argv[2]);
		return;
	}
	if (mps_daemon.quitting) {
		mps_err(cmd, "Error: the control daemon is shutting down\n");
		return;
	}
	if (!mps_daemon.multiuser && geteuid() != 0 && uid != geteuid()) {
		mps_err(cmd, "Error: this daemon runs as user %u and can start servers only for that user\n",
			(unsigned)geteuid());
		return;
	}
	s = mps_server_for_uid((uid_t)uid);
	if (s) {
		mps_err(cmd, "Error: server %d already serves user %lu\n", (int)s->pid, uid);
		return;
	}
	if (mps_daemon.exclusive && !mps_daemon.multiuser && mps_daemon.servers) {
		mps_err(cmd, "Error: exclusive mode: server %d of user %u is still running\n",
			(int)mps_daemon.servers->pid, (unsigned)mps_daemon.servers->uid);
		return;
	}
	r = mps_server_start(mps_daemon.multiuser ? 0 : (uid_t)uid, &s);
	if (r < 0) {
		mps_err(cmd, "Error: cannot start a server for user %lu: %s\n", uid, strerror(-r));
		return;
	}
	/* Answered once it serves, or with why it could not. */
	cmd->wait = MPS_WAIT_READY;
	cmd->wait_server = s->pid;
	cmd->wait_ms = DEVICES_MS;
	cmd->done = start_done;
}

static void cmd_shutdown_server(struct mps_cmd *cmd, int argc, char **argv)
{
	struct mps_server_rec *s;
	bool force = argc == 3 && !strcmp(argv[2], "-f");

	if (argc != 2 && !force) {
		USAGE(cmd);
		return;
	}
	s = server_named(cmd, argv[1]);
	if (!s)
		return;
	if (!admin(cmd) && !owns(cmd, s)) {
		deny(cmd, "shutdown_server");
		return;
	}
	mps_server_stop(s, force ? MPS_STOP_FORCE : MPS_STOP_DRAIN);
}

static int by_pid(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;

	return (x > y) - (x < y);
}

static void cmd_get_client_list(struct mps_cmd *cmd, int argc, char **argv)
{
	struct mps_server_rec *s;
	pid_t *pids;
	size_t n = 0;

	if (argc != 2) {
		USAGE(cmd);
		return;
	}
	s = server_named(cmd, argv[1]);
	if (!s)
		return;
	for (struct mps_server_client *c = s->clients; c; c = c->next)
		n++;
	pids = calloc(n ? n : 1, sizeof(*pids));
	if (!pids) {
		mps_err(cmd, "Error: out of memory\n");
		return;
	}
	n = 0;
	for (struct mps_server_client *c = s->clients; c; c = c->next)
		if (mps_pidview_sees(cmd, c->pid, &pids[n]))
			n++;
	qsort(pids, n, sizeof(*pids), by_pid);
	for (size_t i = 0; i < n; i++)
		mps_out(cmd, "%d\n", (int)pids[i]);
	free(pids);
}

static void cmd_get_device_client_list(struct mps_cmd *cmd, int argc, char **argv)
{
	struct mps_server_rec *s = NULL;

	if (argc > 2) {
		USAGE(cmd);
		return;
	}
	if (argc == 2 && !(s = server_named(cmd, argv[1])))
		return;
	mps_list_device_clients(cmd, s);
}

static void terminate_done(struct mps_cmd *cmd, const struct mps_chan *answer, const char *failure)
{
	if (!answer)
		mps_err(cmd, "Error: terminate_client: %s\n", failure);
	else if (answer->value == 0)
		mps_out(cmd, "0\n");
	else if (answer->value == -ESRCH)
		mps_err(cmd, "Error: server %d has no client %d\n", (int)cmd->wait_server, (int)answer->pid);
	else if (answer->value == -EALREADY)
		mps_err(cmd, "Error: client %d is already being terminated\n", (int)answer->pid);
	else
		mps_err(cmd, "Error: terminate_client: %s\n", strerror(-answer->value));
}

static void cmd_terminate_client(struct mps_cmd *cmd, int argc, char **argv)
{
	struct mps_chan m = { .op = MPS_CHAN_TERMINATE };
	struct mps_server_client *c;
	struct mps_server_rec *s;
	pid_t pid;

	if (argc != 3) {
		USAGE(cmd);
		return;
	}
	s = server_named(cmd, argv[1]);
	if (!s)
		return;
	if (parse_pid(argv[2], &pid) < 0) {
		mps_err(cmd, "Error: '%s' is not a client PID\n", argv[2]);
		return;
	}
	for (c = s->clients; c && c->pid != pid; c = c->next)
		;
	if (!admin(cmd) && !owns(cmd, s) && !(c && c->uid == cmd->uid && !cmd->foreign)) {
		deny(cmd, "terminate_client");
		return;
	}
	if (s->chan < 0) {
		mps_err(cmd, "Error: server %d is not running\n", (int)s->pid);
		return;
	}
	m.pid = (int32_t)pid;
	m.req = mps_daemon.next_req;
	mps_daemon.next_req = mps_daemon.next_req >= 0x7fffffff ? 1 : mps_daemon.next_req + 1;
	if (mps_server_send(s, &m) < 0) {
		mps_err(cmd, "Error: server %d is not answering\n", (int)s->pid);
		return;
	}
	mps_log_info("Terminating client %d of server %d", (int)pid, (int)s->pid);
	cmd->wait = MPS_WAIT_REPLY;
	cmd->wait_server = s->pid;
	cmd->wait_req = m.req;
	cmd->wait_ms = TERMINATE_MS;
	cmd->done = terminate_done;
}

static void show_percentage(struct mps_cmd *cmd, int hundredths)
{
	char buf[32];

	mps_format_percentage(buf, sizeof(buf), hundredths);
	mps_out(cmd, "%s\n", buf);
}

static void cmd_set_default_atp(struct mps_cmd *cmd, int argc, char **argv)
{
	int v;

	if (argc != 2) {
		USAGE(cmd);
		return;
	}
	if (percentage_arg(cmd, argv[1], &v) < 0)
		return;
	mps_daemon.defaults.thread_pct = v;
	show_percentage(cmd, v);
}

static void cmd_get_default_atp(struct mps_cmd *cmd, int argc, char **argv)
{
	if (argc != 1) {
		USAGE(cmd);
		return;
	}
	show_percentage(cmd, mps_daemon.defaults.thread_pct);
}

/* Fault domains: where clients that name none (OPENMPS_FAULT_DOMAIN) go. */
static void cmd_set_default_domain(struct mps_cmd *cmd, int argc, char **argv)
{
	if (argc != 2) {
		USAGE(cmd);
		return;
	}
	if (strlen(argv[1]) >= sizeof(mps_daemon.default_domain)) {
		mps_err(cmd, "Error: a fault domain's name has at most %zu characters\n",
			sizeof(mps_daemon.default_domain) - 1);
		return;
	}
	snprintf(mps_daemon.default_domain, sizeof(mps_daemon.default_domain), "%s",
		 strcmp(argv[1], "shared") ? argv[1] : "");
	mps_out(cmd, "%s\n", argv[1]);
}

static void cmd_get_default_domain(struct mps_cmd *cmd, int argc, char **argv)
{
	if (argc != 1) {
		USAGE(cmd);
		return;
	}
	mps_out(cmd, "%s\n", *mps_daemon.default_domain ? mps_daemon.default_domain : "shared");
}

/* Trust scopes (routing.c): whether clients of other network namespaces
 * than the daemon's (other pods, other containers) may share a server. */
static void cmd_set_ns_sharing(struct mps_cmd *cmd, int argc, char **argv)
{
	if (argc != 2 || (strcmp(argv[1], "on") && strcmp(argv[1], "off"))) {
		USAGE(cmd);
		return;
	}
	mps_daemon.share_namespaces = !strcmp(argv[1], "on");
	mps_log_info("clients of other network namespaces %s servers with the daemon's own",
		     mps_daemon.share_namespaces ? "share" : "do not share");
	mps_out(cmd, "%s\n", argv[1]);
}

static void cmd_get_ns_sharing(struct mps_cmd *cmd, int argc, char **argv)
{
	if (argc != 1) {
		USAGE(cmd);
		return;
	}
	mps_out(cmd, "%s\n", mps_daemon.share_namespaces ? "on" : "off");
}

static void cmd_set_atp(struct mps_cmd *cmd, int argc, char **argv)
{
	struct mps_server_rec *s;
	int v;

	if (argc != 3) {
		USAGE(cmd);
		return;
	}
	if (!(s = server_named(cmd, argv[1])) || percentage_arg(cmd, argv[2], &v) < 0)
		return;
	s->settings.thread_pct = v;
	mps_settings_send_threads(s);
	show_percentage(cmd, v);
}

static void cmd_get_atp(struct mps_cmd *cmd, int argc, char **argv)
{
	struct mps_server_rec *s;

	if (argc != 2) {
		USAGE(cmd);
		return;
	}
	if ((s = server_named(cmd, argv[1])))
		show_percentage(cmd, s->settings.thread_pct);
}

static void show_mem(struct mps_cmd *cmd, uint64_t bytes)
{
	char buf[32];

	mps_format_mem_value(buf, sizeof(buf), bytes);
	mps_out(cmd, "%s\n", buf);
}

static void cmd_set_default_mem(struct mps_cmd *cmd, int argc, char **argv)
{
	char dev[64];
	uint64_t bytes;

	if (argc != 3) {
		USAGE(cmd);
		return;
	}
	if (device_arg(cmd, argv[1], dev, sizeof(dev)) < 0 || mem_arg(cmd, argv[2], &bytes) < 0)
		return;
	if (mps_settings_set_memlimit(&mps_daemon.defaults, dev, bytes) < 0)
		mps_err(cmd, "Error: too many pinned memory limits (%d at most)\n", MPS_MEMLIMITS_MAX);
}

static void cmd_get_default_mem(struct mps_cmd *cmd, int argc, char **argv)
{
	char dev[64];

	if (argc != 2) {
		USAGE(cmd);
		return;
	}
	if (device_arg(cmd, argv[1], dev, sizeof(dev)) == 0)
		show_mem(cmd, mps_settings_memlimit(&mps_daemon.defaults, dev));
}

static void cmd_set_mem(struct mps_cmd *cmd, int argc, char **argv)
{
	struct mps_server_rec *s;
	char dev[64];
	uint64_t bytes;

	if (argc != 4) {
		USAGE(cmd);
		return;
	}
	if (!(s = server_named(cmd, argv[1])) || device_arg(cmd, argv[2], dev, sizeof(dev)) < 0 ||
	    mem_arg(cmd, argv[3], &bytes) < 0)
		return;
	if (mps_settings_set_memlimit(&s->settings, dev, bytes) < 0) {
		mps_err(cmd, "Error: too many pinned memory limits (%d at most)\n", MPS_MEMLIMITS_MAX);
		return;
	}
	mps_settings_send_memlimit(s, dev, bytes);
}

static void cmd_get_mem(struct mps_cmd *cmd, int argc, char **argv)
{
	struct mps_server_rec *s;
	char dev[64];

	if (argc != 3) {
		USAGE(cmd);
		return;
	}
	if ((s = server_named(cmd, argv[1])) && device_arg(cmd, argv[2], dev, sizeof(dev)) == 0)
		show_mem(cmd, mps_settings_memlimit(&s->settings, dev));
}

/* The server holding client `arg` (a PID), or NULL with an error said. */
static struct mps_server_rec *server_of_client(struct mps_cmd *cmd, const char *arg, pid_t *pid)
{
	if (parse_pid(arg, pid) < 0) {
		mps_err(cmd, "Error: '%s' is not a client PID\n", arg);
		return NULL;
	}
	/* From another PID namespace the PID is the caller's (pidview.c). */
	for (struct mps_server_rec *s = mps_daemon.servers; s; s = s->next) {
		for (struct mps_server_client *c = s->clients; c; c = c->next) {
			pid_t shown;

			if (s->chan >= 0 && mps_pidview_sees(cmd, c->pid, &shown) && shown == *pid) {
				*pid = c->pid;
				return s;
			}
		}
	}
	mps_err(cmd, "Error: no client with PID %d\n", (int)*pid);
	return NULL;
}

/* set_client_*: a running client's setting, from its next work on. */
static bool set_client(struct mps_cmd *cmd, const char *pid_arg, int what, uint64_t value, const char *dev,
		       const char *name)
{
	struct mps_chan m = { .op = MPS_CHAN_SET_CLIENT, .value = what, .arg = value };
	struct mps_server_rec *s;
	pid_t pid;

	if (!(s = server_of_client(cmd, pid_arg, &pid)))
		return false;
	if (!admin(cmd) && !owns(cmd, s)) {
		deny(cmd, name);
		return false;
	}
	m.pid = (int32_t)pid;
	if (dev)
		snprintf(m.text, sizeof(m.text), "%s", dev);
	if (mps_server_send(s, &m) < 0) {
		mps_err(cmd, "Error: server %d is not answering\n", (int)s->pid);
		return false;
	}
	return true;
}

static void cmd_set_client_prio(struct mps_cmd *cmd, int argc, char **argv)
{
	int v;

	if (argc != 3) {
		USAGE(cmd);
		return;
	}
	if (mps_parse_priority(argv[2], &v) < 0) {
		mps_err(cmd, "Error: '%s' is not a priority (0 normal, 1 below normal)\n", argv[2]);
		return;
	}
	set_client(cmd, argv[1], MPS_SET_CLIENT_PRIORITY, (uint64_t)v, NULL, "set_client_priority");
}

static void cmd_set_client_atp(struct mps_cmd *cmd, int argc, char **argv)
{
	int v;

	if (argc != 3) {
		USAGE(cmd);
		return;
	}
	if (percentage_arg(cmd, argv[2], &v) < 0)
		return;
	if (set_client(cmd, argv[1], MPS_SET_CLIENT_THREADS, (uint64_t)v, NULL, "set_client_active_thread_percentage"))
		show_percentage(cmd, v);
}

static void cmd_set_client_mem(struct mps_cmd *cmd, int argc, char **argv)
{
	char dev[64];
	uint64_t bytes;

	if (argc != 4) {
		USAGE(cmd);
		return;
	}
	if (device_arg(cmd, argv[2], dev, sizeof(dev)) < 0 || mem_arg(cmd, argv[3], &bytes) < 0)
		return;
	set_client(cmd, argv[1], MPS_SET_CLIENT_MEMLIMIT, bytes, dev, "set_client_device_pinned_mem_limit");
}

static void cmd_set_client_part(struct mps_cmd *cmd, int argc, char **argv)
{
	if (argc != 3) {
		USAGE(cmd);
		return;
	}
	if (strcmp(argv[2], "none") && !mps_partition_name_ok(argv[2])) {
		mps_err(cmd, "Error: '%s' is not a partition name\n", argv[2]);
		return;
	}
	set_client(cmd, argv[1], MPS_SET_CLIENT_PARTITION, 0, strcmp(argv[2], "none") ? argv[2] : "",
		   "set_client_sm_partition");
}

/* sm_partition add NAME DEVICE SMS [lend] | rm NAME | list */
static void cmd_sm_partition(struct mps_cmd *cmd, int argc, char **argv)
{
	char dev[64], why[320];
	int sms, r;

	if (argc == 2 && !strcmp(argv[1], "list")) {
		for (int i = 0; i < mps_daemon.npart; i++) {
			const struct mps_partition *p = &mps_daemon.part[i];

			mps_out(cmd, "%s %s %d%s\n", p->name, p->dev, p->sms, p->lend ? " lend" : "");
		}
		return;
	}
	if (!admin(cmd)) {
		deny(cmd, "sm_partition");
		return;
	}
	if (argc == 3 && !strcmp(argv[1], "rm")) {
		if (mps_partition_remove(argv[2]) < 0)
			mps_err(cmd, "Error: no SM partition named '%s'\n", argv[2]);
		return;
	}
	if (!((argc == 5 || (argc == 6 && !strcmp(argv[5], "lend"))) && !strcmp(argv[1], "add"))) {
		USAGE(cmd);
		return;
	}
	if (!mps_partition_name_ok(argv[2])) {
		mps_err(cmd, "Error: '%s' is not a partition name (up to %d letters, digits, '-' or '_'; not 'none')\n",
			argv[2], MPS_PARTITION_NAME - 1);
		return;
	}
	if (sms_arg(cmd, argv[4], &sms) < 0 || device_arg_known(cmd, argv[3], dev, sizeof(dev)) < 0)
		return;
	if (mps_layout_check(argv[2], dev, sms, 0, why, sizeof(why)) < 0) {
		mps_err(cmd, "Error: %s\n", why);
		return;
	}
	r = mps_partition_set(argv[2], dev, sms, argc == 6);
	if (r == -EEXIST)
		mps_err(cmd, "Error: '%s' is a virtual device's name\n", argv[2]);
	else if (r == -ENOSPC)
		mps_err(cmd, "Error: there are %d SM partitions already\n", MPS_PARTITIONS_MAX);
	else if (r < 0)
		mps_err(cmd, "Error: cannot define SM partition '%s'\n", argv[2]);
	else
		mps_out(cmd, "%s\n", argv[2]);
}

static void gather_metrics(struct mps_cmd *cmd, void (*done)(struct mps_cmd *, const struct mps_chan *, const char *));

/* vdevice list: each virtual device, then the PIDs of the clients that chose
 * it (from the servers' openmps_client_vdevice samples). */
static void vdevice_list_done(struct mps_cmd *cmd, const struct mps_chan *answer, const char *failure)
{
	const char *metrics = cmd->acc ? cmd->acc : "";
	char uuid[48];

	(void)answer;
	for (int i = 0; i < mps_daemon.nvdev; i++) {
		const struct mps_vdevice *x = &mps_daemon.vdev[i];
		char mem[32], tail[64];
		size_t tl;

		mps_vdevice_uuid(x, uuid, sizeof(uuid));
		if (x->sms)
			mps_format_mem_value(mem, sizeof(mem), x->mem);
		else
			snprintf(mem, sizeof(mem), "1/%d", x->parts);
		mps_out(cmd, "%s %s %s %s%d %s", x->name, uuid, x->dev, x->sms ? "" : "1/", x->sms ? x->sms : x->parts,
			mem);
		tl = (size_t)snprintf(tail, sizeof(tail), ",vdevice=\"%s\"} 1", x->name);
		for (const char *l = metrics; *l;) {
			const char *e = strchr(l, '\n'), *pid;
			size_t n = e ? (size_t)(e - l) : strlen(l);
			pid_t shown;

			if (!strncmp(l, "openmps_client_vdevice{", 23) && n > tl && !memcmp(l + n - tl, tail, tl) &&
			    (pid = strstr(l, ",pid=\"")) && pid < l + n &&
			    mps_pidview_sees(cmd, (pid_t)atoi(pid + 6), &shown))
				mps_out(cmd, " %d", (int)shown);
			l += n + (e != NULL);
		}
		mps_out(cmd, "\n");
	}
	if (failure)
		mps_out(cmd, "(not every server answered: %s)\n", failure);
}

/* Defines v; says its name and UUID once it is. */
static int vdevice_define(struct mps_cmd *cmd, const struct mps_vdevice *v)
{
	char uuid[48];
	int r = mps_vdevice_set(v);

	if (!r) {
		mps_vdevice_uuid(v, uuid, sizeof(uuid));
		mps_out(cmd, "%s %s\n", v->name, uuid);
	}
	return r;
}

/* vdevice add NAME DEV SMS MEM | split DEV N | rm NAME | list */
static void cmd_vdevice(struct mps_cmd *cmd, int argc, char **argv)
{
	struct mps_vdevice v;
	char why[320], *end;
	long n;
	int r = 0;

	if (argc == 2 && !strcmp(argv[1], "list")) {
		gather_metrics(cmd, vdevice_list_done);   /* for each one's clients */
		return;
	}
	if (!admin(cmd)) {
		deny(cmd, "vdevice");
		return;
	}
	if (argc == 3 && !strcmp(argv[1], "rm")) {
		if (mps_vdevice_remove(argv[2]) < 0)
			mps_err(cmd, "Error: no virtual device named '%s'\n", argv[2]);
		return;
	}
	memset(&v, 0, sizeof(v));
	if (argc == 6 && !strcmp(argv[1], "add")) {
		if (!mps_partition_name_ok(argv[2])) {
			mps_err(cmd, "Error: '%s' is not a virtual device name (up to %d letters, digits, '-' or '_')\n",
				argv[2], MPS_PARTITION_NAME - 1);
			return;
		}
		if (sms_arg(cmd, argv[4], &v.sms) < 0 || mem_arg(cmd, argv[5], &v.mem) < 0 ||
		    device_arg_known(cmd, argv[3], v.dev, sizeof(v.dev)) < 0)
			return;
		snprintf(v.name, sizeof(v.name), "%s", argv[2]);
		if (mps_layout_check(v.name, v.dev, v.sms, v.mem, why, sizeof(why)) < 0) {
			mps_err(cmd, "Error: %s\n", why);
			return;
		}
		r = vdevice_define(cmd, &v);
	} else if (argc == 4 && !strcmp(argv[1], "split")) {
		n = strtol(argv[3], &end, 10);
		if (*end || end == argv[3] || n < 2 || n > MPS_VDEVICES_MAX) {
			mps_err(cmd, "Error: '%s' is not a number of slices (2 to %d)\n", argv[3], MPS_VDEVICES_MAX);
			return;
		}
		if (device_arg_known(cmd, argv[2], v.dev, sizeof(v.dev)) < 0)
			return;
		if (strspn(v.dev, "0123456789") != strlen(v.dev)) {
			mps_err(cmd, "Error: vdevice split takes a device ordinal\n");
			return;
		}
		if (mps_layout_check_split(v.dev, (int)n, why, sizeof(why)) < 0) {
			mps_err(cmd, "Error: %s\n", why);
			return;
		}
		v.parts = (int)n;
		for (long i = 0; i < n && !r; i++) {
			snprintf(v.name, sizeof(v.name), "vgpu%s-%ld", v.dev, i);
			r = vdevice_define(cmd, &v);
		}
	} else {
		USAGE(cmd);
		return;
	}
	if (r == -EEXIST)
		mps_err(cmd, "Error: '%s' is an SM partition's name\n", v.name);
	else if (r == -ENOSPC)
		mps_err(cmd, "Error: there are %d virtual devices already\n", MPS_VDEVICES_MAX);
	else if (r < 0)
		mps_err(cmd, "Error: cannot define virtual device '%s'\n", v.name);
}

/* ---- get_metrics ----------------------------------------------------- */

/* The metrics, in the order printed: every server's samples of one are
 * grouped under its HELP and TYPE lines, as the exposition format wants. */
static const struct {
	const char *name, *type, *help;
} families[] = {
	{ "openmps_client_memory_bytes", "gauge", "Device memory a client holds." },
	{ "openmps_client_memory_peak_bytes", "gauge", "The most device memory a client has held." },
	{ "openmps_client_memory_limit_bytes", "gauge", "A client's pinned device memory limit." },
	{ "openmps_client_pinned_host_bytes", "gauge", "Pinned host memory the server holds for a client." },
	{ "openmps_client_kernels_total", "counter", "Kernels a client launched." },
	{ "openmps_client_copy_bytes_total", "counter", "Bytes a client copied, by direction." },
	{ "openmps_client_calls_total", "counter", "Calls the server handled for a client." },
	{ "openmps_client_round_trips_total", "counter", "Calls of a client that waited for the server's reply." },
	{ "openmps_client_synchronizes_answered_total", "counter",
	  "Stream synchronizes a client answered itself: only uploads it had staged were outstanding." },
	{ "openmps_client_errors_total", "counter", "Calls of a client that returned an error." },
	{ "openmps_client_gpu_seconds_total", "counter",
	  "Time a client's kernels ran on the GPU, estimated from one launch in OPENMPS_GPU_TIME_SAMPLE (default 16)." },
	{ "openmps_client_priority", "gauge", "A client's priority (0 normal, 1 below normal)." },
	{ "openmps_client_active_thread_percentage", "gauge", "A client's active thread percentage." },
	{ "openmps_client_sms", "gauge", "SMs a client's kernels may use, by device (its percentage as SMs)." },
	{ "openmps_client_vdevice", "gauge", "A virtual device a client chose (1), by device and name." },
	{ "openmps_server_clients", "gauge", "Clients a server serves." },
	{ "openmps_server_calls_total", "counter", "Calls a server handled, of its clients now and gone." },
	{ "openmps_server_round_trips_total", "counter",
	  "Calls a server handled that waited for its reply, of its clients now and gone." },
	{ "openmps_server_synchronizes_answered_total", "counter",
	  "Stream synchronizes the clients answered themselves, of clients now and gone." },
	{ "openmps_server_service_cpu_seconds_total", "counter", "CPU time of a server's service threads." },
	{ "openmps_server_serving_seconds_total", "counter",
	  "Time a server's service threads spent running clients' calls (the rest of their CPU: looking for work)." },
	{ "openmps_server_launch_seconds_total", "counter",
	  "Time a server's service threads spent inside the driver's kernel launch calls." },
	{ "openmps_server_launches_total", "counter", "Kernel launch calls a server's service threads made." },
	{ "openmps_server_turns_total", "counter", "Turns in which a service thread ran one or more calls of one client." },
	{ "openmps_server_wakeups_total", "counter", "Times a sleeping service thread was woken by a client." },
	{ "openmps_server_replays_total", "counter",
	  "Graph launches that stood for a client's repeated chunk of kernel launches." },
	{ "openmps_server_replayed_kernels_total", "counter", "Kernel launches made as part of those graphs." },
	{ "openmps_server_replay_seconds_total", "counter",
	  "Time spent in those graph launches, their parameter updates included." },
	{ "openmps_server_replay_node_updates_total", "counter",
	  "Kernel nodes of those graphs given new arguments before a launch." },
	{ "openmps_server_replay_update_seconds_total", "counter", "Time spent giving those nodes their arguments." },
	{ "openmps_server_poll_seconds_total", "counter",
	  "Time a server's service threads spent looking at clients' pending completions." },
	{ "openmps_server_op_calls_total", "counter", "Calls a server's service threads ran, by operation." },
	{ "openmps_server_op_seconds_total", "counter",
	  "Time a server's service threads spent running calls, by operation (replayed graph launches included)." },
	{ "openmps_server_gpu_sleeper_looks_total", "counter",
	  "Looks a server's service threads took at the words clients sleep on for the GPU to store." },
	{ "openmps_server_gpu_sleeper_wakes_total", "counter",
	  "Client threads those looks woke (a store the GPU made into a word a client slept on)." },
	{ "openmps_server_replay_holds_ended_total", "counter",
	  "Held launches let go one by one: the hold time ran out (time) or the chunk left the kept one (other)." },
	{ "openmps_server_replay_chunks_total", "counter",
	  "Chunks of clients' runs of launches by what became of them: new (kept), seen (a kept one), too_long "
	  "(a launch too large to hold), and kept chunks dropped, built into graphs, or unbuilt, and graphs not made "
	  "because the client's memory limit would not hold them (over_limit)." },
	{ "openmps_server_placed_allocations_total", "counter",
	  "Client allocations a server placed at random addresses (OPENMPS_PLACEMENT=random)." },
	{ "openmps_server_placed_bytes", "gauge", "Device memory mapped for those allocations now (whole granules)." },
	{ "openmps_server_placement_fallbacks_total", "counter",
	  "Allocations that found no free random slot and were placed by the driver." },
	{ "openmps_server_placed_host_mappings_total", "counter",
	  "Host memory the GPU reaches (pinned allocations, clients' regions and bounce rings) mapped at random "
	  "addresses (OPENMPS_PLACEMENT=random)." },
	{ "openmps_server_host_placement_fallbacks_total", "counter",
	  "Such host mappings that found no free random place and went where the kernel put them." },
	{ "openmps_server_memory_bytes", "gauge", "Device memory a server's clients hold, by device." },
	{ "openmps_server_streams", "gauge", "Driver streams a server holds, by device." },
	{ "openmps_server_streams_peak", "gauge",
	  "Most driver streams a server held at once, by device (the driver keeps memory for that many)." },
	{ "openmps_server_green_contexts", "gauge",
	  "Green contexts a server made for SM shares, by device (kept for reuse)." },
	{ "openmps_server_sm_partition_sms", "gauge", "SMs an SM partition holds on a server's device." },
	{ "openmps_server_sm_partition_clients", "gauge", "Clients in an SM partition on a server's device." },
	{ "openmps_server_vdevice_sms", "gauge", "SMs of a virtual device (label uuid: the UUID clients select)." },
	{ "openmps_server_vdevice_memory_bytes", "gauge", "Device memory of a virtual device." },
	{ "openmps_server_vdevice_clients", "gauge", "Clients that chose a virtual device." },
};

static void metrics_partial(struct mps_cmd *cmd, const struct mps_chan *answer, int fd, const char *failure)
{
	char buf[4096];
	ssize_t n;

	(void)answer;
	(void)failure;
	while (fd >= 0 && (n = read(fd, buf, sizeof(buf))) > 0) {
		char *more = realloc(cmd->acc, cmd->acc_len + (size_t)n + 1);

		if (!more)
			break;
		cmd->acc = more;
		memcpy(cmd->acc + cmd->acc_len, buf, (size_t)n);
		cmd->acc_len += (size_t)n;
		cmd->acc[cmd->acc_len] = 0;
	}
	if (fd >= 0)
		close(fd);
}

static void metrics_done(struct mps_cmd *cmd, const struct mps_chan *answer, const char *failure)
{
	int servers = 0;

	(void)answer;
	for (struct mps_server_rec *s = mps_daemon.servers; s; s = s->next)
		servers++;
	mps_out(cmd, "# HELP openmps_servers Servers the control daemon runs.\n# TYPE openmps_servers gauge\n");
	mps_out(cmd, "openmps_servers %d\n", servers);
	mps_out(cmd, "# HELP openmps_server_failures_total Servers that reported a GPU fault, or ended while not asked "
		     "to stop (a crash, a kill), since the daemon started.\n"
		     "# TYPE openmps_server_failures_total counter\n");
	mps_out(cmd, "openmps_server_failures_total %llu\n", (unsigned long long)mps_daemon.server_failures);
	/* The devices by ordinal (the label device of the samples below). */
	if (mps_daemon.devices_known && mps_daemon.ndev > 0)
		mps_out(cmd, "# HELP openmps_device_info A device the servers use: its ordinal, UUID and name.\n"
			     "# TYPE openmps_device_info gauge\n");
	for (int d = 0; mps_daemon.devices_known && d < mps_daemon.ndev; d++) {
		char name[sizeof(mps_daemon.dev[d].name)];
		size_t i;

		for (i = 0; mps_daemon.dev[d].name[i] && i + 1 < sizeof(name); i++)
			name[i] = strchr("\"\\\n", mps_daemon.dev[d].name[i]) ? '_' : mps_daemon.dev[d].name[i];
		name[i] = 0;
		mps_out(cmd, "openmps_device_info{device=\"%d\",uuid=\"%s\",name=\"%s\"} 1\n", d,
			mps_daemon.dev[d].uuid, name);
	}
	if (mps_daemon.devices_known && mps_daemon.ndev > 0)
		mps_out(cmd, "# HELP openmps_device_server_failures_total Failed servers (as openmps_server_failures_total) "
			     "that took the device down: its GPU fault, or a crash or kill of a server using it.\n"
			     "# TYPE openmps_device_server_failures_total counter\n");
	for (int d = 0; mps_daemon.devices_known && d < mps_daemon.ndev; d++)
		mps_out(cmd, "openmps_device_server_failures_total{device=\"%d\",uuid=\"%s\"} %llu\n", d,
			mps_daemon.dev[d].uuid, (unsigned long long)mps_daemon.dev[d].failures);
	/* Which server is whose: its user and its key (fault domain and trust
	 * scope, routing.c), so a client's samples (label server) find both. */
	if (servers)
		mps_out(cmd, "# HELP openmps_server_info A server's user and domain (its fault domain, and the "
			     "network namespace of its clients where not the daemon's).\n"
			     "# TYPE openmps_server_info gauge\n");
	for (struct mps_server_rec *s = mps_daemon.servers; s; s = s->next) {
		char dom[MPS_DOMAIN_KEY + 8];

		mps_domain_label(s->domain, dom, sizeof(dom));
		mps_out(cmd, "openmps_server_info{server=\"%d\",uid=\"%u\",domain=\"%s\"} 1\n", (int)s->pid,
			(unsigned)s->uid, dom);
	}
	for (size_t f = 0; f < sizeof(families) / sizeof(families[0]); f++) {
		size_t len = strlen(families[f].name);
		bool head = false;

		for (const char *l = cmd->acc; l && *l;) {
			const char *e = strchr(l, '\n');
			size_t n = e ? (size_t)(e - l) : strlen(l);

			if (n > len && !strncmp(l, families[f].name, len) && (l[len] == '{' || l[len] == ' ')) {
				if (!head)
					mps_out(cmd, "# HELP %s %s\n# TYPE %s %s\n", families[f].name, families[f].help,
						families[f].name, families[f].type);
				head = true;
				mps_pidview_metrics_line(cmd, l, n);
			}
			l += n + (e != NULL);
		}
	}
	if (failure)
		mps_out(cmd, "# not every server answered: %s\n", failure);
}

/* Asks every serving server for its metrics text, gathered in cmd->acc;
 * done runs once all have answered (or at once, with none to ask). */
static void gather_metrics(struct mps_cmd *cmd, void (*done)(struct mps_cmd *, const struct mps_chan *, const char *))
{
	struct mps_chan m = { .op = MPS_CHAN_METRICS };

	m.req = mps_daemon.next_req;
	mps_daemon.next_req = mps_daemon.next_req >= 0x7fffffff ? 1 : mps_daemon.next_req + 1;
	for (struct mps_server_rec *s = mps_daemon.servers; s && cmd->nwait < MPS_WAIT_SERVERS_MAX; s = s->next)
		if (s->ready && s->chan >= 0 && mps_server_send(s, &m) == 0)
			cmd->wait_pids[cmd->nwait++] = s->pid;
	if (!cmd->nwait) {
		done(cmd, NULL, NULL);
		return;
	}
	cmd->wait = MPS_WAIT_REPLIES;
	cmd->wait_req = m.req;
	cmd->wait_ms = 5000;
	cmd->partial = metrics_partial;
	cmd->done = done;
}

static void cmd_get_metrics(struct mps_cmd *cmd, int argc, char **argv)
{
	(void)argv;
	if (argc != 1) {
		USAGE(cmd);
		return;
	}
	gather_metrics(cmd, metrics_done);
}

static void ps_done(struct mps_cmd *cmd, const struct mps_chan *answer, const char *failure)
{
	struct mps_server_rec *only = cmd->wait_server ? mps_server_by_pid(cmd->wait_server) : NULL;

	(void)answer;
	if (cmd->wait_server && !only) {
		mps_err(cmd, "Error: no server with PID %d\n", (int)cmd->wait_server);
		return;
	}
	mps_list_ps(cmd, only, cmd->acc ? cmd->acc : "");
	if (failure)
		mps_out(cmd, "(not every server answered: %s)\n", failure);
}

static void cmd_ps(struct mps_cmd *cmd, int argc, char **argv)
{
	struct mps_server_rec *s = NULL;
	bool verbose = false;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-v") && !verbose) {
			verbose = true;
		} else if (!strcmp(argv[i], "-p") && i + 1 < argc && !s) {
			if (!(s = server_named(cmd, argv[++i])))
				return;
		} else {
			USAGE(cmd);
			return;
		}
	}
	if (!verbose) {
		mps_list_ps(cmd, s, NULL);
		return;
	}
	/* The memory columns come from the servers. */
	cmd->wait_server = s ? s->pid : 0;
	gather_metrics(cmd, ps_done);
}

static void cmd_set_default_prio(struct mps_cmd *cmd, int argc, char **argv)
{
	int v;

	if (argc != 2) {
		USAGE(cmd);
		return;
	}
	if (mps_parse_priority(argv[1], &v) < 0) {
		mps_err(cmd, "Error: '%s' is not a client priority (0 normal, 1 below normal)\n", argv[1]);
		return;
	}
	mps_daemon.defaults.priority = v;
}

static void cmd_get_default_prio(struct mps_cmd *cmd, int argc, char **argv)
{
	if (argc != 1) {
		USAGE(cmd);
		return;
	}
	mps_out(cmd, "%d\n", mps_daemon.defaults.priority);
}

static void devices_done(struct mps_cmd *cmd, const struct mps_chan *answer, const char *failure)
{
	(void)answer;
	if (failure)
		mps_err(cmd, "Error: cannot list the devices: %s\n", failure);
	else
		mps_list_devices(cmd);
}

static void cmd_device_query(struct mps_cmd *cmd, int argc, char **argv)
{
	int r;

	if (argc != 1) {
		USAGE(cmd);
		return;
	}
	if (mps_daemon.devices_known) {
		mps_list_devices(cmd);
		return;
	}
	/* The daemon never opens the driver: a server tells it the devices. */
	r = mps_servers_probe_devices();
	if (r < 0) {
		mps_err(cmd, "Error: cannot start a server to list the devices: %s\n", strerror(-r));
		return;
	}
	cmd->wait = MPS_WAIT_DEVICES;
	cmd->wait_ms = DEVICES_MS;
	cmd->done = devices_done;
}

/* cdi_spec [PATH|off] [VERSION]: writes the CDI spec (to PATH, else where
 * the daemon keeps one, else /var/run/cdi/openmps.json), saying VERSION
 * (else the daemon's, OPENMPS_CDI_VERSION's), and keeps both from then on;
 * off: no longer. Waits for the devices if no server has told them. */
#define CDI_DEFAULT_PATH "/var/run/cdi/openmps.json"
static void cmd_cdi_spec(struct mps_cmd *cmd, int argc, char **argv)
{
	char why[MPS_CMD_MAX + 256];
	const char *path, *version = mps_daemon.cdi_version;
	int r;

	if (argc == 2 && !strcmp(argv[1], "off")) {
		mps_daemon.cdi_path[0] = 0;
		return;
	}
	/* A version after a path, or alone: told from a path by its digit. */
	if (argc == 3 || (argc == 2 && isdigit((unsigned char)argv[1][0])))
		version = argv[--argc];
	if (argc > 2) {
		USAGE(cmd);
		return;
	}
	path = argc == 2 ? argv[1] : mps_daemon.cdi_path[0] ? mps_daemon.cdi_path : CDI_DEFAULT_PATH;
	if (mps_cdi_path_check(path, why, sizeof(why)) < 0 || mps_cdi_version_check(version, why, sizeof(why)) < 0) {
		mps_err(cmd, "Error: %s\n", why);
		return;
	}
	if (!mps_daemon.devices_known) {
		/* The spec names every GPU: a server tells the daemon them. */
		r = mps_servers_probe_devices();
		if (r < 0) {
			mps_err(cmd, "Error: cannot start a server to list the devices: %s\n", strerror(-r));
			return;
		}
		if (!(cmd->acc = strdup(current_line))) {
			mps_err(cmd, "Error: out of memory\n");
			return;
		}
		cmd->wait = MPS_WAIT_DEVICES;
		cmd->wait_ms = DEVICES_MS;
		cmd->done = rerun_done;
		return;
	}
	if (mps_cdi_write(path, version, why, sizeof(why)) < 0) {
		mps_err(cmd, "Error: %s\n", why);
		return;
	}
	if (path != mps_daemon.cdi_path)
		snprintf(mps_daemon.cdi_path, sizeof(mps_daemon.cdi_path), "%s", path);
	if (version != mps_daemon.cdi_version)
		snprintf(mps_daemon.cdi_version, sizeof(mps_daemon.cdi_version), "%s", version);
	mps_log_info("CDI spec %s written to %s; kept up to date", version, path);
	mps_out(cmd, "%s\n", path);
}

enum who { ANYONE, ADMIN, ADMIN_OR_OWNER };

/* help: every command's usage, one form a line (what `|` separates in a
 * usage goes on lines of its own); help CMD: that command's. */
static void cmd_help(struct mps_cmd *cmd, int argc, char **argv);

static const struct {
	const char *name;
	void (*fn)(struct mps_cmd *cmd, int argc, char **argv);
	enum who who;
	const char *usage;          /* its arguments, for USAGE and help */
} commands[] = {
	{ "help", cmd_help, ANYONE, "help [<command>]" },
	{ "quit", cmd_quit, ADMIN,
	  "quit [-t <timeout in seconds>]" },
	{ "get_server_list", cmd_get_server_list, ANYONE,
	  "get_server_list" },
	{ "get_server_status", cmd_get_server_status, ANYONE,
	  "get_server_status <server PID>" },
	{ "start_server", cmd_start_server, ADMIN,
	  "start_server -uid <user id>" },
	{ "shutdown_server", cmd_shutdown_server, ADMIN_OR_OWNER,
	  "shutdown_server <server PID> [-f]" },
	{ "get_client_list", cmd_get_client_list, ANYONE,
	  "get_client_list <server PID>" },
	{ "get_device_client_list", cmd_get_device_client_list, ANYONE,
	  "get_device_client_list [<server PID>]" },
	{ "ps", cmd_ps, ANYONE,
	  "ps [-v] [-p <server PID>]" },
	{ "terminate_client", cmd_terminate_client, ADMIN_OR_OWNER,
	  "terminate_client <server PID> <client PID>" },
	{ "set_default_active_thread_percentage", cmd_set_default_atp, ADMIN,
	  "set_default_active_thread_percentage <percentage>" },
	{ "get_default_active_thread_percentage", cmd_get_default_atp, ANYONE,
	  "get_default_active_thread_percentage" },
	{ "set_active_thread_percentage", cmd_set_atp, ADMIN,
	  "set_active_thread_percentage <server PID> <percentage>" },
	{ "get_active_thread_percentage", cmd_get_atp, ANYONE,
	  "get_active_thread_percentage <server PID>" },
	{ "set_default_device_pinned_mem_limit", cmd_set_default_mem, ADMIN,
	  "set_default_device_pinned_mem_limit <device> <value>" },
	{ "get_default_device_pinned_mem_limit", cmd_get_default_mem, ANYONE,
	  "get_default_device_pinned_mem_limit <device>" },
	{ "set_device_pinned_mem_limit", cmd_set_mem, ADMIN,
	  "set_device_pinned_mem_limit <server PID> <device> <value>" },
	{ "get_device_pinned_mem_limit", cmd_get_mem, ANYONE,
	  "get_device_pinned_mem_limit <server PID> <device>" },
	{ "set_default_client_priority", cmd_set_default_prio, ADMIN,
	  "set_default_client_priority <0|1>" },
	{ "get_default_client_priority", cmd_get_default_prio, ANYONE,
	  "get_default_client_priority" },
	{ "device_query", cmd_device_query, ANYONE,
	  "device_query" },
	{ "set_default_fault_domain", cmd_set_default_domain, ADMIN,
	  "set_default_fault_domain <shared|own|name>" },
	{ "get_metrics", cmd_get_metrics, ANYONE,
	  "get_metrics" },
	{ "set_client_priority", cmd_set_client_prio, ANYONE,
	  "set_client_priority <client PID> <0|1>" },
	{ "set_client_active_thread_percentage", cmd_set_client_atp, ANYONE,
	  "set_client_active_thread_percentage <client PID> <percentage>" },
	{ "set_client_device_pinned_mem_limit", cmd_set_client_mem, ANYONE,
	  "set_client_device_pinned_mem_limit <client PID> <device> <value>" },
	{ "get_default_fault_domain", cmd_get_default_domain, ANYONE,
	  "get_default_fault_domain" },
	{ "set_namespace_sharing", cmd_set_ns_sharing, ADMIN,
	  "set_namespace_sharing <on|off>" },
	{ "get_namespace_sharing", cmd_get_ns_sharing, ANYONE,
	  "get_namespace_sharing" },
	{ "sm_partition", cmd_sm_partition, ANYONE,
	  "sm_partition add <name> <device> <SMs> [lend] | sm_partition rm <name> | sm_partition list" },
	{ "set_client_sm_partition", cmd_set_client_part, ANYONE,
	  "set_client_sm_partition <client PID> <partition name|none>" },
	{ "vdevice", cmd_vdevice, ANYONE,
	  "vdevice add <name> <device> <SMs> <memory> | vdevice split <device> <count> | vdevice rm <name> | vdevice list" },
	{ "cdi_spec", cmd_cdi_spec, ADMIN,
	  "cdi_spec [<path>|off] [0.6.0|0.5.0]" },
};

void mps_command(const char *line, struct mps_cmd *cmd)
{
	char buf[MPS_CMD_MAX + 1], *argv[ARGS_MAX + 1], *save = NULL;
	int argc = 0;

	snprintf(buf, sizeof(buf), "%s", line);
	current_line = line;
	for (char *t = strtok_r(buf, " \t", &save); t; t = strtok_r(NULL, " \t", &save)) {
		if (argc == ARGS_MAX) {
			mps_err(cmd, "Error: too many arguments\n");
			return;
		}
		argv[argc++] = t;
	}
	argv[argc] = NULL;
	if (argc == 0)
		return;
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		if (strcmp(argv[0], commands[i].name))
			continue;
		if (commands[i].who == ADMIN && !admin(cmd)) {
			deny(cmd, argv[0]);
			return;
		}
		cur_usage = commands[i].usage;
		commands[i].fn(cmd, argc, argv);
		return;
	}
	mps_err(cmd, "Error: unknown command '%.64s'\n", argv[0]);
}

static void help_line(struct mps_cmd *cmd, const char *usage)
{
	for (const char *p = usage;;) {
		const char *bar = strstr(p, " | ");

		if (!bar) {
			mps_out(cmd, "%s\n", p);
			return;
		}
		mps_out(cmd, "%.*s\n", (int)(bar - p), p);
		p = bar + 3;
	}
}

static void cmd_help(struct mps_cmd *cmd, int argc, char **argv)
{
	if (argc > 2) {
		USAGE(cmd);
		return;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		if (argc == 2 && strcmp(argv[1], commands[i].name))
			continue;
		help_line(cmd, commands[i].usage);
		if (argc == 2)
			return;
	}
	if (argc == 2)
		mps_err(cmd, "Error: unknown command '%.64s'\n", argv[1]);
}
