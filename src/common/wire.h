// SPDX-License-Identifier: MIT
/*
 * The wire format between the client library and the server, and nothing
 * else: the handshake messages sent on the unix socket, and the messages sent
 * through the submission queue (region.h says how the queue and the reply
 * slots work).
 *
 * Conventions. All fields are fixed-width and naturally aligned; every
 * message struct begins with struct mps_msg and its size is a multiple of
 * MPS_MSG_ALIGN (variable data follows the struct, and the sender pads the
 * total). Handles (contexts, streams, events, modules, functions, host
 * regions) are 32-bit numbers the server hands out per client; 0 is never a
 * valid handle, and a stream handle of 0 means the legacy default stream of
 * the message's context. Device pointers travel as the real device
 * addresses. A message with a reply slot is synchronous: the server writes a
 * CUresult and the op's results into the slot. A message without one is
 * asynchronous: if it fails, the error is kept and returned by the client's
 * next synchronising call (as CUDA reports asynchronous errors).
 *
 * Every size, index and handle here comes from an untrusted process: the
 * server checks each one against its own tables before use.
 */
#ifndef MPS_COMMON_WIRE_H
#define MPS_COMMON_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/gen/forward_wire.h"
#include "common/region.h"

#define MPS_WIRE_VERSION        17
#define MPS_HELLO_MAGIC         0x4f4c4c48u /* "HLLO" */
#define MPS_WELCOME_MAGIC       0x4d4f4357u /* "WCOM" */
#define MPS_REFUSE_MAGIC        0x55464552u /* "REFU" */
#define MPS_FDMSG_MAGIC         0x4d474446u /* "FDGM" */
#define MPS_WAIT_MAGIC          0x54494157u /* "WAIT" */
#define MPS_DEVOUT_MAGIC        0x54554f44u /* "DOUT" */

#define MPS_MAX_DEVICES         16
#define MPS_MAX_VDEVICES        16   /* virtual devices a server offers */
#define MPS_WIRE_ATTRS          192         /* >= CU_DEVICE_ATTRIBUTE_MAX */
#define MPS_NAME_MAX            256         /* device names, symbol names */
#define MPS_LAUNCH_ATTRS_MAX    8
#define MPS_POINTER_ATTRS_MAX   24

/* ------------------------------------------------------------------ */
/* Handshake, on the unix socket (SOCK_SEQPACKET: one struct a packet). */

enum mps_hello_kind {
	MPS_HELLO_CLIENT = 1, /* a CUDA process */
};

/* client -> daemon, first packet on a new connection. */
struct mps_hello {
	uint32_t magic;
	uint16_t version;
	uint16_t kind;
	uint32_t pid;
	uint32_t flags;
	char comm[64];    /* the client's command name, for logs and listings */
	char domain[32];  /* its fault domain (OPENMPS_FAULT_DOMAIN); "" for the default */
};

/* daemon or server -> client: the connection is refused; then closed. The
 * server also sends one (result CUDA_ERROR_MPS_CLIENT_TERMINATED) before it
 * ends a client on the daemon's orders. With magic MPS_WAIT_MAGIC the same
 * packet instead says the client is queued (another user has the GPU): the
 * client then waits for its welcome without a time limit. */
struct mps_refuse {
	uint32_t magic;
	int32_t result;   /* the CUresult the client's calls return */
	char text[248];
};

/* The errors of a GPU fault, which kill the server's context: the server
 * then ends every client (a refusal with the error) and exits. */
static inline bool mps_wire_fault_result(int r)
{
	switch (r) {
	case CUDA_ERROR_ECC_UNCORRECTABLE:
	case CUDA_ERROR_ILLEGAL_ADDRESS:
	case CUDA_ERROR_LAUNCH_TIMEOUT:
	case CUDA_ERROR_ASSERT:
	case CUDA_ERROR_HARDWARE_STACK_ERROR:
	case CUDA_ERROR_ILLEGAL_INSTRUCTION:
	case CUDA_ERROR_MISALIGNED_ADDRESS:
	case CUDA_ERROR_INVALID_ADDRESS_SPACE:
	case CUDA_ERROR_INVALID_PC:
	case CUDA_ERROR_LAUNCH_FAILED:
		return true;
	default:
		return false;
	}
}

/* server -> client, before the refusal that ends it at a GPU fault: what
 * kernels printed up to the fault (a failed assert's message), for a client
 * whose modules print and whose work was running; a packet per piece. */
#define MPS_DEVOUT_PIECE 4096
struct mps_devout_piece {
	uint32_t magic;
	uint32_t stream;  /* 1: stdout, 2: stderr */
	uint32_t len;     /* bytes of data used */
	uint32_t pad;
	uint8_t data[MPS_DEVOUT_PIECE];
};

struct mps_wire_device {
	char name[MPS_NAME_MAX];
	uint8_t uuid[16];
	uint64_t total_mem;
	char pci_bus_id[32];
	int32_t attr[MPS_WIRE_ATTRS];
	uint8_t attr_ok[MPS_WIRE_ATTRS / 8]; /* bit set: the driver answered */
	uint32_t peers;                      /* bit j: the server's device j is its peer (access enabled) */
	uint32_t base;                       /* a virtual device's GPU: its index + 1; 0 for a GPU */
};

/* server -> client, with the region's fd (SCM_RIGHTS). */
struct mps_welcome {
	uint32_t magic;
	uint16_t version;
	uint16_t ndev;
	uint32_t server_pid;
	uint32_t client_id;
	int32_t driver_version;
	int32_t prio_least;
	int32_t prio_greatest;
	uint32_t region_size;
	uint16_t nvirt;               /* virtual devices after the GPUs (server/vdevice.h) */
	uint16_t pad[3];
	struct mps_wire_device dev[]; /* ndev GPUs, then nvirt virtual devices */
};

/* server -> client, with an fd (SCM_RIGHTS): a host region's, sent before
 * the reply to MPS_OP_HOST_ALLOC; or, right after the welcome, with region
 * MPS_FD_WAKE, the eventfd the client writes when its ring says the server
 * sleeps (region.h). */
#define MPS_FD_WAKE 0u

/* client -> server, with an fd: a shareable handle to import, sent just
 * before MPS_OP_VMM_IMPORT. server -> client: an exported allocation's fd,
 * sent before the reply to MPS_OP_VMM_EXPORT. */
#define MPS_FD_IMPORT 0xfffffff0u
#define MPS_FD_EXPORT 0xfffffff1u
#define MPS_FD_DOT    0xfffffff2u   /* a graph's dot text, before the reply to MPS_OP_GRAPH_DOT */
#define MPS_FD_LINK   0xfffffff3u   /* a linked image, before the reply to MPS_OP_LINK_COMPLETE */

struct mps_fdmsg {
	uint32_t magic;
	uint32_t region;
	uint64_t size;
};

/* ------------------------------------------------------------------ */
/* Submission-queue messages. */

