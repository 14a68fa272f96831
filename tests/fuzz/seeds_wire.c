// SPDX-License-Identifier: MIT
/*
 * Writes the seed corpus of fuzz_wire: valid message sequences a client
 * could send (contexts, memory, copies, streams and events, modules,
 * libraries and launches of the test kernels, stream capture and graphs,
 * pinned host memory), a few
 * malformed ones, and the inputs of bugs the fuzzer found, kept as
 * regressions.
 *
 *   seeds_wire DIR PTX
 *
 * The format is fuzz_wire's (two option bytes, then length-prefixed
 * messages). Handles are predictable, since each input starts a fresh
 * client: the n-th object made gets (n << 8 | 1). Device addresses are
 * fuzz_wire's fake ones: FAKE(k, off) is off bytes into the k-th range made.
 *
 * Exit status: 0, or 1 if a file could not be written.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>

#include "common/wire.h"

#define H(n)           ((uint32_t)(n) << 8 | 1)   /* the n-th handle of a fresh client */
#define FAKE(k, off)   (0xddull << 56 | (uint64_t)(k) << 40 | (uint64_t)(off))
#define CTX            H(1)                      /* every seed's first context */
#define HDR(o, s, x)   { .op = (o), .slot = (s), .ctx = (x) }
#define NO             MPS_NO_SLOT

struct seq {
	uint8_t b[1 << 17];
	size_t n;
};

static const char *dir;
static char *ptx;
static size_t ptx_len;   /* with its NUL */
static int failed;

static void begin(struct seq *s, uint8_t opts, uint8_t limit_mib)
{
	s->n = 0;
	s->b[s->n++] = opts;
	s->b[s->n++] = limit_mib;
}

/* Appends one message: its length, then its bytes (hdr.len set to match). */
static void put(struct seq *s, const void *m, size_t n)
{
	struct mps_msg h;

	if (n > 0xffff || s->n + 2 + n > sizeof(s->b)) {
		fprintf(stderr, "seeds_wire: a seed is too large\n");
		exit(1);
	}
	s->b[s->n++] = (uint8_t)n;
	s->b[s->n++] = (uint8_t)(n >> 8);
	memcpy(s->b + s->n, m, n);
	if (n >= sizeof(h)) {
		memcpy(&h, m, sizeof(h));
		h.len = mps_msg_size(n);
		memcpy(s->b + s->n, &h, sizeof(h));
	}
	s->n += n;
}

/* Appends one message as it lies in the ring: no length before it, padded
 * to the ring's alignment (for seeds with fuzz_wire's ring option). */
static void put_raw(struct seq *s, const void *m, size_t n)
{
	struct mps_msg h;
	size_t len = mps_msg_size(n);

	memcpy(s->b + s->n, m, n);
	memset(s->b + s->n + n, 0, len - n);
	memcpy(&h, m, sizeof(h));
	h.len = (uint32_t)len;
	memcpy(s->b + s->n, &h, sizeof(h));
	s->n += len;
}

/* A message struct followed by tail bytes. */
static void put2(struct seq *s, const void *m, size_t n, const void *tail, size_t tn)
{
	uint8_t buf[MPS_MSG_MAX];

	memcpy(buf, m, n);
	memcpy(buf + n, tail, tn);
	put(s, buf, n + tn);
}

static void save(const struct seq *s, const char *name)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (!f || fwrite(s->b, 1, s->n, f) != s->n || fclose(f) != 0) {
		fprintf(stderr, "seeds_wire: cannot write %s: %s\n", path, strerror(errno));
		failed = 1;
	}
}

/* ---- message builders ---------------------------------------------- */

static void ctx_create(struct seq *s, uint32_t slot, int device)
{
	struct mps_msg_ctx_create m = { .hdr = HDR(MPS_OP_CTX_CREATE, slot, 0), .device = device };

	put(s, &m, sizeof(m));
}

static void simple(struct seq *s, uint16_t op, uint32_t slot, uint32_t ctx)
{
	struct mps_msg m = HDR(op, slot, ctx);

	put(s, &m, sizeof(m));
}

static void with_handle(struct seq *s, uint16_t op, uint32_t slot, uint32_t ctx, uint32_t handle)
{
	struct mps_msg_handle m = { .hdr = HDR(op, slot, ctx), .handle = handle };

	put(s, &m, sizeof(m));
}

static void with_ptr(struct seq *s, uint16_t op, uint32_t slot, uint32_t ctx, uint64_t ptr)
{
	struct mps_msg_ptr m = { .hdr = HDR(op, slot, ctx), .ptr = ptr };

	put(s, &m, sizeof(m));
}

static void mem_alloc(struct seq *s, uint32_t ctx, uint64_t size)
{
	struct mps_msg_mem_alloc m = { .hdr = HDR(MPS_OP_MEM_ALLOC, 0, ctx), .size = size };

	put(s, &m, sizeof(m));
}

/* cuMemAllocAsync (slot given) or cuMemFreeAsync (NO) on a stream. */
static void mem_async(struct seq *s, uint16_t op, uint32_t slot, uint32_t ctx, uint32_t stream, uint64_t value)
{
	struct mps_msg_mem_async m = { .hdr = HDR(op, slot, ctx), .value = value, .stream = stream };

	put(s, &m, sizeof(m));
}

static void copy_inline(struct seq *s, uint32_t ctx, uint32_t stream, uint64_t dst, size_t n)
{
	struct mps_msg_copy m = { .hdr = HDR(MPS_OP_COPY, NO, ctx), .kind = MPS_COPY_H2D, .stream = stream,
				  .host_region = MPS_HOST_INLINE, .dst = dst, .size = n };
	uint8_t data[256];

	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 7 + 1);
	put2(s, &m, sizeof(m), data, n);
}

static void copy_to_slot(struct seq *s, uint32_t slot, uint32_t ctx, uint32_t stream, uint64_t src, uint64_t n)
{
	struct mps_msg_copy m = { .hdr = HDR(MPS_OP_COPY, slot, ctx), .kind = MPS_COPY_D2H, .stream = stream,
				  .host_region = MPS_HOST_SLOT, .src = src, .size = n };

	put(s, &m, sizeof(m));
}

static void copy_d2d(struct seq *s, uint32_t ctx, uint32_t stream, uint64_t dst, uint64_t src, uint64_t n)
{
	struct mps_msg_copy m = { .hdr = HDR(MPS_OP_COPY, NO, ctx), .kind = MPS_COPY_D2D, .stream = stream,
				  .dst = dst, .src = src, .size = n };

	put(s, &m, sizeof(m));
}

