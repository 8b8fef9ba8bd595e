// Hopper (sm_90a) TMA-fed, warp-specialised, persistent implicit-GEMM fp16 convolution: the
// kernel (conv_fp16_tma).  The design note is atop tma_conv.cu, the measurements and the lab it
// came from in docs/kernels/conv_fp16_tma.md; bench/conv_tma_lab.cu runs this same kernel.
//
// In short: A (activations) arrive by TMA im2col loads, B (the KRSC weight, a K-major
// [out_c][K] matrix) by TMA tiled loads, both 128-byte swizzled into a ring of STAGES stages
// guarded by full / empty mbarriers.  Warpgroup 0 is the producer (setmaxnreg 40, one thread
// issues every TMA), warpgroups 1-2 are consumers (setmaxnreg 232) that only issue wgmma and run
// the epilogue from their accumulator registers: bias, (residual,) clamp, fp16, a 4x4 word
// transpose across each quad so every lane stores 16 contiguous bytes (a fused MaxPool instead
// stages the tile in shared memory and reduces whole pooled rows: pool_epilogue).  Persistent grid,
// static scheduler (unit += number of clusters), units ordered n fastest.
#pragma once

#include <cuda.h>
#include <cuda_fp16.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/conv/epilogue.cuh"
#include "kernels/cuda/conv/epilogue_params.h"
#include "kernels/cuda/conv/ptx.cuh"

