// SPDX-License-Identifier: MIT
/*
 * Internal interfaces of the software stand-in for the CUDA driver.
 *
 * The stand-in is a shared library named libcuda.so.1 that implements the
 * part of the driver API openmps-server uses, on the CPU, so that the whole
 * client -> ring -> server path can be tested without a GPU. Device memory is
 * host memory, kernels are C "twins" of tests/kernels/kernels.cu matched by
 * entry name, and every stream is a thread that runs its operations in order.
 *
 * Locking: one mutex (mps__lock/mps__unlock) guards all bookkeeping — the
 * handle registry, devices, contexts, memory ranges, stream queues, events,
 * modules. It is never held while work runs: a stream thread takes an
 * operation off its queue under the lock, pins the memory it touches, drops
 * the lock, does the copy or runs the twin, and retakes the lock to finish.
 * Everything that waits for another thread (synchronize calls, a stream
 * waiting for an event, a context reset waiting for its threads) waits on
 * one condition variable (mps__wait), broadcast (mps__progress) whenever an
 * operation completes or a context changes state; an idle stream thread
 * waits on a condition of its own for work. With one lock there is no lock
 * order to get wrong.
 *
 * Handles are never pointers to our objects: each is a fresh number looked up
 * in the registry (registry.c), so a stale or garbage handle is detected and
 * never dereferenced, and a number is never reused.
 */
#ifndef OPENMPS_STANDIN_H
#define OPENMPS_STANDIN_H

#include <cuda.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* Marks a definition as part of the exported driver API; everything else in
 * the library is built with -fvisibility=hidden. */
#define CU_API __attribute__((visibility("default")))

#define SI_MAX_DEVICES      8
#define SI_SM_COUNT         16
#define SI_MAX_THREADS      1024            /* per block */
#define SI_SMEM_PER_SM      (228 * 1024)    /* shared memory per SM */
#define SI_SMEM_OPTIN       (227 * 1024)    /* most dynamic shared memory a block may opt in to */
#define SI_SMEM_DEFAULT     (48 * 1024)     /* dynamic shared memory without opting in */
#define SI_SMEM_RESERVED    1024            /* reserved by the driver per block */
#define SI_NLIMITS          10              /* CU_LIMIT_STACK_SIZE .. CU_LIMIT_CIG_SHMEM_FALLBACK_ENABLED */
#define SI_DRIVER_VERSION   13000

/* ---- intrusive list ------------------------------------------------------ */

struct si_list {
	struct si_list *prev, *next;
};

#define si_container_of(ptr, type, member) \
	((type *)(void *)((char *)(ptr) - offsetof(type, member)))

static inline void si_list_init(struct si_list *l)
{
	l->prev = l->next = l;
}

static inline bool si_list_empty(const struct si_list *l)
{
	return l->next == l;
}

static inline void si_list_add(struct si_list *head, struct si_list *n)
{
	n->prev = head->prev;
	n->next = head;
	head->prev->next = n;
	head->prev = n;
}

static inline void si_list_del(struct si_list *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	n->prev = n->next = n;
}

/* ---- global lock (lock.c) ------------------------------------------------ */

void mps__lock(void);
void mps__unlock(void);
/* Waits for progress of any kind; the lock must be held and is held again on return. */
void mps__wait(void);
/* Waits on a condition of one's own (a stream's wake-up); as mps__wait. */
void mps__wait_on(pthread_cond_t *cond);
/* Wakes every waiter of mps__wait; the lock must be held. */
void mps__progress(void);

/* ---- handle registry (registry.c); all calls under the lock -------------- */

enum si_kind {
	SI_H_CONTEXT = 1,
	SI_H_STREAM,
	SI_H_EVENT,
	SI_H_MODULE,
	SI_H_FUNCTION,
	SI_H_LIBRARY,
	SI_H_KERNEL,
	SI_H_GRAPH,
	SI_H_GNODE,
	SI_H_GEXEC,
	SI_H_POOL,
	SI_H_PHYS,
	SI_H_LINK,
	SI_H_RESDESC,
	SI_H_GREEN,
	SI_H_GREENCTX,                  /* a green context as a CUcontext (cuCtxFromGreenCtx) */
	SI_H_ARRAY,
	SI_H_MIPMAP,
	SI_H_TEXOBJ,                    /* texture and surface objects */
};

