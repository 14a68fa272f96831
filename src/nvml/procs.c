// SPDX-License-Identifier: MIT
/*
 * NVML's running processes, for a pod: asked of the openmps control daemon
 * whose socket is in the pipe directory (CUDA_MPS_PIPE_DIRECTORY, which the
 * CDI spec and the device plugin set). get_metrics answers a caller of
 * another PID namespace with its own namespace's clients only, under the
 * PIDs they have there (src/control/pidview.c), so a pod lists its own
 * processes and learns nothing of another's. From the metrics text:
 *
 *   openmps_device_info{device="D",uuid="U",...}              a GPU's ordinal
 *   openmps_server_vdevice_sms{...,device="D",vdevice="N",uuid="U"}   a slice's
 *   openmps_client_vdevice{server="S",pid="P",...,device="D",vdevice="N"} 1
 *   openmps_client_memory_bytes{server="S",pid="P",...,device="D"} B
 *   openmps_client_gpu_seconds_total{server="S",pid="P",...} T
 *
 * A GPU lists every client with memory on it (slices' clients too, as NVML
 * lists every process on a GPU); a slice lists the clients that chose it.
 * The command name label comes before device and vdevice and its quotes
 * are escaped, so those are read at their last occurrence in the braces.
 * Each family is read in one pass and the clients joined by (server, pid)
 * through sorted keys: a listing costs time in proportion to the text,
 * not to its square, with hundreds of clients.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "common/paths.h"
#include "common/reply.h"
#include "common/sock.h"
#include "nvml/procs.h"

/* The daemon's get_metrics text (malloc'ed), or NULL. */
static char *metrics(void)
{
	struct timeval tv = { .tv_sec = 10 };
	char path[4096], *buf = NULL;
	int fd;

	if (mps_path_join(path, sizeof(path), mps_pipe_dir(), MPS_DAEMON_SOCKET) < 0)
		return NULL;
	fd = mps_sock_connect(path);
	if (fd < 0)
		return NULL;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (mps_sock_send(fd, "get_metrics", 11, -1) < 0 || mps_reply_recv(fd, &buf) <= 0) {
		free(buf);
		buf = NULL;
	}
	close(fd);
	return buf;
}

/* The value of label name in line l (up to its closing brace) into out:
 * its first occurrence (first) or its last. False if it has none. */
static bool label(const char *l, const char *close, const char *name, bool first, char *out, size_t len)
{
	char key[32];
	const char *at = NULL, *v, *q;
	size_t kl = (size_t)snprintf(key, sizeof(key), "%s=\"", name);

	for (const char *p = l; (p = strstr(p, key)) && p < close; p++) {
		if (p == l || (p[-1] != '{' && p[-1] != ','))
			continue;
		at = p;
		if (first)
			break;
	}
	if (!at)
		return false;
	v = at + kl;
	q = memchr(v, '"', (size_t)(close - v));
	if (!q || (size_t)(q - v) >= len)
		return false;
	memcpy(out, v, (size_t)(q - v));
	out[q - v] = 0;
	return true;
}

/* The next line of text that is a sample of family, its labels' closing
 * brace in *close (the line's last: a command name may hold one). */
static const char *next(const char *text, const char *family, const char **close)
{
	size_t fl = strlen(family);

	for (const char *l = text; l && *l;) {
		const char *e = strchr(l, '\n');
		size_t n = e ? (size_t)(e - l) : strlen(l);

		if (n > fl && !strncmp(l, family, fl) && l[fl] == '{' && (*close = memrchr(l, '}', n)))
			return l;
		l = e ? e + 1 : NULL;
	}
	return NULL;
}

static const char *after(const char *l)
{
	const char *e = strchr(l, '\n');

	return e ? e + 1 : l + strlen(l);
}

/* A client as the samples name it: its server's PID and its own. */
static bool client_key(const char *l, const char *close, uint64_t *key)
{
	char srv[16], pid[16];

	if (!label(l, close, "server", true, srv, sizeof(srv)) || !label(l, close, "pid", true, pid, sizeof(pid)))
		return false;
	*key = (uint64_t)strtoul(srv, NULL, 10) << 32 | (uint32_t)strtoul(pid, NULL, 10);
	return true;
}

