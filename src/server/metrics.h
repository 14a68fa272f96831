// SPDX-License-Identifier: MIT
/*
 * Per-client metrics for get_metrics: what each client holds and has done,
 * as samples in the Prometheus text exposition format, one per line
 * (`name{labels} value`), without the HELP and TYPE lines: the control
 * daemon gathers every server's samples and groups them by metric.
 */
#ifndef MPS_SERVER_METRICS_H
#define MPS_SERVER_METRICS_H

/* Writes the samples of this server and its clients to fd: 0 or -errno. */
int mps_metrics_write(int fd);

#endif