/* Returns a new handle for obj, or 0 when out of memory. */
uintptr_t mps__handle_add(enum si_kind kind, void *obj);
/* Returns the object behind a live handle of that kind, else NULL. */
void *mps__handle_get(uintptr_t handle, enum si_kind kind);
/* Returns the object behind a live handle and its kind, else NULL. */
void *mps__handle_lookup(uintptr_t handle, enum si_kind *kind);
void mps__handle_remove(uintptr_t handle);

/* ---- devices (device.c) -------------------------------------------------- */

struct si_device {
	int ordinal;
	int phys;                       /* which of the stand-in's devices (CUDA_VISIBLE_DEVICES) */
	size_t total_mem;
	size_t used_mem;                /* under the lock */
	struct si_context *ctx;         /* its primary context; lives forever */
};

extern struct si_device mps__devices[SI_MAX_DEVICES];
extern int mps__ndevices;

/* True once cuInit has succeeded. Lock-free. */
bool mps__initialized(void);
/* Returns the device behind an ordinal, or NULL. Needs no lock. */
struct si_device *mps__device(CUdevice dev);

/* ---- contexts (context.c) ------------------------------------------------ */

enum si_ctx_state {
	SI_CTX_INACTIVE,        /* no retains: calls made in it fail */
	SI_CTX_ACTIVE,
	SI_CTX_RESETTING,       /* last release is tearing it down */
};

struct si_context {
	uintptr_t handle;               /* permanent */
	int device;
	unsigned retains;
	enum si_ctx_state state;
	CUresult sticky;                /* CUDA_SUCCESS, or the error that killed it */
	struct si_list streams;         /* stream threads not yet exited */
	unsigned nstreams;
	struct si_stream *legacy;       /* the legacy stream, once used; referenced */
	struct si_list events;
	struct si_list modules;
	size_t limits[SI_NLIMITS];
};

/* The SMs of the calling thread's current context: a green context's, made
 * current through cuCtxFromGreenCtx, or all of them. */
void mps__ctx_sm_range(unsigned *first, unsigned *count);
/* The device and SMs of a green context's CUcontext handle, or false
 * (green.c). Under the lock. */
bool mps__green_ctx(uintptr_t handle, int *device, unsigned *first, unsigned *count);

/* Creates the primary context of each device at cuInit. 0 or -ENOMEM. */
int mps__contexts_create(void);
/*
 * The calling thread's current context for a call that needs one: returns
 * CUDA_ERROR_INVALID_CONTEXT with none current, CUDA_ERROR_CONTEXT_IS_DESTROYED
 * when it was released, or the sticky error that killed it. Under the lock.
 */
CUresult mps__ctx_enter(struct si_context **out);
/* The calling thread's current context, checked only for being active. */
CUresult mps__ctx_current(struct si_context **out);
/* Records an asynchronous error that kills ctx (first one wins). Under the lock. */
void mps__ctx_fault(struct si_context *ctx, CUresult err);
/* Waits until all work submitted to ctx so far has completed. Under the lock. */
void mps__ctx_quiesce(struct si_context *ctx);

/* ---- memory ranges (memory.c); all calls under the lock ------------------ */

enum si_range_kind {
	SI_RANGE_DEVICE,        /* cuMemAlloc */
	SI_RANGE_HOST,          /* cuMemHostRegister */
	SI_RANGE_GLOBAL,        /* a module's global variable */
	SI_RANGE_MAPPED,        /* a physical allocation mapped into a reservation (vmm.c) */
};

struct si_range {
	uintptr_t base;
	size_t size;
	enum si_range_kind kind;
	struct si_context *ctx;         /* owner */
	uint64_t buffer_id;
	void *block;                    /* storage we own (device, global) */
	size_t mapped;                  /* its length, for munmap() */
	size_t charged;                 /* bytes counted against the device; 0 once removed */
	unsigned pins;                  /* operations running on it */
	bool removed;                   /* out of the table; freed when unpinned */
	bool graph;                     /* an allocation node's: freeing keeps it for the next launch */
	bool freed;                     /* such, freed until its graph runs again */
	unsigned graph_refs;            /* such: its node and executable graphs' steps */
	bool managed;                   /* a __managed__ variable's (managed memory) */
	unsigned flags;                 /* cuMemHostRegister flags; a mapping's access */
	struct si_pool *pool;           /* the pool it came from (pools.c), or NULL */
};

struct si_pool;

