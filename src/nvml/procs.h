// SPDX-License-Identifier: MIT
/*
 * The processes using a device, as the openmps control daemon lists them
 * to the caller (procs.c).
 */
#ifndef MPS_NVML_PROCS_H
#define MPS_NVML_PROCS_H

#include <stdint.h>

struct mps_nvml_proc {
	uint32_t pid;          /* as the caller's PID namespace knows it */
	uint64_t bytes;        /* device memory it holds there */
	double gpu_s;          /* the seconds its kernels ran, on every device (sampled) */
};

/* The processes on the device whose UUID (GPU-...) is uuid: a GPU, or a
 * virtual device (a slice) of one. Up to max go to out; returns how many
 * there are (more than max when out was short), or -1 when the daemon
 * cannot be asked. */
int mps_nvml_procs(const char *uuid, struct mps_nvml_proc *out, unsigned int max);

#endif
