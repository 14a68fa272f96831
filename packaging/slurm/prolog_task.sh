#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Slurm TaskProlog: what a job's tasks need to be openmps clients. Lines
# "export NAME=VALUE" on standard output become the task's environment.
PREFIX=${OPENMPS_PREFIX:-/usr/local}
echo "export CUDA_MPS_PIPE_DIRECTORY=/run/openmps"
echo "export LD_LIBRARY_PATH=$PREFIX/lib/openmps${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
echo "export OPENMPS_FAULT_DOMAIN=job-$SLURM_JOB_ID"