/* The range containing addr, or NULL. */
struct si_range *mps__range_find(uintptr_t addr);
/* Classifies [addr, addr+bytes): 1 and *out when one range holds all of it,
 * 0 when no range holds addr (host memory we know nothing of), -1 when the
 * span starts in a range and runs past its end. */
int mps__range_classify(uintptr_t addr, size_t bytes, struct si_range **out);
/* Allocates zeroed (globals) or uninitialised (device) memory of ctx's device.
 * CUDA_ERROR_OUT_OF_MEMORY when the device is full. */
CUresult mps__range_alloc(struct si_context *ctx, size_t bytes, enum si_range_kind kind,
			  struct si_range **out);
/* Adds a host registration; the error codes of cuMemHostRegister. */
CUresult mps__range_register(struct si_context *ctx, void *p, size_t bytes, unsigned flags,
			     struct si_range **out);
/* The handle of a pool (pools.c), 0 for none; a range from a pool leaving
 * the table gives its bytes back to the pool's account. Under the lock. */
uintptr_t mps__pool_handle(const struct si_pool *p);
void mps__pool_freed(struct si_range *r);
/* Adds a mapping of memory the caller owns at [base, base + bytes) (vmm.c). */
CUresult mps__range_map(struct si_context *ctx, uintptr_t base, size_t bytes, struct si_range **out);
/* Address space for a reservation in the device window, inaccessible and
 * uncommitted, aligned to align (a power of two); NULL when there is none. */
void *mps__window_reserve(size_t bytes, size_t align);
/* Takes a range out of the table and uncharges it; its storage and the
 * struct go once no running operation has it pinned. */
void mps__range_remove(struct si_range *r);
/* An event's creation flags, or -1 if ev is none (event.c). Under the lock. */
int mps__event_flags(CUevent ev);

/* Whether device from's contexts may touch device to's memory (peer.c).
 * Call with the lock held. */
bool mps__peer_enabled(int from, int to);

/* Pins the range holding all of [addr, addr+bytes) so it outlives the
 * operation using it. device >= 0 accepts only device memory of that device
 * (and host registrations); -1 accepts any. NULL when there is none. */
struct si_range *mps__range_pin(uintptr_t addr, size_t bytes, int device);
void mps__range_unpin(struct si_range *r);
/* Removes every allocation and registration owned by ctx (context reset). */
void mps__ranges_drop_context(struct si_context *ctx);

/* ---- PTX images (ptx.c) -------------------------------------------------- */

struct si_param {
	size_t offset;
	size_t size;
};

struct si_entry {
	char *name;
	struct si_param *params;
	unsigned nparams;
	size_t param_bytes;             /* end of the last parameter */
	size_t param_align;             /* largest parameter alignment */
	unsigned max_threads;           /* .maxntid/.reqntid, else SI_MAX_THREADS */
};

struct si_global {
	char *name;
	size_t size;
	size_t align;
	bool managed;    /* .attribute(.managed): a __managed__ variable */
};

struct si_image {
	unsigned ptx_version;           /* major * 10 + minor */
	struct si_entry *entries;
	unsigned nentries;
	struct si_global *globals;
	unsigned nglobals;
};

/* Parses PTX text. 0, -ENOEXEC when it is not PTX, -EBADMSG when it is PTX we
 * cannot read, -ENOMEM. */
int mps__ptx_parse(const char *text, struct si_image *img);
void mps__ptx_release(struct si_image *img);
/* Index of the entry called name, or -1. */
int mps__ptx_entry(const struct si_image *img, const char *name);
int mps__ptx_global(const struct si_image *img, const char *name);

/* ---- modules, functions, libraries (module.c, library.c) ----------------- */

struct si_fattrs {                      /* the settable function attributes */
	int max_dyn_smem;
	int carveout;
	int cache_config;
	int cluster[3];
	int non_portable_cluster;
	int cluster_policy;
};

struct si_twin;

struct si_function {
	uintptr_t handle;
	struct si_module *mod;
	const struct si_entry *entry;
	const struct si_twin *twin;     /* NULL: no C twin, cannot run */
	struct si_fattrs own;
	struct si_fattrs *attrs;        /* &own, or the library kernel's per-device set */
};