static void memset32(struct seq *s, uint32_t slot, uint32_t ctx, uint32_t stream, uint64_t dst, uint64_t count,
		     uint32_t elem)
{
	struct mps_msg_memset m = { .hdr = HDR(MPS_OP_MEMSET, slot, ctx), .stream = stream, .elem = elem,
				    .dst = dst, .count = count, .value = 0x5a5a5a5a };

	put(s, &m, sizeof(m));
}

static void stream_create(struct seq *s, uint32_t ctx, uint32_t flags, int prio)
{
	struct mps_msg_stream_create m = { .hdr = HDR(MPS_OP_STREAM_CREATE, 0, ctx), .flags = flags,
					   .priority = prio };

	put(s, &m, sizeof(m));
}

static void event_create(struct seq *s, uint32_t ctx, uint32_t flags)
{
	struct mps_msg_event_create m = { .hdr = HDR(MPS_OP_EVENT_CREATE, 0, ctx), .flags = flags };

	put(s, &m, sizeof(m));
}

static void event_record(struct seq *s, uint32_t ctx, uint32_t event, uint32_t stream)
{
	struct mps_msg_event_record m = { .hdr = HDR(MPS_OP_EVENT_RECORD, NO, ctx), .event = event,
					  .stream = stream };

	put(s, &m, sizeof(m));
}

static void stream_wait(struct seq *s, uint32_t ctx, uint32_t stream, uint32_t event)
{
	struct mps_msg_stream_wait m = { .hdr = HDR(MPS_OP_STREAM_WAIT_EVENT, NO, ctx), .stream = stream,
					 .event = event };

	put(s, &m, sizeof(m));
}

/* Uploads the test PTX (with its NUL) in one piece, or in two. */
static void upload(struct seq *s, uint32_t ctx, int pieces)
{
	struct mps_msg_blob b = { .hdr = HDR(MPS_OP_BLOB_APPEND, NO, ctx), .total = ptx_len };
	size_t first = pieces > 1 ? ptx_len / 2 : ptx_len;

	b.hdr.flags = MPS_BLOB_RESET;
	b.bytes = (uint32_t)first;
	put2(s, &b, sizeof(b), ptx, first);
	if (first < ptx_len) {
		b.hdr.flags = 0;
		b.bytes = (uint32_t)(ptx_len - first);
		put2(s, &b, sizeof(b), ptx + first, ptx_len - first);
	}
}

static void module_load(struct seq *s, uint32_t ctx, uint32_t kind)
{
	struct mps_msg_module_load m = { .hdr = HDR(MPS_OP_MODULE_LOAD, 0, ctx), .kind = kind, .size = ptx_len };

	put(s, &m, sizeof(m));
}

static void get_symbol(struct seq *s, uint16_t op, uint32_t ctx, uint32_t kind, uint32_t parent, const char *name)
{
	struct mps_msg_get_symbol m = { .hdr = HDR(op, 0, ctx), .kind = kind, .parent = parent,
					.name_len = (uint32_t)strlen(name) };
	uint8_t b[sizeof(m) + 256];

	if (m.name_len >= sizeof(b) - sizeof(m))
		exit(1);
	memcpy(b, &m, sizeof(m));
	memcpy(b + sizeof(m), name, m.name_len + 1);
	put(s, b, sizeof(m) + m.name_len + 1);
}

/* A GET_FUNCTION whose name_len lies about the bytes that follow: `bytes`
 * of name are sent as given, with no NUL added. */
static void get_symbol_raw(struct seq *s, uint32_t ctx, uint32_t parent, const char *bytes, uint32_t nbytes,
			   uint32_t name_len)
{
	struct mps_msg_get_symbol m = { .hdr = HDR(MPS_OP_GET_FUNCTION, 0, ctx), .kind = MPS_FUNC_OF_MODULE,
					.parent = parent, .name_len = name_len };
	uint8_t b[sizeof(m) + 64];

	if (nbytes > sizeof(b) - sizeof(m))
		exit(1);
	memcpy(b, &m, sizeof(m));
	memcpy(b + sizeof(m), bytes, nbytes);
	put(s, b, sizeof(m) + nbytes);
}

/* A launch with its packed arguments and attributes. */
static void launch(struct seq *s, uint32_t ctx, uint32_t func, uint32_t stream, uint32_t grid, uint32_t block,
		   const struct mps_launch_attr *attrs, uint32_t nattrs, uint16_t flags, const void *args,
		   uint32_t arg_size)
{
	struct mps_msg_launch m = { .hdr = HDR(MPS_OP_LAUNCH, NO, ctx), .func = func, .stream = stream,
				    .grid = { grid, 1, 1 }, .block = { block, 1, 1 }, .nattrs = nattrs,
				    .arg_size = arg_size };
	uint8_t tail[MPS_LAUNCH_ATTRS_MAX * sizeof(struct mps_launch_attr) + 256];
	size_t at = nattrs * sizeof(*attrs);

	m.hdr.flags = flags;
	if (at)
		memcpy(tail, attrs, at);
	memcpy(tail + at, args, arg_size);
	put2(s, &m, sizeof(m), tail, at + arg_size);
}

/* vadd(a, b, c, n) as the client packs it: three pointers, an int. */
static void launch_vadd(struct seq *s, uint32_t ctx, uint32_t func, uint32_t stream, uint64_t a, uint64_t b,
			uint64_t c, int32_t n)
{
	uint8_t args[28];

	memcpy(args, &a, 8);
	memcpy(args + 8, &b, 8);
	memcpy(args + 16, &c, 8);
	memcpy(args + 24, &n, 4);
	launch(s, ctx, func, stream, (uint32_t)(n + 31) / 32, 32, NULL, 0, 0, args, sizeof(args));
}

/* ---- the seeds ------------------------------------------------------ */

