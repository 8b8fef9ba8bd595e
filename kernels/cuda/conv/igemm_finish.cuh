// The second kernel of the mma.sync conv's workspace variants (kernels/cuda/conv/igemm.h):
// conv_splitk_finish_kernel sums split-K partial tiles (+ bias, activation, max-pool),
// conv_finish_kernel pools the fp16 output of an unfused launch (and finishes split-K when no
// finish tiling fits).  Both end in 16-byte fp16 stores with +0 in the padding channels.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/cuda/conv/epilogue.cuh"
#include "kernels/cuda/conv/igemm_params.h"
#include "kernels/cuda/pdl.cuh"

namespace cnnrt::cuda::conv_detail {

using epilogue::zero_channels_from;

// Finish pass of the unfused pool variant (and of split-K when no finish tiling fits, e.g. a
// pool window of > kFinishMaxPixels pixels): one thread per output pixel x
// 8-channel chunk of y = maxpool(v), where v(n, cy, cx) is read from the workspace ws:
//  * FP32 (split-K): v = clamp(sum over `splits` fp32 partial tiles [z][m][n_limit] + bias);
//    groups == 1, so the partial column is the output channel;
//  * fp16 (unfused pool): v = the finished fp16 conv output [m][out_cs] (bias + activation
//  applied).
// Without a pool p has kernel 1 / stride 1 / pad 0 and out = conv extent, so the same loop is
// the identity.  The max is taken in fp32 and rounded once (rounding is monotone, so this equals
// the fused kernel's max of rounded values).  Grid-stride, 16-byte loads and stores.
template <bool FP32>
__global__ void __launch_bounds__(256)
    conv_finish_kernel(const ConvParams p, const void* ws, int splits) {
  pdl_wait();
  const int chunks = p.out_cs / 8;
  const long long total = (long long)p.batch * p.out_h * p.out_w * chunks;
  const size_t split_stride = size_t(p.m_total) * p.n_limit;
  for (long long id = blockIdx.x * (long long)blockDim.x + threadIdx.x; id < total;
       id += (long long)gridDim.x * blockDim.x) {
    const int c8 = int(id % chunks);
    long long t = id / chunks;
    const int ox = int(t % p.out_w);
    t /= p.out_w;
    const int oy = int(t % p.out_h);
    const int n = int(t / p.out_h);
    const int col = c8 * 8;
    float best[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) best[j] = -INFINITY;
    float bias[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) bias[j] = FP32 ? p.bias[col + j] : 0.f;
    for (int i = 0; i < p.pool.pk_h; ++i) {
      const int cy = oy * p.pool.ps_h - p.pool.pp_h + i;
      if (cy < 0 || cy >= p.conv_h) continue;
      for (int jx = 0; jx < p.pool.pk_w; ++jx) {
        const int cx = ox * p.pool.ps_w - p.pool.pp_w + jx;
        if (cx < 0 || cx >= p.conv_w) continue;
        const long long m = ((long long)n * p.conv_h + cy) * p.conv_w + cx;
        float v[8];
        if constexpr (FP32) {
          const float* src = static_cast<const float*>(ws) + m * p.n_limit + col;
#pragma unroll
          for (int j = 0; j < 8; ++j) v[j] = bias[j];
          for (int z = 0; z < splits; ++z) {
            const float4 a = *reinterpret_cast<const float4*>(src + z * split_stride);
            const float4 b = *reinterpret_cast<const float4*>(src + z * split_stride + 4);
            v[0] += a.x;
            v[1] += a.y;
            v[2] += a.z;
            v[3] += a.w;
            v[4] += b.x;
            v[5] += b.y;
            v[6] += b.z;
            v[7] += b.w;
          }
          if (p.act.on) {
#pragma unroll
            for (int j = 0; j < 8; ++j) v[j] = fminf(fmaxf(v[j], p.act.lo), p.act.hi);
          }
          if (p.residual != nullptr) {  // no pool: m is the output pixel
            const __half* r = p.residual + m * p.out_cs + col;
#pragma unroll
            for (int j = 0; j < 8; ++j)
              v[j] = epilogue::activate(v[j] + __half2float(r[j]), p.residual_act);
          }
        } else {
          const uint4 raw =
              *reinterpret_cast<const uint4*>(static_cast<const __half*>(ws) + m * p.out_cs + col);
          const uint32_t w4[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
          for (int q = 0; q < 4; ++q) {
            __half2 h;
            *reinterpret_cast<uint32_t*>(&h) = w4[q];
            const float2 f = __half22float2(h);
            v[2 * q] = f.x;
            v[2 * q + 1] = f.y;
          }
        }
#pragma unroll
        for (int j = 0; j < 8; ++j) best[j] = fmaxf(best[j], v[j]);
      }
    }
    uint32_t packed[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const __half2 h = __floats2half2_rn(best[2 * q], best[2 * q + 1]);
      packed[q] = *reinterpret_cast<const uint32_t*>(&h);
    }
    const uint4 out =
        zero_channels_from(make_uint4(packed[0], packed[1], packed[2], packed[3]), col, p.out_c);
    *reinterpret_cast<uint4*>(p.y + ((size_t(n) * p.out_h + oy) * p.out_w + ox) * p.out_cs + col) =
        out;
  }
}

// Split-K finish, tiled (replaces conv_finish_kernel<true> for split-K; round 3).  Why: the
// per-output-pixel loop of conv_finish_kernel re-summed all `splits` partials for every tap of
// every pool window (conv5 at batch 1: 9 taps x 18 slices = 162 dependent iterations per thread,
// 1152 threads on 5 SMs: ~30 us).  Here one CTA owns a block of PR x PC pooled pixels x
// kFinishChunks*8 channels of one image: its threads first reduce the covering conv region
// (TH x TW pixels, each conv pixel exactly once, float4 granularity, 8 slices in flight per
// thread) into fp32 shared memory with bias + activation, then take the window maxima from there.
// Without a pool p has kernel 1 / stride 1 / pad 0, so the region is the tile itself.
// Launch: grid (tiles_x * tiles_y * batch, ceil(out_cs / (8 * kFinishChunks))), shared memory
// finish_smem_bytes(th, tw); the host keeps th * tw small (<= kFinishMaxPixels).
__global__ void __launch_bounds__(kFinishThreads)
    conv_splitk_finish_kernel(const ConvParams p, const float* ws, int splits) {
  pdl_wait();
  extern __shared__ __align__(16) float s_v[];  // [tile_th][tile_tw][kFinishChunks * 8]
  constexpr int kQuads = kFinishChunks * 2;     // float4s per pixel
  int t = blockIdx.x;
  const int tile_x = t % p.tile.tiles_x;
  t /= p.tile.tiles_x;
  const int tile_y = t % p.tile.tiles_y;
  const int n = t / p.tile.tiles_y;
  const int col0 = blockIdx.y * kFinishChunks * 8;
  const int cy0 = tile_y * p.tile.tile_ph * p.pool.ps_h - p.pool.pp_h;
  const int cx0 = tile_x * p.tile.tile_pw * p.pool.ps_w - p.pool.pp_w;
  const size_t split_stride = size_t(p.m_total) * p.n_limit;

  // Phase 1: reduce the slices of every conv pixel of the region once.
  for (int id = threadIdx.x; id < p.tile.tile_th * p.tile.tile_tw * kQuads; id += blockDim.x) {
    const int q = id % kQuads, px = id / kQuads;
    const int ly = px / p.tile.tile_tw, lx = px % p.tile.tile_tw;
    const int cy = cy0 + ly, cx = cx0 + lx, col = col0 + q * 4;
    if (cy < 0 || cy >= p.conv_h || cx < 0 || cx >= p.conv_w || col >= p.n_limit) continue;
    const long long m = ((long long)n * p.conv_h + cy) * p.conv_w + cx;
    const float* src = ws + m * p.n_limit + col;
    float4 r = *reinterpret_cast<const float4*>(p.bias + col);
    int z = 0;
    for (; z + kFinishUnroll <= splits; z += kFinishUnroll) {  // independent loads in flight
      float4 v[kFinishUnroll];
#pragma unroll
      for (int u = 0; u < kFinishUnroll; ++u)
        v[u] = *reinterpret_cast<const float4*>(src + (z + u) * split_stride);
#pragma unroll
      for (int u = 0; u < kFinishUnroll; ++u) {
        r.x += v[u].x;
        r.y += v[u].y;
        r.z += v[u].z;
        r.w += v[u].w;
      }
    }
    for (; z < splits; ++z) {
      const float4 v = *reinterpret_cast<const float4*>(src + z * split_stride);
      r.x += v.x;
      r.y += v.y;
      r.z += v.z;
      r.w += v.w;
    }
    if (p.act.on) {
      r.x = fminf(fmaxf(r.x, p.act.lo), p.act.hi);
      r.y = fminf(fmaxf(r.y, p.act.lo), p.act.hi);
      r.z = fminf(fmaxf(r.z, p.act.lo), p.act.hi);
      r.w = fminf(fmaxf(r.w, p.act.lo), p.act.hi);
    }
    if (p.residual != nullptr) {  // no pool: m is the output pixel
      const __half* res = p.residual + m * p.out_cs + col;
      r.x = epilogue::activate(r.x + __half2float(res[0]), p.residual_act);
      r.y = epilogue::activate(r.y + __half2float(res[1]), p.residual_act);
      r.z = epilogue::activate(r.z + __half2float(res[2]), p.residual_act);
      r.w = epilogue::activate(r.w + __half2float(res[3]), p.residual_act);
    }
    *reinterpret_cast<float4*>(s_v + size_t(px) * kQuads * 4 + q * 4) = r;
  }
  __syncthreads();

  // Phase 2: window maxima (fp32, rounded once), 16-byte fp16 stores.
  for (int id = threadIdx.x; id < p.tile.tile_ph * p.tile.tile_pw * kFinishChunks;
       id += blockDim.x) {
    const int c8 = id % kFinishChunks, o = id / kFinishChunks;
    const int px = o % p.tile.tile_pw, py = o / p.tile.tile_pw;
    const int oy = tile_y * p.tile.tile_ph + py, ox = tile_x * p.tile.tile_pw + px;
    const int col = col0 + c8 * 8;
    if (oy >= p.out_h || ox >= p.out_w || col >= p.out_cs) continue;
    float best[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) best[j] = -INFINITY;
    for (int i = 0; i < p.pool.pk_h; ++i) {
      const int ly = py * p.pool.ps_h + i, cy = cy0 + ly;
      if (cy < 0 || cy >= p.conv_h) continue;
      for (int jx = 0; jx < p.pool.pk_w; ++jx) {
        const int lx = px * p.pool.ps_w + jx, cx = cx0 + lx;
        if (cx < 0 || cx >= p.conv_w) continue;
        const float* v = s_v + size_t(ly * p.tile.tile_tw + lx) * kQuads * 4 + c8 * 8;
#pragma unroll
        for (int j = 0; j < 8; ++j) best[j] = fmaxf(best[j], v[j]);
      }
    }
    uint32_t packed[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const __half2 h = __floats2half2_rn(best[2 * q], best[2 * q + 1]);
      packed[q] = *reinterpret_cast<const uint32_t*>(&h);
    }
    const uint4 out =
        zero_channels_from(make_uint4(packed[0], packed[1], packed[2], packed[3]), col, p.out_c);
    *reinterpret_cast<uint4*>(p.y + ((size_t(n) * p.out_h + oy) * p.out_w + ox) * p.out_cs + col) =
        out;
  }
}

}  // namespace cnnrt::cuda::conv_detail