/* Whether an op's message carries a reply slot. */
enum mps_op_sync {
	MPS_ASYNC = 0,   /* never: errors wait for the next synchronising call */
	MPS_SYNC,        /* always */
	MPS_EITHER,      /* both forms exist (copies and memsets) */
};

/*
 * The ops, in one list: X(NAME, handler, message struct, sync). From it come
 * enum mps_op (MPS_OP_NAME), the server's op table and its handlers'
 * declarations (mps__op_handler), and the fuzzer's seeds. The struct is the
 * op's smallest valid message. The ops of the forwarded functions follow,
 * from their own generated list (gen/forward_wire.h): one per function.
 */
#define MPS_HAND_OPS(X) \
	X(CTX_CREATE, ctx_create, mps_msg_ctx_create, MPS_SYNC)           /* val[0] = context */ \
	X(CTX_DESTROY, ctx_destroy, mps_msg, MPS_SYNC) \
	X(CTX_SYNC, ctx_sync, mps_msg, MPS_SYNC)                          /* all the context's streams */ \
	X(CTX_LIMIT, ctx_limit, mps_msg_ctx_limit, MPS_SYNC)              /* get or set; val[0] = value */ \
	X(MEM_ALLOC, mem_alloc, mps_msg_mem_alloc, MPS_SYNC)              /* val[0] = dptr, val[1] = pitch */ \
	X(MEM_FREE, mem_free, mps_msg_ptr, MPS_SYNC) \
	X(MEM_INFO, mem_info, mps_msg, MPS_SYNC)                          /* val[0] = free, val[1] = total */ \
	X(MEM_RANGE, mem_range, mps_msg_ptr, MPS_SYNC)                    /* val[0] = base, val[1] = size */ \
	X(POINTER_ATTR, pointer_attr, mps_msg_pointer_attr, MPS_SYNC)     /* data = struct mps_attr_value each */ \
	X(HOST_ALLOC, host_alloc, mps_msg_host_alloc, MPS_SYNC)           /* val = region, server address, size */ \
	X(HOST_FREE, host_free, mps_msg_handle, MPS_SYNC) \
	X(COPY, copy, mps_msg_copy, MPS_EITHER) \
	X(MEMSET, memset, mps_msg_memset, MPS_EITHER) \
	X(BLOB_APPEND, blob_append, mps_msg_blob, MPS_ASYNC)              /* to the client's upload buffer */ \
	X(MODULE_LOAD, module_load, mps_msg_module_load, MPS_SYNC)        /* the upload; val[0] = module or library; data: JIT logs */ \
	X(MODULE_UNLOAD, module_unload, mps_msg_handle, MPS_SYNC) \
	X(GET_FUNCTION, get_function, mps_msg_get_symbol, MPS_SYNC)       /* val[0]; data = struct mps_func_info */ \
	X(GET_GLOBAL, get_global, mps_msg_get_symbol, MPS_SYNC)           /* val[0] = dptr, val[1] = size */ \
	X(FUNC_ATTR, func_attr, mps_msg_func_attr, MPS_EITHER)            /* val[0] = value; GET_ALL: data */ \
	X(OCCUPANCY, occupancy, mps_msg_occupancy, MPS_SYNC)              /* val[0] = value */ \
	X(LAUNCH, launch, mps_msg_launch, MPS_ASYNC) \
	X(STREAM_CREATE, stream_create, mps_msg_stream_create, MPS_SYNC)  /* val[0] = stream */ \
	X(STREAM_DESTROY, stream_destroy, mps_msg_handle, MPS_ASYNC) \
	X(STREAM_SYNC, stream_sync, mps_msg_handle, MPS_SYNC) \
	X(STREAM_QUERY, stream_query, mps_msg_handle, MPS_SYNC) \
	X(STREAM_WAIT_EVENT, stream_wait_event, mps_msg_stream_wait, MPS_ASYNC) \
	X(EVENT_CREATE, event_create, mps_msg_event_create, MPS_SYNC)     /* val[0] = event */ \
	X(EVENT_DESTROY, event_destroy, mps_msg_handle, MPS_ASYNC) \
	X(EVENT_RECORD, event_record, mps_msg_event_record, MPS_ASYNC) \
	X(EVENT_SYNC, event_sync, mps_msg_handle, MPS_SYNC) \
	X(EVENT_QUERY, event_query, mps_msg_handle, MPS_SYNC) \
	X(EVENT_ELAPSED, event_elapsed, mps_msg_elapsed, MPS_SYNC)        /* val[0] = milliseconds as float bits */ \
	X(ERROR_STRING, error_string, mps_msg_error_string, MPS_SYNC)     /* data = name '\0' description '\0' */ \
	X(MEM_ALLOC_ASYNC, mem_alloc_async, mps_msg_mem_async, MPS_SYNC)  /* val[0] = dptr, in the stream's order */ \
	X(MEM_FREE_ASYNC, mem_free_async, mps_msg_mem_async, MPS_ASYNC)   /* freed in the stream's order */ \
	X(CAPTURE_BEGIN, capture_begin, mps_msg_capture_begin, MPS_SYNC) \
	X(CAPTURE_END, capture_end, mps_msg_handle, MPS_SYNC)             /* val[0] = graph, 0 if none */ \
	X(CAPTURE_INFO, capture_info, mps_msg_handle, MPS_SYNC)           /* val = status, id, graph, n; data */ \
	X(KERNEL_NODE, kernel_node, mps_msg_kernel_node, MPS_EITHER)      /* add: val[0] = node; exec set: may be async */ \
	X(KERNEL_NODE_GET, kernel_node_get, mps_msg_handle, MPS_SYNC)     /* val, data: see mps_kernel_node_out */ \
	X(MODULE_FUNCS, module_funcs, mps_msg_module_funcs, MPS_SYNC)     /* val[0] = count, val[1] = names; data */ \
	X(TPC_MAPS, tpc_maps, mps_msg, MPS_SYNC)                          /* val = bytes of each map; data = both */ \
	X(POOL_ATTR, pool_attr, mps_msg_pool_attr, MPS_SYNC)              /* get or set; val[0] = value */ \
	X(VMM_CREATE, vmm_create, mps_msg_vmm, MPS_SYNC)                  /* val[0] = allocation */ \
	X(VMM_RELEASE, vmm_release, mps_msg_vmm, MPS_SYNC) \
	X(VMM_RESERVE, vmm_reserve, mps_msg_vmm, MPS_SYNC)                /* val[0] = address */ \
	X(VMM_FREE, vmm_free, mps_msg_vmm, MPS_SYNC) \
	X(VMM_MAP, vmm_map, mps_msg_vmm, MPS_SYNC) \
	X(VMM_UNMAP, vmm_unmap, mps_msg_vmm, MPS_SYNC) \
	X(VMM_RETAIN, vmm_retain, mps_msg_vmm, MPS_SYNC)                  /* val[0] = allocation */ \
	X(VMM_EXPORT, vmm_export, mps_msg_vmm, MPS_SYNC)                  /* the fd comes ahead of the reply */ \
	X(VMM_IMPORT, vmm_import, mps_msg_vmm, MPS_SYNC)                  /* the fd went ahead; val[0] = allocation */ \
	X(DEVICES, devices, mps_msg_devices, MPS_SYNC)                    /* before any context */ \
	X(IPC_GET_MEM, ipc_get_mem, mps_msg_ipc, MPS_SYNC)                /* data = the handle */ \
	X(IPC_OPEN_MEM, ipc_open_mem, mps_msg_ipc, MPS_SYNC)              /* val[0] = address, val[1] = size */ \
	X(IPC_CLOSE_MEM, ipc_close_mem, mps_msg_ipc, MPS_SYNC) \
	X(IPC_GET_EVENT, ipc_get_event, mps_msg_ipc, MPS_SYNC)            /* data = the handle */ \
	X(IPC_OPEN_EVENT, ipc_open_event, mps_msg_ipc, MPS_SYNC)          /* val[0] = event */ \
	X(GRAPH_DOT, graph_dot, mps_msg_graph_dot, MPS_SYNC)              /* the text comes ahead of the reply, as an fd */ \
	X(MEMCPY_NODE, memcpy_node, mps_msg_memcpy_node, MPS_SYNC)        /* add: val[0] = node */ \
	X(MEMCPY_NODE_GET, memcpy_node_get, mps_msg_handle, MPS_SYNC)     /* data = struct mps_copy3d */ \
	X(ALLOC_NODE, alloc_node, mps_msg_alloc_node, MPS_SYNC)           /* val[0] = node, val[1] = dptr */ \
	X(ALLOC_NODE_GET, alloc_node_get, mps_msg_handle, MPS_SYNC)       /* val: see mps_msg_alloc_node; data */ \
	X(COND_NODE, cond_node, mps_msg_cond_node, MPS_SYNC)              /* val[0] = node; data = body graphs */ \
	X(POOL_EXPORT, pool_export, mps_msg_vmm, MPS_SYNC)                /* handle: the pool; the fd comes ahead of the reply */ \
	X(POOL_IMPORT, pool_import, mps_msg_vmm, MPS_SYNC)                /* the fd went ahead; val[0] = pool */ \
	X(POOL_EXPORT_PTR, pool_export_ptr, mps_msg_ipc, MPS_SYNC)        /* data = the export data */ \
	X(POOL_IMPORT_PTR, pool_import_ptr, mps_msg_ipc, MPS_SYNC)        /* event: the pool; val[0] = address, val[1] = size */ \
	X(CLIENT_LIMITS, client_limits, mps_msg_client_limits, MPS_SYNC)  /* after DEVICES, before any context */ \
	X(HOSTFN_SETUP, hostfn_setup, mps_msg_hostfn_setup, MPS_SYNC)     /* the notification pipe's fd went ahead */ \
	X(HOSTFN, hostfn, mps_msg_hostfn, MPS_ASYNC)                      /* a host function's place in a stream */ \
	X(GRAPH_HOST_NODE, graph_host_node, mps_msg_graph_host_node, MPS_SYNC) /* deps follow; val[0] = node */ \
	X(HOST_REGISTER, host_register, mps_msg_host_register, MPS_SYNC)  /* the memfd went ahead; val as HOST_ALLOC */ \
	X(SLOT_WAKE, slot_wake, mps_msg_handle, MPS_ASYNC)                /* handle: a word the GPU answers (region.h); wake its waiter */ \
	X(LINK_CREATE, link_create, mps_msg_link, MPS_SYNC)               /* val[0] = link; data = struct mps_link_reply */ \
	X(LINK_ADD, link_add, mps_msg_link, MPS_SYNC)                     /* the upload is the input; data as above */ \
	X(LINK_COMPLETE, link_complete, mps_msg_link, MPS_SYNC)           /* the image's fd goes ahead; val[0] = its size */ \
	X(LINK_DESTROY, link_destroy, mps_msg_link, MPS_SYNC) \
	X(ARRAY_COPY, array_copy, mps_msg_array_copy, MPS_EITHER)         /* a copy to, from or between CUDA arrays */ \
	X(TEXOBJ, texobj, mps_msg_texobj, MPS_SYNC)                       /* create: val[0] = the object */ \
	X(HOSTFN_DEAD, hostfn_dead, mps_msg_hostfn_dead, MPS_SYNC)        /* pairs follow; data = the bitmap */ \
	X(EXEC_HOST_NODE, exec_host_node, mps_msg_exec_host_node, MPS_SYNC) /* a host node's function in one executable graph */ \
	X(STREAM_FENCE, stream_fence, mps_msg_handle, MPS_ASYNC)         /* a synchronize the client answered: streams.h */ \
	X(DEVOUT, devout, mps_msg_devout, MPS_SYNC)                       /* what kernels printed: val[0], val[1] = bytes of data */