static void seed_memory(struct seq *s)
{
	struct mps_msg_pointer_attr pa = { .hdr = HDR(MPS_OP_POINTER_ATTR, 3, 0), .ptr = FAKE(0, 8), .count = 8,
					   .attr = { CU_POINTER_ATTRIBUTE_CONTEXT, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
						     CU_POINTER_ATTRIBUTE_DEVICE_POINTER,
						     CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
						     CU_POINTER_ATTRIBUTE_RANGE_SIZE, CU_POINTER_ATTRIBUTE_BUFFER_ID,
						     CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
						     CU_POINTER_ATTRIBUTE_SYNC_MEMOPS } };

	begin(s, 0, 0);
	ctx_create(s, 0, 0);
	mem_alloc(s, CTX, 4096);
	copy_inline(s, CTX, 0, FAKE(0, 0), 64);
	memset32(s, NO, CTX, 0, FAKE(0, 64), 16, 4);
	copy_to_slot(s, 1, CTX, 0, FAKE(0, 0), 128);
	copy_d2d(s, CTX, 0, FAKE(0, 1024), FAKE(0, 0), 256);
	with_ptr(s, MPS_OP_MEM_RANGE, 2, CTX, FAKE(0, 100));
	put(s, &pa, sizeof(pa));
	simple(s, MPS_OP_MEM_INFO, 4, CTX);
	simple(s, MPS_OP_CTX_SYNC, 5, CTX);
	with_ptr(s, MPS_OP_MEM_FREE, 6, CTX, FAKE(0, 0));
	simple(s, MPS_OP_CTX_DESTROY, 7, CTX);
	save(s, "memory");
}

/* Synchronous forms the client answered itself (MPS_COPY_FENCE), on the
 * legacy stream and a stream of its own, then work on the other stream. */
static void seed_fenced(struct seq *s)
{
	struct mps_msg_copy up = { .hdr = HDR(MPS_OP_COPY, NO, CTX), .kind = MPS_COPY_H2D,
				   .host_region = MPS_HOST_INLINE, .dst = FAKE(0, 0), .size = 16 };
	struct mps_msg_copy dd = { .hdr = HDR(MPS_OP_COPY, NO, CTX), .kind = MPS_COPY_D2D, .dst = FAKE(0, 512),
				   .src = FAKE(0, 0), .size = 16 };
	struct mps_msg_memset ms = { .hdr = HDR(MPS_OP_MEMSET, NO, CTX), .elem = 4, .dst = FAKE(0, 256),
				     .count = 8, .value = 7 };
	uint8_t data[16] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16 };

	begin(s, 0, 0);
	ctx_create(s, 0, 0);
	mem_alloc(s, CTX, 4096);
	stream_create(s, CTX, CU_STREAM_NON_BLOCKING, 0);   /* H(2) */
	up.hdr.flags = dd.hdr.flags = ms.hdr.flags = MPS_COPY_FENCE;
	put2(s, &up, sizeof(up), data, sizeof(data));
	put(s, &ms, sizeof(ms));
	dd.stream = H(2);
	put(s, &dd, sizeof(dd));
	copy_to_slot(s, 1, CTX, H(2), FAKE(0, 512), 16);
	simple(s, MPS_OP_CTX_SYNC, 2, CTX);
	save(s, "fenced");
}

static void seed_pitched(struct seq *s)
{
	struct mps_msg_mem_alloc pitched = { .hdr = HDR(MPS_OP_MEM_ALLOC, 0, CTX), .width = 1000, .height = 10,
					     .elem = 4 };
	struct mps_msg_ctx_limit lim = { .hdr = HDR(MPS_OP_CTX_LIMIT, 1, CTX), .limit = CU_LIMIT_STACK_SIZE };
	struct mps_msg_error_string es = { .hdr = HDR(MPS_OP_ERROR_STRING, 2, 0), .code = CUDA_ERROR_INVALID_VALUE };

	begin(s, 0, 0);
	ctx_create(s, 0, 0);
	put(s, &pitched, sizeof(pitched));
	memset32(s, 3, CTX, 0, FAKE(0, 0), 4000, 1);
	put(s, &lim, sizeof(lim));
	lim.limit = CU_LIMIT_MALLOC_HEAP_SIZE;
	lim.set = 1;
	lim.value = 16 << 20;
	put(s, &lim, sizeof(lim));
	lim.limit = CU_LIMIT_PRINTF_FIFO_SIZE;
	lim.value = 4096;   /* lower than the default: kept as this context's value only */
	put(s, &lim, sizeof(lim));
	lim.set = 0;
	put(s, &lim, sizeof(lim));
	put(s, &es, sizeof(es));
	/* A second context, on the other device, with memory of its own. */
	ctx_create(s, 0, 1);
	mem_alloc(s, H(2), 8192);
	copy_d2d(s, H(2), 0, FAKE(1, 0), FAKE(0, 0), 4000);
	simple(s, MPS_OP_CTX_SYNC, 4, H(2));
	/* Ends with both contexts and their memory still live: teardown frees them. */
	save(s, "pitched");
}

static void seed_alloc_async(struct seq *s)
{
	begin(s, 0, 0);
	ctx_create(s, 0, 0);
	stream_create(s, CTX, CU_STREAM_NON_BLOCKING, 0);                   /* H(2) */
	mem_async(s, MPS_OP_MEM_ALLOC_ASYNC, 1, CTX, H(2), 8192);           /* range 0 */
	memset32(s, NO, CTX, H(2), FAKE(0, 0), 2048, 4);
	copy_to_slot(s, 2, CTX, H(2), FAKE(0, 64), 128);
	mem_async(s, MPS_OP_MEM_FREE_ASYNC, NO, CTX, H(2), FAKE(0, 0));
	mem_async(s, MPS_OP_MEM_FREE_ASYNC, NO, CTX, H(2), FAKE(0, 0));     /* twice */
	simple(s, MPS_OP_CTX_SYNC, 3, CTX);
	mem_async(s, MPS_OP_MEM_ALLOC_ASYNC, 4, CTX, 0, 4096);              /* range 1, legacy */
	mem_async(s, MPS_OP_MEM_FREE_ASYNC, NO, CTX, 0, FAKE(1, 8));        /* not its start */
	mem_async(s, MPS_OP_MEM_ALLOC_ASYNC, 5, CTX, 0, 0);                 /* nothing */
	mem_async(s, MPS_OP_MEM_ALLOC_ASYNC, 6, CTX, H(9), 4096);           /* no such stream */
	simple(s, MPS_OP_CTX_SYNC, 7, CTX);
	simple(s, MPS_OP_CTX_DESTROY, 8, CTX);
	save(s, "alloc_async");
}

/* Pools and virtual memory: the default pool's attributes, a physical
 * allocation mapped into a reservation and used, then handles and ranges
 * that are not the client's, an import with no fd, and everything left
 * mapped and reserved for the teardown. */
