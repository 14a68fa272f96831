// SPDX-License-Identifier: MIT
/*
 * The client library's internal declarations: the connection to the server
 * (conn.c), the objects behind the CUDA handles a program holds (contexts,
 * streams, events, modules, functions), and the helpers the API files share.
 *
 * Every CUDA handle the library gives out points at one of these structs,
 * which starts with a magic number, so a handle of the wrong kind — or one
 * already destroyed — is answered with CUDA_ERROR_INVALID_HANDLE or
 * INVALID_CONTEXT rather than sent to the server. Each struct carries the
 * server's 32-bit handle for the object (wire.h).
 */
#ifndef MPS_CLIENT_CLIENT_H
#define MPS_CLIENT_CLIENT_H

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda.h>

#include "common/sq.h"
#include "common/wire.h"

/* ------------------------------------------------------------------ */
/* Mode and connection (dispatch.c, conn.c) */

enum mps_mode {
	MPS_MODE_PASSTHROUGH = 1, /* no daemon: every call goes to the real driver */
	MPS_MODE_SERVER,          /* connected: calls go to the server */
	MPS_MODE_FAILED,          /* a daemon refused us, or no driver at all */
};

struct mps_conn {
	int sock;
	struct mps_region *region;
	struct mps_sq_producer sq;
	pthread_mutex_t sq_lock;    /* one producer at a time; leaf lock */
	uint32_t sent;              /* messages committed to the ring that may queue work: all but MPS_OP_SLOT_WAKE
	                               (written under sq_lock, read atomically) */
	uint32_t slots_free;        /* bitmap of free reply slots (atomic) */
	uint32_t slot_waiters;      /* threads waiting for a free slot (atomic, futex word) */
	int dead;                   /* atomic: the server is gone */
	int dead_result;            /* atomic: why, if it said (a CUresult), else 0 */
	int forked;                 /* this is a child of the process that connected */
	uint64_t spin_ns;           /* OPENMPS_CLIENT_SPIN_US, when spin_fixed */
	uint64_t yield_ns;          /* OPENMPS_CLIENT_YIELD_US: how long a reply the server owes is polled */
	uint64_t busy_yield_ns;     /* OPENMPS_CLIENT_BUSY_YIELD_US: ... giving the CPU away this often */
	uint64_t gpu_spin_ns;       /* OPENMPS_CLIENT_GPU_SPIN_US: how long one the GPU stores is watched */
	uint64_t gpu_yield_ns;      /* OPENMPS_CLIENT_GPU_YIELD_US: while CPUs are busy, how often it yields then */
	uint64_t gpu_busy_spin_ns;  /* OPENMPS_CLIENT_GPU_BUSY_SPIN_US: the same while CPUs are busy (no spin advised) */
	uint64_t nap_ns;            /* OPENMPS_CLIENT_NAP_US: sleep this long instead of yielding (0: yield) */
	uint64_t trace_wait_ns;     /* OPENMPS_CLIENT_TRACE_WAITS_US: waits this long are logged (0: none) */
	bool gpu_nap;               /* OPENMPS_CLIENT_GPU_NAP: while CPUs are busy, sleep through most of a GPU wait */
	bool spin_fixed;            /* else the server's advice in the region */
	pthread_mutex_t fd_lock;    /* serialises calls that receive an fd */
	struct mps_welcome *welcome;     /* its devices renumbered as this process sees them */
	int ndev;
	uint8_t server_index[MPS_MAX_DEVICES];   /* the server's index of each of those devices */
	bool devices_named_twice;                /* CUDA_VISIBLE_DEVICES named a device twice */
};

extern struct mps_conn mps_conn;
extern CUresult mps_failed_result;     /* what every call returns in MPS_MODE_FAILED */

enum mps_mode mps__mode(void);         /* decides on first use */

/* Connects to the daemon. 0 on success; -ENOENT/-ECONNREFUSED when there is
 * no daemon (pass-through); another negative value with *refusal set when a
 * daemon or server refused us. */