namespace cnnrt::cuda::tma_detail {

constexpr int kThreads = 384;  // producer warpgroup + 2 consumer warpgroups
constexpr int kBK = 64;        // halves per k-tile: one 128-byte swizzle row
// setmaxnreg: 128 x 40 + 256 x 232 = 64512 <= 65536 only when the kernel starts at exactly
// 168 registers per thread (launch bounds 384, 1); the host checks the image's count.
constexpr int kProducerRegs = 40, kConsumerRegs = 232, kEntryRegs = 168;

// The fused MaxPool's tiling (POOL instances; the host builds it, tma_conv.cu's design note).  A
// tile owns `count` consecutive pooled rows g (global: image g / out_h, row g % out_h) and
// computes the BM conv pixels from the first conv row under its first pooled row on: one
// contiguous M range (the im2col box crosses image boundaries), which the host checked covers
// every window of its pooled rows.  Tiles repeat with a period of whole images: tile t is entry
// t % period_tiles of the table, shifted by (t / period_tiles) * period_rows pooled rows.
constexpr int kMaxPoolTiles = 64;
struct TmaPoolTiling {
  int out_h = 0, out_w = 0;  // pooled extent
  int pk_h = 1, pk_w = 1, ps_h = 1, ps_w = 1, pp_h = 0, pp_w = 0;
  int rows_total = 0;  // batch * out_h (set per launch)
  int period_rows = 0, period_tiles = 0;
  int first[kMaxPoolTiles] = {}, count[kMaxPoolTiles] = {};
};

// Everything the kernel reads besides the two tensor maps.  GEMM view: M = batch * conv_h *
// conv_w output pixels, N = out_c, K = kh * kw * in_c in (kh, kw, c) order, in_c % 64 == 0.
struct TmaConvParams {
  const float* bias = nullptr;       // [out_c] (zeros when the layer has none)
  __half* y = nullptr;               // [m][out_c]
  const __half* residual = nullptr;  // [m][out_c], RESIDUAL instances only
  int m = 0, out_c = 0;
  int conv_h = 0, conv_w = 0;
  int sh = 1, sw = 1, pad_top = 0, pad_left = 0;
  int kw = 1;
  int c_blocks = 0, k_tiles = 0;  // in_c / 64, kh * kw * c_blocks
  int n_tiles = 0, units = 0;     // N tiles, (cluster m-block group, n tile) pairs
  EpilogueClamp act;              // after the bias (and the residual)
  TmaPoolTiling pool;             // POOL instances only
};

// Pooled row g's conv rows as an M range [lo, hi) of whole conv rows (clipped to its image).
__host__ __device__ __forceinline__ int pool_conv_lo(const TmaConvParams& p, int g) {
  const int img = g / p.pool.out_h, cy = (g - img * p.pool.out_h) * p.pool.ps_h - p.pool.pp_h;
  return (img * p.conv_h + (cy > 0 ? cy : 0)) * p.conv_w;
}
__host__ __device__ __forceinline__ int pool_conv_hi(const TmaConvParams& p, int g) {
  const int img = g / p.pool.out_h;
  const int end = (g - img * p.pool.out_h) * p.pool.ps_h - p.pool.pp_h + p.pool.pk_h;
  return (img * p.conv_h + (end < p.conv_h ? end : p.conv_h)) * p.conv_w;
}
// Tile t of the pooled tiling: its first pooled row and how many it owns (the batch's last tile
// may own fewer).
__host__ __device__ __forceinline__ void pool_tile_rows(const TmaPoolTiling& t, int tile, int& g0,
                                                        int& count) {
  const int period = tile / t.period_tiles, j = tile - period * t.period_tiles;
  g0 = period * t.period_rows + t.first[j];
  count = t.rows_total - g0 < t.count[j] ? t.rows_total - g0 : t.count[j];
}

template <int BM, int BN, int STAGES, int CL>
struct TmaTile {
  static constexpr uint32_t kA = BM * 128, kB = BN * 128, kStage = kA + kB;
  static constexpr size_t kSmem = 1024 + size_t(STAGES) * kStage;  // +1024: ring alignment
  static constexpr int kMI = BM / 128;  // m64 blocks per consumer warpgroup
  // Fused pool: the epilogue stages BM rows x kPoolChunk columns at a time (rows of kPoolChunk + 8
  // halves: conflict-free half2 stores) after the ring; 32 columns at BM 256 keep 256x128 s4
  // within 227 KB.
  static constexpr int kPoolChunk = BM == 256 ? 32 : 64;
  static constexpr size_t kStaging = size_t(BM) * (kPoolChunk + 8) * 2;
};

#ifdef CNNRT_WGMMA_DEVICE
using namespace cnnrt::cuda::ptx;

__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
               : "memory");
}
// Arrive on the barrier at the same shared offset in CTA `cta` of the cluster.  CTA-scope
// release (the default): with .release.cluster the multicast variants ran at half speed (a
// cluster-scope fence per k-tile; docs/kernels/conv_fp16_tma.md).
__device__ __forceinline__ void mbar_arrive_cluster(uint32_t bar, uint32_t cta) {
  asm volatile(
      "{\n.reg .b32 ra;\nmapa.shared::cluster.u32 ra, %0, %1;\n"
      "mbarrier.arrive.shared::cluster.b64 _, [ra];\n}\n" ::"r"(bar),
      "r"(cta)
      : "memory");
}
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const CUtensorMap* map, int c0, int c1,
                                            uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3}], [%4];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
}
__device__ __forceinline__ void tma_load_2d_mc(uint32_t dst, const CUtensorMap* map, int c0, int c1,
                                               uint32_t bar, uint16_t mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      ".multicast::cluster [%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(bar), "h"(mask)
      : "memory");
}
// 128 pixels x 64 channels starting at the output pixel whose tap-(0,0) input is (w, h) of
// image n, shifted by the tap (off_w, off_h); zeros outside the bounding box / the tensor.
__device__ __forceinline__ void tma_load_im2col(uint32_t dst, const CUtensorMap* map, int c, int w,
                                                int h, int n, uint16_t off_w, uint16_t off_h,
                                                uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4, %5}], [%6], {%7, %8};\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c), "r"(w), "r"(h), "r"(n), "r"(bar), "h"(off_w),
      "h"(off_h)
      : "memory");
}
// 4x4 transpose of 32-bit words across the 4 lanes of a quad (two butterfly stages): lane q's
// w[t] becomes lane t's former w[q], so lane q ends up with 8 consecutive fp16 columns.
__device__ __forceinline__ void quad_transpose(uint32_t (&w)[4], int q) {
#pragma unroll
  for (int bit = 2; bit >= 1; bit >>= 1) {
    const bool hi = (q & bit) != 0;
#pragma unroll
    for (int t = 0; t < 4; ++t) {
      if (t & bit) continue;
      const uint32_t recv = __shfl_xor_sync(0xffffffffu, hi ? w[t] : w[t | bit], bit);
      if (hi)
        w[t] = recv;
      else
        w[t | bit] = recv;
    }
  }
}
__device__ __forceinline__ void cluster_sync_all() {
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
}
__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}

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
      const int img = g / t.out_h, py = g - img * t.out_h;
      __half2 best[4] = {neg_inf, neg_inf, neg_inf, neg_inf};
      for (int a = 0; a < t.pk_h; ++a) {
        const int cy = py * t.ps_h - t.pp_h + a;
        if (cy < 0 || cy >= p.conv_h) continue;
        for (int b = 0; b < t.pk_w; ++b) {
          const int cx = px * t.ps_w - t.pp_w + b;
          if (cx < 0 || cx >= p.conv_w) continue;
          const int local = (img * p.conv_h + cy) * p.conv_w + cx - m_first;
          const uint4 cell = *reinterpret_cast<const uint4*>(stg + local * kPitch + 8 * v);
          const uint32_t w4[4] = {cell.x, cell.y, cell.z, cell.w};
#pragma unroll
          for (int k = 0; k < 4; ++k) {
            __half2 hv;
            *reinterpret_cast<uint32_t*>(&hv) = w4[k];
            best[k] = __hmax2(best[k], hv);
          }
        }
      }
      uint4 out;
      out.x = *reinterpret_cast<uint32_t*>(&best[0]);
      out.y = *reinterpret_cast<uint32_t*>(&best[1]);
      out.z = *reinterpret_cast<uint32_t*>(&best[2]);
      out.w = *reinterpret_cast<uint32_t*>(&best[3]);
      *reinterpret_cast<uint4*>(p.y + (size_t(g) * t.out_w + px) * p.out_c + col) = out;
    }
  }
}
#endif  // CNNRT_WGMMA_DEVICE