static void seed_vmm(struct seq *s)
{
	struct mps_fwd_cuDeviceGetDefaultMemPool dp = { .hdr = HDR(MPS_OP_FWD_cuDeviceGetDefaultMemPool, 1, CTX),
						       .present = 1 };
	struct mps_msg_pool_attr pa = { .hdr = HDR(MPS_OP_POOL_ATTR, 2, CTX), .pool = H(2),
					.attr = CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, .set = 1, .value = ~0ull };
	struct mps_fwd_cuDeviceGetGraphMemAttribute ga = { .hdr = HDR(MPS_OP_FWD_cuDeviceGetGraphMemAttribute, 3, CTX),
							   .present = 4, .a1 = CU_GRAPH_MEM_ATTR_USED_MEM_HIGH };
	struct mps_fwd_cuDeviceSetGraphMemAttribute gs = { .hdr = HDR(MPS_OP_FWD_cuDeviceSetGraphMemAttribute, 3, CTX),
							   .present = 4, .a1 = CU_GRAPH_MEM_ATTR_USED_MEM_HIGH };
	struct mps_msg_vmm v = { .hdr = HDR(MPS_OP_VMM_CREATE, 3, CTX), .size = 2u << 20,
				 .prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
					   .loc_type = CU_MEM_LOCATION_TYPE_DEVICE } };

	begin(s, 0, 0);
	ctx_create(s, 0, 0);
	put(s, &dp, sizeof(dp));                                            /* pool H(2) */
	put(s, &pa, sizeof(pa));
	pa.set = 0;
	pa.attr = CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC;
	put(s, &pa, sizeof(pa));
	put(s, &ga, sizeof(ga));                                            /* the device's graph memory */
	put(s, &gs, sizeof(gs));
	mem_async(s, MPS_OP_MEM_ALLOC_ASYNC, 4, CTX, 0, 8192);              /* range 0 */
	put(s, &v, sizeof(v));                                              /* allocation H(3) */
	v.hdr.op = MPS_OP_VMM_RESERVE;
	v.size = 4u << 20;
	put(s, &v, sizeof(v));                                              /* range 1 */
	v.hdr.op = MPS_OP_VMM_MAP;
	v.ptr = FAKE(1, 0);
	v.size = 2u << 20;
	v.handle = H(3);
	put(s, &v, sizeof(v));
	memset32(s, 5, CTX, 0, FAKE(1, 4096), 64, 4);
	copy_d2d(s, CTX, 0, FAKE(0, 0), FAKE(1, 0), 4096);
	v.hdr.op = MPS_OP_VMM_RETAIN;
	v.ptr = FAKE(1, 100);
	put(s, &v, sizeof(v));
	v.hdr.op = MPS_OP_VMM_MAP;                                          /* over the mapping */
	v.ptr = FAKE(1, 0);
	put(s, &v, sizeof(v));
	v.hdr.op = MPS_OP_VMM_UNMAP;                                        /* half of it */
	v.size = 1u << 20;
	put(s, &v, sizeof(v));
	v.hdr.op = MPS_OP_VMM_MAP;                                          /* a pool, not an allocation */
	v.ptr = FAKE(1, 2u << 20);
	v.size = 2u << 20;
	v.handle = H(2);
	put(s, &v, sizeof(v));
	v.hdr.op = MPS_OP_VMM_IMPORT;                                       /* no fd came */
	v.type = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
	put(s, &v, sizeof(v));
	v.hdr.op = MPS_OP_VMM_RELEASE;
	v.handle = H(3);
	put(s, &v, sizeof(v));
	put(s, &v, sizeof(v));                                              /* the retained reference */
	put(s, &v, sizeof(v));                                              /* one too many */
	simple(s, MPS_OP_CTX_SYNC, 6, CTX);
	save(s, "vmm");
}

static void seed_streams(struct seq *s)
{
	struct mps_msg_elapsed el = { .hdr = HDR(MPS_OP_EVENT_ELAPSED, 6, CTX), .start = H(4), .end = H(4) };

	begin(s, 0, 0);
	ctx_create(s, 0, 0);
	stream_create(s, CTX, CU_STREAM_NON_BLOCKING, 0);   /* H(2) */
	stream_create(s, CTX, 0, -1);                       /* H(3) */
	event_create(s, CTX, 0);                            /* H(4) */
	event_create(s, CTX, CU_EVENT_DISABLE_TIMING);      /* H(5) */
	mem_alloc(s, CTX, 4096);
	memset32(s, NO, CTX, H(2), FAKE(0, 0), 1024, 4);
	event_record(s, CTX, H(4), H(2));
	stream_wait(s, CTX, H(3), H(4));
	memset32(s, NO, CTX, H(3), FAKE(0, 0), 512, 2);
	memset32(s, NO, CTX, 0, FAKE(0, 0), 100, 1);
	event_record(s, CTX, H(5), 0);
	with_handle(s, MPS_OP_EVENT_QUERY, 1, CTX, H(4));
	with_handle(s, MPS_OP_EVENT_SYNC, 2, CTX, H(5));
	with_handle(s, MPS_OP_STREAM_QUERY, 3, CTX, H(2));
	with_handle(s, MPS_OP_STREAM_SYNC, 4, CTX, H(3));
	with_handle(s, MPS_OP_STREAM_SYNC, 5, CTX, 0);
	{
		/* What kernels print: kept for this client, then taken after a
		 * synchronize of a stream and of the context. */
		struct mps_msg_devout dv = { .hdr = HDR(MPS_OP_DEVOUT, 6, CTX) };

		dv.hdr.flags = MPS_DEVOUT_ENABLE;
		put(s, &dv, sizeof(dv));
		dv.hdr.flags = MPS_DEVOUT_TAKE;
		dv.stream = H(2);
		put(s, &dv, sizeof(dv));
		dv.stream = 0;
		put(s, &dv, sizeof(dv));
	}
	put(s, &el, sizeof(el));
	with_handle(s, MPS_OP_EVENT_DESTROY, NO, CTX, H(5));
	with_handle(s, MPS_OP_STREAM_DESTROY, NO, CTX, H(3));
	{
		/* Host functions: a set-up with no pipe, then one in a stream; a
		 * host registration with no memfd. */
		struct mps_msg_hostfn_setup su = { .hdr = HDR(MPS_OP_HOSTFN_SETUP, 6, CTX), .region = H(6) };
		struct mps_msg_hostfn hf = { .hdr = HDR(MPS_OP_HOSTFN, NO, CTX), .stream = H(2), .slot = 3, .seq = 1 };

		struct mps_msg_host_register hr = { .hdr = HDR(MPS_OP_HOST_REGISTER, 6, CTX), .addr = 1 << 20,
						    .size = 1 << 16 };

		put(s, &su, sizeof(su));
		put(s, &hf, sizeof(hf));
		put(s, &hr, sizeof(hr));
	}
	simple(s, MPS_OP_CTX_SYNC, 7, CTX);
	simple(s, MPS_OP_CTX_DESTROY, 8, CTX);
	save(s, "streams");
}