struct si_module {
	uintptr_t handle;               /* 0 once unloaded */
	struct si_context *ctx;
	struct si_image img;
	struct si_function *funcs;      /* one per entry */
	struct si_range **globals;      /* one per global */
	struct si_library *lib;         /* the library this loads into ctx, or NULL */
	unsigned refs;                  /* 1 while loaded + 1 per queued launch */
	struct si_list link;            /* in ctx->modules */
};

struct si_kernel {
	uintptr_t handle;
	struct si_library *lib;
	unsigned index;                 /* entry index */
	struct si_fattrs attrs[SI_MAX_DEVICES];
};

struct si_library {
	uintptr_t handle;
	char *text;                     /* the PTX, loaded again into each context */
	struct si_image img;
	struct si_kernel *kernels;      /* one per entry */
	struct si_module *mods[SI_MAX_DEVICES];
};

void mps__fattrs_default(struct si_fattrs *a);
/* True for an ELF cubin or a fatbin, which the stand-in cannot load. */
bool mps__image_is_binary(const void *image);
/* The PTX text of an image — PTX itself, or the uncompressed PTX inside a
 * fatbin or its wrapper — in memory of its own (free it), or NULL. */
char *mps__image_text(const void *image);
/* The CUresult for an error of mps__ptx_parse. */
CUresult mps__image_error(int err);
/* Loads PTX into ctx; lib non-NULL when loading a library. CUresult of cuModuleLoadData. */
CUresult mps__module_load(struct si_context *ctx, const char *text, struct si_library *lib,
			  struct si_module **out);
/* Unregisters the module's handles and drops the loaded reference. */
void mps__module_unload(struct si_module *m);
void mps__module_put(struct si_module *m);
/* The library's module in ctx, loading it on first use. */
CUresult mps__library_module(struct si_library *lib, struct si_context *ctx, struct si_module **out);
/*
 * A CUfunction as the launch and attribute calls take it: a function handle,
 * or a CUkernel cast to CUfunction, resolved in ctx (the current context when
 * NULL). CUDA_ERROR_INVALID_HANDLE for anything else.
 */
CUresult mps__function_resolve(CUfunction f, struct si_context *ctx, struct si_function **out);
/* The module global called name: its address and size (either may be NULL). */
CUresult mps__module_global(struct si_module *m, const char *name, CUdeviceptr *dptr, size_t *bytes);
/* A function attribute of an entry with settable attributes a. */
CUresult mps__fattr_get(const struct si_entry *e, const struct si_fattrs *a, unsigned ptx_version,
			CUfunction_attribute attr, int *out);
CUresult mps__fattr_set(struct si_fattrs *a, CUfunction_attribute attr, int value);

/* ---- streams and operations (stream.c, ops.c, event.c) ------------------- */

struct si_record {                      /* one cuEventRecord */
	unsigned refs;
	bool done;
	CUresult err;                   /* set when the record was dropped */
	bool timed;
	struct timespec at;
};

struct si_waiter {                      /* a caller waiting for one operation */
	bool done;
	CUresult result;
};

enum si_op_kind {
	SI_OP_COPY,
	SI_OP_MEMSET,
	SI_OP_KERNEL,
	SI_OP_RECORD,
	SI_OP_WAIT,
	SI_OP_MARKER,                   /* does nothing: something to wait for */
	SI_OP_HOSTFN,                   /* a host function (memops.c) */
	SI_OP_VALUE_WAIT,               /* a wait on a 32- or 64-bit word (memops.c) */
	SI_OP_VALUE_WRITE,              /* a write of one (memops.c) */
};

struct si_op {
	struct si_op *next;
	enum si_op_kind kind;
	uint64_t serial;                /* submission order across all streams */
	struct si_waiter *waiter;
	union {
		struct {
			void *dst;
			const void *src;
			size_t bytes;           /* of a row */
			bool pin_dst, pin_src;  /* device or registered memory */
			void *staging;          /* our copy of a pageable source */
			/* A 2D or 3D copy (a graph's copy node): rows of each
			 * slice, slices, and the strides; 0 rows: one row. */
			size_t rows, slices;
			size_t spitch, dpitch, sslice, dslice;
			/* A 3D copy's parameters as given (malloc'ed), for
			 * the node a capture makes of it; NULL otherwise. */
			CUDA_MEMCPY3D *params;
		} copy;
		struct {
			void *dst;
			size_t count;
			unsigned width;
			uint32_t value;
		} memset;
		struct {
			const struct si_twin *twin;
			struct si_module *mod;  /* referenced */
			const struct si_entry *entry;
			unsigned grid[3], block[3];
			unsigned char *params;
			unsigned sm_first, sm_count;   /* a graph's SMs (its context's); 0: the stream's */
		} kernel;
		struct si_record *rec;          /* RECORD, WAIT: referenced */
		struct {
			CUhostFn fn;
			void *data;
		} hostfn;
		struct {
			void *addr;
			uint64_t value;
			unsigned flags;
			bool wide;              /* 64-bit */
		} value_wait;               /* VALUE_WAIT and VALUE_WRITE */
	};
};