/* The types of the server's handles (32 bits with a generation; the server
 * checks each against its table): the same numbers on both sides. */
enum mps_handle_type {
	MPS_H_CTX = 1,
	MPS_H_STREAM,
	MPS_H_EVENT,
	MPS_H_MODULE,
	MPS_H_FUNC,
	MPS_H_HOST,
	MPS_H_GRAPH,      /* server/objects.h's, from here on */
	MPS_H_NODE,
	MPS_H_EXEC,
	MPS_H_POOL,
	MPS_H_ALLOC,
	MPS_H_USEROBJ,
	MPS_H_LINK,       /* a JIT linker invocation (ops_link.c), an object too */
	MPS_H_ARRAY,      /* a CUDA array (forward.def; copies in ops_copy.c) */
	MPS_H_MIPMAP,     /* a mipmapped array; its levels are borrowed arrays */
	MPS_H_TEXOBJ,     /* a texture object (ops_texture.c): the client holds its value */
	MPS_H_SURFOBJ,    /* a surface object, likewise */
};

#define MPS_OPS(X) MPS_HAND_OPS(X) MPS_FWD_OPS(X)

enum mps_op {
	MPS_OP_PAD = 0,           /* filler up to the end of the ring */
#define MPS_OP_ENUM(name, fn, type, sync) MPS_OP_##name,
	MPS_OPS(MPS_OP_ENUM)
#undef MPS_OP_ENUM
	MPS_OP_COUNT
};

/* MPS_OP_CTX_CREATE flags (in the message header). */
#define MPS_CTX_PRIMARY 0x1

struct mps_msg_ctx_create {
	struct mps_msg hdr;
	int32_t device;
	uint32_t flags;   /* CUctx_flags, kept for the client's queries */
	uint64_t reserved;
};

struct mps_msg_ctx_limit {
	struct mps_msg hdr;
	uint32_t limit;   /* CUlimit */
	uint32_t set;
	uint64_t value;
};

