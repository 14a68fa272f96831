// SPDX-License-Identifier: MIT
/*
 * The Kubernetes pod and container a client runs in, read from its cgroup
 * (/proc/PID/cgroup) when it connects, for get_metrics' pod_uid and
 * container_id labels. The kubelet puts each container in a cgroup under
 * its pod's, under "kubepods", named one of two ways:
 *   cgroupfs: /kubepods[/burstable|/besteffort]/pod<UID>/<container id>
 *   systemd:  /kubepods.slice[/kubepods-burstable.slice]/
 *             kubepods[-burstable]-pod<UID with '_' for '-'>.slice/
 *             <runtime>-<container id>.scope
 * where the runtime prefix is cri-containerd, crio or docker (a CRI-O
 * conmon's "crio-conmon-<id>.scope" is not a container). What comes from
 * the kernel is believed; nothing the client says is asked.
 */
#ifndef MPS_SERVER_POD_H
#define MPS_SERVER_POD_H

#include <stddef.h>
#include <sys/types.h>

#define MPS_POD_UID_LEN 37          /* 8-4-4-4-12 and its NUL */
#define MPS_CONTAINER_ID_LEN 129    /* hex digits (64 for containerd, CRI-O, docker) and its NUL */

/* From the text of a /proc/PID/cgroup file (lines "ID:CONTROLLERS:PATH"),
 * the pod's UID (lower case, with dashes) into pod and the container's id
 * (lower-case hex) into container; either is "" where the path does not
 * show it. Returns 1 when a pod was found, 0 when not. Pure:
 * tests/unit/test_pod.c. */
int mps_pod_from_cgroup(const char *text, char *pod, size_t podlen, char *container, size_t containerlen);

/* The same for a running process, from /proc/PID/cgroup (0 and no labels
 * where it cannot be read). */
int mps_pod_of_pid(pid_t pid, char *pod, size_t podlen, char *container, size_t containerlen);

#endif
