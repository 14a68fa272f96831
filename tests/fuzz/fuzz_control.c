// SPDX-License-Identifier: MIT
/*
 * libFuzzer harness for the control daemon's command language:
 * mps_command() (src/control/commands.c), with the parsers and listings it
 * uses (settings.c, listings.c), against a daemon kept in memory — fake
 * servers with fake clients, no processes and no sockets. This file provides
 * what servers.c and daemon.c provide in openmps-control, minus everything
 * that would start, signal or talk to a process.
 *
 * Input: byte 0 options, byte 1 the caller and the answer, then the text.
 *   byte 0 bit 0     the command came through the privileged socket
 *          bit 1     a multi-user daemon;  bit 2  exclusive mode
 *          bit 3     the device list is known
 *          bit 4     the text is several lines, run in turn on the same
 *                    daemon; else it is one line, as given
 *          bits 5-6  how many servers run (0..3)
 *          bit 7     the daemon is quitting
 *   byte 1 bits 0-2  the caller's uid (server k belongs to uid k)
 *          bits 3-4  how a command that waits is answered: 0, -ESRCH,
 *                    -EALREADY, or not at all (the server went away)
 * Server k has PID 4100 + k and k + 1 clients (PIDs 4200 + 10k + j; the
 * first is this process, so ps finds a real command line).
 *
 * Checked, beyond the sanitizers: every reply is a string inside its
 * buffer; an error changes no setting, server or daemon state; a command
 * that waits says for what, how long, and what finishes it; and for a
 * printable line (the daemon passes nothing else) a reply is empty or whole
 * lines, and an error is exactly one line.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "control/control.h"

#define OPT_PRIVILEGED  0x01
#define OPT_MULTIUSER   0x02
#define OPT_EXCLUSIVE   0x04
#define OPT_DEVICES     0x08
#define OPT_LINES       0x10
#define OPT_QUITTING    0x80

#define SERVERS_MAX     16   /* start_server stops adding fakes here */
#define FAKE_NOW_MS     1000000ull

struct mps_daemon mps_daemon;

static pid_t next_pid;

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void fail(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "fuzz_control: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	abort();
}

/* ---- what daemon.c and servers.c provide, in memory ----------------- */

uint64_t mps_now_ms(void)
{
	return FAKE_NOW_MS;
}

const char *mps_server_state_name(enum mps_server_state st)
{
	static const char *const names[] = { "INITIALIZING", "ACTIVE", "FAULT", "STOPPING" };

	return (unsigned int)st < 4 ? names[st] : "STOPPING";
}

struct mps_server_rec *mps_server_by_pid(pid_t pid)
{
	for (struct mps_server_rec *s = mps_daemon.servers; s; s = s->next)
		if (s->pid == pid)
			return s;
	return NULL;
}

struct mps_server_rec *mps_server_for_uid(uid_t uid)
{
	for (struct mps_server_rec *s = mps_daemon.servers; s; s = s->next) {
		if (s->state == MPS_SERVER_STOPPING || s->state == MPS_SERVER_FAULT)
			continue;
		if (mps_daemon.multiuser || s->uid == uid)
			return s;
	}
	return NULL;
}

static struct mps_server_rec *add_server(uid_t uid, enum mps_server_state state, int chan)
{
	struct mps_server_rec *s = calloc(1, sizeof(*s)), **tail;

	if (!s)
		fail("out of memory");
	s->tag = MPS_TAG_SERVER;
	s->pid = next_pid++;
	s->uid = uid;
	s->chan = chan;
	s->state = state;
	s->ready = state == MPS_SERVER_ACTIVE;
	s->pending_tail = &s->pending;
	s->settings = mps_daemon.defaults;
	for (tail = &mps_daemon.servers; *tail; tail = &(*tail)->next)
		;
	*tail = s;
	return s;
}

int mps_server_start(uid_t uid, struct mps_server_rec **out)
{
	int n = 0;

	for (struct mps_server_rec *s = mps_daemon.servers; s; s = s->next)
		n++;
	if (n >= SERVERS_MAX)
		return -EAGAIN;
	*out = add_server(uid, MPS_SERVER_INITIALIZING, 100 + n);
	mps_settings_send_all(*out);
	return 0;
}

