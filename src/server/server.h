// SPDX-License-Identifier: MIT
/*
 * The server's shared declarations: the process-wide state (devices and
 * their primary contexts, the list of clients) and the per-client state the
 * worker thread owns.
 *
 * Threads. The main thread watches the daemon channel and every client's
 * socket for hangups. A pool of service threads serves the clients
 * (sched.h): at any moment at most one of them owns a client, and only the
 * owner reads its ring and touches its handle table, objects and memory
 * account, so almost nothing per client needs a lock. Each client also has a
 * waiter thread, which blocks on the completions handed to it when the
 * client goes idle.
 *
 * Lifetime of a client (two phases, so nothing is freed under a live user):
 *   1. dead: the main thread saw the socket hang up, or its service thread
 *      found the client breaking the protocol. The flag is set and the
 *      client's eventfd written, so a service thread looks at it.
 *   2. the thread that next owns it retires it from the pool and starts a
 *      teardown thread, which stops its waiter, waits for the client's GPU
 *      work to finish, frees every object and byte it held, removes it from
 *      the list and drops the list's reference; the last reference frees the
 *      struct.
 */
#ifndef MPS_SERVER_SERVER_H
#define MPS_SERVER_SERVER_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <cuda.h>

#include "common/sq.h"
#include "common/wire.h"
#include "server/completion.h"
#include "server/gputime.h"
#include "server/handles.h"
#include "server/memacct.h"
#include "server/objects.h"
#include "server/pod.h"
#include "server/vmm.h"

struct mps_device {
	CUdevice dev;
	CUcontext primary;
	struct mps_wire_device info;
	/* Driver streams the server holds on the device, now and at most at
	 * once (server/streams.c counts them): the driver keeps memory for
	 * the most streams a context ever had alive (get_metrics shows both). */
	unsigned int streams, streams_peak;
	/* Its primary context's limits as they are now (MPS_LIMIT_UNKNOWN where
	 * the driver does not say), published in every client's region. */
	uint64_t limit[MPS_REGION_LIMITS];
};

struct mps_server {
	int ndev;
	struct mps_device dev[MPS_MAX_DEVICES];
	int driver_version;
	int prio_least, prio_greatest;
	uint64_t spin_ns;          /* how long an idle worker spins before sleeping */
	bool gpu_replies;          /* the GPU stores replies (OPENMPS_GPU_REPLIES, and the driver can) */
	int max_clients;
	int channel;               /* to the daemon */

	/* Settings the daemon hands down for clients that connect later
	 * (server/control.c). Main thread only: written when the daemon's
	 * message arrives, read when a client is started. */
	int thread_pct;            /* active thread percentage, hundredths */
	int priority;              /* 0 normal, 1 below normal */
	uint64_t mem_limit[MPS_MAX_DEVICES];   /* pinned device memory limit, 0: none */
	uint64_t host_limit;       /* pinned host memory per client, 0: none */
	struct mps_hostpool host_pool;   /* pinned host memory of all clients */
	bool draining;             /* exit once the last client has left */

	pthread_mutex_t lock;      /* protects the list below; never held across a driver call */
	struct mps_client *clients;
	int nclients;
	uint64_t gone_ops, gone_trips, gone_fences;   /* messages of the clients that have left */
	uint32_t next_client_id;
};

extern struct mps_server mps_srv;

/* Server-side objects behind client handles. */
struct mps_sstream;

struct mps_sctx {
	uint32_t handle;
	int device;
	bool primary;
	unsigned int flags;
	struct mps_sstream *legacy;     /* emulated legacy default stream, made on first use */
	struct mps_sstream *streams;    /* every stream of this context, legacy included */
	uint64_t legacy_gen;            /* bumps with every operation on the legacy stream */
	uint64_t legacy_ev_gen;         /* legacy_gen when legacy->ev was last recorded */
	CUstream join;                  /* internal: gathers every stream for a synchronize */
	bool join_busy;                 /* join waits on destroyed streams' work */
	CUevent fence;                  /* recorded where the client answered a synchronize itself (streams.h) */
	uint32_t limits_set;            /* bit per CUlimit this context has set */
	uint64_t limit[CU_LIMIT_MAX];   /* what it set */
};

