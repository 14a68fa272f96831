// SPDX-License-Identifier: MIT
/*
 * A hostile client speaking the wire protocol directly (no client library):
 * wrong operations, short messages, bad handles and devices, copies at
 * memory it does not own (including another client's), absurd sizes, a bad
 * image, symbol names that lie about their length, graphs, captures and
 * forwarded functions given the wrong handles and counts, JIT linker steps
 * with bad options and handles, a reply slot out
 * of range, and finally a broken ring. Each must get
 * a clear error (or, for the broken ring, the end of its connection), while
 * the server stays up and another client keeps working throughout.
 * The daemon socket gets garbage too.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../cuda/common.h"
#include "common/atomics.h"
#include "common/clock.h"
#include "common/paths.h"
#include "common/shm.h"
#include "common/sock.h"
#include "common/sq.h"
#include "common/wire.h"

static int sock = -1;
static int ndev;   /* the GPUs the welcome listed */
static struct mps_region *region;
static struct mps_sq_producer sq;

static void connect_raw(void)
{
	size_t max = sizeof(struct mps_welcome) + MPS_MAX_DEVICES * sizeof(struct mps_wire_device);
	struct mps_hello h = { .magic = MPS_HELLO_MAGIC, .version = MPS_WIRE_VERSION, .kind = MPS_HELLO_CLIENT };
	struct mps_welcome *w = malloc(max);
	char path[4096];
	int fd = -1;

	mps_path_join(path, sizeof(path), mps_pipe_dir(), MPS_DAEMON_SOCKET);
	sock = mps_sock_connect(path);
	REQUIRE(sock >= 0, "cannot reach the daemon at %s", path);
	h.pid = (uint32_t)getpid();
	strcpy(h.comm, "s_malformed");
	REQUIRE(mps_sock_send(sock, &h, sizeof(h), -1) == sizeof(h), "hello");
	REQUIRE(mps_sock_recv(sock, w, max, &fd) > 0 && w->magic == MPS_WELCOME_MAGIC && fd >= 0, "no welcome");
	region = mps_shm_map(fd, MPS_REGION_SIZE, NULL);
	REQUIRE(region, "cannot map the region");
	close(fd);
	ndev = w->ndev;
	free(w);
	mps_sq_producer_init(&sq, region);
	{
		struct mps_fdmsg fm;

		fd = -1;
		REQUIRE(mps_sock_recv(sock, &fm, sizeof(fm), &fd) == sizeof(fm) && fm.magic == MPS_FDMSG_MAGIC &&
				fm.region == MPS_FD_WAKE && fd >= 0, "no wake-up eventfd after the welcome");
		sq.wake_fd = fd;
	}
}

/* Sends len bytes of msg as they are (header included) with the given slot. */
static void send_raw(void *msg, uint32_t len)
{
	void *p;
	uint64_t t0 = mps_now_ns();

	while (!(p = mps_sq_reserve(&sq, len)))
		REQUIRE(mps_now_ns() - t0 < 5000000000ull, "the ring stayed full");
	memcpy(p, msg, len);
	mps_sq_commit(&sq);
}

/* Sends a message of op and waits for its reply in slot 0. */
static CUresult call(uint16_t op, uint32_t ctx, void *msg, uint32_t len, struct mps_slot **out)
{
	struct mps_slot *s = mps_region_slot(region, 0);
	struct mps_msg *m = msg;
	uint64_t t0 = mps_now_ns();

	m->op = op;
	m->flags = m->flags;
	m->len = mps_msg_size(len);
	m->slot = 0;
	m->ctx = ctx;
	mps_store_relaxed(&s->state, MPS_SLOT_BUSY);
	send_raw(msg, m->len);
	while (mps_load_acquire(&s->state) != MPS_SLOT_DONE) {
		if (mps_now_ns() - t0 > 5000000000ull) {
			check_fail(__FILE__, __LINE__, NULL, "no reply to op %u", op);
			return CUDA_ERROR_UNKNOWN;
		}
		usleep(100);
	}
	if (out)
		*out = s;
	return (CUresult)s->result;
}

static void post(uint16_t op, uint32_t ctx, void *msg, uint32_t len)
{
	struct mps_msg *m = msg;

	m->op = op;
	m->len = mps_msg_size(len);
	m->slot = MPS_NO_SLOT;
	m->ctx = ctx;
	send_raw(msg, m->len);
}

/* Uploads the test kernels' PTX and loads it as a module; its handle. */
static uint32_t load_test_module(uint32_t ctx)
{
	char *ptx = t_ptx();
	size_t len = strlen(ptx) + 1, piece = MPS_MSG_MAX - sizeof(struct mps_msg_blob) - 64;
	uint8_t *buf = malloc(MPS_MSG_MAX);
	struct mps_msg_module_load ml;
	struct mps_slot *s;
	uint32_t h = 0;

	REQUIRE(buf, "out of memory");
	for (size_t off = 0; off < len; off += piece) {
		struct mps_msg_blob *b = (void *)buf;
		size_t n = len - off < piece ? len - off : piece;

		memset(b, 0, sizeof(*b));
		b->hdr.flags = off == 0 ? MPS_BLOB_RESET : 0;
		b->total = len;
		b->bytes = (uint32_t)n;
		memcpy(buf + sizeof(*b), ptx + off, n);
		post(MPS_OP_BLOB_APPEND, ctx, buf, (uint32_t)(sizeof(*b) + n));
	}
	memset(&ml, 0, sizeof(ml));
	ml.kind = MPS_MODULE;
	ml.size = len;
	if (call(MPS_OP_MODULE_LOAD, ctx, &ml, sizeof(ml), &s) == CUDA_SUCCESS)
		h = (uint32_t)s->val[0];
	free(buf);
	free(ptx);
	return h;
}

/* A GET_FUNCTION (or GET_GLOBAL) naming `bytes` (nbytes of them, sent as
 * they are) with the length field set to name_len. */
static CUresult get_symbol(uint16_t op, uint32_t ctx, uint32_t mod, const char *bytes, uint32_t nbytes,
			   uint32_t name_len)
{
	uint64_t buf[(sizeof(struct mps_msg_get_symbol) + 64) / 8];   /* aligned for the header */
	struct mps_msg_get_symbol *q = (struct mps_msg_get_symbol *)buf;

	memset(buf, 0, sizeof(buf));
	q->kind = op == MPS_OP_GET_GLOBAL ? MPS_GLOBAL_OF_MODULE : MPS_FUNC_OF_MODULE;
	q->parent = mod;
	q->name_len = name_len;
	memcpy(q->name, bytes, nbytes);
	return call(op, ctx, buf, (uint32_t)(sizeof(*q) + nbytes), NULL);
}

/* Graphs, stream capture and the forwarded functions: handles of the wrong
 * kind or of nothing, counts larger than the arrays sent, absent arrays with
 * counts, missing outputs, messages cut short, kernel nodes whose arguments
 * do not fit their function. Every one refused; the graph and its nodes still
 * work afterwards, and destroying the graph twice is refused the second time. */
/* Memory pools and virtual memory: handles that are not pools or
 * allocations, ranges that are not the client's, sizes past what the
 * server grants, an import without its fd and with an fd that is no
 * allocation's, and properties carrying pointers or foreign locations. */
/* Array copies: no array at all, an array that is not one, a neighbour's
 * memory on the other side, a box whose numbers overflow; then a real
 * array copy still works, and the array is left to the teardown. */
static void attack_array(uint32_t ctx, uint64_t theirs)
{
	union {
		struct mps_msg hdr;
		struct mps_msg_array_copy ac;
		struct mps_msg_texobj tx;
		struct mps_fwd_cuArrayCreate_v2 cr;
		struct mps_msg_mem_alloc ma;
		uint8_t raw[1024];
	} m;
	CUDA_ARRAY_DESCRIPTOR ad = { .Width = 64, .Height = 1, .Format = CU_AD_FORMAT_UNSIGNED_INT32, .NumChannels = 1 };
	struct mps_slot *s;
	uint32_t array;
	uint64_t mine;

	memset(&m, 0, sizeof(m));
	m.cr.present = 0x3;
	memcpy(&m.cr.a1, &ad, sizeof(ad));
	REQUIRE_CU(call(MPS_OP_FWD_cuArrayCreate_v2, ctx, &m, sizeof(m.cr), &s));
	array = (uint32_t)((struct mps_fwd_cuArrayCreate_v2_out *)s->data)->o0;
	REQUIRE(array, "no array");
	memset(&m, 0, sizeof(m));
	m.ma.size = 4096;
	REQUIRE_CU(call(MPS_OP_MEM_ALLOC, ctx, &m, sizeof(m.ma), &s));
	mine = s->val[0];

	memset(&m, 0, sizeof(m));
	m.ac.p.width = 256;
	m.ac.p.height = m.ac.p.depth = 1;
	m.ac.p.src.addr = mine;
	CHECK_CU(call(MPS_OP_ARRAY_COPY, ctx, &m, sizeof(m.ac), NULL), CUDA_ERROR_INVALID_VALUE);
	m.ac.dst_array = 0x7777701;
	CHECK_CU(call(MPS_OP_ARRAY_COPY, ctx, &m, sizeof(m.ac), NULL), CUDA_ERROR_INVALID_HANDLE);
	m.ac.dst_array = array;
	m.ac.p.src.addr = theirs;
	CHECK_CU(call(MPS_OP_ARRAY_COPY, ctx, &m, sizeof(m.ac), NULL), CUDA_ERROR_INVALID_VALUE);
	m.ac.p.src.addr = mine;
	m.ac.p.src.pitch = UINT64_MAX / 2;
	m.ac.p.height = 3;
	CHECK_CU(call(MPS_OP_ARRAY_COPY, ctx, &m, sizeof(m.ac), NULL), CUDA_ERROR_INVALID_VALUE);
	m.ac.p.src.pitch = 0;
	m.ac.p.height = 1;
	m.ac.p.src.x = 4000;   /* past the end of its 4096 bytes */
	CHECK_CU(call(MPS_OP_ARRAY_COPY, ctx, &m, sizeof(m.ac), NULL), CUDA_ERROR_INVALID_VALUE);
	m.ac.p.src.x = 0;
	REQUIRE_CU(call(MPS_OP_ARRAY_COPY, ctx, &m, sizeof(m.ac), NULL));

	/* Texture and surface objects: a resource of no kind, a false array,
	 * a neighbour's memory, rows that overflow, a surface over memory, a
	 * destroy of what is not one; a real one still works. */
	memset(&m, 0, sizeof(m));
	m.tx.hdr.flags = MPS_TEX_CREATE;
	m.tx.res.resType = (CUresourcetype)77;
	CHECK_CU(call(MPS_OP_TEXOBJ, ctx, &m, sizeof(m.tx), NULL), CUDA_ERROR_INVALID_VALUE);
	m.tx.res.resType = CU_RESOURCE_TYPE_ARRAY;
	m.tx.array = 0x7777701;
	CHECK_CU(call(MPS_OP_TEXOBJ, ctx, &m, sizeof(m.tx), NULL), CUDA_ERROR_INVALID_HANDLE);
	m.tx.res.resType = CU_RESOURCE_TYPE_LINEAR;
	m.tx.res.res.linear.devPtr = theirs;
	m.tx.res.res.linear.format = CU_AD_FORMAT_FLOAT;
	m.tx.res.res.linear.numChannels = 1;
	m.tx.res.res.linear.sizeInBytes = 256;
	CHECK_CU(call(MPS_OP_TEXOBJ, ctx, &m, sizeof(m.tx), NULL), CUDA_ERROR_INVALID_VALUE);
	memset(&m.tx.res, 0, sizeof(m.tx.res));
	m.tx.res.resType = CU_RESOURCE_TYPE_PITCH2D;
	m.tx.res.res.pitch2D.devPtr = mine;
	m.tx.res.res.pitch2D.format = CU_AD_FORMAT_FLOAT;
	m.tx.res.res.pitch2D.numChannels = 1;
	m.tx.res.res.pitch2D.width = 16;
	m.tx.res.res.pitch2D.height = 1ull << 31;
	m.tx.res.res.pitch2D.pitchInBytes = 1ull << 40;
	CHECK_CU(call(MPS_OP_TEXOBJ, ctx, &m, sizeof(m.tx), NULL), CUDA_ERROR_INVALID_VALUE);
	m.tx.hdr.flags = MPS_SURF_CREATE;
	m.tx.res.resType = CU_RESOURCE_TYPE_LINEAR;
	m.tx.res.res.linear.devPtr = mine;
	m.tx.res.res.linear.sizeInBytes = 256;
	CHECK_CU(call(MPS_OP_TEXOBJ, ctx, &m, sizeof(m.tx), NULL), CUDA_ERROR_INVALID_VALUE);
	/* A linear texture from its own memory far past the end (ending
	 * there) is made; one of no element size is not. */
	m.tx.hdr.flags = MPS_TEX_CREATE;
	m.tx.res.res.linear.sizeInBytes = 1ull << 40;
	REQUIRE_CU(call(MPS_OP_TEXOBJ, ctx, &m, sizeof(m.tx), &s));
	m.tx.object = s->val[0];
	m.tx.hdr.flags = MPS_TEX_DESTROY;
	REQUIRE_CU(call(MPS_OP_TEXOBJ, ctx, &m, sizeof(m.tx), NULL));
	m.tx.hdr.flags = MPS_TEX_CREATE;
	m.tx.res.res.linear.numChannels = 0;
	CHECK_CU(call(MPS_OP_TEXOBJ, ctx, &m, sizeof(m.tx), NULL), CUDA_ERROR_INVALID_VALUE);
	m.tx.res.res.linear.numChannels = 1;
	m.tx.hdr.flags = MPS_SURF_CREATE;
	m.tx.hdr.flags = MPS_TEX_DESTROY;
	m.tx.object = 0x1234;
	CHECK_CU(call(MPS_OP_TEXOBJ, ctx, &m, sizeof(m.tx), NULL), CUDA_ERROR_INVALID_VALUE);
	m.tx.hdr.flags = 99;
	CHECK_CU(call(MPS_OP_TEXOBJ, ctx, &m, sizeof(m.tx), NULL), CUDA_ERROR_INVALID_VALUE);
	memset(&m, 0, sizeof(m));
	m.tx.hdr.flags = MPS_SURF_CREATE;
	m.tx.res.resType = CU_RESOURCE_TYPE_ARRAY;
	m.tx.array = array;
	REQUIRE_CU(call(MPS_OP_TEXOBJ, ctx, &m, sizeof(m.tx), &s));
	m.tx.object = s->val[0];
	m.tx.hdr.flags = MPS_TEX_DESTROY;   /* a surface is not a texture */
	CHECK_CU(call(MPS_OP_TEXOBJ, ctx, &m, sizeof(m.tx), NULL), CUDA_ERROR_INVALID_VALUE);
	m.tx.hdr.flags = MPS_SURF_DESTROY;
	REQUIRE_CU(call(MPS_OP_TEXOBJ, ctx, &m, sizeof(m.tx), NULL));
}