int mps__connect(CUresult *refusal);
/* The text of the last refusal (mps__connect's -EACCES). */
const char *mps__refusal_text(void);

/* A synchronous call in progress: owns a reply slot until mps__call_end(). */
struct mps_call {
	int slot;
	struct mps_slot *s;
	uint32_t seq;     /* its message's number in the ring (mps_conn.sent once it was committed) */
};

/* Sends a message (hdr followed by len - sizeof(*hdr) bytes, then `extra`)
 * and waits for the reply. The header's op/len/slot/ctx are filled in here.
 * Returns the server's CUresult; the slot stays readable until
 * mps__call_end(). On failure before sending, call->slot is -1. */
CUresult mps__call(uint16_t op, uint32_t ctx, struct mps_msg *hdr, size_t len, const void *extra,
		   size_t extra_len, struct mps_call *call);
void mps__call_end(struct mps_call *call);

/* As mps__call, with `in` (at most MPS_SLOT_DATA bytes) placed in the reply
 * slot's data for the server to read: registered memory it can DMA from. */
CUresult mps__call_slot_in(uint16_t op, uint32_t ctx, struct mps_msg *hdr, size_t len, const void *in,
			   size_t in_len, struct mps_call *call);

/* Sends an asynchronous message. CUDA_SUCCESS, or the connection's error. */
CUresult mps__post(uint16_t op, uint32_t ctx, struct mps_msg *hdr, size_t len, const void *extra,
		   size_t extra_len);

/* The many calls whose only argument is a handle (struct mps_msg_handle),
 * whose answer is only a result. */
CUresult mps__call_handle(uint16_t op, uint32_t ctx, uint32_t handle);
CUresult mps__post_handle(uint16_t op, uint32_t ctx, uint32_t handle);

/* For messages built in place (launches): reserves len bytes in the ring,
 * holding the ring lock, with the header filled in; NULL and *err set if the
 * connection is unusable. Finish with mps__ring_end(). */
void *mps__ring_begin(uint16_t op, uint32_t ctx, uint32_t len, uint16_t flags, CUresult *err);
void mps__ring_end(void);

/* The number of the calling thread's last message (the ring's count
 * once it was sent), as mps_call.seq is for a call. */
uint32_t mps__last_seq(void);
/* How many messages the calling thread has sent, ever. */
uint32_t mps__posted(void);

/* Uploads size bytes of data as the client's upload (a module's image, a
 * linker's input: MPS_OP_BLOB_APPEND) and makes the call that takes it,
 * one upload at a time. */
CUresult mps__upload_call(uint16_t op, uint32_t ctx, const void *data, size_t size, struct mps_msg *hdr, size_t len,
			  struct mps_call *call);

/* JIT options (link.c), for the linker and cuModuleLoadDataEx. The
 * program's options into out (*nout of them): plain numbers as they are; the
 * logs, their sizes and the wall time are the server's own, so they are left
 * out (and refused for one input, as are targets, with per_input); options
 * that carry pointers into the program (symbol tables, kernel name lists)
 * cannot reach the server: CUDA_ERROR_NOT_SUPPORTED if strict, else left
 * out (logged once). */
CUresult mps__jit_pack(struct mps_link_opt *out, uint32_t *nout, unsigned int n, const CUjit_option *opts,
		       void *const *vals, bool per_input, bool strict);
/* The size the program gave for one of its logs (size_opt names it), 0 if none. */
size_t mps__jit_cap(unsigned int n, const CUjit_option *opts, void *const *vals, CUjit_option size_opt);
/* The server's answer to call (struct mps_link_reply in its slot's data),
 * if it answered, into the program's option values: its logs up to
 * info_cap and error_cap bytes, the sizes written, the wall time, the
 * threads per block. */
void mps__jit_outputs(const CUjit_option *opts, void **vals, unsigned int n, size_t info_cap, size_t error_cap,
		      const struct mps_call *call);

/* A whole file into a new buffer with a NUL after it (PTX text); its size
 * in *size if size is not NULL. */