static void seed_module(struct seq *s)
{
	struct mps_msg_func_attr fa = { .hdr = HDR(MPS_OP_FUNC_ATTR, 2, CTX), .kind = MPS_FUNC_GET, .func = H(3),
					.attr = CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK };
	struct mps_msg_occupancy oc = { .hdr = HDR(MPS_OP_OCCUPANCY, 3, CTX), .kind = MPS_OCC_BLOCKS_PER_SM,
					.func = H(3), .block = 256 };
	uint32_t by = 5;

	begin(s, 0, 0);
	ctx_create(s, 0, 0);
	mem_alloc(s, CTX, 4096);
	mem_alloc(s, CTX, 4096);
	mem_alloc(s, CTX, 4096);
	upload(s, CTX, 2);
	module_load(s, CTX, MPS_MODULE);                                        /* H(2) */
	get_symbol(s, MPS_OP_GET_FUNCTION, CTX, MPS_FUNC_OF_MODULE, H(2), "vadd"); /* H(3) */
	copy_inline(s, CTX, 0, FAKE(0, 0), 64);
	copy_inline(s, CTX, 0, FAKE(1, 0), 64);
	launch_vadd(s, CTX, H(3), 0, FAKE(0, 0), FAKE(1, 0), FAKE(2, 0), 16);
	copy_to_slot(s, 1, CTX, 0, FAKE(2, 0), 64);
	get_symbol(s, MPS_OP_GET_GLOBAL, CTX, MPS_GLOBAL_OF_MODULE, H(2), "g_counter");   /* range 3 */
	put(s, &fa, sizeof(fa));
	fa.kind = MPS_FUNC_SET;
	fa.attr = CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
	fa.value = 1024;
	put(s, &fa, sizeof(fa));
	fa.kind = MPS_FUNC_CACHE_CONFIG;
	fa.value = CU_FUNC_CACHE_PREFER_SHARED;
	put(s, &fa, sizeof(fa));
	fa.kind = 99;
	put(s, &fa, sizeof(fa));
	fa.kind = MPS_FUNC_GET_ALL;                 /* every attribute, into the slot */
	put(s, &fa, sizeof(fa));
	fa.hdr.slot = NO;                           /* a get without a reply: refused */
	put(s, &fa, sizeof(fa));
	fa.kind = MPS_FUNC_SET;                     /* sets without one: taken, or refused later */
	fa.value = 4096;
	put(s, &fa, sizeof(fa));
	fa.value = -7;
	put(s, &fa, sizeof(fa));
	fa.kind = MPS_FUNC_CACHE_CONFIG;
	fa.value = 77;
	put(s, &fa, sizeof(fa));
	fa.hdr.slot = 2;
	put(s, &oc, sizeof(oc));
	get_symbol(s, MPS_OP_GET_FUNCTION, CTX, MPS_FUNC_OF_MODULE, H(2), "");          /* no name */
	get_symbol_raw(s, CTX, H(2), "vadd", 4, 4);             /* no NUL after the name */
	get_symbol_raw(s, CTX, H(2), "vadd\0", 5, 4000);        /* longer than the message */
	get_symbol_raw(s, CTX, H(2), "va\0dd\0", 6, 5);         /* a NUL inside */
	get_symbol_raw(s, CTX, H(2), "vadd\0", 5, 0xffffffffu); /* a length that wraps */
	get_symbol(s, MPS_OP_GET_FUNCTION, CTX, MPS_FUNC_OF_MODULE, H(2), "no_such");
	get_symbol(s, MPS_OP_GET_FUNCTION, CTX, MPS_FUNC_OF_MODULE, H(2), "bump_global"); /* H(4) */
	launch(s, CTX, H(4), 0, 1, 1, NULL, 0, 0, &by, sizeof(by));
	copy_to_slot(s, 4, CTX, 0, FAKE(3, 0), 4);
	simple(s, MPS_OP_CTX_SYNC, 5, CTX);
	with_handle(s, MPS_OP_MODULE_UNLOAD, 6, CTX, H(2));
	simple(s, MPS_OP_CTX_DESTROY, 7, CTX);
	save(s, "module");
}

/* Stream capture into a graph, a kernel node added by hand, the graph
 * instantiated and launched, read back and destroyed; then a graph given to
 * calls that want a node or an executable graph. */