struct mps_msg_mem_alloc {
	struct mps_msg hdr;
	uint64_t size;    /* plain allocation; 0 with pitched */
	uint64_t width;   /* pitched: bytes per row */
	uint64_t height;
	uint32_t elem;    /* pitched: element size 4, 8 or 16; 0 for plain */
	uint32_t pad;
};

struct mps_msg_ptr {
	struct mps_msg hdr;
	uint64_t ptr;
};

/* cuMemAllocAsync (size) and cuMemFreeAsync (ptr) on a stream. */
struct mps_msg_mem_async {
	struct mps_msg hdr;
	uint64_t value;   /* size to allocate, or the pointer to free */
	uint32_t stream;  /* 0: the message context's legacy stream */
	uint32_t pad;
};

/* The devices the client sees (CUDA_VISIBLE_DEVICES, common/visible.h):
 * map[i] is the server's index of its device i. Sent once, first; device
 * ordinals in every later message count in this numbering. */
struct mps_msg_devices {
	struct mps_msg hdr;
	uint32_t count;
	uint32_t pad;
	uint8_t map[MPS_MAX_DEVICES];
};

/* Interprocess handles: get (ptr, or the event's handle), open (the
 * handle's bytes, flags) and close (ptr). */
#define MPS_IPC_HANDLE_SIZE 64
struct mps_msg_ipc {
	struct mps_msg hdr;
	uint64_t ptr;
	uint32_t event;
	uint32_t flags;
	uint8_t bytes[MPS_IPC_HANDLE_SIZE];
};

/* The JIT linker (cuLinkCreate, cuLinkAddData/File, cuLinkComplete,
 * cuLinkDestroy) runs in the server. Options travel as values: those that
 * are plain numbers go to the driver; log buffers, their sizes and the wall
 * time are the server's own, sent back after every step (struct
 * mps_link_reply) for the client to write into the program's. An input is
 * uploaded like a module image (MPS_OP_BLOB_APPEND) before MPS_OP_LINK_ADD;
 * the linked image comes back in a memfd (region MPS_FD_LINK). */
#define MPS_LINK_OPTS 32

struct mps_link_opt {
	uint32_t opt;     /* CUjit_option */
	uint32_t pad;
	uint64_t value;   /* the value as the void * the driver takes */
};

/* Whether a JIT option's value is a plain number, which may travel;
 * per_input: one cuLinkAddData takes (compiler options, no target). */
static inline bool mps_jit_plain(uint32_t o, bool per_input)
{
	switch (o) {
	case CU_JIT_TARGET_FROM_CUCONTEXT:
	case CU_JIT_TARGET:
		return !per_input;
	case CU_JIT_MAX_REGISTERS:
	case CU_JIT_THREADS_PER_BLOCK:
	case CU_JIT_OPTIMIZATION_LEVEL:
	case CU_JIT_FALLBACK_STRATEGY:
	case CU_JIT_GENERATE_DEBUG_INFO:
	case CU_JIT_LOG_VERBOSE:
	case CU_JIT_GENERATE_LINE_INFO:
	case CU_JIT_CACHE_MODE:
	case CU_JIT_FTZ:
	case CU_JIT_PREC_DIV:
	case CU_JIT_PREC_SQRT:
	case CU_JIT_FMA:
	case CU_JIT_OPTIMIZE_UNUSED_DEVICE_VARIABLES:
	case CU_JIT_POSITION_INDEPENDENT_CODE:
	case CU_JIT_MIN_CTA_PER_SM:
	case CU_JIT_MAX_THREADS_PER_BLOCK:
	case CU_JIT_OVERRIDE_DIRECTIVE_VALUES:
	case CU_JIT_SPLIT_COMPILE:
		return true;
	default:
		return false;
	}
}

struct mps_msg_link {
	struct mps_msg hdr;
	uint32_t link;    /* ADD, COMPLETE, DESTROY */
	uint32_t type;    /* ADD: CUjitInputType */
	uint64_t size;    /* ADD: the upload's size */
	uint32_t nopts;
	uint32_t pad;
	char name[256];   /* ADD: the input's name in the logs */
	struct mps_link_opt opts[MPS_LINK_OPTS];
};

struct mps_link_reply {
	uint32_t info_len, error_len;   /* the logs so far, in text[] one after the other */
	float wall_ms;                  /* CU_JIT_WALL_TIME so far */
	uint32_t threads;               /* CU_JIT_THREADS_PER_BLOCK as the driver left it; 0: not given */
	char text[];
};

/* cuGraphDebugDotPrint: the server writes the graph to a memfd it sends
 * (region MPS_FD_DOT, size = the text's length); the client writes the file. */
struct mps_msg_graph_dot {
	struct mps_msg hdr;
	uint32_t graph;
	uint32_t flags;
};

/* cuMemPoolGetAttribute / cuMemPoolSetAttribute: every attribute's value
 * is an int or a cuuint64_t, carried widened. */
struct mps_msg_pool_attr {
	struct mps_msg hdr;
	uint32_t pool;    /* the pool's handle */
	uint32_t attr;    /* CUmemPool_attribute */
	uint32_t set;     /* 1: set to value; 0: get */
	uint32_t pad;
	uint64_t value;
};

/* The allocation properties of cuMemCreate, in fixed-width fields (the
 * driver's struct carries a pointer, which never crosses the wire). */
struct mps_vmm_prop {
	uint32_t type;           /* CUmemAllocationType */
	uint32_t handle_types;   /* CUmemAllocationHandleType */
	int32_t loc_type;        /* CUmemLocationType */
	int32_t loc_id;          /* a device ordinal as the client numbers it */
	uint8_t compression;
	uint8_t rdma;
	uint16_t usage;
	uint32_t pad;
};

/* Virtual memory management, one layout for all its ops: reserve (size,
 * arg = alignment, ptr = the address wished for, flags), free (ptr, size),
 * create (size, prop, flags), release (handle), map (ptr, size, arg =
 * offset, handle, flags), unmap (ptr, size), retain (ptr), export (handle,
 * type, flags; the fd comes back over the socket) and import (type; the fd
 * went ahead over the socket, region MPS_FD_IMPORT). */
struct mps_msg_vmm {
	struct mps_msg hdr;
	uint64_t ptr;
	uint64_t size;
	uint64_t arg;
	uint64_t flags;
	uint32_t handle;   /* a physical allocation's handle */
	uint32_t type;     /* CUmemAllocationHandleType */
	struct mps_vmm_prop prop;
};

struct mps_msg_pointer_attr {
	struct mps_msg hdr;
	uint64_t ptr;
	uint32_t count;
	uint32_t attr[MPS_POINTER_ATTRS_MAX]; /* CUpointer_attribute */
	uint32_t pad;
};

struct mps_attr_value {
	int32_t result;   /* CUresult for this attribute */
	uint32_t pad;
	uint64_t value;   /* the value, widened; a context comes back as its handle */
};

/* cuMemHostRegister: the program's pages [addr, addr + size), page-aligned,
 * moved in place into a memfd sealed against shrinking, which goes ahead. */