CUresult mps__read_file(const char *path, void **buf, size_t *size);

/* Receives the fd the server sends before answering a host allocation (or
 * an export); a negative errno if what came was something else, such as why
 * the server is ending this client. */
int mps__recv_fd(uint32_t region, uint64_t *size);

/* A call whose answer is a file descriptor the server sends ahead of it
 * (an export: written to out as an int), or that sends one ahead (an
 * import of os_handle, an fd: val[0] into *out) (vmm.c). One transfer at a
 * time (mps_conn.fd_lock). */
struct mps_msg_vmm;
CUresult mps__fd_export(enum mps_op op, struct mps_msg_vmm *q, void *out);
CUresult mps__fd_import(enum mps_op op, struct mps_msg_vmm *q, void *os_handle, uint64_t *out);

/* Waits until *word (a reply slot's or a staging chunk's state word,
 * region.h) says DONE: spins while the server advises it; then, for a word
 * the GPU is to store, naps as long as napwait.c says (while no spin is
 * advised) and watches it, and for one the server still owes, gives the
 * CPU away now and then for up to OPENMPS_CLIENT_YIELD_US; then sleeps —
 * after asking the server (MPS_OP_SLOT_WAKE, number `wake`) to wake it if
 * the GPU is to store the word. `kind` tells waits apart for the naps: the
 * message's op, or MPS_WAIT_STAGE for a staging chunk. */
#define MPS_WAIT_STAGE 0x10000u
CUresult mps__wait_reply(uint32_t *word, uint32_t wake, uint32_t kind);

/* One wait for a reply as OPENMPS_CLIENT_TRACE_WAITS_US logs it
 * (waittrace.c): clock times (ns) its phases began, 0 for those it never
 * reached. */
struct mps_wait_trace {
	uint64_t start;
	uint64_t gpu;         /* the word first seen handed to the GPU (after the first looks) */
	uint64_t nap, nap_end;
	uint64_t flagged;     /* its bit set in gpu_sleepers */
	uint64_t asked;       /* MPS_OP_SLOT_WAKE sent */
	uint64_t woken;       /* back from its last sleep */
	uint32_t st0;         /* the word's state as the wait began */
	uint32_t hint_ns;     /* the spin it was advised then */
	uint32_t sleeps, yields;
};
void mps__wait_traced(const struct mps_wait_trace *t, uint32_t kind, uint64_t end);

/* The naps of a wait for the GPU (napwait.c), per thread: how long after
 * its start a wait of this kind may sleep (0: not at all), and how long one
 * lasted (a lower bound: the last time it saw its word not yet stored). */
uint64_t mps__nap_until(uint32_t kind);
void mps__nap_record(uint32_t kind, uint64_t ns);

/* ------------------------------------------------------------------ */
/* Objects */

#define MPS_MAGIC_CTX    0x78744353u
#define MPS_MAGIC_STREAM 0x6d725453u
#define MPS_MAGIC_EVENT  0x6e764553u
#define MPS_MAGIC_MODULE 0x646f4d53u
#define MPS_MAGIC_FUNC   0x6e754653u
#define MPS_MAGIC_LINK   0x6b6e4c53u
#define MPS_MAGIC_DEAD   0x64616544u

struct mps_ctx {
	uint32_t magic;
	uint32_t handle;       /* the server's; 0 while a primary context is inactive */
	int device;
	unsigned int flags;
	bool primary;
	int retain;            /* primary: retain count (under ctx_lock) */
	uint32_t peers;        /* bit d: peer access to device d's contexts enabled (atomic) */
	int api_version;
	struct mps_ctx *next;  /* created contexts: the list in context.c */
	uint32_t limits_set;   /* bit l: this context set limit l (atomic), to limit[l] */
	uint64_t limit[MPS_REGION_LIMITS];
};

struct mps_stream {
	uint32_t magic;
	uint32_t handle;
	struct mps_ctx *ctx;
	unsigned int flags;
	int priority;
};

