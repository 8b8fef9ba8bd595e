// Hopper (sm_90a) TMA-fed, warp-specialised, persistent implicit-GEMM fp16 convolution: the
// kernel (conv_fp16_tma).  The host side and its design note are tma_conv.cu, the measurements
// and the lab it came from docs/kernels/conv_fp16_tma.md; bench/conv_tma_lab.cu runs this same
// kernel.
//
// DESIGN NOTE
// * The mainloop is tma_mainloop.cuh's tma_conv_mainloop (the one the int8 kernel instantiates
//   too), with fp16 elements (TmaF16Rows<RB>: RB / 2 halves per RB-byte swizzled k-tile row, RB
//   128 where in_c % 64 == 0 and 64 where in_c % 64 == 32; wgmma m64nNk16, fp32 accumulators;
//   the epilogues do not depend on RB): A by TMA im2col boxes, B (the KRSC weight, a K-major
//   [out_c][K] matrix) by TMA tiled boxes into an mbarrier ring, one producer warpgroup
//   (setmaxnreg 40), two wgmma consumer warpgroups (setmaxnreg 232), a persistent grid.
// * What is fp16's own is the epilogue (TmaF16Epilogue), from the accumulator registers: bias,
//   (residual,) clamp, fp16, a 4x4 word transpose across each quad so every lane stores 16
//   contiguous bytes; a fused MaxPool instead stages the tile in shared memory after the ring and
//   reduces whole pooled rows (pool_epilogue), and its tiles start at the first conv row under
//   their first pooled row (first_row: the host's TmaPoolTiling, tma_pool_tiling.h, which the
//   int8 kernel's fused pool shares), which is all the mainloop sees of the pool.
#pragma once

#include <cuda.h>
#include <cuda_fp16.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/conv/epilogue.cuh"
#include "kernels/cuda/conv/epilogue_params.h"
#include "kernels/cuda/conv/ptx.cuh"
#include "kernels/cuda/conv/tma_mainloop.cuh"
#include "kernels/cuda/conv/tma_pool_tiling.h"
#include "kernels/cuda/pdl.cuh"