struct mps_sstream {
	uint32_t handle;                /* 0 for the legacy stream */
	struct mps_sctx *ctx;
	struct mps_sstream *next;
	CUstream s;
	CUevent ev;                     /* internal, for cross-stream ordering */
	unsigned int flags;
	int priority;
	bool blocking;                  /* orders with the legacy stream */
	bool dirty;                     /* work since the legacy stream last waited for it */
	bool busy;                      /* work since the last context synchronize */
	uint64_t legacy_seen;           /* ctx->legacy_gen this stream last waited for */
	bool capture_origin;            /* a capture the client began on it is under way */
	struct mps_pending *lazy;       /* completions waiting for the stream as it is now (completion.h) */
	uint64_t work;                  /* operations queued on it so far */
	uint64_t staged_at;             /* `work` at a synchronous copy answered before it ran (ops_copy.c), 0 if none */
	uint64_t fence_seen;            /* the client's fence_gen this stream last waited for (streams.h) */
	struct mps_green *green;        /* the SM share its driver stream is in (smshare.h); NULL: all SMs */
};

struct mps_sevent {
	uint32_t handle;
	struct mps_sctx *ctx;
	CUevent ev;
	unsigned int flags;
	uint8_t ipc;                    /* enum mps_event_origin */
};

enum mps_event_origin {
	MPS_EVENT_OWN,                  /* made by the client */
	MPS_EVENT_IPC,                  /* another client's, opened by IPC handle (ipc.h) */
	MPS_EVENT_IPC_DRIVER,           /* another process's, opened by the driver */
};

/* Destroys an event of the client's, whatever its origin (ops_ipc.c). */
void mps__event_free(struct mps_client *c, struct mps_sevent *e);

struct mps_sfunc;

struct mps_smodule {
	uint32_t handle;
	int kind;                       /* MPS_MODULE or MPS_LIBRARY */
	int device;                     /* modules: where loaded */
	uint32_t ctx;                   /* modules: the context loaded in */
	void *image;                    /* the uploaded image, kept while loaded */
	CUmodule mod;
	CUlibrary lib;
	struct mps_sfunc *funcs;        /* functions and kernels got from it */
};

struct mps_sfunc {
	uint32_t handle;
	bool is_kernel;                 /* a CUkernel (library) rather than a CUfunction */
	CUfunction f;                   /* or the CUkernel, cast */
	struct mps_smodule *owner;
	int device;                     /* a CUfunction's device: its module's, or the
	                                 * context's that got it from a kernel */
	struct mps_sfunc *next;         /* in owner->funcs */
	uint32_t nparams;
	uint32_t arg_size;
	uint16_t *param;                /* nparams pairs: offset, size */
	const char *name;               /* interned (fault.h), or NULL */
	uint32_t replay_key;            /* replay.c's hash of name and parameters; 0: not yet */
};

struct mps_shost {
	uint32_t handle;
	int fd;
	void *addr;
	size_t size;
	bool graphed;   /* a graph's copy names it: kept until the client leaves */
	bool freed;     /* the client freed it (graphed); no message may name it */
};

struct mps_client {
	struct mps_client *next;        /* in mps_srv.clients */
	uint32_t id;
	pid_t pid;
	uid_t uid;
	char comm[64];
	char pod_uid[MPS_POD_UID_LEN];            /* its Kubernetes pod, from its cgroup ("": none; pod.h) */
	char container_id[MPS_CONTAINER_ID_LEN];  /* and its container there */
	int sock;
	int refs;                       /* atomic */
	int dead;                       /* atomic: phase 1 of teardown */
	uint64_t dead_ns;               /* atomic: when it began (0 until written, after dead) */

	int region_fd;
	struct mps_region *region;
	struct mps_sq_consumer sq;
	int evfd;                       /* eventfd the client writes to wake us (sched.c) */
	int run;                        /* atomic: enum mps_run_state, sched.c's */
	struct mps_client *rq_next;     /* in the run queue (sched.c) */
	uint64_t rq_at;                 /* when it was queued (sched.c, under its lock) */
	struct mps_client *id_next;     /* in sched.c's table by id */
	uint64_t active_ns;             /* atomic: when it last had work */
	bool ready;                     /* set up and greeted */