struct mps_msg_host_register {
	struct mps_msg hdr;
	uint64_t addr;
	uint64_t size;
};

struct mps_msg_host_alloc {
	struct mps_msg hdr;
	uint64_t size;
	uint32_t flags;   /* CU_MEMHOSTALLOC_* */
	uint32_t pad;
};

struct mps_msg_handle {
	struct mps_msg hdr;
	uint32_t handle;
	uint32_t pad;
};

/* Where a copy's host side is. */
#define MPS_HOST_INLINE  0xffffffffu /* H2D: the bytes follow the message */
#define MPS_HOST_SLOT    0xfffffffeu /* the reply slot's data (synchronous copies) */

enum mps_copy_kind {
	MPS_COPY_H2D = 1,
	MPS_COPY_D2H = 2,
	MPS_COPY_D2D = 3,
};

/* MPS_OP_COPY / MPS_OP_MEMSET flags (in the message header). */
#define MPS_COPY_STAGE 0x1  /* on completion, mark staging chunk `stage` done */
#define MPS_COPY_FENCE 0x2  /* a synchronous form the client did not wait for: the client's later work on
			     * every stream waits for it (server/streams.h, mps_stream_fence) */

struct mps_msg_copy {
	struct mps_msg hdr;
	uint32_t kind;    /* enum mps_copy_kind */
	uint32_t stream;
	uint32_t host_region; /* a host region handle, MPS_HOST_INLINE or MPS_HOST_SLOT */
	uint32_t stage;   /* with MPS_COPY_STAGE */
	uint64_t host_offset;
	uint64_t dst;     /* device address (H2D, D2D) */
	uint64_t src;     /* device address (D2H, D2D) */
	uint64_t size;
};

struct mps_msg_memset {
	struct mps_msg hdr;
	uint32_t stream;
	uint32_t elem;    /* 1, 2 or 4 */
	uint64_t dst;
	uint64_t count;   /* elements (of each row) */
	uint32_t value;
	uint32_t pad;
	uint64_t pitch;   /* bytes from one row to the next */
	uint64_t height;  /* rows; 0: a plain memset of count elements */
};

/* MPS_OP_BLOB_APPEND flags. */
#define MPS_BLOB_RESET 0x1

struct mps_msg_blob {
	struct mps_msg hdr;
	uint64_t total;   /* with MPS_BLOB_RESET: the whole upload's size */
	uint32_t bytes;   /* data bytes following (the message is padded) */
	uint32_t pad;
};

enum mps_module_kind {
	MPS_MODULE = 1,   /* cuModuleLoadData */
	MPS_LIBRARY = 2,  /* cuLibraryLoadData */
};

struct mps_msg_module_load {
	struct mps_msg hdr;
	uint32_t kind;    /* enum mps_module_kind */
	uint32_t nopts;   /* a module's JIT options (cuModuleLoadDataEx), as for a link */
	uint64_t size;    /* must equal the upload's size */
	struct mps_link_opt opts[MPS_LINK_OPTS];
};

enum mps_func_kind {
	MPS_FUNC_OF_MODULE = 1,  /* cuModuleGetFunction(module, name) */
	MPS_KERNEL_OF_LIBRARY,   /* cuLibraryGetKernel(library, name) */
	MPS_FUNC_OF_KERNEL,      /* cuKernelGetFunction(kernel) in the message's context */
	MPS_GLOBAL_OF_MODULE,    /* cuModuleGetGlobal(module, name) */
	MPS_GLOBAL_OF_LIBRARY,   /* cuLibraryGetGlobal(library, name) */
	MPS_MANAGED_OF_LIBRARY,  /* cuLibraryGetManaged(library, name) */
};

/* The symbol's name follows the message: name_len bytes, then a NUL (C++
 * kernels' mangled names run to kilobytes). MPS_FUNC_OF_KERNEL sends none. */
struct mps_msg_get_symbol {
	struct mps_msg hdr;
	uint32_t kind;     /* enum mps_func_kind */
	uint32_t parent;   /* module, library or kernel */
	uint32_t name_len; /* without the NUL */
	uint32_t pad;
	char name[];
};

#define MPS_SYMBOL_MAX (MPS_MSG_MAX - sizeof(struct mps_msg_get_symbol) - 1)

/* MPS_OP_MODULE_FUNCS: the functions of a module, as the driver enumerates
 * them (cuModuleEnumerateFunctions). The reply gives their count and the
 * names of up to max_names of them from index first, each ending in a NUL,
 * as many as fit in the reply slot. */
struct mps_msg_module_funcs {
	struct mps_msg hdr;
	uint32_t module;
	uint32_t first;
	uint32_t max_names;  /* 0: the count only */
	uint32_t pad;
};

/* Reply data of MPS_OP_GET_FUNCTION: what a launch needs to pack arguments. */
struct mps_func_info {
	uint32_t nparams;
	uint32_t arg_size;          /* bytes of the packed argument buffer */
	int32_t max_threads;        /* CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK */
	uint32_t pad;
	struct {
		uint16_t offset;
		uint16_t size;
	} param[];
};

#define MPS_FUNC_PARAMS_MAX ((MPS_SLOT_DATA - sizeof(struct mps_func_info)) / 4)
#define MPS_ARGS_MAX        32768u  /* CUDA's limit on kernel parameter bytes */

/* MPS_OP_FUNC_ATTR: a get is synchronous; a set or a cache configuration
 * may be sent without a reply slot, its failure then reported by the next
 * synchronising call. */
enum mps_attr_kind {
	MPS_FUNC_GET = 1,       /* cuFuncGetAttribute */
	MPS_FUNC_SET,           /* cuFuncSetAttribute */
	MPS_FUNC_CACHE_CONFIG,  /* cuFuncSetCacheConfig (value = CUfunc_cache) */
	MPS_KERNEL_GET,         /* cuKernelGetAttribute (device) */
	MPS_KERNEL_SET,         /* cuKernelSetAttribute (device) */
	MPS_KERNEL_CACHE_CONFIG,
	MPS_FUNC_GET_ALL,       /* every attribute at once: data = struct mps_fattr_all */
	MPS_KERNEL_GET_ALL,     /* the same of a kernel on a device */
};

/* Attributes 0 .. MPS_FATTR_COUNT - 1 of a function, each with the
 * driver's answer (CUresult) and its value. */
#define MPS_FATTR_COUNT 16

struct mps_fattr_all {
	int32_t value[MPS_FATTR_COUNT];
	int32_t result[MPS_FATTR_COUNT];
};

struct mps_msg_func_attr {
	struct mps_msg hdr;
	uint32_t kind;    /* enum mps_attr_kind */
	uint32_t func;    /* function or kernel handle */
	int32_t attr;
	int32_t value;
	int32_t device;
	uint32_t pad;
};