static void seed_graph(struct seq *s)
{
	struct mps_msg_capture_begin cb = { .hdr = HDR(MPS_OP_CAPTURE_BEGIN, 1, CTX), .stream = H(4) };
	struct mps_fwd_cuGraphInstantiateWithFlags gi = { .hdr = HDR(MPS_OP_FWD_cuGraphInstantiateWithFlags, 3, CTX),
							  .present = 1, .a1 = H(5) };
	struct mps_fwd_cuGraphLaunch gl = { .hdr = HDR(MPS_OP_FWD_cuGraphLaunch, 4, CTX), .a0 = H(7), .a1 = H(4) };
	struct mps_fwd_cuGraphGetNodes gn = { .hdr = HDR(MPS_OP_FWD_cuGraphGetNodes, 6, CTX), .present = 2,
					      .a0 = H(5), .a2 = 8 };
	struct mps_fwd_cuGraphExecDestroy ed = { .hdr = HDR(MPS_OP_FWD_cuGraphExecDestroy, 8, CTX), .a0 = H(7) };
	struct mps_fwd_cuGraphDestroy gd = { .hdr = HDR(MPS_OP_FWD_cuGraphDestroy, 9, CTX), .a0 = H(5) };
	struct {
		struct mps_msg_kernel_node k;
		uint64_t args[4];
	} kn = { .k = { .hdr = HDR(MPS_OP_KERNEL_NODE, 2, CTX), .graph = H(5), .func = H(3), .grid = { 1, 1, 1 },
			.block = { 16, 1, 1 }, .arg_size = 28 },
		 .args = { FAKE(0, 0), FAKE(1, 0), FAKE(2, 0), 16 } };

	kn.k.hdr.flags = MPS_KNODE_ADD;
	begin(s, 0, 0);
	ctx_create(s, 0, 0);
	mem_alloc(s, CTX, 4096);
	mem_alloc(s, CTX, 4096);
	mem_alloc(s, CTX, 4096);
	upload(s, CTX, 2);
	module_load(s, CTX, MPS_MODULE);                                        /* H(2) */
	get_symbol(s, MPS_OP_GET_FUNCTION, CTX, MPS_FUNC_OF_MODULE, H(2), "vadd"); /* H(3) */
	stream_create(s, CTX, CU_STREAM_NON_BLOCKING, 0);                       /* H(4) */
	copy_inline(s, CTX, 0, FAKE(0, 0), 64);
	copy_inline(s, CTX, 0, FAKE(1, 0), 64);
	put(s, &cb, sizeof(cb));
	launch_vadd(s, CTX, H(3), H(4), FAKE(0, 0), FAKE(1, 0), FAKE(2, 0), 16);
	with_handle(s, MPS_OP_CAPTURE_INFO, 5, CTX, H(4));
	with_handle(s, MPS_OP_CAPTURE_END, 1, CTX, H(4));                       /* H(5) */
	put(s, &kn, sizeof(kn));                                                /* H(6) */
	put(s, &gi, sizeof(gi));                                                /* H(7) */
	put(s, &gl, sizeof(gl));
	with_handle(s, MPS_OP_STREAM_SYNC, 5, CTX, H(4));
	copy_to_slot(s, 1, CTX, 0, FAKE(2, 0), 64);
	put(s, &gn, sizeof(gn));
	with_handle(s, MPS_OP_KERNEL_NODE_GET, 7, CTX, H(6));
	with_handle(s, MPS_OP_KERNEL_NODE_GET, 7, CTX, H(5));                   /* a graph, not a node */
	gl.a0 = H(5);
	put(s, &gl, sizeof(gl));                                                /* a graph launched as an executable */
	put(s, &ed, sizeof(ed));
	put(s, &gd, sizeof(gd));
	put(s, &gd, sizeof(gd));                                                /* twice */
	simple(s, MPS_OP_CTX_SYNC, 10, CTX);
	save(s, "graph");
}

static void seed_library(struct seq *s)
{
	struct mps_launch_attr prio = { .id = CU_LAUNCH_ATTRIBUTE_PRIORITY };
	struct mps_msg_func_attr fa = { .hdr = HDR(MPS_OP_FUNC_ATTR, 2, CTX), .kind = MPS_KERNEL_GET, .func = H(3),
					.attr = CU_FUNC_ATTRIBUTE_NUM_REGS, .device = 0 };
	struct mps_msg_occupancy oc = { .hdr = HDR(MPS_OP_OCCUPANCY, 3, CTX), .kind = MPS_OCC_DYN_SMEM,
					.func = H(3), .block = 128, .num_blocks = 2 };
	struct mps_msg_occupancy cl = { .hdr = HDR(MPS_OP_OCCUPANCY, 4, CTX), .kind = MPS_OCC_CLUSTERS,
					.func = H(4), .grid = { 8, 1, 1 }, .blockdim = { 128, 1, 1 },
					.cluster = { 2, 1, 1 } };
	uint8_t args[16];
	uint64_t p = FAKE(0, 0);
	uint32_t base = 7;
	int32_t n = 64;

	memcpy(args, &p, 8);
	memcpy(args + 8, &base, 4);
	memcpy(args + 12, &n, 4);
	begin(s, 0, 0);
	ctx_create(s, 0, 0);
	upload(s, CTX, 1);
	module_load(s, CTX, MPS_LIBRARY);                                            /* H(2) */
	get_symbol(s, MPS_OP_GET_FUNCTION, CTX, MPS_KERNEL_OF_LIBRARY, H(2), "iota_u32"); /* H(3) */
	get_symbol(s, MPS_OP_GET_FUNCTION, CTX, MPS_FUNC_OF_KERNEL, H(3), "");           /* H(4) */
	mem_alloc(s, CTX, 4096);
	launch(s, CTX, H(3), 0, 2, 32, &prio, 1, MPS_LAUNCH_COOPERATIVE, args, sizeof(args));
	launch(s, CTX, H(4), 0, 2, 32, NULL, 0, 0, args, sizeof(args));
	put(s, &fa, sizeof(fa));
	fa.kind = MPS_KERNEL_SET;
	fa.attr = CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
	fa.value = 2048;
	fa.device = 1;
	put(s, &fa, sizeof(fa));
	fa.kind = MPS_KERNEL_CACHE_CONFIG;
	fa.value = CU_FUNC_CACHE_PREFER_L1;
	put(s, &fa, sizeof(fa));
	fa.device = 7;                  /* no such device */
	put(s, &fa, sizeof(fa));
	put(s, &oc, sizeof(oc));
	put(s, &cl, sizeof(cl));
	get_symbol(s, MPS_OP_GET_FUNCTION, 0, MPS_FUNC_OF_KERNEL, H(3), "");   /* no context */
	get_symbol(s, MPS_OP_GET_GLOBAL, CTX, MPS_GLOBAL_OF_LIBRARY, H(2), "g_counter");
	copy_to_slot(s, 5, CTX, 0, FAKE(0, 0), 256);
	simple(s, MPS_OP_CTX_SYNC, 6, CTX);
	with_handle(s, MPS_OP_MODULE_UNLOAD, 7, CTX, H(2));
	save(s, "library");
}

static void seed_host(struct seq *s)
{
	struct mps_msg_host_alloc ha = { .hdr = HDR(MPS_OP_HOST_ALLOC, 1, CTX), .size = 8192 };
	struct mps_msg_copy up = { .hdr = HDR(MPS_OP_COPY, NO, CTX), .kind = MPS_COPY_H2D, .host_region = H(2),
				   .stage = 3, .dst = FAKE(0, 0), .size = 4096 };
	struct mps_msg_copy down = { .hdr = HDR(MPS_OP_COPY, 2, CTX), .kind = MPS_COPY_D2H, .host_region = H(2),
				     .host_offset = 4096, .src = FAKE(0, 0), .size = 4096 };
	struct mps_msg_pointer_attr pa = { .hdr = HDR(MPS_OP_POINTER_ATTR, 3, 0), .ptr = FAKE(1, 16), .count = 3,
					   .attr = { CU_POINTER_ATTRIBUTE_HOST_POINTER,
						     CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_MAPPED } };

	begin(s, 0, 0);
	ctx_create(s, 0, 0);
	mem_alloc(s, CTX, 8192);
	put(s, &ha, sizeof(ha));               /* H(2), range 1 */
	up.hdr.flags = MPS_COPY_STAGE;
	put(s, &up, sizeof(up));
	put(s, &down, sizeof(down));
	put(s, &pa, sizeof(pa));
	memset32(s, NO, CTX, 0, FAKE(1, 0), 64, 4);
	copy_d2d(s, CTX, 0, FAKE(0, 0), FAKE(1, 0), 256);
	with_handle(s, MPS_OP_HOST_FREE, 4, CTX, H(2));
	put(s, &ha, sizeof(ha));               /* left for teardown */
	simple(s, MPS_OP_CTX_SYNC, 5, CTX);
	save(s, "host");
}