struct mps_event {
	uint32_t magic;
	uint32_t handle;
	struct mps_ctx *ctx;
	unsigned int flags;
	struct mps_event *hnext;   /* in event.c's table by handle */
};

struct mps_func;

struct mps_module {
	uint32_t magic;
	uint32_t handle;
	int kind;              /* MPS_MODULE or MPS_LIBRARY */
	struct mps_ctx *ctx;
	pthread_mutex_t lock;  /* protects funcs */
	struct mps_func *funcs;
};

struct mps_func {
	uint32_t magic;
	uint32_t handle;
	bool is_kernel;        /* a CUkernel of a library */
	struct mps_module *mod;
	struct mps_func *next; /* in mod->funcs */
	struct mps_func *per_ctx;  /* kernels: the functions got for contexts */
	struct mps_ctx *ctx;   /* functions of kernels: their context */
	char *name;
	struct mps_func *hnext;   /* in module.c's table by handle */
	uint32_t nparams;
	uint32_t arg_size;
	int max_threads;
	uint16_t *param;       /* offset, size pairs */
	void *view;            /* its view (funcview.c), once one was asked for */
	struct mps_fattrs *attrs;  /* its attributes, per device (funcattr.c; under mod->lock) */
	struct mps_occ *occ;       /* occupancy answers kept (funcattr.c; under mod->lock) */
	uint32_t attrs_gen;        /* bumped when what is kept is forgotten (under mod->lock) */
};

/* ------------------------------------------------------------------ */
/* Helpers shared by the API files */

/* The calling thread's current context, or NULL. */
struct mps_ctx *mps__ctx_cur(void);

/* The server handle of ctx, activating an inactive primary context. */
CUresult mps__ctx_handle(struct mps_ctx *ctx, uint32_t *handle);

/* The context the server knows by handle, or NULL. */
struct mps_ctx *mps__ctx_by_handle(uint32_t handle);

/* The current context's server handle (CUDA_ERROR_INVALID_CONTEXT if none). */
CUresult mps__cur_handle(uint32_t *handle);

/* Resolves a CUstream as passed by the program. per_thread: the call is a
 * _ptsz/_ptds variant, where 0 means the per-thread default stream. Gives
 * the server's stream handle and the context handle to send with it. */
/* A 2D or 3D copy with a CUDA array on one side or both (array.c). */
CUresult mps__array_copy3d(const CUDA_MEMCPY3D *p, CUstream s, bool per_thread, bool async);

CUresult mps__stream_resolve(CUstream s, bool per_thread, uint32_t *stream, uint32_t *ctx);

/* Checks a handle's magic; NULL if it is not a live object of that kind. */
void *mps__obj(const void *h, uint32_t magic);

/* A CUfunction or CUkernel as the program passes it: the function, whether
 * the handle is the function itself or its view; NULL if neither. */
struct mps_func *mps__func(const void *h);

/* Function views (funcview.c): the function a view stands for (NULL if h is
 * not a view, or its function was unloaded), and dropping f's view when f
 * goes. */
struct mps_func *mps__func_of_view(const void *h);
void mps__func_view_drop(struct mps_func *f);

/* Device allocations the client knows of, for telling device pointers from
 * host pointers (memory.c). */
void mps__devmem_add(uint64_t base, uint64_t size, struct mps_ctx *ctx, const void *owner);
void mps__devmem_remove(uint64_t base);
void mps__devmem_forget(struct mps_ctx *ctx, const void *owner);
/* Whether [addr, addr + size) lies in one device range whose addresses
 * this process holds, inaccessible (memory.c). */
bool mps__devmem_reserved(uint64_t addr, uint64_t size);
bool mps__devmem_has(uint64_t addr);
/* Whether [addr, addr + size) lies in one allocation of this process's own
 * (cuMemAlloc, a pool) that no other process or client may reach: never
 * given out by an IPC handle or export, nor opened from one. Marks the
 * allocation holding addr as shared. (memory.c) */