	struct mps_handles handles;
	struct mps_objindex objindex;   /* driver objects' handles (objects.h) */
	struct mps_memacct mem;
	struct mps_completions comp;
	int deferred;                   /* atomic CUresult: first asynchronous error not yet reported */
	struct {                        /* for get_metrics (metrics.c); its service thread's, read by others */
		uint64_t launches;
		uint64_t h2d, d2h, d2d;     /* bytes copied */
		uint64_t errors;            /* calls answered with an error, asynchronous ones included */
	} stats;
	struct mps_gputime gpu;         /* its kernels' GPU time, sampled (gputime.h) */
	struct {                        /* its last GPU work, for a fault's report (fault.h); atomics */
		uint64_t ns;
		int dev;
		uint32_t stream;
		const char *kernel;
	} work;
	unsigned int captures;          /* stream captures it has begun and not ended (ops_capture.c) */
	uint32_t pool_default[MPS_MAX_DEVICES];   /* its own default pool per device, made on first use */
	uint32_t pool_current[MPS_MAX_DEVICES];   /* cuDeviceSetMemPool's choice; 0: the default (ops_pool.c) */
	uint32_t graph_mem_devs;        /* devices it made graph allocations on (ops_gnode.c, ops_pool.c) */
	struct mps_gallocs *gallocs;    /* its executable graphs' allocation and free nodes (galloc.h) */
	bool devout;                    /* its modules print: what kernels print is kept for it (devout.c) */
	struct mps_hostfn *hostfn;      /* its host functions' pipe and words (ops_hostfn.c) */
	struct mps_memwaits *memwaits;  /* its last stream waits on memory (ops_memop.c) */
	struct mps_vmm vmm;             /* address reservations and mappings (vmm.h) */
	uint8_t vis[MPS_MAX_DEVICES];   /* the server's index of the client's device i */
	int nvis;                       /* devices it sees (MPS_OP_DEVICES; all by default) */

	uint8_t *blob;                  /* module upload buffer */
	size_t blob_len, blob_total, blob_cap;
	bool uploading;                 /* an upload is under way and intact */
	uint8_t *msg;                   /* the message being handled, copied out of the ring */
	uint64_t ops;                   /* messages handled */
	uint64_t trips;                 /* of which synchronous: a reply was waited for */
	uint64_t fences;                /* synchronizes the client answered itself (MPS_OP_STREAM_FENCE) */
	uint64_t fence_gen;             /* bumps with each; its other streams wait for the latest once */
	struct mps_sctx *fence_ctx;     /* whose `fence` event holds the latest, or NULL */
	uint32_t clear_devs;            /* devices whose clears of its new memory its streams wait for too */

	/* Settings in force for this client: the server's when it connected,
	 * lowered by its own (CLIENT_LIMITS), changed by set_client_*. */
	int thread_pct;                 /* active thread percentage, hundredths; atomic */
	int priority;                   /* 0 normal, 1 below normal; atomic (set_client_priority) */
	int priority_applied;           /* the priority its streams have: its service thread's */
	uint32_t devmask;               /* worker only: devices it made contexts on */
	int sm_part;                    /* atomic: the SM partition it asks for (smshare.h's name id; 0: none) */
	int vpart[MPS_MAX_DEVICES];     /* the partition a virtual device it chose gives that GPU; 0: none */
	struct mps_vpick {              /* the virtual devices its welcome listed (vdevice.h) */
		int name;                   /* smshare.h's name id */
		int dev;
		uint64_t mem;
	} vwelcome[MPS_MAX_VDEVICES];
	unsigned int nvwelcome;
	uint32_t vused;                 /* bit v: it chose vwelcome[v] */
	struct mps_smbind {             /* worker only: its SM share on each device (smshare.h) */
		struct mps_green *green;    /* NULL: all SMs */
		int pct;                    /* the thread_pct it was chosen for; 0: none yet */
		int part;                   /* the sm_part it was chosen for */
		unsigned int gen;           /* the device's share generation then */
		bool in_part;               /* green is partition `part`'s */
	} sm[MPS_MAX_DEVICES];
	int term_req;                   /* atomic: terminate_client request to answer
					 * when torn down; -1 once it has been */
	struct mps_replay *replay;      /* its runs of launches (replay.h); NULL before its first */
	struct mps_bounce *bounce;      /* its bounce ring (bounce.h); NULL before its first use */
	uint64_t replay_held_at;        /* atomic: when it last held a launch; 0: holds none */
	struct mps_held_free *held_frees; /* placed memory freed in stream order, not yet reached (ops_mem.c) */
};