/* Sending always works on a server whose channel is open. */
int mps_server_send(struct mps_server_rec *s, struct mps_chan *m)
{
	if (!m)
		fail("mps_server_send without a packet");
	return s->chan < 0 ? -EPIPE : 0;
}

void mps_server_stop(struct mps_server_rec *s, enum mps_stop how)
{
	if (s->stop == MPS_STOP_FORCE || (s->stop == how && how == MPS_STOP_DRAIN))
		return;
	if (s->state != MPS_SERVER_FAULT)
		s->state = MPS_SERVER_STOPPING;
	s->stop = how;
	s->stop_sent = how == MPS_STOP_FORCE;
}

void mps_servers_stop_all(enum mps_stop how)
{
	for (struct mps_server_rec *s = mps_daemon.servers; s; s = s->next)
		mps_server_stop(s, how);
}

int mps_servers_probe_devices(void)
{
	struct mps_server_rec *s;

	if (mps_daemon.devices_known)
		return 0;
	if (mps_daemon.quitting)
		return -ESHUTDOWN;
	return mps_server_start(mps_daemon.multiuser ? 0 : getuid(), &s);
}

/* The CDI spec (cdi.c) as the commands see it, writing nothing: an input
 * must not make files wherever its path points. The path rules are cdi.c's. */
int mps_cdi_path_check(const char *path, char *why, size_t len)
{
	size_t n = strlen(path);

	if (path[0] != '/' || n >= sizeof(mps_daemon.cdi_path) - 8 || n < 6 || strcmp(path + n - 5, ".json") ||
	    path[n - 6] == '/') {
		snprintf(why, len, "not an absolute path to a .json file");
		return -EINVAL;
	}
	return 0;
}

int mps_cdi_version_check(const char *version, char *why, size_t len)
{
	if (strcmp(version, MPS_CDI_VERSION) && strcmp(version, "0.5.0")) {
		snprintf(why, len, "not 0.6.0 or 0.5.0");
		return -EINVAL;
	}
	return 0;
}

int mps_cdi_write(const char *path, const char *version, char *why, size_t len)
{
	int r = mps_cdi_path_check(path, why, len);

	return r < 0 ? r : mps_cdi_version_check(version, why, len);
}

void mps_cdi_refresh(void)
{
}

/* ---- the daemon of one input ---------------------------------------- */

static void reset_daemon(unsigned int opts)
{
	while (mps_daemon.servers) {
		struct mps_server_rec *s = mps_daemon.servers;

		mps_daemon.servers = s->next;
		while (s->clients) {
			struct mps_server_client *c = s->clients;

			s->clients = c->next;
			free(c);
		}
		free(s);
	}
	memset(&mps_daemon, 0, sizeof(mps_daemon));
	mps_daemon.lock_fd = mps_daemon.listen_fd = mps_daemon.priv_fd = -1;
	mps_daemon.epfd = mps_daemon.spare_fd = mps_daemon.server_log_fd = -1;
	mps_daemon.waiting_tail = &mps_daemon.waiting;
	mps_daemon.next_req = 1;
	snprintf(mps_daemon.cdi_version, sizeof(mps_daemon.cdi_version), "%s", MPS_CDI_VERSION);
	mps_settings_init(&mps_daemon.defaults);
	mps_daemon.multiuser = opts & OPT_MULTIUSER;
	mps_daemon.exclusive = opts & OPT_EXCLUSIVE;
	mps_daemon.quitting = opts & OPT_QUITTING;
	mps_daemon.devices_known = opts & OPT_DEVICES;
	mps_daemon.ndev = 2;
	for (int d = 0; d < 2; d++) {
		snprintf(mps_daemon.dev[d].uuid, sizeof(mps_daemon.dev[d].uuid),
			 "GPU-%d1234567-89ab-cdef-0123-456789abcdef", d);
		snprintf(mps_daemon.dev[d].name, sizeof(mps_daemon.dev[d].name), "Fuzzed GPU %d", d);
		mps_daemon.dev[d].total_mem = (uint64_t)(d + 1) << 34;
		mps_daemon.dev[d].sm_groups = d ? 8 : 16;   /* layouts: sm_partition and vdevice check them */
		mps_daemon.dev[d].group_sms = d ? 2 : 8;
	}
	next_pid = 4100;
	for (int k = 0; k < (int)((opts >> 5) & 3); k++) {
		struct mps_server_rec *s = add_server((uid_t)k, (enum mps_server_state)k, k == 2 ? -1 : 100 + k);

		for (int j = k; j >= 0; j--) {
			struct mps_server_client *c = calloc(1, sizeof(*c));

			if (!c)
				fail("out of memory");
			c->pid = k == 0 && j == 0 ? getpid() : 4200 + 10 * k + j;
			c->uid = j % 2 ? 7 : (uid_t)k;
			c->id = (uint32_t)j + 1;
			c->devmask = 1ull << j | (j == 2 ? 1ull << 15 : 0);
			snprintf(c->comm, sizeof(c->comm), "client%d", j);
			c->next = s->clients;
			s->clients = c;
		}
	}
	next_pid = 4110;
}