static void attack_memory(uint32_t ctx, uint64_t theirs)
{
	union {
		struct mps_msg hdr;
		struct mps_msg_pool_attr pa;
		struct mps_msg_vmm v;
		struct mps_fwd_cuDeviceGetDefaultMemPool dp;
		struct mps_fwd_cuDeviceGetGraphMemAttribute ga;
		struct mps_fwd_cuDeviceSetGraphMemAttribute gs;
		struct mps_fwd_cuMemPoolCreate pc;
		struct mps_fwd_cuMemPoolDestroy pd;
		struct mps_fwd_cuMemSetAccess sa;
		struct mps_msg_ipc ipc;
		uint8_t raw[512];
	} m;
	struct mps_fdmsg fm = { .magic = MPS_FDMSG_MAGIC, .region = MPS_FD_IMPORT };
	CUmemPoolProps props;
	CUmemAccessDesc *desc;
	struct mps_slot *s;
	uint32_t pool, alloc;
	uint64_t res, gran = 2u << 20;
	int fd;

	/* The default pool, then its attributes with lies around it. */
	memset(&m, 0, sizeof(m));
	m.dp.present = 1;
	REQUIRE_CU(call(MPS_OP_FWD_cuDeviceGetDefaultMemPool, ctx, &m, sizeof(m.dp), &s));
	pool = (uint32_t)((struct mps_fwd_cuDeviceGetDefaultMemPool_out *)s->data)->o0;
	REQUIRE(pool, "no default pool");
	m.dp.a1 = 77;   /* no such device */
	CHECK_CU(call(MPS_OP_FWD_cuDeviceGetDefaultMemPool, ctx, &m, sizeof(m.dp), NULL), CUDA_ERROR_INVALID_DEVICE);

	/* The device's graph memory: no such device, no value, a value set
	 * that only a reset may be, an attribute of no kind. */
	memset(&m, 0, sizeof(m));
	m.ga.present = 0x4;
	m.ga.a0 = 77;
	CHECK_CU(call(MPS_OP_FWD_cuDeviceGetGraphMemAttribute, ctx, &m, sizeof(m.ga), NULL),
		 CUDA_ERROR_INVALID_DEVICE);
	m.ga.a0 = 0;
	m.ga.a1 = 99;
	CHECK_CU(call(MPS_OP_FWD_cuDeviceGetGraphMemAttribute, ctx, &m, sizeof(m.ga), NULL), CUDA_ERROR_INVALID_VALUE);
	m.ga.present = 0;
	m.ga.a1 = CU_GRAPH_MEM_ATTR_USED_MEM_HIGH;
	CHECK_CU(call(MPS_OP_FWD_cuDeviceGetGraphMemAttribute, ctx, &m, sizeof(m.ga), NULL), CUDA_ERROR_INVALID_VALUE);
	memset(&m, 0, sizeof(m));
	m.gs.present = 0x4;
	m.gs.a1 = CU_GRAPH_MEM_ATTR_USED_MEM_HIGH;
	memcpy(m.gs.a2, &(cuuint64_t){ 1ull << 40 }, sizeof(cuuint64_t));
	CHECK_CU(call(MPS_OP_FWD_cuDeviceSetGraphMemAttribute, ctx, &m, sizeof(m.gs), NULL), CUDA_ERROR_INVALID_VALUE);
	memset(&m, 0, sizeof(m));
	m.pa.pool = ctx;   /* a context, not a pool */
	m.pa.attr = CU_MEMPOOL_ATTR_RELEASE_THRESHOLD;
	CHECK_CU(call(MPS_OP_POOL_ATTR, ctx, &m, sizeof(m.pa), NULL), CUDA_ERROR_INVALID_VALUE);
	m.pa.pool = pool;
	m.pa.attr = 0x7fff;
	CHECK_CU(call(MPS_OP_POOL_ATTR, ctx, &m, sizeof(m.pa), NULL), CUDA_ERROR_INVALID_VALUE);
	m.pa.attr = CU_MEMPOOL_ATTR_USED_MEM_CURRENT;
	m.pa.set = 1;
	m.pa.value = 12345;
	CHECK(call(MPS_OP_POOL_ATTR, ctx, &m, sizeof(m.pa), NULL) != CUDA_SUCCESS, "a read-only attribute was set");
	CHECK_CU(call(MPS_OP_POOL_ATTR, ctx, &m, 16, NULL), CUDA_ERROR_INVALID_VALUE);   /* cut short */
	/* Its default pool is not the client's to destroy. */
	memset(&m, 0, sizeof(m));
	m.pd.a0 = pool;
	CHECK_CU(call(MPS_OP_FWD_cuMemPoolDestroy, ctx, &m, sizeof(m.pd), NULL), CUDA_ERROR_INVALID_VALUE);
	/* A pool with a pointer in its properties, or on the host. */
	memset(&m, 0, sizeof(m));
	memset(&props, 0, sizeof(props));
	props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
	props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	props.win32SecurityAttributes = (void *)(uintptr_t)0xdeadbeef000ull;
	m.pc.present = 1 | 2;
	memcpy(m.pc.a1, &props, sizeof(props));
	REQUIRE_CU(call(MPS_OP_FWD_cuMemPoolCreate, ctx, &m, sizeof(m.pc), &s));
	m.pd.present = 0;
	m.pd.a0 = ((struct mps_fwd_cuMemPoolCreate_out *)s->data)->o0;
	REQUIRE_CU(call(MPS_OP_FWD_cuMemPoolDestroy, ctx, &m, sizeof(m.pd), NULL));
	memset(&m, 0, sizeof(m));
	props.location.type = CU_MEM_LOCATION_TYPE_HOST;
	m.pc.present = 1 | 2;
	memcpy(m.pc.a1, &props, sizeof(props));
	CHECK_CU(call(MPS_OP_FWD_cuMemPoolCreate, ctx, &m, sizeof(m.pc), NULL), CUDA_ERROR_NOT_SUPPORTED);

	/* Physical allocations: bad properties, then one to attack with. */
	memset(&m, 0, sizeof(m));
	m.v.size = gran;
	m.v.prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	m.v.prop.loc_type = CU_MEM_LOCATION_TYPE_DEVICE;
	m.v.prop.loc_id = 99;
	CHECK_CU(call(MPS_OP_VMM_CREATE, ctx, &m, sizeof(m.v), NULL), CUDA_ERROR_INVALID_DEVICE);
	m.v.prop.loc_id = -5;
	CHECK_CU(call(MPS_OP_VMM_CREATE, ctx, &m, sizeof(m.v), NULL), CUDA_ERROR_INVALID_DEVICE);
	m.v.prop.loc_id = 0;
	m.v.prop.loc_type = CU_MEM_LOCATION_TYPE_HOST;
	CHECK_CU(call(MPS_OP_VMM_CREATE, ctx, &m, sizeof(m.v), NULL), CUDA_ERROR_NOT_SUPPORTED);
	m.v.prop.loc_type = CU_MEM_LOCATION_TYPE_DEVICE;
	m.v.prop.handle_types = 0xff;
	CHECK_CU(call(MPS_OP_VMM_CREATE, ctx, &m, sizeof(m.v), NULL), CUDA_ERROR_NOT_SUPPORTED);
	m.v.prop.handle_types = 0;
	m.v.size = 1ull << 62;   /* past any limit or device */
	CHECK(call(MPS_OP_VMM_CREATE, ctx, &m, sizeof(m.v), NULL) != CUDA_SUCCESS, "2^62 bytes created");
	m.v.size = gran;
	REQUIRE_CU(call(MPS_OP_VMM_CREATE, ctx, &m, sizeof(m.v), &s));
	alloc = (uint32_t)s->val[0];
	/* Address space: none, more than a client may hold. */
	memset(&m, 0, sizeof(m));
	CHECK_CU(call(MPS_OP_VMM_RESERVE, ctx, &m, sizeof(m.v), NULL), CUDA_ERROR_INVALID_VALUE);
	m.v.size = 1ull << 46;
	CHECK_CU(call(MPS_OP_VMM_RESERVE, ctx, &m, sizeof(m.v), NULL), CUDA_ERROR_OUT_OF_MEMORY);
	m.v.size = 2 * gran;
	m.v.ptr = theirs;   /* a wish for the neighbour's address is only a wish */
	REQUIRE_CU(call(MPS_OP_VMM_RESERVE, ctx, &m, sizeof(m.v), &s));
	res = s->val[0];
	CHECK(res != theirs, "reserved over the neighbour's memory");
	/* Maps: not a handle, outside the reservation, over the neighbour,
	 * past the allocation. */
	memset(&m, 0, sizeof(m));
	m.v.ptr = res;
	m.v.size = gran;
	m.v.handle = ctx;
	CHECK_CU(call(MPS_OP_VMM_MAP, ctx, &m, sizeof(m.v), NULL), CUDA_ERROR_INVALID_VALUE);
	m.v.handle = alloc;
	m.v.ptr = theirs;
	CHECK_CU(call(MPS_OP_VMM_MAP, ctx, &m, sizeof(m.v), NULL), CUDA_ERROR_INVALID_VALUE);
	m.v.ptr = res + gran;
	m.v.size = 2 * gran;
	CHECK_CU(call(MPS_OP_VMM_MAP, ctx, &m, sizeof(m.v), NULL), CUDA_ERROR_INVALID_VALUE);
	m.v.ptr = res;
	m.v.size = gran;
	m.v.arg = gran;   /* offset at the end */
	CHECK_CU(call(MPS_OP_VMM_MAP, ctx, &m, sizeof(m.v), NULL), CUDA_ERROR_INVALID_VALUE);
	m.v.arg = ~0ull;
	CHECK_CU(call(MPS_OP_VMM_MAP, ctx, &m, sizeof(m.v), NULL), CUDA_ERROR_INVALID_VALUE);
	m.v.arg = 0;
	REQUIRE_CU(call(MPS_OP_VMM_MAP, ctx, &m, sizeof(m.v), NULL));
	/* Access for the neighbour's range, and for a device that is not. */
	memset(&m, 0, sizeof(m));
	m.sa.present = 4;
	m.sa.a0 = theirs;
	m.sa.a1 = 4096;
	m.sa.a3 = 1;
	desc = (CUmemAccessDesc *)(&m.sa + 1);
	desc->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	desc->flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	CHECK_CU(call(MPS_OP_FWD_cuMemSetAccess, ctx, &m, sizeof(m.sa) + 16, NULL), CUDA_ERROR_INVALID_VALUE);
	m.sa.a0 = res;
	desc->location.id = 42;
	CHECK_CU(call(MPS_OP_FWD_cuMemSetAccess, ctx, &m, sizeof(m.sa) + 16, NULL), CUDA_ERROR_INVALID_DEVICE);
	/* Retain, unmap and free what is not there or not whole. */
	memset(&m, 0, sizeof(m));
	m.v.ptr = theirs;
	CHECK_CU(call(MPS_OP_VMM_RETAIN, ctx, &m, sizeof(m.v), NULL), CUDA_ERROR_INVALID_VALUE);
	m.v.size = 4096;
	CHECK_CU(call(MPS_OP_VMM_UNMAP, ctx, &m, sizeof(m.v), NULL), CUDA_ERROR_INVALID_VALUE);
	m.v.ptr = res;
	m.v.size = gran / 2;
	CHECK_CU(call(MPS_OP_VMM_UNMAP, ctx, &m, sizeof(m.v), NULL), CUDA_ERROR_INVALID_VALUE);
	m.v.size = gran;
	CHECK_CU(call(MPS_OP_VMM_FREE, ctx, &m, sizeof(m.v), NULL), CUDA_ERROR_INVALID_VALUE);
	m.v.ptr = theirs;
	m.v.size = 2 * gran;
	CHECK_CU(call(MPS_OP_VMM_FREE, ctx, &m, sizeof(m.v), NULL), CUDA_ERROR_INVALID_VALUE);
	/* Export: no such handle, a type the server cannot pass. */
	memset(&m, 0, sizeof(m));
	m.v.handle = 0x7fff0001;
	m.v.type = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
	CHECK_CU(call(MPS_OP_VMM_EXPORT, ctx, &m, sizeof(m.v), NULL), CUDA_ERROR_INVALID_VALUE);
	m.v.handle = alloc;
	m.v.type = CU_MEM_HANDLE_TYPE_WIN32;
	CHECK_CU(call(MPS_OP_VMM_EXPORT, ctx, &m, sizeof(m.v), NULL), CUDA_ERROR_NOT_SUPPORTED);
	/* Import: no fd sent, then an fd that is no allocation's. */
	memset(&m, 0, sizeof(m));
	m.v.type = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
	CHECK_CU(call(MPS_OP_VMM_IMPORT, ctx, &m, sizeof(m.v), NULL), CUDA_ERROR_INVALID_VALUE);
	fd = open("/dev/null", O_RDONLY);
	REQUIRE(fd >= 0, "open /dev/null");
	REQUIRE(mps_sock_send(sock, &fm, sizeof(fm), fd) == sizeof(fm), "sending an fd");
	close(fd);
	CHECK(call(MPS_OP_VMM_IMPORT, ctx, &m, sizeof(m.v), NULL) != CUDA_SUCCESS, "/dev/null imported");
	/* Released while mapped: no longer the client's to name. */
	memset(&m, 0, sizeof(m));
	m.v.handle = alloc;
	REQUIRE_CU(call(MPS_OP_VMM_RELEASE, ctx, &m, sizeof(m.v), NULL));
	CHECK_CU(call(MPS_OP_VMM_RELEASE, ctx, &m, sizeof(m.v), NULL), CUDA_ERROR_INVALID_VALUE);
	m.v.ptr = res + gran;
	m.v.size = gran;
	CHECK_CU(call(MPS_OP_VMM_MAP, ctx, &m, sizeof(m.v), NULL), CUDA_ERROR_INVALID_VALUE);
	/* The reservation left mapped; the server undoes both at the end. */

	/* IPC: a handle for the neighbour's memory, a handle of garbage, a
	 * close of what was never opened, an event that is not one. */
	memset(&m, 0, sizeof(m));
	m.ipc.ptr = theirs;
	CHECK_CU(call(MPS_OP_IPC_GET_MEM, ctx, &m, sizeof(m.ipc), NULL), CUDA_ERROR_INVALID_VALUE);
	memset(m.ipc.bytes, 0xa5, sizeof(m.ipc.bytes));
	CHECK(call(MPS_OP_IPC_OPEN_MEM, ctx, &m, sizeof(m.ipc), NULL) != CUDA_SUCCESS, "a garbage handle opened");
	m.ipc.flags = 0xff;
	CHECK_CU(call(MPS_OP_IPC_OPEN_MEM, ctx, &m, sizeof(m.ipc), NULL), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(call(MPS_OP_IPC_CLOSE_MEM, ctx, &m, sizeof(m.ipc), NULL), CUDA_ERROR_INVALID_VALUE);
	m.ipc.event = ctx;
	CHECK_CU(call(MPS_OP_IPC_GET_EVENT, ctx, &m, sizeof(m.ipc), NULL), CUDA_ERROR_INVALID_HANDLE);
	CHECK(call(MPS_OP_IPC_OPEN_EVENT, ctx, &m, sizeof(m.ipc), NULL) != CUDA_SUCCESS, "a garbage event opened");
	CHECK_CU(call(MPS_OP_IPC_OPEN_EVENT, 0x7fff0001, &m, sizeof(m.ipc), NULL), CUDA_ERROR_INVALID_CONTEXT);

	/* Pool sharing: a pool that is not one, a default pool, a type that
	 * is not a file descriptor; an import with no fd sent; the
	 * neighbour's pointer exported; a pointer imported into a pool that
	 * was not imported, or into none. */
	memset(&m, 0, sizeof(m));
	m.v.handle = ctx;
	m.v.type = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
	CHECK_CU(call(MPS_OP_POOL_EXPORT, ctx, &m, sizeof(m.v), NULL), CUDA_ERROR_INVALID_VALUE);
	m.v.handle = pool;   /* the default pool: made without a handle type */
	CHECK(call(MPS_OP_POOL_EXPORT, ctx, &m, sizeof(m.v), NULL) != CUDA_SUCCESS, "the default pool was exported");
	m.v.type = CU_MEM_HANDLE_TYPE_FABRIC;
	CHECK_CU(call(MPS_OP_POOL_EXPORT, ctx, &m, sizeof(m.v), NULL), CUDA_ERROR_NOT_SUPPORTED);
	m.v.type = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
	CHECK_CU(call(MPS_OP_POOL_IMPORT, ctx, &m, sizeof(m.v), NULL), CUDA_ERROR_INVALID_VALUE);
	memset(&m, 0, sizeof(m));
	m.ipc.ptr = theirs;
	CHECK_CU(call(MPS_OP_POOL_EXPORT_PTR, ctx, &m, sizeof(m.ipc), NULL), CUDA_ERROR_INVALID_VALUE);
	m.ipc.event = pool;
	CHECK_CU(call(MPS_OP_POOL_IMPORT_PTR, ctx, &m, sizeof(m.ipc), NULL), CUDA_ERROR_INVALID_VALUE);
	m.ipc.event = 0x7fff0001;
	CHECK_CU(call(MPS_OP_POOL_IMPORT_PTR, ctx, &m, sizeof(m.ipc), NULL), CUDA_ERROR_INVALID_VALUE);

	/* The devices it sees, sent again once it has a context, and with a
	 * count past the server's devices: refused, the numbering unchanged. */
	{
		union {   /* room for the size rounded up to the ring's unit */
			struct mps_msg_devices d;
			uint8_t bytes[sizeof(struct mps_msg_devices) + MPS_MSG_ALIGN];
		} dv;

		memset(&dv, 0, sizeof(dv));
		dv.d.count = 1;
		dv.d.map[0] = 1;
		CHECK_CU(call(MPS_OP_DEVICES, ctx, &dv, sizeof(dv.d), NULL), CUDA_ERROR_INVALID_VALUE);
		dv.d.count = 99;
		CHECK_CU(call(MPS_OP_DEVICES, ctx, &dv, sizeof(dv.d), NULL), CUDA_ERROR_INVALID_VALUE);
		CHECK_CU(call(MPS_OP_DEVICES, ctx, &dv, 16, NULL), CUDA_ERROR_INVALID_VALUE);   /* cut short */
		memset(&m, 0, sizeof(m));
		REQUIRE_CU(call(MPS_OP_MEM_INFO, ctx, &m, 16, NULL));
	}

	/* Its own limits, sent once it has a context (too late), with values
	 * out of range, and cut short: refused, no limit taken. */
	{
		union {
			struct mps_msg_client_limits l;
			uint8_t bytes[sizeof(struct mps_msg_client_limits) + MPS_MSG_ALIGN];
		} lm;

		memset(&lm, 0, sizeof(lm));
		lm.l.priority = -1;
		lm.l.mem_limit[0] = 1 << 20;
		CHECK_CU(call(MPS_OP_CLIENT_LIMITS, ctx, &lm, sizeof(lm.l), NULL), CUDA_ERROR_INVALID_VALUE);
		lm.l.priority = 7;
		lm.l.thread_pct = 20000;
		CHECK_CU(call(MPS_OP_CLIENT_LIMITS, ctx, &lm, sizeof(lm.l), NULL), CUDA_ERROR_INVALID_VALUE);
		CHECK_CU(call(MPS_OP_CLIENT_LIMITS, ctx, &lm, 16, NULL), CUDA_ERROR_INVALID_VALUE);   /* cut short */
		memset(&m, 0, sizeof(m));
		REQUIRE_CU(call(MPS_OP_MEM_INFO, ctx, &m, 16, &s));
		CHECK(s->val[1] > (1u << 20), "a refused 1 MiB limit shows: total %llu", (unsigned long long)s->val[1]);
	}

	/* A graph's picture, asked of a context and of nothing. */
	memset(&m, 0, sizeof(m));
	m.ipc.ptr = ctx;   /* the first word: mps_msg_graph_dot's graph */
	CHECK_CU(call(MPS_OP_GRAPH_DOT, ctx, &m, sizeof(struct mps_msg_graph_dot), NULL), CUDA_ERROR_INVALID_VALUE);
	m.ipc.ptr = 0;
	CHECK_CU(call(MPS_OP_GRAPH_DOT, ctx, &m, sizeof(struct mps_msg_graph_dot), NULL), CUDA_ERROR_INVALID_VALUE);
}

/* Host functions: one before any set-up (refused at the next
 * synchronize), a set-up with no pipe ahead of it naming no region, graph
 * host nodes naming no graph or made before the set-up; stream waits on
 * memory not the client's; host registrations without their memfd. */
/* Requests to be woken on words out of range, on a slot and a staging chunk
 * nothing is pending on, and on a slot the GPU answered already: each
 * ignored or a harmless wake-up, the server answering on. */
static void attack_wake(uint32_t ctx)
{
	union {
		struct mps_msg_handle q;
		uint8_t raw[64];
	} w;
	struct mps_msg_handle *const w_p = &w.q;
	const uint32_t bad[] = { MPS_WAKE_COUNT, 999, UINT32_MAX, 7, MPS_WAKE_STAGE(3) };

	memset(&w, 0, sizeof(w));
	for (unsigned int i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		w_p->handle = bad[i];
		post(MPS_OP_SLOT_WAKE, ctx, w_p, sizeof(*w_p));
	}
	w_p->handle = 0;
	REQUIRE_CU(call(MPS_OP_STREAM_SYNC, ctx, w_p, sizeof(*w_p), NULL));
	post(MPS_OP_SLOT_WAKE, ctx, w_p, sizeof(*w_p));   /* answered already */
	post(MPS_OP_SLOT_WAKE, ctx, w_p, sizeof(*w_p));
	REQUIRE_CU(call(MPS_OP_STREAM_SYNC, ctx, w_p, sizeof(*w_p), NULL));
	REQUIRE_CU(call(MPS_OP_CTX_SYNC, ctx, w_p, 16, NULL));
}

/* What kernels print: an ask of no kind, a take before the client said it
 * prints (nothing), one for a stream that is not the client's, then a
 * take that works (nothing printed, nothing given). */
static void attack_devout(uint32_t ctx)
{
	union {
		struct mps_msg_devout q;
		uint8_t raw[64];   /* room for the rounding up */
	} u;
	struct mps_msg_devout *const qp = &u.q;
	struct mps_slot *s;

	memset(&u, 0, sizeof(u));
	qp->hdr.flags = 77;
	CHECK_CU(call(MPS_OP_DEVOUT, ctx, qp, sizeof(*qp), NULL), CUDA_ERROR_INVALID_VALUE);
	qp->hdr.flags = MPS_DEVOUT_TAKE;
	REQUIRE_CU(call(MPS_OP_DEVOUT, ctx, qp, sizeof(*qp), &s));
	CHECK(s->val[0] == 0 && s->val[1] == 0, "a take before the client prints gave %llu bytes",
	      (unsigned long long)(s->val[0] + s->val[1]));
	qp->hdr.flags = MPS_DEVOUT_ENABLE;
	REQUIRE_CU(call(MPS_OP_DEVOUT, ctx, qp, sizeof(*qp), NULL));
	qp->hdr.flags = MPS_DEVOUT_TAKE;
	qp->stream = 0x7777701;
	CHECK_CU(call(MPS_OP_DEVOUT, ctx, qp, sizeof(*qp), NULL), CUDA_ERROR_INVALID_HANDLE);
	qp->stream = 0;
	REQUIRE_CU(call(MPS_OP_DEVOUT, ctx, qp, sizeof(*qp), &s));
	CHECK(s->val[0] + s->val[1] <= MPS_SLOT_DATA && s->val[2] == 0, "a take gave %llu + %llu bytes, more %llu",
	      (unsigned long long)s->val[0], (unsigned long long)s->val[1], (unsigned long long)s->val[2]);
}

/* A link message q sent from u, which has room for its rounding up. */
static CUresult link_call(void *u, const struct mps_msg_link *q, uint16_t op, uint32_t ctx, struct mps_slot **out)
{
	memset(u, 0, sizeof(*q) + MPS_MSG_ALIGN);
	memcpy(u, q, sizeof(*q));
	return call(op, ctx, u, sizeof(*q), out);
}

/* The JIT linker: options that are not plain numbers (a log buffer, a
 * symbol table, one past the last), too many options, an input with no
 * upload or of an unknown kind, steps on a link that does not exist or was
 * destroyed: each refused, with no link made; then a good link still
 * works, and one left behind goes with the client. */
static void attack_link(uint32_t ctx)
{
	union {
		struct mps_msg_link q;
		uint8_t raw[sizeof(struct mps_msg_link) + MPS_MSG_ALIGN];   /* sent rounded up */
	} u;
	struct mps_msg_link q;
	struct mps_slot *s;
	const uint32_t bad_opts[] = { CU_JIT_INFO_LOG_BUFFER, CU_JIT_GLOBAL_SYMBOL_ADDRESSES, CU_JIT_NUM_OPTIONS, 1000 };
	uint32_t link;

	for (unsigned int i = 0; i < sizeof(bad_opts) / sizeof(bad_opts[0]); i++) {
		memset(&q, 0, sizeof(q));
		q.nopts = 1;
		q.opts[0].opt = bad_opts[i];
		q.opts[0].value = 0x1000;
		CHECK_CU(link_call(&u, &q, MPS_OP_LINK_CREATE, ctx, NULL), CUDA_ERROR_INVALID_VALUE);
	}
	memset(&q, 0, sizeof(q));
	q.nopts = MPS_LINK_OPTS + 1;
	CHECK_CU(link_call(&u, &q, MPS_OP_LINK_CREATE, ctx, NULL), CUDA_ERROR_INVALID_VALUE);
	memset(&q, 0, sizeof(q));
	CHECK_CU(link_call(&u, &q, MPS_OP_LINK_CREATE, 0, NULL), CUDA_ERROR_INVALID_CONTEXT);
	q.link = 12345;
	CHECK_CU(link_call(&u, &q, MPS_OP_LINK_ADD, ctx, NULL), CUDA_ERROR_INVALID_HANDLE);
	CHECK_CU(link_call(&u, &q, MPS_OP_LINK_COMPLETE, ctx, NULL), CUDA_ERROR_INVALID_HANDLE);
	CHECK_CU(link_call(&u, &q, MPS_OP_LINK_DESTROY, ctx, NULL), CUDA_ERROR_INVALID_HANDLE);
	q.link = ctx;   /* a handle of another kind */
	CHECK_CU(link_call(&u, &q, MPS_OP_LINK_DESTROY, ctx, NULL), CUDA_ERROR_INVALID_HANDLE);
	memset(&q, 0, sizeof(q));
	q.nopts = 1;
	q.opts[0].opt = CU_JIT_OPTIMIZATION_LEVEL;
	q.opts[0].value = 2;
	REQUIRE(link_call(&u, &q, MPS_OP_LINK_CREATE, ctx, &s) == CUDA_SUCCESS, "a good link was refused");
	link = (uint32_t)s->val[0];
	memset(&q, 0, sizeof(q));
	q.link = link;
	q.type = CU_JIT_INPUT_PTX;
	q.size = 100;   /* nothing was uploaded */
	CHECK_CU(link_call(&u, &q, MPS_OP_LINK_ADD, ctx, NULL), CUDA_ERROR_INVALID_IMAGE);
	q.type = CU_JIT_NUM_INPUT_TYPES;
	CHECK_CU(link_call(&u, &q, MPS_OP_LINK_ADD, ctx, NULL), CUDA_ERROR_INVALID_IMAGE);
	q.type = CU_JIT_INPUT_PTX;
	q.nopts = 1;
	q.opts[0].opt = CU_JIT_TARGET;   /* not for an input */
	CHECK_CU(link_call(&u, &q, MPS_OP_LINK_ADD, ctx, NULL), CUDA_ERROR_INVALID_IMAGE);
	q.nopts = 0;
	/* Nothing to link: the driver's verdict, whichever it is (the
	 * stand-in refuses; the real driver links an empty image). The link
	 * is still the client's to destroy, once. */
	(void)link_call(&u, &q, MPS_OP_LINK_COMPLETE, ctx, NULL);
	REQUIRE_CU(link_call(&u, &q, MPS_OP_LINK_DESTROY, ctx, NULL));
	CHECK_CU(link_call(&u, &q, MPS_OP_LINK_DESTROY, ctx, NULL), CUDA_ERROR_INVALID_HANDLE);
	/* Left for the teardown. */
	memset(&q, 0, sizeof(q));
	REQUIRE_CU(link_call(&u, &q, MPS_OP_LINK_CREATE, ctx, NULL));
}

static void attack_hostfn(uint32_t ctx)
{
	/* Each message in a buffer as long as the ring's rounding of it. */
	union {
		struct mps_msg_hostfn_setup su;
		uint8_t raw[256];
	} sub;
	union {
		struct mps_msg_hostfn hf;
		uint8_t raw[256];
	} hfb;
	struct mps_msg_hostfn_setup *const su_p = &sub.su;
	struct mps_msg_hostfn *const hf_p = &hfb.hf;
	union {
		struct mps_msg hdr;
		uint8_t raw[256];
	} z;

	memset(&hfb, 0, sizeof(hfb));
	hf_p->slot = 0;
	hf_p->seq = 1;
	post(MPS_OP_HOSTFN, ctx, hf_p, sizeof(*hf_p));
	hf_p->slot = MPS_HOSTFN_SLOTS;
	post(MPS_OP_HOSTFN, ctx, hf_p, sizeof(*hf_p));
	memset(&z, 0, sizeof(z));
	CHECK_CU(call(MPS_OP_CTX_SYNC, ctx, &z, 16, NULL), CUDA_ERROR_INVALID_VALUE);
	memset(&sub, 0, sizeof(sub));
	su_p->region = 0x7777;
	CHECK_CU(call(MPS_OP_HOSTFN_SETUP, ctx, su_p, sizeof(*su_p), NULL), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(call(MPS_OP_HOSTFN_SETUP, ctx, su_p, 16, NULL), CUDA_ERROR_INVALID_VALUE);   /* cut short */
	memset(&z, 0, sizeof(z));
	REQUIRE_CU(call(MPS_OP_CTX_SYNC, ctx, &z, 16, NULL));

	/* Which graph slots are dead, before any set-up, with a count past
	 * the limit and pairs past the message: each refused. */
	{
		union {
			struct {
				struct mps_msg_hostfn_dead q;
				struct mps_hostfn_slotseq p[2];
			} m;
			uint8_t raw[256];
		} hd;

		memset(&hd, 0, sizeof(hd));
		hd.m.q.n = 2;
		hd.m.p[0] = (struct mps_hostfn_slotseq){ .slot = 600, .seq = 1 };
		hd.m.p[1] = (struct mps_hostfn_slotseq){ .slot = 0xffffffffu, .seq = 0 };
		CHECK_CU(call(MPS_OP_HOSTFN_DEAD, ctx, &hd, sizeof(hd.m), NULL), CUDA_ERROR_INVALID_VALUE);
		hd.m.q.n = MPS_HOSTFN_SLOTS + 1;
		CHECK_CU(call(MPS_OP_HOSTFN_DEAD, ctx, &hd, sizeof(hd.m), NULL), CUDA_ERROR_INVALID_VALUE);
		hd.m.q.n = 30;
		CHECK_CU(call(MPS_OP_HOSTFN_DEAD, ctx, &hd, sizeof(hd.m), NULL), CUDA_ERROR_INVALID_VALUE);
	}

	/* A graph host node naming no graph, and one in a real graph before
	 * any host-function set-up: each refused. */
	{
		union {
			struct mps_msg_graph_host_node q;
			uint8_t raw[256];
		} gh;
		union {
			struct mps_fwd_cuGraphCreate q;
			uint8_t raw[256];
		} gc;
		struct mps_slot *sl;

		memset(&gh, 0, sizeof(gh));
		gh.q.graph = 0x7777;
		gh.q.seq = 1;
		CHECK_CU(call(MPS_OP_GRAPH_HOST_NODE, ctx, &gh, sizeof(gh.q), NULL), CUDA_ERROR_INVALID_VALUE);
		memset(&gc, 0, sizeof(gc));
		gc.q.present = 1;
		REQUIRE_CU(call(MPS_OP_FWD_cuGraphCreate, ctx, &gc, sizeof(gc.q), &sl));
		memset(&gh, 0, sizeof(gh));
		gh.q.graph = (uint32_t)((const struct mps_fwd_cuGraphCreate_out *)sl->data)->o0;
		gh.q.seq = 1;
		CHECK_CU(call(MPS_OP_GRAPH_HOST_NODE, ctx, &gh, sizeof(gh.q), NULL), CUDA_ERROR_INVALID_VALUE);
		gh.q.ndeps = 1000;   /* dependencies past the message */
		CHECK_CU(call(MPS_OP_GRAPH_HOST_NODE, ctx, &gh, sizeof(gh.q), NULL), CUDA_ERROR_INVALID_VALUE);

		/* An executable graph's host node: naming no executable graph,
		 * a graph in its place, and that with no node and a slot past
		 * the table (refused for the graph before the slot is read). */
		union {
			struct mps_msg_exec_host_node q;
			uint8_t raw[256];
		} xh;

		memset(&xh, 0, sizeof(xh));
		xh.q.exec = 0x7777;
		xh.q.node = 0x7778;
		xh.q.seq = 1;
		CHECK_CU(call(MPS_OP_EXEC_HOST_NODE, ctx, &xh, sizeof(xh.q), NULL), CUDA_ERROR_INVALID_VALUE);
		xh.q.exec = gh.q.graph;
		CHECK_CU(call(MPS_OP_EXEC_HOST_NODE, ctx, &xh, sizeof(xh.q), NULL), CUDA_ERROR_INVALID_VALUE);
		xh.q.node = 0;
		xh.q.slot = MPS_HOSTFN_SLOTS;
		CHECK_CU(call(MPS_OP_EXEC_HOST_NODE, ctx, &xh, sizeof(xh.q), NULL), CUDA_ERROR_INVALID_VALUE);
	}

	/* A wait on memory that is not the client's (the legacy stream): its
	 * error comes with the next synchronize, and the stream does not wait. */
	{
		union {
			struct mps_fwd_cuStreamWaitValue32_v2 q;
			uint8_t raw[256];
		} wv;

		memset(&wv, 0, sizeof(wv));
		wv.q.a1 = 0x7f0000001000ull;
		wv.q.a2 = 1;
		post(MPS_OP_FWD_cuStreamWaitValue32_v2, ctx, &wv, sizeof(wv.q));
		memset(&z, 0, sizeof(z));
		CHECK_CU(call(MPS_OP_CTX_SYNC, ctx, &z, 16, NULL), CUDA_ERROR_INVALID_VALUE);
	}
	/* The same in a batch, a batch of an unknown operation, and one whose
	 * count is past the array sent. */
	{
		union {
			struct {
				struct mps_fwd_cuStreamBatchMemOp_v2 q;
				CUstreamBatchMemOpParams p[1];
			} m;
			uint8_t raw[512];
		} bb;
		__typeof__(bb.m) *const b = &bb.m;

		for (int k = 0; k < 3; k++) {
			memset(&bb, 0, sizeof(bb));
			b->q.present = 1ull << 2;
			b->q.a1 = k == 2 ? 1000 : 1;
			b->p[0].waitValue.operation = k == 1 ? (CUstreamBatchMemOpType)77 : CU_STREAM_MEM_OP_WAIT_VALUE_32;
			b->p[0].waitValue.address = 0x7f0000002000ull;
			post(MPS_OP_FWD_cuStreamBatchMemOp_v2, ctx, b, sizeof(*b));
			memset(&z, 0, sizeof(z));
			CHECK_CU(call(MPS_OP_CTX_SYNC, ctx, &z, 16, NULL), CUDA_ERROR_INVALID_VALUE);
		}
	}

	/* Host registrations with no memfd ahead, of no size and cut short. */
	{
		union {
			struct mps_msg_host_register q;
			uint8_t raw[256];
		} hr;

		memset(&hr, 0, sizeof(hr));
		hr.q.addr = 0x100000;
		hr.q.size = 1 << 20;
		CHECK_CU(call(MPS_OP_HOST_REGISTER, ctx, &hr, sizeof(hr.q), NULL), CUDA_ERROR_INVALID_VALUE);
		hr.q.size = 0;
		CHECK_CU(call(MPS_OP_HOST_REGISTER, ctx, &hr, sizeof(hr.q), NULL), CUDA_ERROR_INVALID_VALUE);
		CHECK_CU(call(MPS_OP_HOST_REGISTER, ctx, &hr, 16, NULL), CUDA_ERROR_INVALID_VALUE);
	}
}

static void attack_graphs(uint32_t ctx, uint32_t mod)
{
	union {
		struct mps_msg hdr;
		struct mps_fwd_cuGraphCreate gc;
		struct mps_fwd_cuGraphDestroy gd;
		struct mps_fwd_cuGraphAddEmptyNode en;
		struct mps_fwd_cuGraphAddDependencies_v2 ad;
		struct mps_fwd_cuGraphGetNodes gn;
		struct mps_fwd_cuStreamGetAttribute sa;
		struct mps_msg_capture_begin cb;
		struct mps_msg_stream_create sc;
		struct mps_msg_handle h;
		struct mps_msg_kernel_node kn;
		uint8_t raw[512];
	} m;
	struct mps_slot *s;
	uint32_t g, n1, n2, fn, st, *hs;
	uint64_t *count;

	memset(&m, 0, sizeof(m));
	m.gc.present = 1;   /* phGraph */
	REQUIRE_CU(call(MPS_OP_FWD_cuGraphCreate, ctx, &m, sizeof(m.gc), &s));
	g = (uint32_t)((struct mps_fwd_cuGraphCreate_out *)s->data)->o0;
	REQUIRE(g, "cuGraphCreate gave no handle");
	/* No place for the handle: refused, nothing made. */
	memset(&m, 0, sizeof(m));
	CHECK_CU(call(MPS_OP_FWD_cuGraphCreate, ctx, &m, sizeof(m.gc), NULL), CUDA_ERROR_INVALID_VALUE);
	/* Cut short: the header alone. */
	memset(&m, 0, sizeof(m));
	CHECK_CU(call(MPS_OP_FWD_cuGraphAddEmptyNode, ctx, &m, 16, NULL), CUDA_ERROR_INVALID_VALUE);

	memset(&m, 0, sizeof(m));
	m.en.present = 1;
	m.en.a1 = g;
	REQUIRE_CU(call(MPS_OP_FWD_cuGraphAddEmptyNode, ctx, &m, sizeof(m.en), &s));
	n1 = (uint32_t)((struct mps_fwd_cuGraphAddEmptyNode_out *)s->data)->o0;
	/* A context, a number and nothing at all as the graph (the driver
	 * answers a bad graph or node with INVALID_VALUE). */
	m.en.a1 = ctx;
	CHECK_CU(call(MPS_OP_FWD_cuGraphAddEmptyNode, ctx, &m, sizeof(m.en), NULL), CUDA_ERROR_INVALID_VALUE);
	m.en.a1 = 0x7fffff01;
	CHECK_CU(call(MPS_OP_FWD_cuGraphAddEmptyNode, ctx, &m, sizeof(m.en), NULL), CUDA_ERROR_INVALID_VALUE);
	m.en.a1 = 0;
	CHECK(call(MPS_OP_FWD_cuGraphAddEmptyNode, ctx, &m, sizeof(m.en), NULL) != CUDA_SUCCESS,
	      "a node added to no graph");
	/* Dependencies said but not sent, absent, or not nodes. */
	m.en.a1 = g;
	m.en.a3 = 1ull << 40;
	m.en.present = 1 | 4;   /* phGraphNode, dependencies */
	CHECK_CU(call(MPS_OP_FWD_cuGraphAddEmptyNode, ctx, &m, sizeof(m.en), NULL), CUDA_ERROR_INVALID_VALUE);
	m.en.a3 = 3;
	m.en.present = 1;
	CHECK_CU(call(MPS_OP_FWD_cuGraphAddEmptyNode, ctx, &m, sizeof(m.en), NULL), CUDA_ERROR_INVALID_VALUE);
	m.en.a3 = 2;
	m.en.present = 1 | 4;   /* phGraphNode, dependencies */
	hs = (uint32_t *)(&m.en + 1);
	hs[0] = n1;
	hs[1] = g;   /* a graph where a node belongs */
	CHECK_CU(call(MPS_OP_FWD_cuGraphAddEmptyNode, ctx, &m, sizeof(m.en) + 8, NULL), CUDA_ERROR_INVALID_VALUE);
	hs[1] = n1;   /* a repeated dependency is the driver's to judge */
	CHECK(call(MPS_OP_FWD_cuGraphAddEmptyNode, ctx, &m, sizeof(m.en) + 8, NULL) != CUDA_SUCCESS,
	      "a node that depends twice on one node");
	memset(&m, 0, sizeof(m));
	m.en.present = 1 | 4;   /* phGraphNode, dependencies */
	m.en.a1 = g;
	m.en.a3 = 1;
	hs = (uint32_t *)(&m.en + 1);
	hs[0] = n1;
	REQUIRE_CU(call(MPS_OP_FWD_cuGraphAddEmptyNode, ctx, &m, sizeof(m.en) + 8, &s));
	n2 = (uint32_t)((struct mps_fwd_cuGraphAddEmptyNode_out *)s->data)->o0;
	REQUIRE(n1 && n2 && n1 != n2, "empty nodes %u, %u", n1, n2);

	/* Edges: 3 said, 1 sent; from absent with a count. */
	memset(&m, 0, sizeof(m));
	m.ad.a0 = g;
	m.ad.a4 = 3;
	m.ad.present = 2 | 4;
	hs = (uint32_t *)(&m.ad + 1);
	hs[0] = n1;
	hs[2] = n2;
	CHECK_CU(call(MPS_OP_FWD_cuGraphAddDependencies_v2, ctx, &m, sizeof(m.ad) + 16, NULL), CUDA_ERROR_INVALID_VALUE);
	m.ad.a4 = 1;
	m.ad.present = 4;
	CHECK_CU(call(MPS_OP_FWD_cuGraphAddDependencies_v2, ctx, &m, sizeof(m.ad) + 16, NULL), CUDA_ERROR_INVALID_VALUE);

	/* Reading nodes back: an absurd capacity and offset give what exists. */
	memset(&m, 0, sizeof(m));
	m.gn.a0 = g;
	m.gn.a2 = ~0ull;
	m.gn.off = ~0ull >> 1;
	m.gn.present = 2 | 4;
	REQUIRE_CU(call(MPS_OP_FWD_cuGraphGetNodes, ctx, &m, sizeof(m.gn), &s));
	count = &((struct mps_fwd_cuGraphGetNodes_out *)s->data)->count;
	CHECK(*count == 2, "the graph has %llu nodes, 2 made", (unsigned long long)*count);

	/* A stream attribute out of range, of a stream that is not one. */
	memset(&m, 0, sizeof(m));
	m.sa.a0 = g;
	m.sa.a1 = CU_LAUNCH_ATTRIBUTE_PRIORITY;
	m.sa.present = 4;
	CHECK_CU(call(MPS_OP_FWD_cuStreamGetAttribute, ctx, &m, sizeof(m.sa), NULL), CUDA_ERROR_INVALID_HANDLE);
	m.sa.a0 = 0;
	m.sa.a1 = 0x7fffffff;
	CHECK(call(MPS_OP_FWD_cuStreamGetAttribute, ctx, &m, sizeof(m.sa), NULL) != CUDA_SUCCESS,
	      "a stream attribute that does not exist was read");

	/* Capture: of a stream that does not exist, into a node that is not
	 * one, ending a capture never begun, asking after a graph. */
	memset(&m, 0, sizeof(m));
	m.cb.stream = 0x7fffff01;
	CHECK_CU(call(MPS_OP_CAPTURE_BEGIN, ctx, &m, sizeof(m.cb), NULL), CUDA_ERROR_INVALID_HANDLE);
	m.cb.stream = 0;   /* the legacy stream cannot be captured */
	CHECK_CU(call(MPS_OP_CAPTURE_BEGIN, ctx, &m, sizeof(m.cb), NULL), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
	memset(&m, 0, sizeof(m));
	m.sc.flags = CU_STREAM_NON_BLOCKING;
	REQUIRE_CU(call(MPS_OP_STREAM_CREATE, ctx, &m, sizeof(m.sc), &s));
	st = (uint32_t)s->val[0];
	memset(&m, 0, sizeof(m));
	m.cb.stream = st;
	m.cb.graph = g;
	m.cb.ndeps = 1u << 30;
	CHECK_CU(call(MPS_OP_CAPTURE_BEGIN, ctx, &m, sizeof(m.cb), NULL), CUDA_ERROR_INVALID_VALUE);
	m.cb.ndeps = 1;   /* a dependency that is a graph */
	((uint32_t *)(&m.cb + 1))[0] = g;
	CHECK_CU(call(MPS_OP_CAPTURE_BEGIN, ctx, &m, sizeof(m.cb) + 8, NULL), CUDA_ERROR_INVALID_VALUE);
	memset(&m, 0, sizeof(m));
	m.h.handle = st;   /* never captured: no graph, and the stream still works */
	CHECK(call(MPS_OP_CAPTURE_END, ctx, &m, sizeof(m.h), NULL) != CUDA_SUCCESS, "a capture never begun ended");
	REQUIRE_CU(call(MPS_OP_STREAM_SYNC, ctx, &m, sizeof(m.h), NULL));
	memset(&m, 0, sizeof(m));
	m.h.handle = 0;
	CHECK(call(MPS_OP_CAPTURE_END, ctx, &m, sizeof(m.h), NULL) != CUDA_SUCCESS, "a capture never begun ended");
	m.h.handle = g;
	CHECK_CU(call(MPS_OP_CAPTURE_INFO, ctx, &m, sizeof(m.h), NULL), CUDA_ERROR_INVALID_HANDLE);

	/* Kernel nodes: a function that is not one, arguments that do not fit
	 * the function, more arguments than the message holds, a node to set
	 * that is a graph. */
	REQUIRE(get_symbol(MPS_OP_GET_FUNCTION, ctx, mod, "vadd", 5, 4) == CUDA_SUCCESS, "no vadd");
	fn = (uint32_t)mps_region_slot(region, 0)->val[0];
	memset(&m, 0, sizeof(m));
	m.kn.hdr.flags = MPS_KNODE_ADD;
	m.kn.graph = g;
	m.kn.func = ctx;
	m.kn.grid[0] = m.kn.grid[1] = m.kn.grid[2] = 1;
	m.kn.block[0] = m.kn.block[1] = m.kn.block[2] = 1;
	m.kn.arg_size = 28;
	CHECK_CU(call(MPS_OP_KERNEL_NODE, ctx, &m, sizeof(m.kn) + 32, NULL), CUDA_ERROR_INVALID_HANDLE);
	m.kn.func = fn;
	m.kn.arg_size = 4;
	CHECK(call(MPS_OP_KERNEL_NODE, ctx, &m, sizeof(m.kn) + 32, NULL) != CUDA_SUCCESS,
	      "a kernel node with 4 bytes of vadd's arguments");
	m.kn.arg_size = 4000;
	CHECK_CU(call(MPS_OP_KERNEL_NODE, ctx, &m, sizeof(m.kn) + 32, NULL), CUDA_ERROR_INVALID_VALUE);
	m.kn.arg_size = 0;
	m.kn.ndeps = 0xffffffffu;
	CHECK_CU(call(MPS_OP_KERNEL_NODE, ctx, &m, sizeof(m.kn) + 32, NULL), CUDA_ERROR_INVALID_VALUE);
	m.kn.hdr.flags = MPS_KNODE_SET;
	m.kn.ndeps = 0;
	m.kn.node = g;
	CHECK_CU(call(MPS_OP_KERNEL_NODE, ctx, &m, sizeof(m.kn) + 32, NULL), CUDA_ERROR_INVALID_VALUE);
	m.kn.hdr.flags = 77;
	CHECK(call(MPS_OP_KERNEL_NODE, ctx, &m, sizeof(m.kn) + 32, NULL) != CUDA_SUCCESS, "kernel node op 77");
	/* Without a reply slot only an executable graph's node may be set:
	 * an add is refused, a set of a node of no executable graph fails;
	 * each failure comes back at the next synchronize. */
	{
		struct mps_msg z = { 0 };

		m.kn.hdr.flags = MPS_KNODE_ADD;
		m.kn.graph = g;
		post(MPS_OP_KERNEL_NODE, ctx, &m, sizeof(m.kn) + 32);
		CHECK_CU(call(MPS_OP_CTX_SYNC, ctx, &z, 16, NULL), CUDA_ERROR_INVALID_VALUE);
		m.kn.hdr.flags = MPS_KNODE_EXEC_SET;
		m.kn.node = n1;
		m.kn.exec = g;   /* a graph, not an executable graph */
		post(MPS_OP_KERNEL_NODE, ctx, &m, sizeof(m.kn) + 32);
		CHECK(call(MPS_OP_CTX_SYNC, ctx, &z, 16, NULL) != CUDA_SUCCESS, "a node set in a graph's place went by");
		REQUIRE_CU(call(MPS_OP_CTX_SYNC, ctx, &z, 16, NULL));
	}
	memset(&m, 0, sizeof(m));
	m.h.handle = n1;   /* an empty node read as a kernel node */
	CHECK(call(MPS_OP_KERNEL_NODE_GET, ctx, &m, sizeof(m.h), NULL) != CUDA_SUCCESS, "an empty node read as a kernel");

	/* After all that the graph is whole: two nodes. Destroyed once. */
	memset(&m, 0, sizeof(m));
	m.gn.a0 = g;
	m.gn.a2 = 0;
	m.gn.present = 4;
	REQUIRE_CU(call(MPS_OP_FWD_cuGraphGetNodes, ctx, &m, sizeof(m.gn), &s));
	count = &((struct mps_fwd_cuGraphGetNodes_out *)s->data)->count;
	CHECK(*count == 2, "the graph has %llu nodes after the attack", (unsigned long long)*count);
	memset(&m, 0, sizeof(m));
	m.gd.a0 = g;
	REQUIRE_CU(call(MPS_OP_FWD_cuGraphDestroy, ctx, &m, sizeof(m.gd), NULL));
	CHECK_CU(call(MPS_OP_FWD_cuGraphDestroy, ctx, &m, sizeof(m.gd), NULL), CUDA_ERROR_INVALID_VALUE);
	memset(&m, 0, sizeof(m));
	m.en.present = 1;
	m.en.a1 = g;
	CHECK_CU(call(MPS_OP_FWD_cuGraphAddEmptyNode, ctx, &m, sizeof(m.en), NULL), CUDA_ERROR_INVALID_VALUE);
}

/* Function attributes: every attribute of a function that is not one, of a
 * kernel on a device that does not exist, a query sent without a reply
 * slot, sets without one of a handle that is not a function, of a value
 * the driver refuses and of an attribute kind that does not exist. Each
 * refused, the asynchronous ones at the next synchronize; then all is well. */
/* Tensor maps: array counts that overrun the message, an output not asked
 * for, a descriptor to move that is not one. */
static void attack_tensormap(uint32_t ctx)
{
	union {
		struct mps_fwd_cuTensorMapEncodeTiled q;
		struct mps_fwd_cuTensorMapReplaceAddress ra;
		uint8_t raw[512];
	} u;
	struct mps_fwd_cuTensorMapEncodeTiled *q = &u.q;
	uint64_t *arr = (uint64_t *)(q + 1);
	uint32_t *box;
	struct mps_slot *s;
	const uint32_t len = sizeof(*q) + 48;   /* dims 16, strides 16, box 8, element strides 8 */

	memset(&u, 0, sizeof(u));
	q->present = 1 | 1u << 4 | 1u << 5 | 1u << 6 | 1u << 7;
	q->a1 = CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
	q->a2 = 2;
	q->a3 = 0x7f0000100000ull;
	arr[0] = 64;
	arr[1] = 64;
	arr[2] = 256;
	box = (uint32_t *)&arr[4];
	box[0] = box[1] = 16;
	box[2] = box[3] = 1;
	REQUIRE_CU(call(MPS_OP_FWD_cuTensorMapEncodeTiled, ctx, &u, len, &s));
	q->a2 = 5;   /* five of each, in a message holding two */
	CHECK_CU(call(MPS_OP_FWD_cuTensorMapEncodeTiled, ctx, &u, len, NULL), CUDA_ERROR_INVALID_VALUE);
	q->a2 = 0xffffffffu;
	CHECK_CU(call(MPS_OP_FWD_cuTensorMapEncodeTiled, ctx, &u, len, NULL), CUDA_ERROR_INVALID_VALUE);
	q->a2 = 2;
	q->present &= ~1ull;   /* no descriptor to write */
	CHECK_CU(call(MPS_OP_FWD_cuTensorMapEncodeTiled, ctx, &u, len, NULL), CUDA_ERROR_INVALID_VALUE);
	q->present |= 1;
	CHECK_CU(call(MPS_OP_FWD_cuTensorMapEncodeTiled, ctx, &u, 16, NULL), CUDA_ERROR_INVALID_VALUE);
	REQUIRE_CU(call(MPS_OP_FWD_cuTensorMapEncodeTiled, ctx, &u, len, NULL));   /* still served */

	memset(&u, 0, sizeof(u));
	u.ra.a1 = 0x7f0000200000ull;
	CHECK_CU(call(MPS_OP_FWD_cuTensorMapReplaceAddress, ctx, &u, sizeof(u.ra), NULL), CUDA_ERROR_INVALID_VALUE);
	u.ra.present = 1;
	memset(u.ra.a0, 0xa5, sizeof(u.ra.a0));   /* not a descriptor */
	/* The driver's verdict: the stand-in refuses it, the real driver
	 * writes the address into whatever it is given (a descriptor reaches
	 * nothing a kernel could not). Either way the server goes on. */
	{
		CUresult r = call(MPS_OP_FWD_cuTensorMapReplaceAddress, ctx, &u, sizeof(u.ra), NULL);

		CHECK(r == CUDA_SUCCESS || r == CUDA_ERROR_INVALID_VALUE, "a false descriptor's new address: %d",
		      (int)r);
	}
}

static void attack_funcattr(uint32_t ctx, uint32_t mod)
{
	union {   /* room for the size rounded up to the ring's unit */
		struct mps_msg_func_attr q;
		uint8_t raw[sizeof(struct mps_msg_func_attr) + MPS_MSG_ALIGN];
	} u;
	struct mps_msg_func_attr *qp = &u.q;
	struct mps_msg z = { 0 };
	struct mps_slot *s;
	uint32_t fn;

	REQUIRE(get_symbol(MPS_OP_GET_FUNCTION, ctx, mod, "vadd", 5, 4) == CUDA_SUCCESS, "no vadd");
	fn = (uint32_t)mps_region_slot(region, 0)->val[0];
	memset(&u, 0, sizeof(u));
	qp->kind = MPS_FUNC_GET_ALL;
	qp->func = ctx;
	CHECK_CU(call(MPS_OP_FUNC_ATTR, ctx, qp, sizeof(*qp), NULL), CUDA_ERROR_INVALID_HANDLE);
	qp->func = fn;
	REQUIRE_CU(call(MPS_OP_FUNC_ATTR, ctx, qp, sizeof(*qp), &s));
	CHECK(s->len == sizeof(struct mps_fattr_all) &&
	      ((const struct mps_fattr_all *)s->data)->result[CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK] == CUDA_SUCCESS,
	      "every attribute of vadd: %u bytes", s->len);
	qp->kind = MPS_KERNEL_GET_ALL;
	qp->device = 99;
	CHECK(call(MPS_OP_FUNC_ATTR, ctx, qp, sizeof(*qp), NULL) == CUDA_SUCCESS,
	      "a function's attributes are its device's, whatever device is named");
	qp->device = 0;
	qp->kind = MPS_FUNC_GET;
	post(MPS_OP_FUNC_ATTR, ctx, qp, sizeof(*qp));
	CHECK_CU(call(MPS_OP_CTX_SYNC, ctx, &z, 16, NULL), CUDA_ERROR_INVALID_VALUE);
	qp->kind = MPS_FUNC_SET;
	qp->attr = CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
	qp->value = 1024;
	qp->func = mod;   /* a module */
	post(MPS_OP_FUNC_ATTR, ctx, qp, sizeof(*qp));
	CHECK_CU(call(MPS_OP_CTX_SYNC, ctx, &z, 16, NULL), CUDA_ERROR_INVALID_HANDLE);
	qp->func = fn;
	qp->value = -5;
	post(MPS_OP_FUNC_ATTR, ctx, qp, sizeof(*qp));
	CHECK_CU(call(MPS_OP_CTX_SYNC, ctx, &z, 16, NULL), CUDA_ERROR_INVALID_VALUE);
	qp->kind = 77;
	post(MPS_OP_FUNC_ATTR, ctx, qp, sizeof(*qp));
	CHECK_CU(call(MPS_OP_CTX_SYNC, ctx, &z, 16, NULL), CUDA_ERROR_INVALID_VALUE);
	qp->kind = MPS_FUNC_CACHE_CONFIG;
	qp->value = 1234;
	post(MPS_OP_FUNC_ATTR, ctx, qp, sizeof(*qp));
	CHECK_CU(call(MPS_OP_CTX_SYNC, ctx, &z, 16, NULL), CUDA_ERROR_INVALID_VALUE);
	/* A set that is right, without a reply, takes. */
	qp->kind = MPS_FUNC_SET;
	qp->value = 2048;
	post(MPS_OP_FUNC_ATTR, ctx, qp, sizeof(*qp));
	REQUIRE_CU(call(MPS_OP_CTX_SYNC, ctx, &z, 16, NULL));
	qp->kind = MPS_FUNC_GET;
	REQUIRE_CU(call(MPS_OP_FUNC_ATTR, ctx, qp, sizeof(*qp), &s));
	CHECK((int)s->val[0] == 2048, "max dynamic shared memory %d after an asynchronous set of 2048", (int)s->val[0]);
}

/* Copy, allocation and conditional nodes: sides in the neighbour's memory
 * or in no region, spans that wrap, extents past their memory; an
 * allocation with too many access descriptors, of nothing, on a device
 * that does not exist or on the host; a conditional node with no bodies or
 * too many, and a handle that is not one. Each refused; the graph whole. */
static void attack_gnodes(uint32_t ctx, uint64_t theirs)
{
	union {
		struct mps_msg hdr;
		struct mps_fwd_cuGraphCreate gc;
		struct mps_fwd_cuGraphDestroy gd;
		struct mps_fwd_cuGraphGetNodes gn;
		struct mps_msg_memcpy_node mc;
		struct mps_msg_alloc_node an;
		struct mps_msg_cond_node cn;
		struct mps_msg_handle h;
		struct mps_msg_mem_alloc ma;
		uint8_t raw[512];
	} m;
	struct mps_slot *s;
	uint32_t g;
	uint64_t mine;

	memset(&m, 0, sizeof(m));
	m.gc.present = 1;
	REQUIRE_CU(call(MPS_OP_FWD_cuGraphCreate, ctx, &m, sizeof(m.gc), &s));
	g = (uint32_t)((struct mps_fwd_cuGraphCreate_out *)s->data)->o0;
	memset(&m, 0, sizeof(m));
	m.ma.size = 4096;
	REQUIRE_CU(call(MPS_OP_MEM_ALLOC, ctx, &m, sizeof(m.ma), &s));
	mine = s->val[0];

	/* A sound copy between two of its own addresses, then the lies. */
	memset(&m, 0, sizeof(m));
	m.mc.hdr.flags = MPS_KNODE_ADD;
	m.mc.graph = g;
	m.mc.p.src.addr = mine;
	m.mc.p.dst.addr = mine + 2048;
	m.mc.p.width = 1024;
	m.mc.p.height = m.mc.p.depth = 1;
	REQUIRE_CU(call(MPS_OP_MEMCPY_NODE, ctx, &m, sizeof(m.mc), NULL));
	m.mc.p.src.addr = theirs;
	CHECK_CU(call(MPS_OP_MEMCPY_NODE, ctx, &m, sizeof(m.mc), NULL), CUDA_ERROR_INVALID_VALUE);
	m.mc.p.src.addr = mine;
	m.mc.p.width = 4096;   /* past the end of the destination */
	CHECK_CU(call(MPS_OP_MEMCPY_NODE, ctx, &m, sizeof(m.mc), NULL), CUDA_ERROR_INVALID_VALUE);
	m.mc.p.width = 16;
	m.mc.p.height = 2;
	m.mc.p.src.pitch = m.mc.p.dst.pitch = ~0ull / 2;   /* a span that wraps */
	CHECK_CU(call(MPS_OP_MEMCPY_NODE, ctx, &m, sizeof(m.mc), NULL), CUDA_ERROR_INVALID_VALUE);
	m.mc.p.src.pitch = m.mc.p.dst.pitch = 8;   /* rows that overlap */
	CHECK_CU(call(MPS_OP_MEMCPY_NODE, ctx, &m, sizeof(m.mc), NULL), CUDA_ERROR_INVALID_VALUE);
	m.mc.p.src.pitch = m.mc.p.dst.pitch = 64;
	m.mc.p.depth = 1ull << 62;
	m.mc.p.src.height = m.mc.p.dst.height = 2;
	CHECK_CU(call(MPS_OP_MEMCPY_NODE, ctx, &m, sizeof(m.mc), NULL), CUDA_ERROR_INVALID_VALUE);
	m.mc.p.depth = 1;
	m.mc.p.src.region = 0x7fff0001;   /* no such host region */
	CHECK_CU(call(MPS_OP_MEMCPY_NODE, ctx, &m, sizeof(m.mc), NULL), CUDA_ERROR_INVALID_VALUE);
	m.mc.p.src.region = ctx;   /* a context as a region */
	CHECK_CU(call(MPS_OP_MEMCPY_NODE, ctx, &m, sizeof(m.mc), NULL), CUDA_ERROR_INVALID_VALUE);
	m.mc.p.src.region = 0;
	m.mc.ndeps = 1u << 30;
	CHECK_CU(call(MPS_OP_MEMCPY_NODE, ctx, &m, sizeof(m.mc), NULL), CUDA_ERROR_INVALID_VALUE);
	m.mc.ndeps = 0;
	m.mc.hdr.flags = MPS_KNODE_EXEC_SET;
	m.mc.exec = g;   /* a graph as an executable graph */
	CHECK_CU(call(MPS_OP_MEMCPY_NODE, ctx, &m, sizeof(m.mc), NULL), CUDA_ERROR_INVALID_VALUE);
	m.mc.hdr.flags = 77;
	CHECK_CU(call(MPS_OP_MEMCPY_NODE, ctx, &m, sizeof(m.mc), NULL), CUDA_ERROR_INVALID_VALUE);
	m.mc.hdr.flags = MPS_KNODE_ADD;
	m.mc.ctx = 0x7fff0001;   /* no such context */
	CHECK_CU(call(MPS_OP_MEMCPY_NODE, ctx, &m, sizeof(m.mc), NULL), CUDA_ERROR_INVALID_CONTEXT);
	memset(&m, 0, sizeof(m));
	m.h.handle = g;
	CHECK_CU(call(MPS_OP_MEMCPY_NODE_GET, ctx, &m, sizeof(m.h), NULL), CUDA_ERROR_INVALID_VALUE);
	CHECK_CU(call(MPS_OP_ALLOC_NODE_GET, ctx, &m, sizeof(m.h), NULL), CUDA_ERROR_INVALID_VALUE);

	memset(&m, 0, sizeof(m));
	m.an.graph = g;
	m.an.loc_type = CU_MEM_LOCATION_TYPE_DEVICE;
	m.an.bytesize = 1 << 20;
	m.an.naccess = 1u << 20;
	CHECK_CU(call(MPS_OP_ALLOC_NODE, ctx, &m, sizeof(m.an), NULL), CUDA_ERROR_INVALID_VALUE);
	m.an.naccess = 0;
	m.an.bytesize = 0;
	CHECK_CU(call(MPS_OP_ALLOC_NODE, ctx, &m, sizeof(m.an), NULL), CUDA_ERROR_INVALID_VALUE);
	m.an.bytesize = 1 << 20;
	m.an.loc_id = 99;
	CHECK_CU(call(MPS_OP_ALLOC_NODE, ctx, &m, sizeof(m.an), NULL), CUDA_ERROR_INVALID_DEVICE);
	m.an.loc_id = 0;
	m.an.loc_type = CU_MEM_LOCATION_TYPE_HOST;
	CHECK_CU(call(MPS_OP_ALLOC_NODE, ctx, &m, sizeof(m.an), NULL), CUDA_ERROR_NOT_SUPPORTED);
	m.an.loc_type = CU_MEM_LOCATION_TYPE_DEVICE;
	m.an.graph = ctx;
	CHECK_CU(call(MPS_OP_ALLOC_NODE, ctx, &m, sizeof(m.an), NULL), CUDA_ERROR_INVALID_VALUE);

	memset(&m, 0, sizeof(m));
	m.cn.graph = g;
	m.cn.type = CU_GRAPH_COND_TYPE_IF;
	CHECK_CU(call(MPS_OP_COND_NODE, ctx, &m, sizeof(m.cn), NULL), CUDA_ERROR_INVALID_VALUE);
	m.cn.size = MPS_COND_BODIES_MAX + 1;
	CHECK_CU(call(MPS_OP_COND_NODE, ctx, &m, sizeof(m.cn), NULL), CUDA_ERROR_INVALID_VALUE);
	m.cn.size = 1;
	m.cn.handle = 0x5eed;   /* made by no one */
	CHECK(call(MPS_OP_COND_NODE, ctx, &m, sizeof(m.cn), NULL) != CUDA_SUCCESS, "a conditional node on no handle");
	m.cn.ndeps = 5;   /* said, not sent */
	CHECK_CU(call(MPS_OP_COND_NODE, ctx, &m, sizeof(m.cn), NULL), CUDA_ERROR_INVALID_VALUE);

	/* The graph holds the one sound node. */
	memset(&m, 0, sizeof(m));
	m.gn.a0 = g;
	m.gn.present = 4;
	REQUIRE_CU(call(MPS_OP_FWD_cuGraphGetNodes, ctx, &m, sizeof(m.gn), &s));
	CHECK(((struct mps_fwd_cuGraphGetNodes_out *)s->data)->count == 1, "the graph has %llu nodes, 1 made",
	      (unsigned long long)((struct mps_fwd_cuGraphGetNodes_out *)s->data)->count);
	memset(&m, 0, sizeof(m));
	m.gd.a0 = g;
	REQUIRE_CU(call(MPS_OP_FWD_cuGraphDestroy, ctx, &m, sizeof(m.gd), NULL));
}

/* A well-behaved client in another process: allocates, publishes its
 * device pointer, then keeps verifying work until killed. */
static pid_t start_neighbour(uint64_t *its_ptr)
{
	int fds[2];
	pid_t pid;

	if (pipe(fds) < 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		uint64_t rng = t_rng(3);
		uint32_t in[256], got[256];
		CUdeviceptr d;

		close(fds[0]);
		t_primary(t_device());
		REQUIRE_CU(cuMemAlloc(&d, sizeof(in)));
		if (write(fds[1], &d, sizeof(d)) != sizeof(d))
			_exit(1);
		for (;;) {
			t_fill_u32(in, 256, &rng);
			REQUIRE_CU(cuMemcpyHtoD(d, in, sizeof(in)));
			REQUIRE_CU(cuMemcpyDtoH(got, d, sizeof(got)));
			if (memcmp(in, got, sizeof(in))) {
				fprintf(stderr, "s_malformed: the neighbour's data changed\n");
				_exit(1);
			}
		}
	}
	close(fds[1]);
	if (read(fds[0], its_ptr, sizeof(*its_ptr)) != sizeof(*its_ptr))
		return -1;
	close(fds[0]);
	return pid;
}

static void poke_daemon(void)
{
	char path[4096], junk[4000], reply[512];
	int fd;
	ssize_t n;

	mps_path_join(path, sizeof(path), mps_pipe_dir(), MPS_DAEMON_SOCKET);
	/* Too long a command. */
	fd = mps_sock_connect(path);
	REQUIRE(fd >= 0, "daemon socket");
	memset(junk, 'x', sizeof(junk));
	mps_sock_send(fd, junk, sizeof(junk), -1);
	mps_sock_set_timeout(fd, 5000);
	n = mps_sock_recv(fd, reply, sizeof(reply) - 1, NULL);
	CHECK(n > 0 && !strncmp(reply, "Error", 5), "an over-long line got no error reply");
	close(fd);
	/* Silence, then hang up. */
	fd = mps_sock_connect(path);
	REQUIRE(fd >= 0, "daemon socket");
	close(fd);
	/* Binary garbage that is not a hello. */
	fd = mps_sock_connect(path);
	REQUIRE(fd >= 0, "daemon socket");
	memset(junk, 0xff, 80);
	mps_sock_send(fd, junk, 80, -1);
	mps_sock_set_timeout(fd, 5000);
	n = mps_sock_recv(fd, reply, sizeof(reply) - 1, NULL);
	CHECK(n > 0 && !strncmp(reply, "Error", 5), "garbage on the daemon socket got no error reply");
	close(fd);
}

int main(int argc, char **argv)
{
	union {
		struct mps_msg hdr;
		struct mps_msg_ctx_create cc;
		struct mps_msg_mem_alloc ma;
		struct mps_msg_copy cp;
		struct mps_msg_handle h;
		struct mps_msg_host_alloc ha;
		struct mps_msg_blob blob;
		struct mps_msg_module_load ml;
		struct mps_msg_launch la;
		struct mps_msg_mem_async ma2;
		struct mps_msg_memset ms;
		uint8_t raw[256];
	} m;
	struct mps_slot *s;
	uint64_t theirs = 0, mine;
	uint32_t ctx;
	pid_t nb;
	int st;

	if (argc > 1 && !strcmp(argv[1], "--probe")) {
		size_t fr, total;

		t_primary(t_device());
		REQUIRE_CU(cuMemGetInfo(&fr, &total));
		return T_PASS;
	}
	t_init(argc, argv);
	nb = start_neighbour(&theirs);
	REQUIRE(nb > 0, "the neighbour did not start");
	poke_daemon();
	connect_raw();

	memset(&m, 0, sizeof(m));
	CHECK_CU(call(999, 0, &m, 16, NULL), CUDA_ERROR_INVALID_VALUE);
	memset(&m, 0, sizeof(m));
	CHECK_CU(call(MPS_OP_MEM_ALLOC, 0, &m, 16, NULL), CUDA_ERROR_INVALID_VALUE);
	/* Before any context: a device past the GPUs where no virtual device
	 * was offered, the same GPU twice; its own SM partition named with no
	 * terminating NUL (taken as cut, an unknown name: it shares). */
	{
		union {
			struct mps_msg_devices d;
			uint8_t bytes[sizeof(struct mps_msg_devices) + MPS_MSG_ALIGN];
		} dv;
		union {
			struct mps_msg_client_limits l;
			uint8_t bytes[sizeof(struct mps_msg_client_limits) + MPS_MSG_ALIGN];
		} lm;

		memset(&dv, 0, sizeof(dv));
		dv.d.count = 1;
		dv.d.map[0] = MPS_MAX_DEVICES + 3;
		CHECK_CU(call(MPS_OP_DEVICES, 0, &dv, sizeof(dv.d), NULL), CUDA_ERROR_INVALID_DEVICE);
		dv.d.count = 2;
		dv.d.map[0] = dv.d.map[1] = 0;
		/* With one GPU, two devices are more than there are. */
		CHECK_CU(call(MPS_OP_DEVICES, 0, &dv, sizeof(dv.d), NULL),
			 ndev < 2 ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_INVALID_DEVICE);
		memset(&lm, 0, sizeof(lm));
		lm.l.priority = -1;
		memset(lm.l.sm_partition, 'p', sizeof(lm.l.sm_partition));
		REQUIRE_CU(call(MPS_OP_CLIENT_LIMITS, 0, &lm, sizeof(lm.l), NULL));
	}
	memset(&m, 0, sizeof(m));
	m.cc.device = 99;
	CHECK_CU(call(MPS_OP_CTX_CREATE, 0, &m, sizeof(m.cc), NULL), CUDA_ERROR_INVALID_DEVICE);
	memset(&m, 0, sizeof(m));
	REQUIRE_CU(call(MPS_OP_CTX_CREATE, 0, &m, sizeof(m.cc), &s));
	ctx = (uint32_t)s->val[0];
	memset(&m, 0, sizeof(m));
	m.h.handle = 0x12345601;
	CHECK_CU(call(MPS_OP_STREAM_SYNC, ctx, &m, sizeof(m.h), NULL), CUDA_ERROR_INVALID_HANDLE);
	memset(&m, 0, sizeof(m));
	m.h.handle = ctx;   /* a context handle used as an event */
	CHECK_CU(call(MPS_OP_EVENT_QUERY, ctx, &m, sizeof(m.h), NULL), CUDA_ERROR_INVALID_HANDLE);

	memset(&m, 0, sizeof(m));
	m.ma.size = 4096;
	REQUIRE_CU(call(MPS_OP_MEM_ALLOC, ctx, &m, sizeof(m.ma), &s));
	mine = s->val[0];
	/* 2D memsets whose rows run past the allocation, or whose pitch
	 * wraps or is narrower than a row. */
	memset(&m, 0, sizeof(m));
	m.ms.elem = 4;
	m.ms.dst = mine;
	m.ms.count = 16;
	m.ms.pitch = 4096;
	m.ms.height = 2;
	CHECK_CU(call(MPS_OP_MEMSET, ctx, &m, sizeof(m.ms), NULL), CUDA_ERROR_INVALID_VALUE);
	m.ms.pitch = 1ull << 62;
	m.ms.height = 5;
	CHECK_CU(call(MPS_OP_MEMSET, ctx, &m, sizeof(m.ms), NULL), CUDA_ERROR_INVALID_VALUE);
	m.ms.pitch = 8;
	m.ms.height = 2;
	CHECK_CU(call(MPS_OP_MEMSET, ctx, &m, sizeof(m.ms), NULL), CUDA_ERROR_INVALID_VALUE);
	m.ms.pitch = 1024;
	m.ms.height = 4;
	REQUIRE_CU(call(MPS_OP_MEMSET, ctx, &m, sizeof(m.ms), NULL));
	/* Past the end of our allocation, and someone else's memory. */
	memset(&m, 0, sizeof(m));
	m.cp.kind = MPS_COPY_D2H;
	m.cp.host_region = MPS_HOST_SLOT;
	m.cp.src = mine + 4094;
	m.cp.size = 4;
	CHECK_CU(call(MPS_OP_COPY, ctx, &m, sizeof(m.cp), NULL), CUDA_ERROR_INVALID_VALUE);
	m.cp.src = theirs;
	CHECK_CU(call(MPS_OP_COPY, ctx, &m, sizeof(m.cp), NULL), CUDA_ERROR_INVALID_VALUE);
	m.cp.kind = MPS_COPY_D2D;
	m.cp.host_region = 0;
	m.cp.dst = theirs;
	m.cp.src = mine;
	CHECK_CU(call(MPS_OP_COPY, ctx, &m, sizeof(m.cp), NULL), CUDA_ERROR_INVALID_VALUE);
	/* A reply-slot copy larger than a slot, and an inline copy claiming more
	 * bytes than the message carries. */
	memset(&m, 0, sizeof(m));
	m.cp.kind = MPS_COPY_D2H;
	m.cp.host_region = MPS_HOST_SLOT;
	m.cp.src = mine;
	m.cp.size = 1 << 20;
	CHECK_CU(call(MPS_OP_COPY, ctx, &m, sizeof(m.cp), NULL), CUDA_ERROR_INVALID_VALUE);
	memset(&m, 0, sizeof(m));
	m.cp.kind = MPS_COPY_H2D;
	m.cp.host_region = MPS_HOST_INLINE;
	m.cp.dst = mine;
	m.cp.size = 4000;
	CHECK_CU(call(MPS_OP_COPY, ctx, &m, sizeof(m.cp) + 16, NULL), CUDA_ERROR_INVALID_VALUE);

	/* Fenced synchronous forms (MPS_COPY_FENCE, every flag bit set too)
	 * into someone else's memory: refused, the error at the next
	 * synchronize; one into our own memory passes. */
	memset(&m, 0, sizeof(m));
	m.ms.hdr.flags = MPS_COPY_FENCE;
	m.ms.elem = 4;
	m.ms.dst = theirs;
	m.ms.count = 4;
	post(MPS_OP_MEMSET, ctx, &m, sizeof(m.ms));
	memset(&m, 0, sizeof(m));
	CHECK_CU(call(MPS_OP_CTX_SYNC, ctx, &m, 16, NULL), CUDA_ERROR_INVALID_VALUE);
	memset(&m, 0, sizeof(m));
	m.cp.hdr.flags = 0xffff;
	m.cp.kind = MPS_COPY_D2D;
	m.cp.dst = theirs;
	m.cp.src = mine;
	m.cp.size = 4;
	post(MPS_OP_COPY, ctx, &m, sizeof(m.cp));
	memset(&m, 0, sizeof(m));
	CHECK_CU(call(MPS_OP_CTX_SYNC, ctx, &m, 16, NULL), CUDA_ERROR_INVALID_VALUE);
	memset(&m, 0, sizeof(m));
	m.ms.hdr.flags = MPS_COPY_FENCE;
	m.ms.elem = 4;
	m.ms.dst = mine;
	m.ms.count = 16;
	post(MPS_OP_MEMSET, ctx, &m, sizeof(m.ms));
	memset(&m, 0, sizeof(m));
	CHECK_CU(call(MPS_OP_CTX_SYNC, ctx, &m, 16, NULL), CUDA_SUCCESS);

	memset(&m, 0, sizeof(m));
	CHECK_CU(call(MPS_OP_HOST_ALLOC, ctx, &m, sizeof(m.ha), NULL), CUDA_ERROR_INVALID_VALUE);
	m.ha.size = 1ull << 50;
	CHECK_CU(call(MPS_OP_HOST_ALLOC, ctx, &m, sizeof(m.ha), NULL), CUDA_ERROR_OUT_OF_MEMORY);

	/* An asynchronous failure surfaces at the next synchronize. */
	memset(&m, 0, sizeof(m));
	m.la.func = 0x7777701;
	m.la.grid[0] = m.la.grid[1] = m.la.grid[2] = 1;
	m.la.block[0] = m.la.block[1] = m.la.block[2] = 1;
	post(MPS_OP_LAUNCH, ctx, &m, sizeof(m.la));
	memset(&m, 0, sizeof(m));
	CHECK_CU(call(MPS_OP_CTX_SYNC, ctx, &m, 16, NULL), CUDA_ERROR_INVALID_HANDLE);
	memset(&m, 0, sizeof(m));
	REQUIRE_CU(call(MPS_OP_CTX_SYNC, ctx, &m, 16, NULL));

	/* An upload far larger than allowed, then a load of it. */
	memset(&m, 0, sizeof(m));
	m.blob.hdr.flags = MPS_BLOB_RESET;
	m.blob.total = 1ull << 40;
	post(MPS_OP_BLOB_APPEND, ctx, &m, sizeof(m.blob));
	memset(&m, 0, sizeof(m));
	m.ml.kind = MPS_MODULE;
	m.ml.size = 1ull << 40;
	CHECK_CU(call(MPS_OP_MODULE_LOAD, ctx, &m, sizeof(m.ml), NULL), CUDA_ERROR_INVALID_IMAGE);
	/* A small upload of garbage: the driver rejects the image. */
	memset(&m, 0, sizeof(m));
	m.blob.hdr.flags = MPS_BLOB_RESET;
	m.blob.total = 64;
	m.blob.bytes = 64;
	memset(m.raw + sizeof(m.blob), 0xa5, 64);
	post(MPS_OP_BLOB_APPEND, ctx, &m, sizeof(m.blob) + 64);
	memset(&m, 0, sizeof(m));
	m.ml.kind = MPS_MODULE;
	m.ml.size = 64;
	CHECK(call(MPS_OP_MODULE_LOAD, ctx, &m, sizeof(m.ml), NULL) != CUDA_SUCCESS, "a garbage image loaded");
	/* The refused upload was asynchronous: its error comes with the next
	 * synchronize, once. */
	memset(&m, 0, sizeof(m));
	CHECK_CU(call(MPS_OP_CTX_SYNC, ctx, &m, 16, NULL), CUDA_ERROR_INVALID_IMAGE);
	memset(&m, 0, sizeof(m));
	REQUIRE_CU(call(MPS_OP_CTX_SYNC, ctx, &m, 16, NULL));

	/* Stream-ordered allocation: nothing, on a stream that is not one, and a
	 * free of what is not ours (its error comes with the next synchronize). */
	memset(&m, 0, sizeof(m));
	CHECK_CU(call(MPS_OP_MEM_ALLOC_ASYNC, ctx, &m, sizeof(m.ma2), NULL), CUDA_ERROR_INVALID_VALUE);
	memset(&m, 0, sizeof(m));
	m.ma2.value = 4096;
	m.ma2.stream = 0x12345601;
	CHECK_CU(call(MPS_OP_MEM_ALLOC_ASYNC, ctx, &m, sizeof(m.ma2), NULL), CUDA_ERROR_INVALID_HANDLE);
	memset(&m, 0, sizeof(m));
	m.ma2.value = theirs;
	post(MPS_OP_MEM_FREE_ASYNC, ctx, &m, sizeof(m.ma2));
	memset(&m, 0, sizeof(m));
	CHECK_CU(call(MPS_OP_CTX_SYNC, ctx, &m, 16, NULL), CUDA_ERROR_INVALID_VALUE);
	memset(&m, 0, sizeof(m));
	m.ma2.value = 4096;
	REQUIRE_CU(call(MPS_OP_MEM_ALLOC_ASYNC, ctx, &m, sizeof(m.ma2), &s));
	m.ma2.value = s->val[0];
	CHECK(m.ma2.value != 0, "a stream-ordered allocation gave NULL");
	post(MPS_OP_MEM_FREE_ASYNC, ctx, &m, sizeof(m.ma2));
	memset(&m, 0, sizeof(m));
	REQUIRE_CU(call(MPS_OP_CTX_SYNC, ctx, &m, 16, NULL));

	/* Symbol names whose length field lies: each refused, the module and
	 * an honest name still fine. */
	{
		uint32_t mod = load_test_module(ctx);

		REQUIRE(mod, "the test module did not load");
		REQUIRE_CU(get_symbol(MPS_OP_GET_FUNCTION, ctx, mod, "vadd", 5, 4));
		CHECK_CU(get_symbol(MPS_OP_GET_FUNCTION, ctx, mod, "nope", 5, 4), CUDA_ERROR_NOT_FOUND);
		CHECK_CU(get_symbol(MPS_OP_GET_FUNCTION, ctx, mod, "vaddXXXX", 8, 4), CUDA_ERROR_INVALID_VALUE);
		CHECK_CU(get_symbol(MPS_OP_GET_FUNCTION, ctx, mod, "vadd", 5, 4000), CUDA_ERROR_INVALID_VALUE);
		CHECK_CU(get_symbol(MPS_OP_GET_FUNCTION, ctx, mod, "va\0dd", 6, 5), CUDA_ERROR_INVALID_VALUE);
		CHECK_CU(get_symbol(MPS_OP_GET_FUNCTION, ctx, mod, "", 1, 0), CUDA_ERROR_INVALID_VALUE);
		CHECK_CU(get_symbol(MPS_OP_GET_FUNCTION, ctx, mod, "vadd", 5, 0xffffffffu), CUDA_ERROR_INVALID_VALUE);
		CHECK_CU(get_symbol(MPS_OP_GET_GLOBAL, ctx, mod, "g_counterXXXXXXX", 16, 9), CUDA_ERROR_INVALID_VALUE);
		REQUIRE_CU(get_symbol(MPS_OP_GET_GLOBAL, ctx, mod, "g_counter", 10, 9));
		attack_graphs(ctx, mod);
		attack_funcattr(ctx, mod);
		attack_tensormap(ctx);
		attack_gnodes(ctx, theirs);
		attack_memory(ctx, theirs);
		attack_hostfn(ctx);
		attack_wake(ctx);
		attack_devout(ctx);
		attack_link(ctx);
		attack_array(ctx, theirs);
	}

	/* A reply slot out of range is ignored; the next call still works. */
	memset(&m, 0, sizeof(m));
	m.hdr.op = MPS_OP_MEM_INFO;
	m.hdr.len = 16;
	m.hdr.slot = 1000;
	m.hdr.ctx = ctx;
	send_raw(&m, 16);
	memset(&m, 0, sizeof(m));
	REQUIRE_CU(call(MPS_OP_MEM_INFO, ctx, &m, 16, NULL));

	/* Break the ring: a length that is not a multiple of the alignment.
	 * The server must hang up on us. */
	{
		struct mps_msg *bad = mps_sq_reserve(&sq, 16);

		REQUIRE(bad, "ring full");
		bad->op = MPS_OP_MEM_INFO;
		bad->len = 24;
		bad->slot = MPS_NO_SLOT;
		mps_sq_commit(&sq);
		/* Bypass the ring helper's own bookkeeping: publish 32 bytes. */
		mps_store_release(&region->sq_tail.v, mps_load_acquire(&region->sq_tail.v) + 16);
		mps_sq_kick(region);
	}
	mps_sock_set_timeout(sock, 5000);
	{
		/* A hang-up reads as the end of the stream, or as a reset when
		 * the server closed with bytes of ours still unread. Messages
		 * the server sent before it (a refusal saying why, a notice)
		 * are read past. */
		struct mps_refuse why;
		ssize_t n;
		int msgs = 0;

		while ((n = mps_sock_recv(sock, &why, sizeof(why), NULL)) > 0 && ++msgs < 16)
			if (n == (ssize_t)sizeof(why) && why.magic == MPS_REFUSE_MAGIC) {
				why.text[sizeof(why.text) - 1] = 0;
				printf("s_malformed: the server hung up saying \"%s\"\n", why.text);
			}
		CHECK(n == 0 || n == -ECONNRESET, "the server did not hang up on a broken ring (%zd)", n);
	}

	/* The neighbour is still fine, and so is a new client. */
	CHECK(waitpid(nb, &st, WNOHANG) == 0, "the neighbour died (status %#x)", st);
	kill(nb, SIGKILL);
	waitpid(nb, &st, 0);
	{
		/* A fresh process (this one has used CUDA, so a fork of it may not). */
		pid_t p = fork();

		if (p == 0) {
			execl("/proc/self/exe", argv[0], "--probe", (char *)NULL);
			_exit(127);
		}
		waitpid(p, &st, 0);
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "a new client failed after the attack");
	}
	munmap(region, MPS_REGION_SIZE);
	close(sock);
	if (!check_failures())
		printf("s_malformed: every bad message got its error; the server survived\n");
	return check_finish("s_malformed");
}