namespace cnnrt::cuda::tma_detail {

// Everything the kernel reads besides the two tensor maps.  GEMM view: M = batch * conv_h *
// conv_w output pixels, N = out_c, K = kh * kw * in_c in (kh, kw, c) order, in_c a multiple of
// the k-tile row's halves (64, or 32 for 64-byte rows).
struct TmaConvParams {
  const float* bias = nullptr;       // [out_c] (zeros when the layer has none)
  __half* y = nullptr;               // [m][out_c]
  const __half* residual = nullptr;  // [m][out_c], RESIDUAL instances only
  int m = 0, out_c = 0;
  int conv_h = 0, conv_w = 0;
  int sh = 1, sw = 1, pad_top = 0, pad_left = 0;
  int kw = 1;
  int c_blocks = 0, k_tiles = 0;  // in_c / (halves per k-tile row), kh * kw * c_blocks
  int n_tiles = 0, units = 0;     // N tiles, (cluster m-block group, n tile) pairs
  EpilogueClamp act;              // after the bias (and the residual)
  TmaPoolTiling pool;             // POOL instances only (tma_pool_tiling.h)
};

// The fp16 ring (TmaRing) of RB-byte k-tile rows plus the fused pool's staging.  CL (cluster
// size) only names the lab's multicast variants: the ring is the same.
template <int BM, int BN, int STAGES, int CL, int RB = 128>
struct TmaTile : TmaRing<TmaF16Rows<RB>, BM, BN, STAGES> {
  // Fused pool: the epilogue stages BM rows x kPoolChunk columns at a time (rows of kPoolChunk + 8
  // halves: conflict-free half2 stores) after the ring; 32 columns at BM 256 keep 256x128 s4
  // within 227 KB.
  static constexpr int kPoolChunk = BM == 256 ? 32 : 64;
  static constexpr size_t kStaging = size_t(BM) * (kPoolChunk + 8) * 2;
};

#ifdef CNNRT_WGMMA_DEVICE
// The fused-MaxPool epilogue of one tile, run by both consumer warpgroups (256 threads, named
// barrier 1): per chunk of kPoolChunk columns, bias + clamp in fp32 -> fp16 into the staging tile
// (row = the tile's M row), then every (pooled pixel, 8 channels) of the tile's pooled rows takes
// the max of its window's staged cells with __hmax2 (max after fp16 rounding = the rounded fp32
// max: rounding is monotone), the conv -> bias -> act -> pool order of the reference.  Window
// cells outside the conv output (pool padding, ceil_mode overhang) are skipped (-inf); every
// window holds a real cell.  The first barrier keeps the previous chunk's (or tile's) readers
// ahead of the new writes.
template <int BM, int BN, typename C>
__device__ __forceinline__ void pool_epilogue(const float (&acc)[C::kMI][BN / 2],
                                              const TmaConvParams& p, uint8_t* staging_bytes,
                                              int m_blk, int n0, int cw, int warp, int lane) {
  constexpr int kChunk = C::kPoolChunk, kPitch = kChunk + 8, kVecs = kChunk / 8;
  __half* stg = reinterpret_cast<__half*>(staging_bytes);
  const TmaPoolTiling& t = p.pool;
  int g0, count;
  pool_tile_rows(t, m_blk, g0, count);
  const int m_first = pool_conv_lo(p, g0), q = lane % 4, tid = threadIdx.x - 128;
  const __half2 neg_inf = __float2half2_rn(-INFINITY);
#pragma unroll
  for (int c0 = 0; c0 < BN; c0 += kChunk) {
    ptx::named_barrier_sync(1, 256);
#pragma unroll
    for (int i = 0; i < C::kMI; ++i) {
      const int row = cw * (BM / 2) + i * 64 + warp * 16 + lane / 4;
#pragma unroll
      for (int jj = 0; jj < kVecs; ++jj) {
        const int j = c0 / 8 + jj, col = n0 + 8 * j + 2 * q;
        const float2 bv =
            col < p.out_c ? *reinterpret_cast<const float2*>(p.bias + col) : make_float2(0.f, 0.f);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const float v0 = epilogue::activate(acc[i][4 * j + 2 * h] + bv.x, p.act),
                      v1 = epilogue::activate(acc[i][4 * j + 2 * h + 1] + bv.y, p.act);
          *reinterpret_cast<__half2*>(stg + (row + 8 * h) * kPitch + 8 * jj + 2 * q) =
              __floats2half2_rn(v0, v1);
        }
      }
    }
    ptx::named_barrier_sync(1, 256);
    for (int id = tid; id < count * t.out_w * kVecs; id += 256) {
      const int v = id % kVecs, rest = id / kVecs, px = rest % t.out_w, g = g0 + rest / t.out_w;
      const int col = n0 + c0 + 8 * v;
      if (col >= p.out_c) continue;
      __half2 best[4] = {neg_inf, neg_inf, neg_inf, neg_inf};
      for_each_window_cell(p, g, px, m_first, [&](int local) {
        const uint4 cell = *reinterpret_cast<const uint4*>(stg + local * kPitch + 8 * v);
        const uint32_t w4[4] = {cell.x, cell.y, cell.z, cell.w};
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          __half2 hv;
          *reinterpret_cast<uint32_t*>(&hv) = w4[k];
          best[k] = __hmax2(best[k], hv);
        }
      });
      uint4 out;
      out.x = *reinterpret_cast<uint32_t*>(&best[0]);
      out.y = *reinterpret_cast<uint32_t*>(&best[1]);
      out.z = *reinterpret_cast<uint32_t*>(&best[2]);
      out.w = *reinterpret_cast<uint32_t*>(&best[3]);
      *reinterpret_cast<uint4*>(p.y + (size_t(g) * t.out_w + px) * p.out_c + col) = out;
    }
  }
}
// The register epilogue of one tile (no pool), by both consumer warpgroups.
template <int BM, int BN, bool RESIDUAL, int MI>
__device__ __forceinline__ void register_epilogue(const float (&acc)[MI][BN / 2],
                                                  const TmaConvParams& p, const TmaUnit& u) {
  // Epilogue: register layout of m64nN: warp w rows 16w..16w+15; reg 4j+2h+{0,1} = row
  // lane/4 + 8h, cols 8j + 2(lane%4) + {0,1}.  bias (+ clamp) in fp32 -> fp16 pairs, quad
  // transpose, one 16-byte store per lane (a quad writes 64 contiguous bytes of a row).
  // With a residual the pairs stay unclamped; epilogue::add_residual adds r (16-byte loads at
  // the stores' offsets) and clamps, the convention of every conv with a native residual.
  // The residual of kGroup column groups (both row halves) is loaded before any of it is
  // used: one load at a time left the epilogue latency-bound (ResNet-50's 1x1 + add layers
  // ran 3x the time of the same conv without the add, H100).
  constexpr int kColGroups = BN / 32;
  constexpr int kGroup = kColGroups % 4 == 0 ? 4 : kColGroups % 3 == 0 ? 3 : 1;
  const int q = u.lane % 4;
#pragma unroll
  for (int i = 0; i < MI; ++i) {
    const int row0 = u.m_blk * BM + u.cw * (BM / 2) + i * 64 + u.warp * 16 + u.lane / 4;
#pragma unroll
    for (int g0 = 0; g0 < kColGroups; g0 += kGroup) {
      uint4 res[kGroup][2];
      if (RESIDUAL) {
#pragma unroll
        for (int gg = 0; gg < kGroup; ++gg)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int row = row0 + 8 * h, col = u.n0 + 8 * (4 * (g0 + gg) + q);
            res[gg][h] = row < p.m && col < p.out_c ? __ldg(reinterpret_cast<const uint4*>(
                                                          p.residual + size_t(row) * p.out_c + col))
                                                    : make_uint4(0, 0, 0, 0);
          }
      }
#pragma unroll
      for (int gg = 0; gg < kGroup; ++gg) {
        const int jg = g0 + gg;
        float2 bv[4];
#pragma unroll
        for (int t = 0; t < 4; ++t) {
          const int col = u.n0 + 8 * (4 * jg + t) + 2 * q;
          bv[t] = col < p.out_c ? *reinterpret_cast<const float2*>(p.bias + col)
                                : make_float2(0.f, 0.f);
        }
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          uint32_t w[4];
#pragma unroll
          for (int t = 0; t < 4; ++t) {
            const int j = 4 * jg + t;
            float v0 = acc[i][4 * j + 2 * h] + bv[t].x, v1 = acc[i][4 * j + 2 * h + 1] + bv[t].y;
            if (!RESIDUAL) {
              v0 = epilogue::activate(v0, p.act);
              v1 = epilogue::activate(v1, p.act);
            }
            __half2 v = __floats2half2_rn(v0, v1);
            w[t] = *reinterpret_cast<uint32_t*>(&v);
          }
          quad_transpose(w, q);
          const int row = row0 + 8 * h, col = u.n0 + 8 * (4 * jg + q);
          if (row < p.m && col < p.out_c) {
            const size_t at = size_t(row) * p.out_c + col;
            uint4 out = make_uint4(w[0], w[1], w[2], w[3]);
            if (RESIDUAL)
              out =
                  epilogue::add_residual(out, reinterpret_cast<const __half*>(&res[gg][h]), p.act);
            *reinterpret_cast<uint4*>(p.y + at) = out;
          }
        }
      }
    }
  }
}

