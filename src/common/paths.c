// SPDX-License-Identifier: MIT
/*
 * See paths.h.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/paths.h"

static const char *pipe_default = MPS_DEFAULT_PIPE_DIR, *log_default = MPS_DEFAULT_LOG_DIR;

static const char *env_or(const char *name, const char *def)
{
	const char *v = getenv(name);

	return v && *v ? v : def;
}

const char *mps_pipe_dir(void)
{
	return env_or("CUDA_MPS_PIPE_DIRECTORY", pipe_default);
}

const char *mps_log_dir(void)
{
	return env_or("CUDA_MPS_LOG_DIRECTORY", log_default);
}

const char *mps_pipe_default(void)
{
	return pipe_default;
}

const char *mps_log_default(void)
{
	return log_default;
}

void mps_paths_nvidia_defaults(void)
{
	pipe_default = MPS_NVIDIA_PIPE_DIR;
	log_default = MPS_NVIDIA_LOG_DIR;
}

int mps_path_join(char *buf, size_t len, const char *dir, const char *name)
{
	int n = snprintf(buf, len, "%s/%s", dir, name);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}