static void seed_spin(struct seq *s)
{
	uint8_t args[20];
	int64_t cycles = 2000;
	uint64_t out = FAKE(0, 0), flag = FAKE(0, 256);
	uint32_t value = 9;

	begin(s, 0, 0);
	ctx_create(s, 0, 0);
	upload(s, CTX, 1);
	module_load(s, CTX, MPS_MODULE);                                        /* H(2) */
	get_symbol(s, MPS_OP_GET_FUNCTION, CTX, MPS_FUNC_OF_MODULE, H(2), "spin"); /* H(3) */
	get_symbol(s, MPS_OP_GET_FUNCTION, CTX, MPS_FUNC_OF_MODULE, H(2), "spin_then_store"); /* H(4) */
	stream_create(s, CTX, 0, 0);                                              /* H(5) */
	mem_alloc(s, CTX, 4096);
	memcpy(args, &cycles, 8);
	memcpy(args + 8, &out, 8);
	launch(s, CTX, H(3), H(5), 4, 32, NULL, 0, 0, args, 16);
	with_handle(s, MPS_OP_STREAM_SYNC, 1, CTX, 0);
	memcpy(args + 8, &flag, 8);
	memcpy(args + 16, &value, 4);
	launch(s, CTX, H(4), 0, 1, 1, NULL, 0, 0, args, 20);
	copy_to_slot(s, 2, CTX, H(5), FAKE(0, 256), 4);
	simple(s, MPS_OP_CTX_SYNC, 3, CTX);
	save(s, "spin");
}

/* Everything a client can get wrong, once. */
static void seed_malformed(struct seq *s)
{
	struct mps_msg bad_op = HDR(200, 0, 0);
	struct mps_msg_copy stage = { .hdr = HDR(MPS_OP_COPY, NO, CTX), .kind = MPS_COPY_D2D, .stage = 99 };
	struct mps_msg_launch ghost = { .hdr = HDR(MPS_OP_LAUNCH, NO, CTX), .func = H(9) };
	struct mps_msg_blob blob = { .hdr = HDR(MPS_OP_BLOB_APPEND, NO, CTX), .bytes = 64 };

	begin(s, 0, 0);
	put(s, &bad_op, sizeof(bad_op));
	simple(s, MPS_OP_MEM_ALLOC, 0, 0);                /* too short */
	simple(s, MPS_OP_CTX_SYNC, NO, 0);                /* sync without a slot */
	with_handle(s, MPS_OP_STREAM_DESTROY, 1, 0, 0);   /* async with a slot */
	simple(s, MPS_OP_CTX_SYNC, 40, 0);                /* no such slot */
	ctx_create(s, 2, 5);                              /* no such device */
	ctx_create(s, 0, 0);
	mem_alloc(s, 0x999, 4096);                        /* no such context */
	mem_alloc(s, CTX, 0);
	mem_alloc(s, CTX, 1ull << 40);                    /* more than the device has */
	stage.hdr.flags = MPS_COPY_STAGE;
	put(s, &stage, sizeof(stage));
	copy_inline(s, CTX, 0, FAKE(7, 0), 16);           /* no such range */
	put(s, &ghost, sizeof(ghost));
	blob.hdr.flags = 0;
	put(s, &blob, sizeof(blob));                      /* no upload started */
	module_load(s, CTX, MPS_MODULE);                  /* nothing uploaded */
	with_handle(s, MPS_OP_EVENT_SYNC, 3, CTX, CTX);   /* a context is not an event */
	with_ptr(s, MPS_OP_MEM_FREE, 4, CTX, 0x1234);
	save(s, "malformed");
}

/* A memory limit on device 0 and the waiter thread doing the completions. */
static void seed_limit(struct seq *s)
{
	struct mps_msg_mem_alloc pitched = { .hdr = HDR(MPS_OP_MEM_ALLOC, 1, CTX), .width = 4096, .height = 1024,
					     .elem = 16 };

	begin(s, 3, 1);   /* 2 MiB */
	ctx_create(s, 0, 0);
	mem_alloc(s, CTX, 1 << 20);
	mem_alloc(s, CTX, 1 << 20);   /* over the limit */
	put(s, &pitched, sizeof(pitched));
	memset32(s, 2, CTX, 0, FAKE(0, 0), 1 << 18, 4);
	simple(s, MPS_OP_CTX_SYNC, 3, CTX);
	with_ptr(s, MPS_OP_MEM_FREE, 4, CTX, FAKE(0, 0));
	mem_alloc(s, CTX, 2 << 20);
	save(s, "limit");
}

/* Tensor maps: a tiled encoding of a fuzz device address, one whose rank
 * claims more array elements than the message holds, and the descriptor
 * moved to another address (and one that is not a descriptor). */
static void seed_tensormap(struct seq *s)
{
	struct mps_fwd_cuTensorMapEncodeTiled q = { .hdr = HDR(MPS_OP_FWD_cuTensorMapEncodeTiled, 1, CTX),
						    .present = 1 | 1u << 4 | 1u << 5 | 1u << 6 | 1u << 7,
						    .a1 = CU_TENSOR_MAP_DATA_TYPE_FLOAT32, .a2 = 2,
						    .a3 = FAKE(0, 0) };
	struct mps_fwd_cuTensorMapReplaceAddress ra = { .hdr = HDR(MPS_OP_FWD_cuTensorMapReplaceAddress, 3, CTX),
							 .present = 1, .a1 = FAKE(0, 256) };
	uint64_t arrays[6] = { 16, 16, 64, 0, 0, 0 };
	uint32_t *box = (uint32_t *)&arrays[4];

	box[0] = box[1] = 16;
	box[2] = box[3] = 1;
	begin(s, 0, 0);
	ctx_create(s, 0, 0);
	mem_alloc(s, CTX, 4096);
	put2(s, &q, sizeof(q), arrays, sizeof(arrays));
	q.a2 = 5;
	put2(s, &q, sizeof(q), arrays, sizeof(arrays));
	memset(ra.a0, 0x5a, sizeof(ra.a0));
	put(s, &ra, sizeof(ra));
	save(s, "tensormap");
}