// conv_fp16_tma's side of tma_conv_mainloop: where a tile's rows start and what its accumulators
// become.  POOL: tiles of the host's pooled tiling (p.pool), the staged pool epilogue (after the
// ring of RB-byte rows).
template <int BM, int BN, int STAGES, bool RESIDUAL, bool POOL, int RB>
struct TmaF16Epilogue {
  static __device__ __forceinline__ int first_row(const TmaConvParams& p, int m_blk) {
    int m_first = m_blk * BM;
    if (POOL) {
      int g0, count;
      pool_tile_rows(p.pool, m_blk, g0, count);
      m_first = pool_conv_lo(p, g0);
    }
    return m_first;
  }
  template <int MI>
  static __device__ __forceinline__ void store(const float (&acc)[MI][BN / 2],
                                               const TmaConvParams& p, const TmaUnit& u) {
    if constexpr (POOL)
      pool_epilogue<BM, BN, TmaTile<BM, BN, STAGES, 1, RB>>(acc, p, u.after_ring, u.m_blk, u.n0,
                                                            u.cw, u.warp, u.lane);
    else
      register_epilogue<BM, BN, RESIDUAL>(acc, p, u);
  }
};
#endif  // CNNRT_WGMMA_DEVICE

// BM x BN tiles, a ring of STAGES, clusters of CL CTAs along M (weight tile multicast), RESIDUAL:
// y = clamp(conv + bias + r) instead of clamp(conv + bias); POOL: y = maxpool(clamp(conv + bias))
// over p.pool's tiling (dynamic shared memory kSmem + kStaging); RB: the k-tile row's bytes (128:
// in_c % 64 == 0, the lab's and the original instances; 64: in_c % 64 == 32).
template <int BM, int BN, int STAGES, int CL, bool RESIDUAL, bool POOL = false, int RB = 128>
__global__ void __launch_bounds__(kThreads, 1)
    conv_tma_kernel(const __grid_constant__ CUtensorMap tmap_x,
                    const __grid_constant__ CUtensorMap tmap_w, const TmaConvParams p) {
  pdl_wait();
#ifdef CNNRT_WGMMA_DEVICE
  static_assert(!POOL || (CL == 1 && !RESIDUAL), "the fused pool: no cluster, no residual");
  static_assert(!POOL || BN % TmaTile<BM, BN, STAGES, CL, RB>::kPoolChunk == 0,
                "whole staging chunks");
  tma_conv_mainloop<TmaF16Rows<RB>, BM, BN, STAGES, CL,
                    TmaF16Epilogue<BM, BN, STAGES, RESIDUAL, POOL, RB>>(tmap_x, tmap_w, p);
#endif
}

}  // namespace cnnrt::cuda::tma_detail