/* ---- checks ------------------------------------------------------------ */

static bool settings_equal(const struct mps_settings *a, const struct mps_settings *b)
{
	if (a->thread_pct != b->thread_pct || a->priority != b->priority || a->nmem != b->nmem)
		return false;
	for (int i = 0; i < a->nmem; i++)
		if (strcmp(a->mem[i].dev, b->mem[i].dev) || a->mem[i].bytes != b->mem[i].bytes)
			return false;
	return true;
}

/* What a command may change; an error must leave all of it as it was. */
struct snapshot {
	bool quitting;
	uint64_t quit_deadline;
	struct mps_settings defaults;
	int nservers;
	struct {
		pid_t pid;
		enum mps_server_state state;
		enum mps_stop stop;
		struct mps_settings settings;
	} server[SERVERS_MAX];
};

static void snap(struct snapshot *t)
{
	int n = 0;

	t->quitting = mps_daemon.quitting;
	t->quit_deadline = mps_daemon.quit_deadline;
	t->defaults = mps_daemon.defaults;
	for (struct mps_server_rec *s = mps_daemon.servers; s && n < SERVERS_MAX; s = s->next, n++) {
		t->server[n].pid = s->pid;
		t->server[n].state = s->state;
		t->server[n].stop = s->stop;
		t->server[n].settings = s->settings;
	}
	t->nservers = n;
}

static void check_unchanged(const struct snapshot *t, const char *line, const char *reply)
{
	struct snapshot now;

	snap(&now);
	if (now.quitting != t->quitting || now.quit_deadline != t->quit_deadline ||
	    !settings_equal(&now.defaults, &t->defaults) || now.nservers != t->nservers)
		fail("'%s' failed (%s) but changed the daemon", line, reply);
	for (int i = 0; i < now.nservers; i++)
		if (now.server[i].pid != t->server[i].pid || now.server[i].state != t->server[i].state ||
		    now.server[i].stop != t->server[i].stop ||
		    !settings_equal(&now.server[i].settings, &t->server[i].settings))
			fail("'%s' failed (%s) but changed server %d", line, reply, (int)now.server[i].pid);
}

static bool printable(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 0x20 && s[i] < 0x7f) || s[i] == '\t'))
			return false;
	return true;
}

static void check_reply(const struct mps_cmd *cmd, const char *line, bool whole_lines)
{
	size_t n = strnlen(cmd->out, cmd->outlen);

	if (n == cmd->outlen)
		fail("the reply to '%s' overran its buffer", line);
	if (!whole_lines || n == 0)
		return;
	if (cmd->out[n - 1] != '\n')
		fail("the reply to '%s' does not end a line: '%s'", line, cmd->out);
	if (!strncmp(cmd->out, "Error", 5) && strchr(cmd->out, '\n') != cmd->out + n - 1)
		fail("the error reply to '%s' is more than one line: '%s'", line, cmd->out);
}

