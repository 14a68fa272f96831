// SPDX-License-Identifier: MIT
/*
 * SM shares: a client's active thread percentage as the SMs its kernels may
 * use. At start each device's SMs are split once into equal groups the
 * hardware co-schedules (cuDevSmResourceSplitByCount at the smallest size:
 * 8 SMs on Hopper, so thread block clusters keep working inside a share). A
 * share is the whole number of groups nearest the percentage, or the whole
 * device when that is nearer; a share below the whole device is a green
 * context over that many groups, and the client's streams on the device are
 * made in it (server/streams.c), so every kernel, copy and memset it queues
 * runs on those SMs only.
 *
 * Green contexts are shared and kept: clients with the same groups use one
 * (each with streams of its own), and one is never destroyed, because the
 * driver keeps the device memory of a destroyed green context (about 6 MiB
 * each on an H200) — a pool reuses them instead. A new share takes the
 * groups fewest clients use, so two clients at 50% land on different SMs
 * where the device has room, as they would under NVIDIA MPS.
 *
 * What the client is told: the SM count of its share on each device, in its
 * shared region (mps_region.sm_count), which it answers for
 * CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, so frameworks size their grids
 * to it. A changed percentage (set_client_active_thread_percentage) takes
 * effect at the client's next work on each stream (its streams move to the
 * new share, ordered after what they had queued).
 */
#ifndef MPS_SERVER_SMSHARE_H
#define MPS_SERVER_SMSHARE_H

#include <stdbool.h>
#include <stdio.h>

#include <cuda.h>

#define MPS_SM_PARTITION_NAME 32

struct mps_client;
struct mps_green;

/* Splits device dev's SMs (its primary context current). Without green
 * contexts (an older driver) shares are not enforced, which it logs once. */
void mps_sm_init(int dev);

/* The SMs client c gets on device dev, as its settings stand now. */
unsigned int mps_sm_client_count(const struct mps_client *c, int dev);

/* SM partitions: groups of a device reserved for the clients that name the
 * partition (CUDA_MPS_SM_PARTITION, set_client_sm_partition), exactly
 * those whatever their percentage; shares use the groups no partition
 * holds, and those of a partition that lends them while it has no client
 * (with no group open, the whole device: partitions may take it all). A changed set of open groups
 * moves the streams of the clients it concerns at their next work.
 * mps_sm_partition_set places (or moves) one: 0, or -ENOSPC when it does
 * not fit (its clients then share). Main thread. */
int mps_sm_partition_set(int dev, const char *name, unsigned int sms, bool lend);
void mps_sm_partition_remove(const char *name);
/* A number for a partition name (0: none, or no room for more names): the
 * client's sm_part. With add, a name not yet known gets one (the daemon's
 * names: a partition, or a client moved by set_client_sm_partition before
 * it is defined); without, only names the daemon gave (what a client asks
 * for itself: it cannot fill the table). */
int mps_sm_name_id(const char *name, bool add);
/* The name of an id (mps_sm_name_id), "" for none. */
const char *mps_sm_name_of(int id);
/* The SMs partition `name` holds on device dev (0: none, or it did not fit). */
unsigned int mps_sm_partition_sms(int dev, const char *name);
/* The size of device dev's groups, and how many (0 without shares). */
unsigned int mps_sm_group_sms(int dev, unsigned int *ngroups);
/* openmps_server_sm_partition_sms and _clients samples. */
void mps_sm_partition_metrics(FILE *f, int server);

/* The green context client c's new streams on device dev go in, for its
 * percentage now (NULL: the whole device). Worker only. */
struct mps_green *mps_sm_bind(struct mps_client *c, int dev);

/* A non-blocking stream of that priority in green context g. */
CUresult mps_sm_stream_new(struct mps_green *g, int priority, CUstream *out);

/* The green context g as a context, for a graph's kernel node that names
 * the context it runs in (a CUkernel's); NULL if the driver cannot say. */
CUcontext mps_sm_ctx(struct mps_green *g);

/* Writes c's SM count on every device into its region (mps_srv.lock held,
 * or on c's own service thread). */
void mps_sm_publish(struct mps_client *c);

/* Gives back c's shares (teardown). */
void mps_sm_release(struct mps_client *c);

/* Green contexts made on device dev so far (get_metrics). */
unsigned int mps_sm_greens(int dev);

#endif
