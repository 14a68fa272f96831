// SPDX-License-Identifier: MIT
/*
 * Where the daemon, the servers and the clients meet: the pipe directory
 * (CUDA_MPS_PIPE_DIRECTORY, default /tmp/openmps) holds the daemon's socket;
 * the log directory (CUDA_MPS_LOG_DIRECTORY, default /var/log/openmps) holds
 * control.log and server.log. The defaults differ from NVIDIA's so the two
 * never meet by accident; the socket is not named "control", so NVIDIA's
 * client runtime never takes ours for its daemon. Run under NVIDIA's name
 * (nvidia-cuda-mps-control, where cluster engines look for it), the control
 * program takes NVIDIA's defaults instead, /tmp/nvidia-mps and
 * /var/log/nvidia-mps, as the scripts written for it expect.
 */
#ifndef MPS_COMMON_PATHS_H
#define MPS_COMMON_PATHS_H

#include <stddef.h>

#define MPS_DEFAULT_PIPE_DIR  "/tmp/openmps"
#define MPS_DEFAULT_LOG_DIR   "/var/log/openmps"
#define MPS_DAEMON_SOCKET     "openmps.sock"
#define MPS_NVIDIA_PIPE_DIR   "/tmp/nvidia-mps"
#define MPS_NVIDIA_LOG_DIR    "/var/log/nvidia-mps"
#define MPS_NVIDIA_CONTROL    "nvidia-cuda-mps-control"

const char *mps_pipe_dir(void);
const char *mps_log_dir(void);

/* From now on the defaults are NVIDIA's (the program runs as
 * MPS_NVIDIA_CONTROL). */
void mps_paths_nvidia_defaults(void);
/* The defaults in force, whatever the environment says. */
const char *mps_pipe_default(void);
const char *mps_log_default(void);

/* Joins dir and name into buf. Returns 0 or -ENAMETOOLONG. */
int mps_path_join(char *buf, size_t len, const char *dir, const char *name);

#endif