struct si_stream {
	uintptr_t handle;               /* 0 once destroyed */
	struct si_context *ctx;
	unsigned flags;
	int priority;
	struct si_op *head, *tail;      /* queued, not yet started */
	struct si_op *running;          /* taken off the queue, not yet completed */
	uint64_t enqueued, completed;
	bool destroyed;                 /* exit once drained */
	bool killed;                    /* context reset: drop everything and exit */
	unsigned refs;                  /* handle + thread + waiters */
	pthread_cond_t wake;            /* work arrived, or destroyed/killed */
	struct si_list link;            /* in ctx->streams */
	struct si_capture *cap;         /* the capture this stream is in, or NULL (capture.c) */
	struct si_gnode **cap_deps;     /* the nodes its next captured work follows */
	unsigned ncap_deps, cap_deps_cap;
	uint64_t cap_ops;               /* work captured on it (unjoined detection) */
	bool cap_unjoined;              /* forked into the capture and not joined back */
	unsigned sm_first, sm_count;    /* the SMs its kernels run on (a green context's, or all) */
};

struct si_op *mps__op_new(enum si_op_kind kind);
/* Frees an operation and what it holds. Under the lock. */
void mps__op_free(struct si_op *op);
/* Runs a host function, waits until a word allows the stream on or writes
 * a word (memops.c).
 * Without the lock; gone(arg) says when to stop waiting. */
void mps__memop_run(struct si_op *op, bool (*gone)(void *), void *arg);
/* Runs a copy, memset or kernel (on SMs [sm_first, sm_first + sm_count)).
 * Without the lock. CUDA_SUCCESS or the fault. */
CUresult mps__op_execute(struct si_op *op, int device, unsigned sm_first, unsigned sm_count);
/* A stream of ctx whose kernels run on SMs [sm_first, sm_first + sm_count)
 * (green.c). Under the lock. */
CUresult mps__stream_create_in(struct si_context *ctx, unsigned flags, int priority, unsigned sm_first,
			       unsigned sm_count, CUstream *out);

/* True for the handles that name the legacy stream (0, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD). */
bool mps__stream_is_legacy(CUstream h);
/*
 * Resolves the stream of an enqueueing call: the context its work runs in and
 * the stream (the current context's legacy stream, started on first use, for
 * the legacy handles). A current context is required; a stream may belong to
 * another context. Returns sticky errors too.
 */
CUresult mps__stream_enter(CUstream h, struct si_context **ctx, struct si_stream **s);
/* Queues op on s. Takes ownership of op. Under the lock. */
void mps__submit(struct si_stream *s, struct si_op *op);
/* Queues op on s and waits until it has run; returns its result. Under the lock. */
CUresult mps__submit_wait(struct si_stream *s, struct si_op *op);
/* Stops every stream of ctx (reset) and waits for their threads to exit. */
void mps__streams_kill(struct si_context *ctx);
void mps__stream_put(struct si_stream *s);

struct si_record *mps__record_new(void);
void mps__record_put(struct si_record *rec);
/* Marks a record reached (timestamp) or dropped (err). Under the lock. */
void mps__record_complete(struct si_record *rec, CUresult err);
/* CUDA_SUCCESS when ev is a live event of ctx. Under the lock. */
CUresult mps__event_check(CUevent ev, struct si_context *ctx);
/* Records ev on stream s of ctx. Under the lock. */
CUresult mps__event_record(struct si_context *ctx, struct si_stream *s, CUevent ev);
/* Destroys every event of ctx (reset). */
void mps__events_drop_context(struct si_context *ctx);

/* ---- kernels' C twins (twins.c, launch.c) -------------------------------- */

struct si_launch {                      /* what a twin sees */
	unsigned grid[3], block[3];
	const unsigned char *params;
	const struct si_entry *entry;
	struct si_module *mod;
	int device;
	unsigned sm_first, sm_count;    /* the SMs the stream may use */
	struct si_range *pinned[8];
	unsigned npinned;
};