/* Uploads raw bytes as an image and loads it. */
static void load_raw(struct seq *s, const void *image, size_t n, uint32_t kind)
{
	struct mps_msg_blob b = { .hdr = HDR(MPS_OP_BLOB_APPEND, NO, CTX), .total = n, .bytes = (uint32_t)n };
	struct mps_msg_module_load m = { .hdr = HDR(MPS_OP_MODULE_LOAD, 0, CTX), .kind = kind, .size = n };

	b.hdr.flags = MPS_BLOB_RESET;
	put2(s, &b, sizeof(b), image, n);
	put(s, &m, sizeof(m));
}

/* Regression: images whose end the driver would look for past the upload
 * (PTX without its NUL, a fatbin or cubin whose headers claim more than was
 * sent, a one-byte image) and a fatbin wrapper, whose pointer means nothing
 * in the server. Each must be refused, never read past. */
static void seed_regress_image(struct seq *s)
{
	static const char ptx_head[] = ".version 8.0\n.target sm_90\n.address_size 64\n";
	uint8_t fatbin[32] = { 0x50, 0xed, 0x55, 0xba, 1, 0, 16, 0, 0x00, 0x10 };   /* fat_size 4096 */
	uint8_t wrapper[24] = { 0xb1, 0x43, 0x62, 0x46, 1, 0, 0, 0, 0x00, 0x10, 0, 0, 0, 0x20 };
	uint8_t elf[64] = { 0x7f, 'E', 'L', 'F', 2, 1, 1 };
	uint8_t elf32[64] = { 0x7f, 'E', 'L', 'F', 1, 1, 1 };
	uint16_t shnum = 4, shentsize = 64;

	memcpy(elf + 0x28, &(uint64_t){ 64 }, 8);   /* section headers right after the ELF header */
	memcpy(elf + 0x3a, &shentsize, 2);
	memcpy(elf + 0x3c, &shnum, 2);
	begin(s, 0, 0);
	ctx_create(s, 0, 0);
	load_raw(s, ptx_head, sizeof(ptx_head) - 1, MPS_MODULE);
	load_raw(s, ptx_head, sizeof(ptx_head) - 1, MPS_LIBRARY);
	load_raw(s, "\x7f", 1, MPS_MODULE);
	load_raw(s, fatbin, sizeof(fatbin), MPS_MODULE);
	load_raw(s, wrapper, sizeof(wrapper), MPS_LIBRARY);
	load_raw(s, elf, sizeof(elf), MPS_MODULE);
	load_raw(s, elf32, sizeof(elf32), MPS_MODULE);
	load_raw(s, ptx, ptx_len, MPS_MODULE);   /* and a good one still loads */
	save(s, "regress-image-unterminated");
}

/* The ring's contents as they are: good messages, then one whose length
 * breaks the ring's rules, after which nothing more is taken. */
static void seed_ring(struct seq *s)
{
	struct mps_msg_ctx_create cc = { .hdr = HDR(MPS_OP_CTX_CREATE, 0, 0) };
	struct mps_msg_mem_alloc ma = { .hdr = HDR(MPS_OP_MEM_ALLOC, 1, CTX), .size = 4096 };
	struct mps_msg_memset ms = { .hdr = HDR(MPS_OP_MEMSET, NO, CTX), .elem = 4, .dst = FAKE(0, 0), .count = 64 };
	struct mps_msg sync = HDR(MPS_OP_CTX_SYNC, 2, CTX);
	struct mps_msg broken = HDR(MPS_OP_CTX_SYNC, 3, CTX);

	begin(s, 4, 0);
	memset(s->b + s->n, 0, 8);        /* from the ring's start, all of it published */
	s->n += 8;
	put_raw(s, &cc, sizeof(cc));
	put_raw(s, &ma, sizeof(ma));
	put_raw(s, &ms, sizeof(ms));
	put_raw(s, &sync, sizeof(sync));
	memcpy(s->b + s->n, &broken, sizeof(broken));
	memcpy(s->b + s->n + 4, &(uint32_t){ 8 }, 4);   /* len 8: shorter than a header */
	s->n += sizeof(broken);
	put_raw(s, &sync, sizeof(sync));
	save(s, "ring");

	/* Near the ring's end: a message, a pad to the end, messages from the
	 * start again. */
	begin(s, 4, 0);
	memcpy(s->b + s->n, &(uint32_t){ MPS_SQ_SIZE - 64 }, 4);
	memset(s->b + s->n + 4, 0, 4);
	s->n += 8;
	put_raw(s, &cc, sizeof(cc));
	memset(&broken, 0, sizeof(broken));
	broken.len = 32;                  /* op 0: a pad */
	memcpy(s->b + s->n, &broken, sizeof(broken));
	memset(s->b + s->n + sizeof(broken), 0, 16);
	s->n += 32;
	put_raw(s, &ma, sizeof(ma));
	put_raw(s, &sync, sizeof(sync));
	save(s, "ring-wrap");
}

int main(int argc, char **argv)
{
	static struct seq s;
	FILE *f;
	long n;

	if (argc != 3) {
		fprintf(stderr, "usage: seeds_wire DIR PTX\n");
		return 1;
	}
	dir = argv[1];
	f = fopen(argv[2], "rb");
	if (!f || fseek(f, 0, SEEK_END) < 0 || (n = ftell(f)) <= 0 || fseek(f, 0, SEEK_SET) < 0) {
		fprintf(stderr, "seeds_wire: cannot read %s\n", argv[2]);
		return 1;
	}
	ptx = calloc(1, (size_t)n + 1);
	if (!ptx || fread(ptx, 1, (size_t)n, f) != (size_t)n) {
		fprintf(stderr, "seeds_wire: cannot read %s\n", argv[2]);
		return 1;
	}
	fclose(f);
	ptx_len = (size_t)n + 1;
	seed_memory(&s);
	seed_fenced(&s);
	seed_pitched(&s);
	seed_streams(&s);
	seed_alloc_async(&s);
	seed_vmm(&s);
	seed_module(&s);
	seed_library(&s);
	seed_graph(&s);
	seed_host(&s);
	seed_spin(&s);
	seed_malformed(&s);
	seed_limit(&s);
	seed_tensormap(&s);
	seed_regress_image(&s);
	seed_ring(&s);
	return failed;
}