bool mps__devmem_private(uint64_t addr, uint64_t size);
void mps__devmem_share(uint64_t addr);

/* Tells the server which of its devices this process sees (CUDA_VISIBLE_DEVICES,
 * CUDA_DEVICE_ORDER) and renumbers the welcome's devices to match: the
 * number visible, or -errno. Once, right after connecting. */
int mps__select_devices(void);

/* What a call that failed on the connection (or whose descriptor did not
 * come) returns: what the server said as it ended us (terminate_client, a
 * GPU fault) if it did, else otherwise (CUDA_ERROR_MPS_CONNECTION_FAILED
 * for a failed connection). */
CUresult mps__ended_or(CUresult otherwise);

/* Sends the limits the environment asks for (limits.c): 0, or -1 if the
 * server refused them. Once, right after mps__select_devices(). */
int mps__send_limits(void);

/* Whether device d may access device peer's memory directly (0 or 1). */
int mps__peer_capable(CUdevice d, CUdevice peer);

/* A pinned host region for the library's own use (the staging region):
 * not known to the program, never freed. */
CUresult mps__host_region(size_t size, uint32_t *handle, void **addr);

/* __managed__ variables (mvar.c): one the server named at addr, made
 * reachable here at that address (owner: its module or library; value: its
 * bytes now, or NULL: fetched in ctx, or at the next meeting point if there
 * is no context); forgotten with its owner; the program's changes sent
 * ahead of work on a stream; the device's values fetched once the program
 * has waited for it. With no context (ctx 0) nothing moves. */
CUresult mps__mvar_add(uint64_t addr, size_t size, const void *owner, const void *value, uint32_t ctx);
void mps__mvar_forget(const void *owner);
CUresult mps__mvar_send(uint32_t stream, uint32_t ctx);
CUresult mps__mvar_fetch(uint32_t stream, uint32_t ctx);

/* What kernels print (devout.c): an image loaded in context ctx looked at
 * for printf and assert; after a synchronizing call on stream (0: the
 * context ctx), what they printed written to stdout and stderr. */
void mps__devout_scan(const void *image, size_t size, uint32_t ctx);
void mps__devout_take(uint32_t stream, uint32_t ctx);
/* Bytes the server sent for the process's stdout (1) or stderr (2). */
void mps__devout_write(uint32_t stream, const void *bytes, size_t n);

/* The program has waited for work on stream (0: all of ctx's) and found it
 * done (stream.c): host functions' writes are seen here (hostfn.c), and
 * __managed__ variables hold what the work left (mvar.c). */
CUresult mps__waited(uint32_t stream, uint32_t ctx);

/* Copies of n bytes on the server's stream and context handles that touch
 * nothing but the copy (copy.c): to the device as an asynchronous copy
 * (the bytes taken now), from it as a synchronous one. */
CUresult mps__copy_h2d(uint64_t dst, const void *src, size_t n, uint32_t stream, uint32_t ctx);
CUresult mps__copy_d2h(void *dst, uint64_t src, size_t n, uint32_t stream, uint32_t ctx);

/* A staging buffer for a graph's copy of pageable memory (gstage.c): the
 * box of the program's memory it mirrors (host: the span's first byte;
 * rows, depth and width: the box; x, y, z, pitch, height: the side's
 * geometry, whose first byte is start bytes from its base), the pinned
 * buffer of span bytes laid out the same (region: the server's handle) and
 * the kept host function slot that moves the rows, to the host or from it. */
struct mps_gstage {
	bool to_host;
	uint8_t *host;
	uint64_t span, start;
	uint64_t x, y, z, pitch, height;
	uint64_t width, rows, depth;
	uint8_t *buf;
	uint32_t region;
	uint32_t slot, seq;
};

/* The stage for want's copy (made on first use, kept for good), in *out. */
CUresult mps__gstage_get(const struct mps_gstage *want, struct mps_gstage **out);
/* The same for n bytes at host. */
CUresult mps__gstage_linear(bool to_host, void *host, size_t n, struct mps_gstage **out);
/* cuGraphExecUpdate gave exec the graph's nodes again: the host nodes it
 * had been given slots of their own (gnode.c) run the graph's now. */
