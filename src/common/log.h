// SPDX-License-Identifier: MIT
/*
 * Logging in the format of NVIDIA's MPS logs, so tools that read those read
 * ours:  [YYYY-MM-DD HH:MM:SS.mmm Role PID] message
 * Each process sets its role ("Control", "Server", "Client") and where lines
 * go (a file descriptor opened with O_APPEND, so lines from several processes
 * interleave whole). Lines below the level set by OPENMPS_LOG_LEVEL (error,
 * warn, info, debug; default info) are dropped.
 */
#ifndef MPS_COMMON_LOG_H
#define MPS_COMMON_LOG_H

enum mps_log_level {
	MPS_LOG_ERROR = 0,
	MPS_LOG_WARN,
	MPS_LOG_INFO,
	MPS_LOG_DEBUG,
};

/* Sets the role and the output fd (-1 keeps the current one, stderr at
 * first). Reads OPENMPS_LOG_LEVEL. */
void mps_log_init(const char *role, int fd);
void mps_log_set_fd(int fd);
int mps_log_fd(void);
int mps_log_enabled(enum mps_log_level level);

void mps_log(enum mps_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define mps_log_error(...) mps_log(MPS_LOG_ERROR, __VA_ARGS__)
#define mps_log_warn(...)  mps_log(MPS_LOG_WARN, __VA_ARGS__)
#define mps_log_info(...)  mps_log(MPS_LOG_INFO, __VA_ARGS__)
#define mps_log_debug(...) do { if (mps_log_enabled(MPS_LOG_DEBUG)) mps_log(MPS_LOG_DEBUG, __VA_ARGS__); } while (0)

#endif
