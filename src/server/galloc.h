// SPDX-License-Identifier: MIT
/*
 * Graph allocations across launches (galloc.c): each executable graph's
 * allocation and free nodes, so that a launch gives the client's account
 * the allocations freed since and takes away what the graph frees.
 */
#ifndef MPS_SERVER_GALLOC_H
#define MPS_SERVER_GALLOC_H

#include <stdbool.h>
#include <stdint.h>

#include <cuda.h>

struct mps_client;
struct mps_sstream;

/* exec was made from g: its allocation and free nodes noted (nothing to do
 * for a client that never made a graph allocation). */
CUresult mps_galloc_exec_adds(struct mps_client *c, CUgraphExec exec, CUgraph g);
void mps_galloc_exec_gone(struct mps_client *c, CUgraphExec exec);
/* Launches exec on st: its allocations charged and recorded again, those
 * its free nodes free removed. CUDA_ERROR_OUT_OF_MEMORY, and no launch,
 * when the client's limit refuses them. */
CUresult mps_galloc_launch(struct mps_client *c, CUgraphExec exec, struct mps_sstream *st);
/* Whether base is an allocation node's address in one of the client's
 * executable graphs (its memory may be freed for now). */
bool mps_galloc_known(struct mps_client *c, uint64_t base);
/* 0 if [addr, addr + size) is the client's memory (mps_memacct_check) or
 * lies in such an allocation: what a node of a graph may name. */
int mps_galloc_check(struct mps_client *c, uint64_t addr, uint64_t size);
void mps_galloc_free(struct mps_client *c);

#endif
