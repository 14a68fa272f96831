// SPDX-License-Identifier: MIT
/*
 * server/pod.c: the pod UID and container id that /proc/PID/cgroup texts
 * show, in the kubelet's two cgroup layouts (cgroupfs, systemd), under
 * cgroup v1 and v2, with each runtime's prefix, and the paths that show
 * none (outside kubepods, a conmon, a pod's own cgroup, made-up look-alikes).
 */
#include <stdio.h>
#include <string.h>

#include "../check.h"
#include "server/pod.h"

#define UID "0a1b2c3d-4e5f-6789-abcd-ef0123456789"
#define UIDS "0a1b2c3d_4e5f_6789_abcd_ef0123456789"
#define CID "3f2e1d0c9b8a79685746352413021f0e3d2c1b0a99887766554433221100ffee"

static void expect(const char *text, const char *pod, const char *container)
{
	char p[MPS_POD_UID_LEN], c[MPS_CONTAINER_ID_LEN];
	int r = mps_pod_from_cgroup(text, p, sizeof(p), c, sizeof(c));

	CHECK(r == (*pod != 0) && !strcmp(p, pod) && !strcmp(c, container),
	      "%s: got %d [%s] [%s], want [%s] [%s]", text, r, p, c, pod, container);
}

int main(void)
{
	char small[8], c[MPS_CONTAINER_ID_LEN];

	/* cgroupfs, each QoS class, v2 and v1. */
	expect("0::/kubepods/burstable/pod" UID "/" CID "\n", UID, CID);
	expect("0::/kubepods/besteffort/pod" UID "/" CID "\n", UID, CID);
	expect("0::/kubepods/pod" UID "/" CID "\n", UID, CID);   /* guaranteed */
	expect("12:pids:/kubepods/burstable/pod" UID "/" CID "\n11:cpu,cpuacct:/kubepods/burstable/pod" UID "/" CID
	       "\n0::/\n", UID, CID);
	expect("3:memory:/\n2:cpu:/kubepods/burstable/pod" UID "/" CID, UID, CID);   /* no final newline */
	expect("0::/kubepods/burstable/pod" UID "/crio-" CID "\n", UID, CID);
	/* systemd, with each runtime's scope. */
	expect("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UIDS
	       ".slice/cri-containerd-" CID ".scope\n", UID, CID);
	expect("0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" UIDS ".slice/crio-" CID
	       ".scope\n", UID, CID);
	expect("0::/kubepods.slice/kubepods-pod" UIDS ".slice/docker-" CID ".scope\n", UID, CID);
	expect("1:name=systemd:/kubepods.slice/kubepods-pod" UIDS ".slice/docker-" CID ".scope\n", UID, CID);
	/* kind and other nested set-ups; a cgroup namespace's relative path. */
	expect("0::/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/"
	       "kubelet-kubepods-besteffort-pod" UIDS ".slice/cri-containerd-" CID ".scope\n", UID, CID);
	expect("0::/../../kubepods-besteffort-pod" UIDS ".slice/cri-containerd-" CID ".scope\n", UID, CID);
	/* Upper-case hex comes out lower case. */
	expect("0::/kubepods/pod0A1B2C3D-4E5F-6789-ABCD-EF0123456789/3F2E1D0C9B8A\n",
	       UID, "3f2e1d0c9b8a");
	/* A pod without a container: the pod's own cgroup, a conmon, a sandbox
	 * sub-cgroup of another name. */
	expect("0::/kubepods/burstable/pod" UID "\n", UID, "");
	expect("0::/kubepods/burstable/pod" UID "/\n", UID, "");
	expect("0::/kubepods.slice/kubepods-pod" UIDS ".slice/crio-conmon-" CID ".scope\n", UID, "");
	expect("0::/kubepods/pod" UID "/not-a-container\n", UID, "");
	expect("0::/kubepods/pod" UID "/abc\n", UID, "");   /* too short to be an id */
	/* No pod. */
	expect("0::/\n", "", "");
	expect("", "", "");
	expect("0::/user.slice/user-0.slice/session-1.scope\n", "", "");
	expect("0::/system.slice/docker-" CID ".scope\n", "", "");   /* docker outside Kubernetes */
	expect("0::/pod" UID "/" CID "\n", "", "");                 /* no kubepods */
	expect("0::/kubepods/burstable/pod" UID "x/" CID "\n", "", "");
	expect("0::/kubepods/burstable/pod0a1b2c3d-4e5f-6789-abcd-ef01234567/" CID "\n", "", "");
	expect("0::/kubepods/burstable/podzz1b2c3d-4e5f-6789-abcd-ef0123456789/" CID "\n", "", "");
	expect("0::/kubepods.slice/kubepods-pod" UIDS ".scope/x\n", "", "");
	expect("garbage without colons kubepods/pod" UID "\n", "", "");
	/* Too small a buffer: nothing, not a cut UID. */
	CHECK(mps_pod_from_cgroup("0::/kubepods/pod" UID "/" CID, small, sizeof(small), c, sizeof(c)) == 0 &&
		      !small[0], "a small buffer took a pod");
	/* A process outside any pod: this test. */
	{
		char p[MPS_POD_UID_LEN];

		CHECK(mps_pod_of_pid(999999999, p, sizeof(p), c, sizeof(c)) == 0 && !p[0] && !c[0],
		      "a pid that does not exist has a pod");
	}
	return check_finish("test_pod");
}