enum mps_occupancy_kind {
	MPS_OCC_BLOCKS_PER_SM = 1, /* cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags */
	MPS_OCC_DYN_SMEM,          /* cuOccupancyAvailableDynamicSMemPerBlock */
	MPS_OCC_CLUSTERS,          /* cuOccupancyMaxActiveClusters */
};

struct mps_msg_occupancy {
	struct mps_msg hdr;
	uint32_t kind;
	uint32_t func;
	int32_t block;
	uint32_t flags;
	uint64_t dyn_smem;
	int32_t num_blocks;   /* available dynamic shared memory: blocks per SM */
	uint32_t grid[3];     /* clusters: the launch configuration */
	uint32_t blockdim[3];
	uint32_t cluster[3];  /* 0: no cluster dimension attribute */
};

/* One launch attribute. Only the ids mps_launch_attr_plain() accepts may
 * travel: those whose values are plain numbers, never pointers into the
 * client or handles of its objects. */
struct mps_launch_attr {
	uint32_t id;      /* CUlaunchAttributeID */
	uint32_t pad;
	uint8_t value[64];
};

/* MPS_OP_LAUNCH flags. */
#define MPS_LAUNCH_COOPERATIVE 0x1

struct mps_msg_launch {
	struct mps_msg hdr;
	uint32_t func;    /* function or kernel handle */
	uint32_t stream;
	uint32_t grid[3];
	uint32_t block[3];
	uint32_t shared_mem;
	uint32_t nattrs;
	uint32_t arg_size;
	uint32_t pad;
	/* then nattrs struct mps_launch_attr, then arg_size bytes of packed arguments */
};

struct mps_msg_stream_create {
	struct mps_msg hdr;
	uint32_t flags;   /* CU_STREAM_* */
	int32_t priority;
};

struct mps_msg_stream_wait {
	struct mps_msg hdr;
	uint32_t stream;
	uint32_t event;
	uint32_t flags;
	uint32_t pad;
};

struct mps_msg_event_create {
	struct mps_msg hdr;
	uint32_t flags;   /* CU_EVENT_* */
	uint32_t pad;
};

struct mps_msg_event_record {
	struct mps_msg hdr;
	uint32_t event;
	uint32_t stream;
	uint32_t flags;
	uint32_t pad;
};

struct mps_msg_elapsed {
	struct mps_msg hdr;
	uint32_t start;
	uint32_t end;
};

/* MPS_OP_CAPTURE_BEGIN: stream capture into a new graph, or (graph not 0)
 * into that graph after ndeps of its nodes: ndeps node handles follow,
 * padded to 8 bytes, then, with MPS_CAPTURE_EDGES, ndeps CUgraphEdgeData.
 * The server always captures in relaxed mode (its own threads serve many
 * clients); the client applies the mode's rules to its own threads. */
#define MPS_CAPTURE_EDGES 0x1

struct mps_msg_capture_begin {
	struct mps_msg hdr;
	uint32_t stream;
	uint32_t graph;
	uint32_t ndeps;
	uint32_t mode;    /* the client's CUstreamCaptureMode, for the log */
};

/* MPS_OP_KERNEL_NODE: a kernel node of a graph, added or given new
 * parameters (flags: what); the arguments are packed as for a launch, at
 * the offsets the server gave for the function. ndeps node handles
 * (add only) follow the header, padded to 8 bytes, then arg_size bytes. */
enum mps_kernel_node_what {
	MPS_KNODE_ADD = 1,   /* cuGraphAddKernelNode: in graph, after the dependencies */
	MPS_KNODE_SET,       /* cuGraphKernelNodeSetParams: node */
	MPS_KNODE_EXEC_SET,  /* cuGraphExecKernelNodeSetParams: node's copy in exec */
};

struct mps_msg_kernel_node {
	struct mps_msg hdr;
	uint32_t graph;
	uint32_t node;
	uint32_t exec;
	uint32_t func;     /* function or kernel handle */
	uint32_t ctx;      /* a kernel's context; 0: the message's */
	uint32_t grid[3];
	uint32_t block[3];
	uint32_t shared_mem;
	uint32_t ndeps;
	uint32_t arg_size;
};

/* Host functions (cuLaunchHostFunc, cuStreamAddCallback) run in the client,
 * in stream order. The client gives the server, once, a pinned region of
 * MPS_HOSTFN_SLOTS 32-bit words and the write end of a pipe (HOSTFN_SETUP).
 * For each host function it takes a free slot, bumps that slot's sequence
 * number and posts HOSTFN: the server queues on the stream a host function
 * of its own, which writes the 8-byte struct mps_hostfn_note into the pipe,
 * then a wait until the slot's word reaches the sequence number (the
 * driver's cyclic comparison). The client's runner thread reads the note,
 * runs the program's function and stores the sequence number into the
 * word, and the stream goes on. */
#define MPS_HOSTFN_SLOTS 1024u

struct mps_msg_hostfn_setup {
	struct mps_msg hdr;
	uint32_t region;   /* the client's pinned region of the words */
	uint32_t pad;
	uint64_t offset;   /* of the first word in it; MPS_HOSTFN_SLOTS words must fit */
};

struct mps_msg_hostfn {
	struct mps_msg hdr;
	uint32_t stream;
	uint32_t slot;     /* < MPS_HOSTFN_SLOTS */
	uint32_t seq;
	uint32_t flags;    /* MPS_HOSTFN_CAPTURED */
};

/* In a stream capture, and in a graph (GRAPH_HOST_NODE), a host function
 * keeps its slot and becomes three nodes: the note, a wait until the word
 * equals the sequence number, and a write of 0 to the word, so every
 * launch of the graph waits for its own run of the function. */
#define MPS_HOSTFN_CAPTURED 0x1u

/* HOSTFN_DEAD: n pairs follow, each a graph's slot and the sequence number
 * the client last gave it; the reply's data is a bitmap of
 * MPS_HOSTFN_SLOTS bits, set for each slot whose node the server has made
 * with that number and that no graph, capture or executable graph of the
 * client's holds any more: the client may give it to another. */
struct mps_msg_hostfn_dead {
	struct mps_msg hdr;
	uint32_t n;        /* <= MPS_HOSTFN_SLOTS */
	uint32_t pad;
};

struct mps_hostfn_slotseq {
	uint32_t slot;
	uint32_t seq;
};

struct mps_msg_graph_host_node {
	struct mps_msg hdr;
	uint32_t graph;
	uint32_t ndeps;    /* the dependencies' node handles follow */
	uint32_t slot;
	uint32_t seq;
};

/* EXEC_HOST_NODE: host node `node` (of the graph `exec` was made from)
 * runs the function kept in slot (seq) in `exec` alone. */
struct mps_msg_exec_host_node {
	struct mps_msg hdr;
	uint32_t exec;
	uint32_t node;
	uint32_t slot;
	uint32_t seq;
};

struct mps_hostfn_note {
	uint32_t slot;
	uint32_t seq;
};