void mps__exec_hosts_forget(CUgraphExec exec);
/* exec was launched: its host nodes' slots of their own each have one
 * more run to come (gnode.c). */
void mps__exec_hosts_launched(CUgraphExec exec);
/* A copy node in graph (gnode.c), staged if a side is pageable memory. */
CUresult mps__graph_add_copy(CUgraphNode *out, CUgraph graph, const CUgraphNode *deps, size_t ndeps,
			     const CUDA_MEMCPY3D *p);

/* Host functions kept by a graph (hostfn.c): a slot for good, with its
 * sequence number; given back if the node could not be made; a node's
 * function and data read (get) or changed (set). */
CUresult mps__hostfn_keep(CUhostFn fn, void *data, uint32_t *slot, uint32_t *seq);
void mps__hostfn_unkeep(uint32_t slot);
/* A kept slot never given back, even with no graph holding it (a staging
 * buffer's, which later graphs use again). */
void mps__hostfn_pin(uint32_t slot);
/* After the program has waited for a stream: what host functions wrote
 * before it went on (a staged copy's bytes) is seen here; and before work
 * that may run host functions (a graph), what the program wrote is seen
 * by them (hostfn.c). */
void mps__hostfn_acquire(void);
void mps__hostfn_release(void);
CUresult mps__hostfn_params(uint32_t slot, CUDA_HOST_NODE_PARAMS *get, const CUDA_HOST_NODE_PARAMS *set);
/* How many times a kept slot's function has run and returned. */
uint64_t mps__hostfn_runs(uint32_t slot);

/* Registered host memory (hostreg.c) in the table of pinned regions
 * (memory.c): whether any region meets [p, p + len); a region added (user
 * NULL: adopted, managed memory, not registered to the program); the
 * one registered at the program's pointer user taken out (its handle). */
bool mps__hostmem_overlaps(const void *p, size_t len);
CUresult mps__hostmem_add_registered(void *addr, size_t size, uint32_t handle, unsigned int flags, uint64_t devptr,
				     void *user);
bool mps__hostmem_take_registered(const void *user, uint32_t *handle);
/* Pages of the calling thread's own stack moved into the sealed memfd fd
 * (sized len) mapped over them, with nothing written to memory between
 * the copy and the mapping; and moved back into private memory
 * (stackmove.c). 0, or -errno (-ENOTSUP where it cannot be done). */
int mps__stack_move(int fd, void *start, size_t len);
int mps__stack_restore(void *start, size_t len);

/* Shared memory of the client's own making: the sealed memfd fd, mapped
 * here over [start, start + len), pinned in the server as adopted memory
 * (hostreg.c); the server's device address of start in *devptr; unpinned
 * again (the mapping here stays), and the table's entry for an adopted
 * region at addr taken out (its handle). */
CUresult mps__host_pin_shared(void *start, size_t len, int fd, uint64_t *devptr);
CUresult mps__host_unpin_shared(void *start);
bool mps__hostmem_take_adopted(const void *addr, uint32_t *handle);

/* Managed memory (managed.c): whether p lies in a managed allocation, with
 * its n attributes attrs (each value and result) or its range; cuMemFree of one (true if p was
 * one, *r the result); a prefetch of [p, p + count) to location id `to`
 * (a device ordinal or CU_DEVICE_CPU): true if the range is managed, *r
 * then the result. */
bool mps__managed_attrs(uint64_t p, unsigned int n, const CUpointer_attribute *attrs, uint64_t *vals,
			CUresult *res);
bool mps__managed_range(uint64_t p, uint64_t *base, uint64_t *size);
bool mps__managed_free(uint64_t p, CUresult *r);
bool mps__managed_prefetch(uint64_t p, size_t count, int to, CUresult *r);