/* What printf_u32 kernels printed, written to stdout: at a synchronize
 * (twins.c). */
void mps__printf_flush(void);

struct si_twin {
	const char *name;
	unsigned nparams;
	unsigned sizes[8];              /* the parameter sizes it expects */
	CUresult (*run)(struct si_launch *l);
};

/* A linear texture object's memory (texture.c): its device address, size,
 * format and channels. False for anything else. Under the lock. */
bool mps__texture_linear(uint64_t value, uintptr_t *base, size_t *bytes, CUarray_format *format,
			 unsigned *channels);

/* A tiled tensor map as tensormap.c encodes it. */
struct si_tmap {
	unsigned dtype, rank, esize;
	uint64_t addr;
	uint64_t dim[5], stride[4];
	uint32_t box[5];
};

/* Reads a stand-in tiled tensor map; false if the bytes are not one. */
bool mps__tensormap_tile(const void *desc, struct si_tmap *t);

/* The twin of an entry, or NULL when it has none or its signature differs. */
const struct si_twin *mps__twin_find(const struct si_entry *e);
/* Parameter i of the launch, at its PTX offset. */
const void *mps__launch_param(const struct si_launch *l, unsigned i);
/*
 * Makes [addr, addr+bytes) accessible to the twin: it must lie in device
 * memory of the launch's device or in registered host memory, aligned to
 * align. CUDA_ERROR_ILLEGAL_ADDRESS or CUDA_ERROR_MISALIGNED_ADDRESS
 * otherwise — the faults a GPU would raise.
 */
CUresult mps__launch_access(struct si_launch *l, uint64_t addr, size_t bytes, size_t align,
			    void **out);
/* The module global called name, at least bytes long. */
CUresult mps__launch_global(struct si_launch *l, const char *name, size_t bytes, void **out);

/* ---- graphs and stream capture (graph.c, graphexec.c, capture.c) --------- */

struct si_graph {
	uintptr_t handle;               /* 0 for a graph no one may name (being built) */
	struct si_list nodes;           /* si_gnode.link, in creation order */
	unsigned nnodes;
	struct si_gnode *parent;        /* the child-graph node that owns it, or NULL */
	struct si_capture *cap;         /* the capture building it, or NULL */
};

struct si_gnode {
	uintptr_t handle;
	struct si_graph *graph;
	CUgraphNodeType type;
	struct si_op *op;               /* kernel, memcpy, memset: the work, never submitted itself */
	const struct si_function *fn;   /* kernel: its function */
	struct si_graph *child;         /* CU_GRAPH_NODE_TYPE_GRAPH: a clone it owns */
	CUevent event;                  /* event record / wait */
	CUdeviceptr dptr;               /* mem alloc / free */
	size_t bytes;                   /* mem alloc */
	CUDA_MEMCPY3D copy;             /* memcpy: the parameters as given */
	struct si_graph **bodies;       /* conditional: the body graphs it owns */
	CUgraph *body_handles;          /* conditional: their handles, the array phGraph_out points at */
	unsigned nbodies;
	CUgraphConditionalHandle cond;
	CUgraphConditionalNodeType cond_type;
	struct si_gnode **deps;
	unsigned ndeps, deps_cap;
	struct si_gnode *clone_of;      /* during cuGraphClone, and after: FindInClone */
	int mark;                       /* scratch for walks */
	struct si_list link;            /* in graph->nodes */
};

struct si_capture {
	uint64_t id;
	struct si_graph *graph;
	struct si_stream *origin;
	CUstreamCaptureMode mode;
	bool invalidated;
	bool to_graph;                  /* into a graph of the caller's (not returned as new) */
};

struct si_graph *mps__graph_new(void);
/* Destroys a graph and its nodes (a child graph's too). Under the lock. */
void mps__graph_free(struct si_graph *g);
/* Adds a node of a type after ndeps nodes of g. NULL when out of memory. */
struct si_gnode *mps__gnode_add(struct si_graph *g, CUgraphNodeType type, struct si_gnode *const *deps,
				unsigned ndeps);
/* The graph and node a handle names, or NULL. Under the lock. */
struct si_graph *mps__graph_arg(CUgraph h);
struct si_gnode *mps__gnode_arg(CUgraphNode h);
/* The common frame of the cuGraphAdd*Node calls: checks the graph and the
 * dependencies, makes the node after them. Under the lock. */