/* client.c */
struct mps_client *mps_client_start(int sock, pid_t pid, uid_t uid, const char *comm);
/* Ends client c (why, if any, logged): marks it dead and shuts its socket.
 * mps_client_kill first looks for a GPU fault (fault.h), which makes driver
 * calls, so it is never called under mps_srv.lock; mps_client_end is the
 * same for a caller that looked before it took that lock. */
void mps_client_kill(struct mps_client *c, const char *why);
void mps_client_end(struct mps_client *c, const char *why);
void mps_client_put(struct mps_client *c);
void mps_client_kill_all(void);

/* Tells a connecting client why it is refused (then the caller closes). */
void mps__refuse(int fd, CUresult r, const char *text);

/* service.c */

/* A client's server-side state (message buffer, shared region, completion
 * thread): NULL, or why it could not be made. Undone, with everything the
 * client made since, by mps__client_teardown(). */
const char *mps__client_setup(struct mps_client *c);
void mps__client_teardown(struct mps_client *c);

/* Sets a new client up and sends it its welcome (first thing a service
 * thread does with it). 0, or -1 if the client cannot be served. */
int mps__client_greet(struct mps_client *c);

/* Tears a retired client down, reports it gone and drops the list's
 * reference (on a thread of its own: it waits for the GPU). */
void mps__client_finish(struct mps_client *c);

/* Checks one message (copied out of the ring) against the op table and
 * runs it: the seam the worker loop and the wire fuzzer share. */
void mps__dispatch(struct mps_client *c, const struct mps_msg *m);

/* The operation's name as the op table spells it (metrics), or NULL. */
const char *mps__op_name(unsigned int op);

/* Makes dev's primary context current on the calling thread (remembered
 * per thread, so binding the same device again costs nothing). */
CUresult mps__bind_device(struct mps_client *c, int dev);

/* The device bound on the calling thread, or -1. */
int mps__cur_device(void);

/* Context limits (ops_ctx.c): reads device dev's primary context's limits
 * (that context current); copies them into a client's new region. */
void mps_limits_read(int dev);
/* The device heap sized up front, after mps_limits_read (ops_ctx.c). */
void mps_limits_preset(int dev);
void mps_limits_publish(struct mps_client *c);

/* Records an asynchronous failure to be reported at the next synchronising call. */
void mps__defer_error(struct mps_client *c, CUresult r, const char *what);

/* ops_launch.c: launches f on s with its packed arguments and checked
 * attributes (cuLaunchKernel without any, else cuLaunchKernelEx). */
CUresult mps__launch(const struct mps_sfunc *f, const uint32_t grid[3], const uint32_t block[3], uint32_t smem,
		     CUstream s, const uint8_t *args, const CUlaunchAttribute *attrs, unsigned int nattrs);

/* Takes the pending asynchronous error, if any (CUDA_SUCCESS if none). */
CUresult mps__take_deferred(struct mps_client *c);

/* Writes a synchronous reply and wakes the client. */
void mps__reply(struct mps_client *c, uint32_t slot, CUresult r);
struct mps_slot *mps__slot(struct mps_client *c, uint32_t slot);

/* Looks up a handle of a type for the current message, NULL if invalid. */
void *mps__obj(struct mps_client *c, uint32_t handle, int type);
struct mps_sctx *mps__msg_ctx(struct mps_client *c, const struct mps_msg *m);

/* Operation handlers: each takes a validated-length message and either
 * replies (sync) or records a deferred error (async). ops_*.c */