/* Managed memory on the device (migrate.c, OPENMPS_MANAGED=device):
 * whether that mode is on; a new allocation of bytesize in context ctx
 * (CUDA_ERROR_NOT_SUPPORTED: not here, use host memory); whether a lies in
 * one; its cuMemFree (false if p is none); everything the CPU wrote moved
 * to the device and made the device's, before work goes there on stream
 * (nothing while that stream captures): what kernels on the stream may
 * reach, and the allocations holding addresses a and b (0: none), which a
 * copy or a memset names; an attachment
 * (cuStreamAttachMemAsync's flags and stream), and what was attached to a
 * stream being destroyed (global again, after its work); and
 * [p, p + count) made the CPU's (a prefetch to the host). */
bool mps__migrate_on(void);
CUresult mps__migrate_alloc(size_t bytesize, unsigned int flags, uint32_t ctx, CUdeviceptr *dptr);
bool mps__migrate_has(uint64_t a);
bool mps__migrate_free(uint64_t p, CUresult *r);
CUresult mps__migrate_to_device(uint32_t stream, uint64_t a, uint64_t b);
CUresult mps__migrate_to_host(uint64_t p, size_t count);
void mps__migrate_attach(uint64_t p, unsigned int flags, uint32_t stream);
void mps__migrate_attach_gone(uint32_t stream);
/* What a host function wrote to managed memory on the device, moved there
 * before its stream goes on (all but memory attached to the host). */
CUresult mps__migrate_settle(void);

/* Whether this thread is the one that runs the program's host functions
 * (hostfn.c). */
bool mps__hostfn_runner(void);

/* A memory location as the device-numbered calls name it: a device ordinal
 * of the program's, or CU_DEVICE_CPU; CU_DEVICE_INVALID if it is neither;
 * and a device-numbered location (CU_DEVICE_CPU: the host) as a location
 * (managed.c). */
int mps__location_id(CUmemLocation loc);
CUmemLocation mps__device_location(CUdevice d);

/* Pinned host memory: the region holding [p, p + len), or false. */
bool mps__hostmem_find(const void *p, size_t len, uint32_t *region, uint64_t *offset);

/* Where the program sees the pinned host region the server calls region,
 * or NULL (freed, or the library's own). */
void *mps__hostmem_base(uint32_t region);

/* A kernel node added to graph, or given new parameters in its graph or in
 * an executable graph (what: enum mps_kernel_node_what) (graph.c). */
CUresult mps__kernel_node(int what, CUgraphNode *out, CUgraph graph, CUgraphExec exec, CUgraphNode node,
			  const CUgraphNode *deps, size_t ndeps, const CUDA_KERNEL_NODE_PARAMS *p);

/* Per-thread default stream of ctx (stream.c), made on first use; and
 * forgetting those of a context that died. */
CUresult mps__per_thread_stream(struct mps_ctx *ctx, uint32_t *handle);
void mps__per_thread_forget(struct mps_ctx *ctx);

/* The live function or kernel the server knows by handle, or NULL (module.c). */
struct mps_func *mps__func_by_handle(uint32_t handle);

/* A launch's arguments as the server wants them (launch.c): the size of
 * the packed buffer for f given cuLaunchKernel's params or extra, then the
 * packing. CUDA_ERROR_INVALID_VALUE where the driver refuses them. */
CUresult mps__args_size(const struct mps_func *f, void **params, void **extra, const void **packed,
			size_t *packed_len, size_t *size);
void mps__args_pack(const struct mps_func *f, void **params, const void *packed, size_t packed_len, size_t size,
		    uint8_t *dst);

/* The live event the server knows by handle, or NULL (event.c). */
struct mps_event *mps__event_by_handle(uint32_t handle);

/* Makes the program's CUevent for an event the server made for it (an IPC
 * handle opened): *out, or CUDA_ERROR_OUT_OF_MEMORY (event.c). */
CUresult mps__event_adopt(uint32_t handle, struct mps_ctx *ctx, unsigned int flags, CUevent *out);

