// SPDX-License-Identifier: MIT
/*
 * A copy node's geometry — each side's offsets, pitch and height, and the
 * extent — between the driver's CUDA_MEMCPY3D and the wire's struct
 * mps_copy3d, the same way in the client and the server. Where each side's
 * memory is (device address, pinned region and offset) is each one's own.
 */
#ifndef MPS_COMMON_COPY3D_H
#define MPS_COMMON_COPY3D_H

#include <cuda.h>

#include "common/wire.h"

static inline void mps_copy3d_geometry_in(struct mps_copy3d *w, const CUDA_MEMCPY3D *c)
{
	w->src.x = c->srcXInBytes;
	w->src.y = c->srcY;
	w->src.z = c->srcZ;
	w->src.pitch = c->srcPitch;
	w->src.height = c->srcHeight;
	w->dst.x = c->dstXInBytes;
	w->dst.y = c->dstY;
	w->dst.z = c->dstZ;
	w->dst.pitch = c->dstPitch;
	w->dst.height = c->dstHeight;
	w->width = c->WidthInBytes;
	w->height = c->Height;
	w->depth = c->Depth;
}

static inline void mps_copy3d_geometry_out(CUDA_MEMCPY3D *c, const struct mps_copy3d *w)
{
	c->srcXInBytes = w->src.x;
	c->srcY = w->src.y;
	c->srcZ = w->src.z;
	c->srcPitch = w->src.pitch;
	c->srcHeight = w->src.height;
	c->dstXInBytes = w->dst.x;
	c->dstY = w->dst.y;
	c->dstZ = w->dst.z;
	c->dstPitch = w->dst.pitch;
	c->dstHeight = w->dst.height;
	c->WidthInBytes = w->width;
	c->Height = w->height;
	c->Depth = w->depth;
}

#endif