typedef void mps_op_fn(struct mps_client *c, const struct mps_msg *m);
#define MPS_OP_DECLARE(name, fn, type, sync) mps_op_fn mps__op_##fn;
MPS_OPS(MPS_OP_DECLARE)
#undef MPS_OP_DECLARE

/* A device ordinal of the client's as the server's device index, and back;
 * -1 if it names none (client.c). */
int mps__client_device(const struct mps_client *c, int64_t ordinal);
int mps__client_ordinal(const struct mps_client *c, int index);

/* Teardown helpers, used when a client leaves. */
void mps__ctx_release_all(struct mps_client *c);
void mps__modules_release_all(struct mps_client *c);
void mps__vmm_release_all(struct mps_client *c);

/* Allocates size bytes in the stream's order from pool (NULL: the client's
 * current pool of the stream's device, or the graph's while the stream is
 * captured), charged and recorded as the client's (ops_pool.c). */
CUresult mps__pool_alloc(struct mps_client *c, struct mps_sstream *st, struct mps_sobj *pool, uint64_t size,
			 CUdeviceptr *out);
void mps__modules_release_ctx(struct mps_client *c, uint32_t ctx);

/* An imported pool pointer of the client's at ptr freed (its view
 * closed): false if ptr is none (ops_mem.c). */
bool mps__free_pool_ptr(struct mps_client *c, uint64_t ptr);

/* Unmaps the client's placed allocations freed by cuMemFreeAsync whose
 * streams have reached the free; wait: all of them, waiting for those
 * streams (ops_mem.c). */
void mps__held_frees_reap(struct mps_client *c, bool wait);

/* The fd the client sent ahead of its import message, or -1 (ops_vmm.c). */
int mps__take_fd(struct mps_client *c);

/* Destroys a pool the client no longer holds: an imported one gives back
 * its share, one others imported waits for them (ipc.h) (ops_pool.c). */
struct mps_sobj;
CUresult mps__pool_release(struct mps_client *c, struct mps_sobj *o);
void mps__host_release_all(struct mps_client *c);
/* ops_hostfn.c: at teardown, first every host function's wait let go, then
 * (once the streams have drained) the pipe closed. */
void mps__hostfn_release(struct mps_client *c);
void mps__hostfn_free(struct mps_client *c);
/* ops_memop.c: at teardown, every wait on memory the client left let go. */
void mps__memwaits_release(struct mps_client *c);
/* A host function's node in graph g after deps, *node (ops_hostfn.c): a
 * child graph of three nodes. mps__hostfn_node_type: whether node is such
 * a child, or a client's copy through a staging buffer (a child graph of a
 * copy and such a child), and the type it is to the client. */
CUresult mps__hostfn_nodes(struct mps_client *c, CUgraph g, const CUgraphNode *deps, size_t ndeps, int device,
			   uint32_t slot, uint32_t seq, CUgraphNode *node);
bool mps__hostfn_node_type(CUgraphNode node, CUgraphNodeType *type);
/* Host node `node` of the graph exec was made from runs the function kept
 * in slot (seq) in exec from now on (cuGraphExecHostNodeSetParams). */
CUresult mps__hostfn_exec_node(struct mps_client *c, CUgraphExec exec, CUgraphNode node, int device, uint32_t slot,
			       uint32_t seq);
/* An executable graph made or updated from g, and destroyed: which graph
 * slots it may run (ops_hostfn.c, for HOSTFN_DEAD). */
void mps__hostfn_exec_adds(struct mps_client *c, CUgraphExec exec, CUgraph g);
void mps__hostfn_exec_gone(struct mps_client *c, CUgraphExec exec);

/* The client's finished upload (MPS_OP_BLOB_APPEND) if it is size bytes,
 * with a NUL after it, now the caller's to free; NULL if there is none of
 * that size (an upload under way is dropped either way). */
uint8_t *mps__upload_take(struct mps_client *c, uint64_t size);

/* Destroys a JIT linker invocation of ops_link.c (its record included). */
CUresult mps__link_release(void *link);

/* The client's pinned host region called handle, NULL if none or freed. */
struct mps_shost *mps__host_get(struct mps_client *c, uint32_t handle);

#endif
