#!/bin/sh
# SPDX-License-Identifier: MIT
#
# A Slurm epilog: the job's clients are gone; the daemon stays for the next
# job, and quits once no job is left on the node (drop the last part to keep
# it running for good).
export CUDA_MPS_PIPE_DIRECTORY=/run/openmps
PREFIX=${OPENMPS_PREFIX:-/usr/local}
if [ -z "$(squeue -h -w "$(hostname -s)" -t running -o %i 2>/dev/null | grep -v "^$SLURM_JOB_ID$")" ]; then
	echo "quit -t 30" | "$PREFIX/bin/openmps-control" >/dev/null 2>&1
fi
exit 0