// BM x BN tiles, a ring of STAGES, clusters of CL CTAs along M (weight tile multicast), RESIDUAL:
// y = clamp(conv + bias + r) instead of clamp(conv + bias); POOL: y = maxpool(clamp(conv + bias))
// over p.pool's tiling (dynamic shared memory kSmem + kStaging).
template <int BM, int BN, int STAGES, int CL, bool RESIDUAL, bool POOL = false>
__global__ void __launch_bounds__(kThreads, 1)
    conv_tma_kernel(const __grid_constant__ CUtensorMap tmap_x,
                    const __grid_constant__ CUtensorMap tmap_w, const TmaConvParams p) {
#ifdef CNNRT_WGMMA_DEVICE
  using C = TmaTile<BM, BN, STAGES, CL>;
  static_assert(!POOL || (CL == 1 && !RESIDUAL), "the fused pool: no cluster, no residual");
  static_assert(!POOL || BN % C::kPoolChunk == 0, "whole staging chunks");
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  __shared__ __align__(8) uint64_t full_bar[STAGES], empty_bar[STAGES];
  const uint32_t ring = (smem_u32(smem_raw) + 1023u) & ~1023u;
  const int wg = threadIdx.x / 128;
  const uint32_t rank = CL > 1 ? cluster_rank() : 0;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbarrier_init(smem_u32(&full_bar[s]), 1);
      mbarrier_init(smem_u32(&empty_bar[s]), 2 * CL);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  if (CL > 1)
    cluster_sync_all();
  else
    __syncthreads();
  const int first = blockIdx.x / CL, step = gridDim.x / CL;

  if (wg == 0) {  // ---------------- producer warpgroup: one thread issues every TMA
    setmaxnreg_dec<kProducerRegs>();
    if (threadIdx.x == 0) {
      int stage = 0;
      uint32_t phase = 0;
      const int pix = p.conv_h * p.conv_w;
      for (int u = first; u < p.units; u += step) {
        const int m_blk = (u / p.n_tiles) * CL + int(rank), n0 = (u % p.n_tiles) * BN;
        int m_first = m_blk * BM;
        if (POOL) {
          int g0, count;
          pool_tile_rows(p.pool, m_blk, g0, count);
          m_first = pool_conv_lo(p, g0);
        }
        int aw[C::kMI], ah[C::kMI], an[C::kMI];
#pragma unroll
        for (int i = 0; i < C::kMI; ++i) {
          const int m = m_first + 128 * i, img = m / pix, rem = m - img * pix;
          const int oy = rem / p.conv_w, ox = rem - oy * p.conv_w;
          aw[i] = ox * p.sw - p.pad_left;
          ah[i] = oy * p.sh - p.pad_top;
          an[i] = img;
        }
        int cb = 0, r = 0, s = 0;
        for (int kt = 0; kt < p.k_tiles; ++kt) {
          mbarrier_wait_parity(smem_u32(&empty_bar[stage]), phase ^ 1);
          const uint32_t fb = smem_u32(&full_bar[stage]);
          mbar_expect_tx(fb, C::kStage);
          const uint32_t a_dst = ring + stage * C::kStage, b_dst = a_dst + C::kA;
#pragma unroll
          for (int i = 0; i < C::kMI; ++i)
            tma_load_im2col(a_dst + i * 16384, &tmap_x, cb * kBK, aw[i], ah[i], an[i], uint16_t(s),
                            uint16_t(r), fb);
          if (CL == 1)
            tma_load_2d(b_dst, &tmap_w, kt * kBK, n0, fb);
          else
            tma_load_2d_mc(b_dst + rank * (C::kB / CL), &tmap_w, kt * kBK,
                           n0 + int(rank) * (BN / CL), fb, uint16_t((1u << CL) - 1));
          if (++cb == p.c_blocks) {
            cb = 0;
            if (++s == p.kw) {
              s = 0;
              ++r;
            }
          }
          if (++stage == STAGES) {
            stage = 0;
            phase ^= 1;
          }
        }
      }
    }
  } else {  // ---------------- consumer warpgroups: wgmma, then the register epilogue
    setmaxnreg_inc<kConsumerRegs>();
    const int cw = wg - 1, warp = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32;
    float acc[C::kMI][BN / 2];
    int stage = 0;
    uint32_t phase = 0;
    auto release = [&](int st) {
      if (threadIdx.x % 128 == 0) {
        if (CL == 1)
          mbarrier_arrive(smem_u32(&empty_bar[st]));
        else
          for (int c = 0; c < CL; ++c) mbar_arrive_cluster(smem_u32(&empty_bar[st]), uint32_t(c));
      }
    };
    for (int u = first; u < p.units; u += step) {
      const int m_blk = (u / p.n_tiles) * CL + int(rank), n0 = (u % p.n_tiles) * BN;
#pragma unroll
      for (int i = 0; i < C::kMI; ++i)
#pragma unroll
        for (int j = 0; j < BN / 2; ++j) acc[i][j] = 0.f;
      int prev = -1;
      for (int kt = 0; kt < p.k_tiles; ++kt) {
        mbarrier_wait_parity(smem_u32(&full_bar[stage]), phase);
        const uint32_t a = ring + stage * C::kStage + cw * (BM / 2) * 128;
        const uint32_t b = ring + stage * C::kStage + C::kA;
#pragma unroll
        for (int i = 0; i < C::kMI; ++i) fence_operands(acc[i]);
        wgmma_fence();
#pragma unroll
        for (int k16 = 0; k16 < 4; ++k16)
#pragma unroll
          for (int i = 0; i < C::kMI; ++i)
            Mma<BN>::run(acc[i], make_desc(a + i * 8192 + k16 * 32), make_desc(b + k16 * 32));
        wgmma_commit();
#pragma unroll
        for (int i = 0; i < C::kMI; ++i) fence_operands(acc[i]);
        wgmma_wait<1>();
        if (prev >= 0) release(prev);
        prev = stage;
        if (++stage == STAGES) {
          stage = 0;
          phase ^= 1;
        }
      }
      wgmma_wait<0>();
#pragma unroll
      for (int i = 0; i < C::kMI; ++i) fence_operands(acc[i]);
      release(prev);
      if constexpr (POOL) {
        pool_epilogue<BM, BN, C>(acc, p,
                                 smem_raw + (ring - smem_u32(smem_raw)) + STAGES * C::kStage, m_blk,
                                 n0, cw, warp, lane);
        continue;
      }
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
      const int q = lane % 4;
#pragma unroll
      for (int i = 0; i < C::kMI; ++i) {
        const int row0 = m_blk * BM + cw * (BM / 2) + i * 64 + warp * 16 + lane / 4;
#pragma unroll
        for (int g0 = 0; g0 < kColGroups; g0 += kGroup) {
          uint4 res[kGroup][2];
          if (RESIDUAL) {
#pragma unroll
            for (int gg = 0; gg < kGroup; ++gg)
#pragma unroll
              for (int h = 0; h < 2; ++h) {
                const int row = row0 + 8 * h, col = n0 + 8 * (4 * (g0 + gg) + q);
                res[gg][h] = row < p.m && col < p.out_c
                                 ? __ldg(reinterpret_cast<const uint4*>(
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
              const int col = n0 + 8 * (4 * jg + t) + 2 * q;
              bv[t] = col < p.out_c ? *reinterpret_cast<const float2*>(p.bias + col)
                                    : make_float2(0.f, 0.f);
            }
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              uint32_t w[4];
#pragma unroll
              for (int t = 0; t < 4; ++t) {
                const int j = 4 * jg + t;
                float v0 = acc[i][4 * j + 2 * h] + bv[t].x,
                      v1 = acc[i][4 * j + 2 * h + 1] + bv[t].y;
                if (!RESIDUAL) {
                  v0 = epilogue::activate(v0, p.act);
                  v1 = epilogue::activate(v1, p.act);
                }
                __half2 v = __floats2half2_rn(v0, v1);
                w[t] = *reinterpret_cast<uint32_t*>(&v);
              }
              quad_transpose(w, q);
              const int row = row0 + 8 * h, col = n0 + 8 * (4 * jg + q);
              if (row < p.m && col < p.out_c) {
                const size_t at = size_t(row) * p.out_c + col;
                uint4 out = make_uint4(w[0], w[1], w[2], w[3]);
                if (RESIDUAL)
                  out = epilogue::add_residual(out, reinterpret_cast<const __half*>(&res[gg][h]),
                                               p.act);
                *reinterpret_cast<uint4*>(p.y + at) = out;
              }
            }
          }
        }
      }
    }
  }
  if (CL > 1) cluster_sync_all();  // no CTA leaves while its peer may still arrive on its barriers
#endif
}

}  // namespace cnnrt::cuda::tma_detail