/* Answers a command that waits, as conn.c does when the answer comes. */
static void answer(struct mps_cmd *cmd, const char *line, unsigned int how)
{
	enum mps_wait wait = cmd->wait;
	struct mps_chan a;

	if (wait != MPS_WAIT_REPLY && wait != MPS_WAIT_DEVICES && wait != MPS_WAIT_READY && wait != MPS_WAIT_REPLIES)
		fail("'%s' waits for %d", line, (int)wait);
	if (!cmd->done || !cmd->wait_ms)
		fail("'%s' waits, but for no time or with nothing to finish it", line);
	cmd->wait = MPS_WAIT_NONE;
	if (wait == MPS_WAIT_REPLIES) {
		/* Each server answers (with nothing to add) or goes away. */
		if (!cmd->partial || cmd->nwait <= 0 || cmd->nwait > MPS_WAIT_SERVERS_MAX)
			fail("'%s' waits for %d servers' replies", line, cmd->nwait);
		while (cmd->nwait > 0) {
			pid_t p = cmd->wait_pids[--cmd->nwait];

			if (!mps_server_by_pid(p))
				fail("'%s' waits for server %d, which does not exist", line, (int)p);
			memset(&a, 0, sizeof(a));
			a.op = MPS_CHAN_REPLY;
			a.req = cmd->wait_req;
			cmd->partial(cmd, how == 3 ? NULL : &a, -1, how == 3 ? "the server went away" : NULL);
		}
		cmd->done(cmd, NULL, NULL);
		return;
	}
	if (how == 3) {
		cmd->done(cmd, NULL, "the server went away");
	} else if (wait == MPS_WAIT_REPLY) {
		if (!mps_server_by_pid(cmd->wait_server))
			fail("'%s' waits for server %d, which does not exist", line, (int)cmd->wait_server);
		memset(&a, 0, sizeof(a));
		a.op = MPS_CHAN_REPLY;
		a.req = cmd->wait_req;
		a.pid = 4200;
		a.value = how == 1 ? -ESRCH : how == 2 ? -EALREADY : 0;
		cmd->done(cmd, &a, NULL);
	} else if (wait == MPS_WAIT_READY) {
		if (!mps_server_by_pid(cmd->wait_server))
			fail("'%s' waits for server %d, which does not exist", line, (int)cmd->wait_server);
		cmd->done(cmd, NULL, NULL);
	} else {
		mps_daemon.devices_known = true;
		cmd->done(cmd, NULL, NULL);
	}
}

static void run_line(const char *line, bool whole_lines, unsigned int opts, unsigned int caller)
{
	struct mps_cmd cmd;
	struct snapshot before;

	memset(&cmd, 0, sizeof(cmd));
	cmd.uid = caller & 7;
	cmd.privileged = opts & OPT_PRIVILEGED;
	cmd.outlen = 64;   /* small: the harness grows it as the daemon does */
	cmd.out = malloc(cmd.outlen);
	if (!cmd.out)
		fail("out of memory");
	cmd.out[0] = 0;
	snap(&before);
	mps_command(line, &cmd);
	check_reply(&cmd, line, whole_lines);
	if (!strncmp(cmd.out, "Error", 5))
		check_unchanged(&before, line, cmd.out);
	if (cmd.wait != MPS_WAIT_NONE) {
		answer(&cmd, line, (caller >> 3) & 3);
		check_reply(&cmd, line, whole_lines);
	}
	free(cmd.acc);
	free(cmd.out);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	setenv("OPENMPS_LOG_LEVEL", "error", 0);
	mps_log_init("Control", 2);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	unsigned int opts = size > 0 ? data[0] : 0, caller = size > 1 ? data[1] : 0;
	size_t n = size > 2 ? size - 2 : 0;
	char *text = malloc(n + 1);

	if (!text)
		fail("out of memory");
	if (n)
		memcpy(text, data + 2, n);
	text[n] = 0;
	reset_daemon(opts);
	if (opts & OPT_LINES) {
		for (char *line = text, *end; line <= text + n; line = end + 1) {
			size_t len;

			end = memchr(line, '\n', (size_t)(text + n - line));
			if (!end)
				end = text + n;
			*end = 0;
			len = (size_t)(end - line);
			if (len > 0 && line[len - 1] == '\r')
				line[--len] = 0;
			run_line(line, len <= MPS_CMD_MAX && printable(line, len), opts, caller);
		}
	} else {
		run_line(text, n <= MPS_CMD_MAX && printable(text, n), opts, caller);
	}
	free(text);
	return 0;
}