struct keyed {
	uint64_t key;
	double value;
};

static int by_key(const void *a, const void *b)
{
	uint64_t x = ((const struct keyed *)a)->key, y = ((const struct keyed *)b)->key;

	return x < y ? -1 : x > y;
}

/* Every sample of family whose labels device and (when vdev is given)
 * vdevice are dev and vdev, or of any device when dev is NULL: the
 * client's key and the value, sorted by key (malloc'ed; *n of them), or
 * NULL when there is none or no memory. One pass over the text. */
static struct keyed *samples(const char *text, const char *family, const char *dev, const char *vdev, size_t *n)
{
	struct keyed *a = NULL;
	size_t cap = 0;
	const char *l, *close;
	char v[128];

	*n = 0;
	for (l = text; (l = next(l, family, &close)); l = after(l)) {
		uint64_t key;

		if (!client_key(l, close, &key) ||
		    (dev && (!label(l, close, "device", false, v, sizeof(v)) || strcmp(v, dev))) ||
		    (vdev && (!label(l, close, "vdevice", false, v, sizeof(v)) || strcmp(v, vdev))))
			continue;
		if (*n == cap) {
			struct keyed *b = realloc(a, (cap = cap ? 2 * cap : 64) * sizeof(*a));

			if (!b) {
				free(a);
				*n = 0;
				return NULL;
			}
			a = b;
		}
		a[*n].key = key;
		a[(*n)++].value = strtod(close + 2, NULL);
	}
	if (*n)
		qsort(a, *n, sizeof(*a), by_key);
	return a;
}

static const struct keyed *find(const struct keyed *a, size_t n, uint64_t key)
{
	struct keyed k = { .key = key };

	return n ? bsearch(&k, a, n, sizeof(*a), by_key) : NULL;
}

int mps_nvml_procs(const char *uuid, struct mps_nvml_proc *out, unsigned int max)
{
	char dev[16] = "", vdev[128] = "", v[128], d[16];
	char *text = metrics();
	struct keyed *chose = NULL, *gpu = NULL;
	size_t nchose = 0, ngpu = 0;
	const char *l, *close;
	unsigned int n = 0;

	if (!text)
		return -1;
	for (l = text; (l = next(l, "openmps_device_info", &close)); l = after(l))
		if (label(l, close, "uuid", false, v, sizeof(v)) && !strcasecmp(v, uuid) &&
		    label(l, close, "device", false, dev, sizeof(dev)))
			break;
	if (!dev[0]) {
		for (l = text; (l = next(l, "openmps_server_vdevice_sms", &close)); l = after(l))
			if (label(l, close, "uuid", false, v, sizeof(v)) && !strcasecmp(v, uuid) &&
			    label(l, close, "device", false, dev, sizeof(dev)) &&
			    label(l, close, "vdevice", false, vdev, sizeof(vdev)))
				break;
	}
	if (!dev[0]) {
		free(text);
		return 0;   /* no client has used it */
	}
	/* A slice's clients are those that chose it (their vdevice samples). */
	if (vdev[0])
		chose = samples(text, "openmps_client_vdevice", dev, vdev, &nchose);
	gpu = samples(text, "openmps_client_gpu_seconds_total", NULL, NULL, &ngpu);
	for (l = text; (l = next(l, "openmps_client_memory_bytes", &close)); l = after(l)) {
		const struct keyed *g;
		uint64_t key;

		if (!client_key(l, close, &key) || !label(l, close, "device", false, d, sizeof(d)) || strcmp(d, dev) ||
		    (vdev[0] && !find(chose, nchose, key)))
			continue;
		if (n < max) {
			out[n].pid = (uint32_t)key;
			out[n].bytes = strtoull(close + 2, NULL, 10);
			out[n].gpu_s = (g = find(gpu, ngpu, key)) ? g->value : 0;
		}
		n++;
	}
	free(chose);
	free(gpu);
	free(text);
	return (int)n;
}