/* Called when a context dies on the server, to drop what the client kept. */
void mps__ctx_forget(struct mps_ctx *ctx);

/* memcpy, spread over a few threads when it is large (pcopy.c). */
void mps__pcopy(void *dst, const void *src, size_t n);
/* pwrite of n bytes of src to fd at off, the same way; 0 or -errno. */
int mps__pwrite_parallel(int fd, const void *src, off_t off, size_t n);

/* A stream known to have finished everything sent to it (stream.c): after
 * a reply that the stream's work had to be done for (a synchronize, a copy
 * into the reply slot), whose message was number seq. Until the client
 * sends anything else, synchronizing or querying that stream on this
 * thread needs no round trip. */
void mps__stream_idle(uint32_t stream, uint32_t ctx, uint32_t seq);

/* The calling thread's last `posted` messages (mps__posted) were a copy of
 * n bytes into device memory at dst from pageable memory, whose bytes are
 * the server's now (staged): if they come right after the stream was
 * known idle on this thread, or after such copies, a synchronize of the
 * stream is answered here (stream.c, server/streams.h: fences). */
void mps__stream_uploaded(uint32_t stream, uint32_t ctx, uint64_t dst, size_t n, uint32_t posted);

/* Whether all the stream's work sent before now was done when last seen
 * on this thread, or is staged uploads sent since (stream.c): what a
 * synchronous upload from pageable memory waits for before its bytes are
 * staged, as the driver's does, is then over. */
bool mps__stream_settled(uint32_t stream, uint32_t ctx);

/* The stream was found idle at message seq: the staging of copies sent on
 * it before then may be reused (copy.c). */
void mps__copy_settled(uint32_t stream, uint32_t ctx, uint32_t seq);

/* Frees the attributes kept of a function that goes (funcattr.c). */
void mps__fattr_drop(struct mps_func *f);

/* Occupancy answers kept for f on device (funcattr.c): the value of a
 * query like q, if kept; keeps one. Only blocks per SM and dynamic shared
 * memory queries are kept. */
struct mps_msg_occupancy;
bool mps__occ_find(struct mps_func *f, int device, const struct mps_msg_occupancy *q, uint64_t *value);
void mps__occ_keep(struct mps_func *f, int device, const struct mps_msg_occupancy *q, uint64_t value);

/* Logs, once per name, that a function is not supported in server mode. */
void mps__unsupported(const char *name);

/* The name of a CUresult ("CUDA_ERROR_INVALID_VALUE"), or "an unknown code". */
const char *mps__error_name(CUresult r);

/* Whether calls are entered through mps__trace_entry: OPENMPS_TRACE_ERRORS,
 * OPENMPS_CALL_STATS or CUDA_LOG_FILE is set (trace.c). */
bool mps__tracing(void);

/* The outermost driver call the calling thread is in (enum mps_sym), or -1
 * when none or when calls are not traced (trace.c). */
int mps__trace_current(void);

/* The driver's error log (logs.c): a message from `source` ("CUDA" if
 * NULL) at `level`, kept, written to CUDA_LOG_FILE and handed to the
 * registered callbacks; "Returning N (NAME) from FUNCTION" for function
 * sym; whether CUDA_LOG_FILE is set (every failed served call is logged). */
void mps__logs_vadd(const char *source, CUlogLevel level, const char *fmt, va_list ap);
void mps__logs_add(const char *source, CUlogLevel level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void mps__logs_returning(int sym, CUresult r);
bool mps__logs_to_file(void);

/* OPENMPS_CALL_STATS (callstats.c): whether it is set; a traced call of
 * function idx; a message sent to the server; a wait for a reply; a nap
 * through a GPU wait (how long; whether the GPU had stored the word by its
 * end). */
bool mps__stats_on(void);
void mps__stats_call(int idx);
void mps__stats_message(void);
void mps__stats_round_trip(void);
void mps__stats_waited(uint64_t start);
void mps__stats_nap(uint64_t ns, bool overslept);

#endif
