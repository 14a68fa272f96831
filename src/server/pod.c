// SPDX-License-Identifier: MIT
/*
 * See pod.h. The cgroup path is taken segment by segment: a path counts
 * only if one of its segments names "kubepods"; the pod is the segment
 * that is "pod<UID>" (cgroupfs) or ends in "-pod<UID>.slice" (systemd,
 * dashes written as '_'), and the container the segment right after it.
 * A process's cgroups differ by hierarchy under cgroup v1 (one line per
 * controller) and are one line under v2; the first line that shows a pod
 * is taken. Segments before the pod may be "..": a server in a cgroup
 * namespace of its own sees paths relative to its own cgroup.
 */
#include <ctype.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "server/pod.h"

/* A pod UID of 36 characters, '-' or (systemd) '_' between the 8-4-4-4-12
 * hex groups, into out as lower case with dashes. */
static bool pod_uid(const char *s, size_t len, char *out, size_t outlen)
{
	if (len != 36 || outlen < MPS_POD_UID_LEN)
		return false;
	for (size_t i = 0; i < 36; i++) {
		bool sep = i == 8 || i == 13 || i == 18 || i == 23;

		if (sep ? s[i] != '-' && s[i] != '_' : !isxdigit((unsigned char)s[i]))
			return false;
		out[i] = sep ? '-' : (char)tolower((unsigned char)s[i]);
	}
	out[36] = 0;
	return true;
}

/* The pod UID a segment names (cgroupfs "pod<UID>", systemd
 * "...-pod<UID>.slice"), into out. */
static bool pod_segment(const char *s, size_t len, char *out, size_t outlen)
{
	static const char slice[] = ".slice";
	const size_t sl = sizeof(slice) - 1;

	if (len == 3 + 36 && !strncmp(s, "pod", 3))
		return pod_uid(s + 3, 36, out, outlen);
	if (len >= 4 + 36 + sl && !memcmp(s + len - sl, slice, sl) && !strncmp(s + len - sl - 36 - 4, "-pod", 4))
		return pod_uid(s + len - sl - 36, 36, out, outlen);
	return false;
}

/* The container id a segment names: bare hex (cgroupfs), or
 * "<runtime>-<hex>[.scope]" for the runtimes kubelet knows; into out. */
static bool container_segment(const char *s, size_t len, char *out, size_t outlen)
{
	static const char *const prefixes[] = { "cri-containerd-", "crio-", "docker-", "containerd-" };
	static const char scope[] = ".scope";
	const size_t sl = sizeof(scope) - 1;

	if (len > sl && !memcmp(s + len - sl, scope, sl))
		len -= sl;
	for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
		size_t pl = strlen(prefixes[i]);

		if (len > pl && !strncmp(s, prefixes[i], pl)) {
			s += pl;
			len -= pl;
			break;
		}
	}
	if (len < 12 || len >= outlen)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!isxdigit((unsigned char)s[i]))
			return false;
	for (size_t i = 0; i < len; i++)
		out[i] = (char)tolower((unsigned char)s[i]);
	out[len] = 0;
	return true;
}

/* One cgroup path [p, end): 1 with the pod (and the container where shown). */
static int from_path(const char *p, const char *end, char *pod, size_t podlen, char *container, size_t clen)
{
	bool kube = false;

	while (p < end) {
		const char *seg, *next;
		size_t len;

		while (p < end && *p == '/')
			p++;
		seg = p;
		while (p < end && *p != '/')
			p++;
		len = (size_t)(p - seg);
		if (!len)
			break;
		if (len >= 8 && memmem(seg, len, "kubepods", 8))
			kube = true;
		if (!kube || !pod_segment(seg, len, pod, podlen))
			continue;
		/* The container: the segment after the pod's, if any. */
		while (p < end && *p == '/')
			p++;
		next = p;
		while (p < end && *p != '/')
			p++;
		if (p > next)
			container_segment(next, (size_t)(p - next), container, clen);
		return 1;
	}
	return 0;
}

int mps_pod_from_cgroup(const char *text, char *pod, size_t podlen, char *container, size_t containerlen)
{
	if (podlen)
		pod[0] = 0;
	if (containerlen)
		container[0] = 0;
	if (podlen < MPS_POD_UID_LEN || !containerlen)
		return 0;
	for (const char *l = text; l && *l;) {
		const char *e = strchr(l, '\n'), *end = e ? e : l + strlen(l);
		const char *c1 = memchr(l, ':', (size_t)(end - l));
		const char *c2 = c1 ? memchr(c1 + 1, ':', (size_t)(end - c1 - 1)) : NULL;

		if (c2 && from_path(c2 + 1, end, pod, podlen, container, containerlen))
			return 1;
		container[0] = 0;
		l = e ? e + 1 : NULL;
	}
	pod[0] = 0;
	return 0;
}

int mps_pod_of_pid(pid_t pid, char *pod, size_t podlen, char *container, size_t containerlen)
{
	char path[64], text[8192];
	size_t n = 0;
	ssize_t r;
	int fd;

	if (podlen)
		pod[0] = 0;
	if (containerlen)
		container[0] = 0;
	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	while (n < sizeof(text) - 1 && (r = read(fd, text + n, sizeof(text) - 1 - n)) > 0)
		n += (size_t)r;
	close(fd);
	text[n] = 0;
	return mps_pod_from_cgroup(text, pod, podlen, container, containerlen);
}