CUresult mps__graph_add_node(CUgraphNode *out, CUgraph hg, const CUgraphNode *deps, size_t ndeps,
			     CUgraphNodeType type, struct si_gnode **node);
/* The same, for a node that does op (taken: freed if the node cannot be
 * made). Under the lock. */
CUresult mps__graph_add_op_node(CUgraphNode *out, CUgraph hg, const CUgraphNode *deps, size_t ndeps,
				CUgraphNodeType type, struct si_op *op, struct si_gnode **node);
/* Frees a node no other node depends on (and what it owns). */
void mps__gnode_free(struct si_gnode *n);
/* A conditional handle's value at launch: its default. 0, or -1 if the
 * handle is none of ours (graphnodes.c). */
int mps__cond_value(CUgraphConditionalHandle h, unsigned *value);
/* The copy a copy node's parameters describe, checked (graphnodes.c). */
CUresult mps__copy3d_op(const CUDA_MEMCPY3D *p, struct si_op **out);
/* An array's memory as a copy sees it (array.c): its first byte, row
 * bytes, rows per slice and slices. Under the lock. */
CUresult mps__array_side(CUarray h, uintptr_t *base, size_t *pitch, size_t *height, size_t *slices);
/* A deep copy of a kernel, copy or memset operation (for a node or a launch). */
struct si_op *mps__op_clone(const struct si_op *op);
/* Checks a kernel launch and makes its operation (launch.c): what the
 * driver checks at cuLaunchKernel, against the function fn resolved in ctx. */
CUresult mps__kernel_op(struct si_function *fn, const unsigned grid[3], const unsigned block[3], unsigned smem,
			void **params, void **extra, struct si_op **out);
/* Queues the nodes of g on s, in an order that keeps every dependency
 * (graphexec.c). Under the lock. */
CUresult mps__graph_submit(struct si_graph *g, struct si_context *ctx, struct si_stream *s);
/* Puts an operation submitted to a capturing stream into the capture
 * graph instead (capture.c). Takes ownership of op. Under the lock. */
void mps__capture_op(struct si_stream *s, struct si_op *op);
/* An allocation node's range referred to by one node or step more, or one
 * fewer: with none left it is freed if the graph freed it, else it is plain
 * device memory from then on (graphnodes.c). Under the lock. */
void mps__graph_range_hold(CUdeviceptr dptr);
void mps__graph_range_release(CUdeviceptr dptr);
/* cuMemAllocAsync / cuMemFreeAsync on a capturing stream: an allocation or
 * free node of the capture graph at dptr (capture.c). Under the lock. */
CUresult mps__capture_mem(struct si_stream *s, CUgraphNodeType type, CUdeviceptr dptr, size_t bytes);
/* A synchronizing call on a capturing stream: invalidates its capture and
 * returns CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED. Under the lock. */
CUresult mps__capture_refuse(struct si_stream *s);
/* An event recorded on, or waited for by, a capturing stream (or waited for
 * by one that joins the capture). Under the lock; CUresult of the call. */
struct si_event;
CUresult mps__capture_record(struct si_stream *s, CUevent ev);
CUresult mps__capture_wait(struct si_stream *s, CUevent ev);
/* The capture an event was last recorded in (its dependencies), or NULL
 * (event.c). */
struct si_capture *mps__event_capture(CUevent ev, struct si_gnode ***deps, unsigned *ndeps,
				      struct si_stream **from, uint64_t *ops);
void mps__event_set_capture(CUevent ev, struct si_capture *cap, struct si_gnode *const *deps, unsigned ndeps,
			    struct si_stream *from, uint64_t ops);
/* An operation that waits for ev's latest record, or NULL with *rc
 * CUDA_SUCCESS when it was never recorded (event.c). Under the lock. */
struct si_op *mps__event_wait_op(CUevent ev, CUresult *rc);
/* A deep copy of a graph and its nodes (graph.c); NULL when out of memory. */
struct si_graph *mps__graph_clone(struct si_graph *src);
/* Ends s's part in its capture (the capture ended or its stream went). */
void mps__capture_leave(struct si_stream *s);

/* Blocks of a function resident on one SM (occupancy.c). */
int mps__occupancy(const struct si_function *fn, int block_threads, size_t dyn_smem);

#endif
