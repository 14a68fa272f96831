// SPDX-License-Identifier: MIT
/*
 * The listings: ps (one row per client and device it uses, with NVIDIA's
 * columns PID ID SERVER DEVICE NAMESPACE COMMAND), get_device_client_list
 * (each device and the clients that use it) and device_query (the devices
 * clients can use). Client and device facts come from the servers (CLIENT_UP,
 * CLIENT_DEVICES, DEVICE); the command line and PID namespace of a client are
 * read from /proc when the listing is made, and shown as "-" when they cannot
 * be (a client that just left, or another user's process seen by a daemon
 * that is not root). A caller of another PID namespace sees only its own
 * namespace's clients, under their PIDs there (pidview.c).
 */
#include <ctype.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "control/control.h"

#define COMMAND_MAX 256   /* of a client's command line shown by ps */

int mps_device_ordinal(const char *dev)
{
	if (isdigit((unsigned char)dev[0]))
		return atoi(dev);
	if (!mps_daemon.devices_known || strlen(dev) < 4)
		return -1;
	/* Compare the digits after the "GPU-"/"MIG-" prefix. */
	for (int i = 0; i < mps_daemon.ndev; i++)
		if (strlen(mps_daemon.dev[i].uuid) > 4 && !strcasecmp(mps_daemon.dev[i].uuid + 4, dev + 4))
			return i;
	return -1;
}

/* The first three groups of a device's UUID, as NVIDIA's ps shows it; the
 * ordinal while the daemon does not know the UUIDs. */
static void short_uuid(char *buf, size_t len, int dev)
{
	if (mps_daemon.devices_known && dev < mps_daemon.ndev && mps_daemon.dev[dev].uuid[0])
		snprintf(buf, len, "%.22s", mps_daemon.dev[dev].uuid);
	else
		snprintf(buf, len, "%d", dev);
}

static void read_cmdline(pid_t pid, const char *comm, char *buf, size_t len)
{
	char path[64];
	ssize_t n = -1;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		n = read(fd, buf, len - 1);
		close(fd);
	}
	if (n <= 0) {
		snprintf(buf, len, "%s", comm[0] ? comm : "-");
		return;
	}
	while (n > 0 && buf[n - 1] == 0)
		n--;
	for (ssize_t i = 0; i < n; i++)
		if (buf[i] == 0 || buf[i] == '\n' || buf[i] == '\t')
			buf[i] = ' ';
	buf[n] = 0;
}

/* The inode number of the client's PID namespace ("pid:[4026531836]"). */
static void read_namespace(pid_t pid, char *buf, size_t len)
{
	char path[64], link[64];
	ssize_t n;
	char *open_br, *close_br;

	snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)pid);
	n = readlink(path, link, sizeof(link) - 1);
	if (n <= 0) {
		snprintf(buf, len, "-");
		return;
	}
	link[n] = 0;
	open_br = strchr(link, '[');
	close_br = strchr(link, ']');
	if (open_br && close_br && close_br > open_br)
		snprintf(buf, len, "%.*s", (int)(close_br - open_br - 1), open_br + 1);
	else
		snprintf(buf, len, "%s", link);
}

static int by_pid(const void *a, const void *b)
{
	const struct mps_server_client *x = *(const struct mps_server_client *const *)a;
	const struct mps_server_client *y = *(const struct mps_server_client *const *)b;

	return (x->pid > y->pid) - (x->pid < y->pid);
}

/* A server's clients sorted by PID (NULL when it has none or memory ran out). */
static struct mps_server_client **sorted_clients(const struct mps_server_rec *s, size_t *count)
{
	struct mps_server_client **v;
	size_t n = 0;

	for (struct mps_server_client *c = s->clients; c; c = c->next)
		n++;
	*count = 0;
	if (!n || !(v = calloc(n, sizeof(*v))))
		return NULL;
	n = 0;
	for (struct mps_server_client *c = s->clients; c; c = c->next)
		v[n++] = c;
	qsort(v, n, sizeof(*v), by_pid);
	*count = n;
	return v;
}

#define PS_ROW "%-8s %-4s %-8s %-22s %-12s %s\n"
#define PS_ROW_V "%-8s %-4s %-8s %-22s %10s %10s %5s %5s %4s %9s %-12s %-24s %s\n"

/* A client's figure from the servers' metrics text (the family's samples:
 * server, pid, ..., the device label where dev >= 0, then the value), as
 * text in fmt after dividing by scale; "-" when there is none. The device
 * label is the last one, after the escaped command name, so its last
 * occurrence is the real one. */
static void metric_text(const char *metrics, const char *family, pid_t server, pid_t pid, int dev,
			const char *fmt, double scale, char *out, size_t size)
{
	char head[128];
	size_t hl;

	snprintf(out, size, "-");
	hl = (size_t)snprintf(head, sizeof(head), "%s{server=\"%d\",pid=\"%d\",", family, (int)server, (int)pid);
	for (const char *l = metrics; l && *l;) {
		const char *e = strchr(l, '\n'), *close, *d = NULL;
		size_t n = e ? (size_t)(e - l) : strlen(l);

		if (n > hl && !strncmp(l, head, hl) && (close = memchr(l, '}', n)) && close[1] == ' ') {
			for (const char *p = l; dev >= 0 && (p = strstr(p, ",device=\"")) && p < close; p++)
				d = p;
			if (dev < 0 || (d && atoi(d + 9) == dev)) {
				snprintf(out, size, fmt, strtod(close + 2, NULL) / scale);
				return;
			}
		}
		l += n + (e != NULL);
	}
}