/* MPS_OP_CLIENT_LIMITS: what the client's environment asks for itself
 * (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE, CUDA_MPS_CLIENT_PRIORITY,
 * CUDA_MPS_PINNED_DEVICE_MEM_LIMIT); each may only lower what the server
 * set, as under MPS. */
struct mps_msg_client_limits {
	struct mps_msg hdr;
	uint32_t thread_pct;                  /* hundredths of a percent; 0: not set */
	int32_t priority;                     /* 0 normal, 1 below normal; -1: not set */
	uint64_t mem_limit[MPS_MAX_DEVICES];  /* bytes, by the client's device ordinal; 0: not set */
	char sm_partition[32];                /* CUDA_MPS_SM_PARTITION, NUL-terminated; "": none */
};

/* A copy of a graph's copy node (CUDA_MEMCPY3D as the wire carries it).
 * Each side is device memory (region and array 0: addr is a device
 * address), a pinned host region of the client's (region: its handle;
 * addr: an offset in it) or a CUDA array of the client's (array: its
 * handle; addr, pitch and height unused: the array's own); x, y, z, pitch
 * and height place the copy in it as in CUDA_MEMCPY3D, and width (bytes),
 * height and depth are its extent. MPS_OP_ARRAY_COPY names its arrays
 * apart and leaves array 0. */
struct mps_copy3d_side {
	uint64_t addr;
	uint64_t x, y, z;
	uint64_t pitch, height;
	uint32_t region;
	uint32_t array;
};

struct mps_copy3d {
	struct mps_copy3d_side src, dst;
	uint64_t width, height, depth;
};

/* Where one side of a copy starts (*start, from its base address) and how
 * many bytes it spans from there: 0 for an empty copy, UINT64_MAX when the
 * numbers overflow or rows would overlap. Client and server both use it. */
static inline uint64_t mps_copy3d_span(const struct mps_copy3d_side *s, const struct mps_copy3d *p, uint64_t *start)
{
	const uint64_t q = UINT64_MAX / 4;   /* each term below stays under it */
	uint64_t slice, span;

	*start = 0;
	if (!p->width || !p->height || !p->depth)
		return 0;
	if ((p->height > 1 || p->depth > 1) && s->pitch < s->x + p->width)
		return UINT64_MAX;
	if (p->depth > 1 && s->height < s->y + p->height)
		return UINT64_MAX;
	if (s->pitch && s->height > UINT64_MAX / s->pitch)
		return UINT64_MAX;
	slice = s->height * s->pitch;
	if ((slice && s->z > q / slice) || (s->pitch && s->y > q / s->pitch) || s->x > q ||
	    (slice && p->depth - 1 > q / slice) || (s->pitch && p->height - 1 > q / s->pitch) || p->width > q)
		return UINT64_MAX;
	*start = s->z * slice + s->y * s->pitch + s->x;
	span = (p->depth - 1) * slice + (p->height - 1) * s->pitch + p->width;
	return *start > UINT64_MAX - span ? UINT64_MAX : span;
}

/* MPS_OP_ARRAY_COPY: a copy with a CUDA array on one side or both, on a
 * stream. Each side is an array (its handle; the side's addr, pitch and
 * height are unused: the array's own) or device memory the client owns
 * (array 0: addr is a device address), placed as in CUDA_MEMCPY3D. */
struct mps_msg_array_copy {
	struct mps_msg hdr;
	uint32_t stream;
	uint32_t src_array, dst_array;
	uint32_t pad;
	struct mps_copy3d p;
};

/* MPS_OP_TEXOBJ: a texture or surface object made (flags MPS_TEX_CREATE,
 * MPS_SURF_CREATE) or destroyed (MPS_TEX_DESTROY, MPS_SURF_DESTROY:
 * object). The resource is the driver's CUDA_RESOURCE_DESC with its array
 * handle (an array or mipmapped array) in `array` instead; linear and
 * pitched resources are device memory the client owns. A texture's
 * descriptors are the driver's, plain values; view says whether the view
 * descriptor counts. The client holds the object's value itself (kernels
 * take it by value); the server knows which are the client's. */
enum { MPS_TEX_CREATE = 1, MPS_TEX_DESTROY, MPS_SURF_CREATE, MPS_SURF_DESTROY };

struct mps_msg_texobj {
	struct mps_msg hdr;
	uint64_t object;
	uint32_t array;
	uint32_t view;
	CUDA_RESOURCE_DESC res;
	CUDA_TEXTURE_DESC tex;
	CUDA_RESOURCE_VIEW_DESC view_desc;
};

/* MPS_OP_DEVOUT: what kernels print (device printf, failed device
 * asserts), which the driver writes to the server's stdout and stderr
 * (server/devout.c). MPS_DEVOUT_ENABLE: the client's modules print, so
 * such output is kept for it. MPS_DEVOUT_TAKE: after a synchronizing call
 * of the client's on `stream` (0: its context), the driver's printf buffer
 * emptied and up to a slot's worth handed over: val[0] bytes for stdout,
 * then val[1] for stderr, in data; val[2] 1 when more is left. */
enum { MPS_DEVOUT_ENABLE = 1, MPS_DEVOUT_TAKE };

struct mps_msg_devout {
	struct mps_msg hdr;
	uint32_t stream;
	uint32_t pad;
};

/* MPS_OP_MEMCPY_NODE: a copy node added or given new parameters (flags:
 * enum mps_kernel_node_what); ndeps node handles (add only) follow,
 * padded to 8 bytes. ctx: the copy's context (0: the message's). */
struct mps_msg_memcpy_node {
	struct mps_msg hdr;
	uint32_t graph;
	uint32_t node;
	uint32_t exec;
	uint32_t ctx;
	uint32_t ndeps;
	uint32_t pad;
	struct mps_copy3d p;
};

/* MPS_OP_ALLOC_NODE: an allocation node (cuGraphAddMemAllocNode) of
 * bytesize bytes on the device loc_id (the client's numbering), after ndeps
 * nodes: their handles follow, padded to 8 bytes, then naccess struct
 * mps_access. The reply of MPS_OP_ALLOC_NODE_GET: val[0] the address,
 * val[1] the size, val[2] the device (the server's index), val[3] the
 * number of access descriptors in data (the server's device indices). */
struct mps_access {
	int32_t loc_type;
	int32_t loc_id;
	uint32_t flags;
	uint32_t pad;
};

#define MPS_ALLOC_NODE_ACCESS_MAX (MPS_SLOT_DATA / sizeof(struct mps_access))

struct mps_msg_alloc_node {
	struct mps_msg hdr;
	uint32_t graph;
	uint32_t ndeps;
	int32_t loc_type;
	int32_t loc_id;
	uint32_t naccess;
	uint32_t pad;
	uint64_t bytesize;
};

/* MPS_OP_COND_NODE: a conditional node (cuGraphAddNode with
 * CU_GRAPH_NODE_TYPE_CONDITIONAL) after ndeps nodes, their handles
 * following; the reply's data holds its size body graphs' handles. */
