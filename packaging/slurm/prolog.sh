#!/bin/sh
# SPDX-License-Identifier: MIT
#
# A Slurm prolog that gives each job on a node the GPU through openmps, in
# the manner NVIDIA documents for MPS: one daemon per node, started by the
# first job and left running; each job's processes are clients, in a fault
# domain of their own so that one job's GPU fault does not end another's.
# Install as Prolog= in slurm.conf (runs as root on the node); the job's
# environment gets the variables through TaskProlog (prolog_task.sh).
export CUDA_MPS_PIPE_DIRECTORY=/run/openmps CUDA_MPS_LOG_DIRECTORY=/var/log/openmps
PREFIX=${OPENMPS_PREFIX:-/usr/local}
if ! echo get_server_list | "$PREFIX/bin/openmps-control" >/dev/null 2>&1; then
	"$PREFIX/bin/openmps-control" -d || exit 1
fi
exit 0