void mps_domain_label(const char *key, char *out, size_t size)
{
	size_t n = 0;

	if (!*key || *key == '@')
		n = (size_t)snprintf(out, size, "shared");
	if (n >= size)
		n = size - 1;
	for (; *key && n + 1 < size; key++)
		out[n++] = isalnum((unsigned char)*key) || strchr("_.:@[]+=-", *key) ? *key : '_';
	out[n] = 0;
}

void mps_list_ps(struct mps_cmd *cmd, struct mps_server_rec *only, const char *metrics)
{
	char pid[16], id[16], srv[16], dev[64], ns[64], command[COMMAND_MAX], mem[32], peak[32], sms[32], pct[32],
		prio[32], gpu[32], dom[MPS_DOMAIN_KEY + 8];

	if (metrics)
		mps_out(cmd, PS_ROW_V, "PID", "ID", "SERVER", "DEVICE", "MEM_MIB", "PEAK_MIB", "SMS", "PCT", "PRIO",
			"GPU_S", "NAMESPACE", "DOMAIN", "COMMAND");
	else
		mps_out(cmd, PS_ROW, "PID", "ID", "SERVER", "DEVICE", "NAMESPACE", "COMMAND");
	for (struct mps_server_rec *s = mps_daemon.servers; s; s = s->next) {
		struct mps_server_client **v;
		size_t n;

		if (only && s != only)
			continue;
		v = sorted_clients(s, &n);
		for (size_t i = 0; i < n; i++) {
			struct mps_server_client *c = v[i];
			bool any = false;
			pid_t shown;

			if (!mps_pidview_sees(cmd, c->pid, &shown))
				continue;   /* another pod's */
			snprintf(pid, sizeof(pid), "%d", (int)shown);
			snprintf(id, sizeof(id), "%u", c->id);
			snprintf(srv, sizeof(srv), "%d", (int)s->pid);
			read_namespace(c->pid, ns, sizeof(ns));
			read_cmdline(c->pid, c->comm, command, sizeof(command));
			mps_domain_label(s->domain, dom, sizeof(dom));
			if (metrics) {
				metric_text(metrics, "openmps_client_active_thread_percentage", s->pid, c->pid, -1, "%.1f",
					    1.0, pct, sizeof(pct));
				metric_text(metrics, "openmps_client_priority", s->pid, c->pid, -1, "%.0f", 1.0, prio,
					    sizeof(prio));
				metric_text(metrics, "openmps_client_gpu_seconds_total", s->pid, c->pid, -1, "%.3f",
					    1.0, gpu, sizeof(gpu));
			}
			for (int d = 0; d < MPS_MAX_DEVICES; d++) {
				if (!(c->devmask & (1ull << d)))
					continue;
				short_uuid(dev, sizeof(dev), d);
				if (metrics) {
					metric_text(metrics, "openmps_client_memory_bytes", s->pid, c->pid, d, "%.1f",
						    1048576.0, mem, sizeof(mem));
					metric_text(metrics, "openmps_client_memory_peak_bytes", s->pid, c->pid, d,
						    "%.1f", 1048576.0, peak, sizeof(peak));
					metric_text(metrics, "openmps_client_sms", s->pid, c->pid, d, "%.0f", 1.0, sms,
						    sizeof(sms));
					mps_out(cmd, PS_ROW_V, pid, id, srv, dev, mem, peak, sms, pct, prio, gpu, ns,
						dom, command);
				} else {
					mps_out(cmd, PS_ROW, pid, id, srv, dev, ns, command);
				}
				any = true;
			}
			if (!any && metrics)
				mps_out(cmd, PS_ROW_V, pid, id, srv, "-", "-", "-", "-", pct, prio, gpu, ns, dom,
					command);
			else if (!any)
				mps_out(cmd, PS_ROW, pid, id, srv, "-", ns, command);
		}
		free(v);
	}
}

void mps_list_device_clients(struct mps_cmd *cmd, struct mps_server_rec *only)
{
	uint64_t seen = 0;
	int ndev;

	for (struct mps_server_rec *s = mps_daemon.servers; s; s = s->next)
		for (struct mps_server_client *c = s->clients; c; c = c->next)
			seen |= c->devmask;
	ndev = mps_daemon.devices_known ? mps_daemon.ndev : 0;
	for (int d = 0; d < MPS_MAX_DEVICES; d++)
		if (seen & (1ull << d) && d >= ndev)
			ndev = d + 1;
	for (int d = 0; d < ndev; d++) {
		const char *uuid = mps_daemon.devices_known && d < mps_daemon.ndev ? mps_daemon.dev[d].uuid : "";

		mps_out(cmd, "Device %d%s%s%s:", d, uuid[0] ? " (" : "", uuid, uuid[0] ? ")" : "");
		for (struct mps_server_rec *s = mps_daemon.servers; s; s = s->next) {
			struct mps_server_client **v;
			size_t n;

			if (only && s != only)
				continue;
			v = sorted_clients(s, &n);
			for (size_t i = 0; i < n; i++) {
				pid_t shown;

				if (v[i]->devmask & (1ull << d) && mps_pidview_sees(cmd, v[i]->pid, &shown))
					mps_out(cmd, " %d", (int)shown);
			}
			free(v);
		}
		mps_out(cmd, "\n");
	}
}

void mps_list_devices(struct mps_cmd *cmd)
{
	mps_out(cmd, "%-4s %-40s %-12s %s\n", "ID", "UUID", "MEMORY", "NAME");
	for (int d = 0; d < mps_daemon.ndev; d++) {
		char mem[32];

		snprintf(mem, sizeof(mem), "%llu MiB", (unsigned long long)(mps_daemon.dev[d].total_mem >> 20));
		mps_out(cmd, "%-4d %-40s %-12s %s\n", d, mps_daemon.dev[d].uuid, mem, mps_daemon.dev[d].name);
	}
}