#define MPS_COND_BODIES_MAX 64

struct mps_msg_cond_node {
	struct mps_msg hdr;
	uint32_t graph;
	uint32_t ndeps;
	uint32_t ctx;     /* 0: the message's */
	uint32_t type;    /* CUgraphConditionalNodeType */
	uint32_t size;
	uint32_t pad;
	uint64_t handle;  /* CUgraphConditionalHandle */
};

/* Reply of MPS_OP_KERNEL_NODE_GET: val[0] the function's handle (as a
 * kernel when val[1] is 1); data: this struct, then arg_size bytes of
 * arguments at the function's offsets. */
struct mps_kernel_node_out {
	uint32_t grid[3];
	uint32_t block[3];
	uint32_t shared_mem;
	uint32_t arg_size;
};

/* Reply data of MPS_OP_CAPTURE_INFO: val[3] dependencies, as node handles
 * (padded to 8 bytes), then as many CUgraphEdgeData. */
#define MPS_CAPTURE_DEPS_MAX (MPS_SLOT_DATA / (4 + 8) - 1)

struct mps_msg_error_string {
	struct mps_msg hdr;
	int32_t code;
	uint32_t pad;
};

/* True for the launch attribute ids (CUlaunchAttributeID) that may travel. */
static inline int mps_launch_attr_plain(uint32_t id)
{
	switch (id) {
	case 0:  /* IGNORE */
	case 1:  /* ACCESS_POLICY_WINDOW */
	case 2:  /* COOPERATIVE */
	case 4:  /* CLUSTER_DIMENSION */
	case 5:  /* CLUSTER_SCHEDULING_POLICY_PREFERENCE */
	case 6:  /* PROGRAMMATIC_STREAM_SERIALIZATION */
	case 8:  /* PRIORITY */
	case 9:  /* MEM_SYNC_DOMAIN_MAP */
	case 10: /* MEM_SYNC_DOMAIN */
	case 11: /* PREFERRED_CLUSTER_DIMENSION */
	case 14: /* PREFERRED_SHARED_MEMORY_CARVEOUT */
		return 1;
	default:
		return 0;
	}
}

/* Rounds a message length up to the ring's alignment. */
static inline uint32_t mps_msg_size(size_t n)
{
	return (uint32_t)((n + MPS_MSG_ALIGN - 1) & ~(size_t)(MPS_MSG_ALIGN - 1));
}

#define MPS_WIRE_ASSERT_SIZE(t) \
	_Static_assert(sizeof(struct t) % 8 == 0, #t " keeps 8-byte alignment")
MPS_WIRE_ASSERT_SIZE(mps_msg_ctx_create);
MPS_WIRE_ASSERT_SIZE(mps_msg_ctx_limit);
MPS_WIRE_ASSERT_SIZE(mps_msg_mem_alloc);
MPS_WIRE_ASSERT_SIZE(mps_msg_ptr);
MPS_WIRE_ASSERT_SIZE(mps_msg_pointer_attr);
MPS_WIRE_ASSERT_SIZE(mps_msg_host_alloc);
MPS_WIRE_ASSERT_SIZE(mps_msg_handle);
MPS_WIRE_ASSERT_SIZE(mps_msg_copy);
MPS_WIRE_ASSERT_SIZE(mps_msg_memset);
MPS_WIRE_ASSERT_SIZE(mps_msg_blob);
MPS_WIRE_ASSERT_SIZE(mps_msg_module_load);
MPS_WIRE_ASSERT_SIZE(mps_msg_mem_async);
MPS_WIRE_ASSERT_SIZE(mps_msg_get_symbol);
MPS_WIRE_ASSERT_SIZE(mps_msg_func_attr);
MPS_WIRE_ASSERT_SIZE(mps_msg_occupancy);
MPS_WIRE_ASSERT_SIZE(mps_msg_launch);
MPS_WIRE_ASSERT_SIZE(mps_msg_stream_create);
MPS_WIRE_ASSERT_SIZE(mps_msg_stream_wait);
MPS_WIRE_ASSERT_SIZE(mps_msg_event_create);
MPS_WIRE_ASSERT_SIZE(mps_msg_event_record);
MPS_WIRE_ASSERT_SIZE(mps_msg_elapsed);
MPS_WIRE_ASSERT_SIZE(mps_msg_error_string);
MPS_WIRE_ASSERT_SIZE(mps_msg_capture_begin);
MPS_WIRE_ASSERT_SIZE(mps_msg_kernel_node);
MPS_WIRE_ASSERT_SIZE(mps_msg_pool_attr);
MPS_WIRE_ASSERT_SIZE(mps_msg_vmm);
MPS_WIRE_ASSERT_SIZE(mps_msg_devices);
MPS_WIRE_ASSERT_SIZE(mps_msg_ipc);
MPS_WIRE_ASSERT_SIZE(mps_msg_graph_dot);
MPS_WIRE_ASSERT_SIZE(mps_msg_memcpy_node);
MPS_WIRE_ASSERT_SIZE(mps_msg_alloc_node);
MPS_WIRE_ASSERT_SIZE(mps_msg_cond_node);
MPS_WIRE_ASSERT_SIZE(mps_msg_client_limits);
MPS_WIRE_ASSERT_SIZE(mps_msg_devout);
_Static_assert(sizeof(struct mps_kernel_node_out) == 32, "kernel node reply layout");
_Static_assert(sizeof(struct mps_launch_attr) == 72, "launch attribute is CUlaunchAttribute-sized");
_Static_assert(offsetof(struct mps_msg_copy, host_offset) == 32, "copy layout");
_Static_assert(offsetof(struct mps_msg_launch, func) == 16, "launch layout");
_Static_assert(sizeof(struct mps_msg_launch) == 64, "launch header size");
_Static_assert(sizeof(struct mps_func_info) == 16, "func info header");
_Static_assert(sizeof(struct mps_fattr_all) <= MPS_SLOT_DATA, "every attribute fits a reply");
_Static_assert(sizeof(struct mps_vmm_prop) == 24, "allocation properties");
_Static_assert(offsetof(struct mps_msg_vmm, prop) == 56, "vmm layout");
_Static_assert(MPS_WIRE_ATTRS % 8 == 0, "attribute bitmap");
_Static_assert(sizeof(struct mps_hello) == 112, "hello size");
_Static_assert(sizeof(struct mps_refuse) == 256, "refuse size");
_Static_assert(offsetof(struct mps_welcome, dev) == 40, "welcome layout");
_Static_assert(MPS_REGION_DEVICES == MPS_MAX_DEVICES, "the region has a word per device");
_Static_assert(sizeof(struct mps_wire_device) == 1112, "device record size");
_Static_assert(sizeof(struct mps_msg_launch) + MPS_LAUNCH_ATTRS_MAX * sizeof(struct mps_launch_attr) +
	       MPS_ARGS_MAX <= MPS_MSG_MAX, "a launch fits in one message");

#endif
