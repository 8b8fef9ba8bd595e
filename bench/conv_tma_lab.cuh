// conv_tma_lab.cuh: the device side of bench/conv_tma_lab.cu (the design note is there): the TMA
// / mbarrier / cluster PTX wrappers this lab adds to kernels/cuda/conv/ptx.cuh, and the
// warp-specialised persistent TMA + wgmma conv kernel.
#pragma once

#include <cuda.h>
#include <cuda_fp16.h>

#include <cstdint>

#ifdef LAB_DEBUG
#define CNNRT_WGMMA_WAIT_LIMIT (1ull << 30)
#endif
#include "../kernels/cuda/conv/ptx.cuh"

struct Geom {
  int n, h, w, c, oc, kh, kw, stride, pad, oh, ow;
  int m, k, k_tiles, c_blocks;
  int m_tiles, n_tiles, units;  // units: (cluster m-block group, n block) pairs
};

namespace lab {
#ifdef CNNRT_WGMMA_DEVICE
using namespace cnnrt::cuda::ptx;

__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
               : "memory");
}
// Arrive on the barrier at the same shared offset in CTA `cta` of the cluster.
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
__device__ __forceinline__ void tma_load_2d_mc(uint32_t dst, const CUtensorMap* map, int c0,
                                               int c1, uint32_t bar, uint16_t mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      ".multicast::cluster [%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(bar), "h"(mask)
      : "memory");
}
// 128 pixels x 64 channels starting at output pixel whose tap-(0,0) input is (w, h) of image n,
// shifted by the tap (off_w, off_h); zero outside the bounding box / the tensor.
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
      if (hi) w[t] = recv; else w[t | bit] = recv;
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
#endif

template <int BM, int BN, int STAGES, int CL, int EPI>
struct Cfg {
  static constexpr uint32_t kA = BM * 128, kB = BN * 128, kStage = kA + kB;
  static constexpr size_t kSmem = 1024 + size_t(STAGES) * kStage;
  static constexpr int kMI = BM / 128;  // m64 blocks per consumer warpgroup
};

template <int BM, int BN, int STAGES, int CL, int EPI>
__global__ void __launch_bounds__(384, 1)
    conv_tma_kernel(const __grid_constant__ CUtensorMap tmap_x,
                    const __grid_constant__ CUtensorMap tmap_w, const float* __restrict__ bias,
                    __half* __restrict__ y, Geom g) {
#ifdef CNNRT_WGMMA_DEVICE
  using C = Cfg<BM, BN, STAGES, CL, EPI>;
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
  if (CL > 1) cluster_sync_all(); else __syncthreads();
  const int first = blockIdx.x / CL, step = gridDim.x / CL;

  if (wg == 0) {  // ---------------- producer warpgroup: one thread issues every TMA
    setmaxnreg_dec<40>();
    if (threadIdx.x == 0) {
      int stage = 0;
      uint32_t phase = 0;
      const int pix = g.oh * g.ow;
      for (int u = first; u < g.units; u += step) {
        const int m_blk = (u / g.n_tiles) * CL + int(rank), n0 = (u % g.n_tiles) * BN;
        int aw[C::kMI * 2], ah[C::kMI * 2], an[C::kMI * 2];
#pragma unroll
        for (int i = 0; i < BM / 128; ++i) {
          const int m = m_blk * BM + 128 * i, img = m / pix, rem = m - img * pix;
          const int oy = rem / g.ow, ox = rem - oy * g.ow;
          aw[i] = ox * g.stride - g.pad;
          ah[i] = oy * g.stride - g.pad;
          an[i] = img;
        }
        int cb = 0, r = 0, s = 0;
        for (int kt = 0; kt < g.k_tiles; ++kt) {
          mbarrier_wait_parity(smem_u32(&empty_bar[stage]), phase ^ 1);
          const uint32_t fb = smem_u32(&full_bar[stage]);
          mbar_expect_tx(fb, C::kStage);
          const uint32_t a_dst = ring + stage * C::kStage, b_dst = a_dst + C::kA;
#pragma unroll
          for (int i = 0; i < BM / 128; ++i)
            tma_load_im2col(a_dst + i * 16384, &tmap_x, cb * 64, aw[i], ah[i], an[i], uint16_t(s),
                            uint16_t(r), fb);
          if (CL == 1)
            tma_load_2d(b_dst, &tmap_w, kt * 64, n0, fb);
          else
            tma_load_2d_mc(b_dst + rank * (C::kB / CL), &tmap_w, kt * 64, n0 + int(rank) * (BN / CL),
                           fb, uint16_t((1u << CL) - 1));
          if (++cb == g.c_blocks) {
            cb = 0;
            if (++s == g.kw) { s = 0; ++r; }
          }
          if (++stage == STAGES) { stage = 0; phase ^= 1; }
        }
      }
    }
  } else {  // ---------------- consumer warpgroups: wgmma only
    setmaxnreg_inc<232>();
    const int cw = wg - 1, warp = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32;
    float acc[C::kMI][BN / 2];
    int stage = 0;
    uint32_t phase = 0;
    auto release = [&](int st) {
      if (threadIdx.x % 128 == 0) {
        if (CL == 1) mbarrier_arrive(smem_u32(&empty_bar[st]));
        else
          for (int c = 0; c < CL; ++c) mbar_arrive_cluster(smem_u32(&empty_bar[st]), uint32_t(c));
      }
    };
    for (int u = first; u < g.units; u += step) {
      const int m_blk = (u / g.n_tiles) * CL + int(rank), n0 = (u % g.n_tiles) * BN;
#pragma unroll
      for (int i = 0; i < C::kMI; ++i)
#pragma unroll
        for (int j = 0; j < BN / 2; ++j) acc[i][j] = 0.f;
      int prev = -1;
      for (int kt = 0; kt < g.k_tiles; ++kt) {
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
        if (++stage == STAGES) { stage = 0; phase ^= 1; }
      }
      wgmma_wait<0>();
#pragma unroll
      for (int i = 0; i < C::kMI; ++i) fence_operands(acc[i]);
      release(prev);
      // Epilogue: register layout of m64nN: warp w rows 16w..16w+15; reg 4j+2h+{0,1} = row
      // lane/4 + 8h, cols 8j + 2(lane%4) + {0,1}. EPI 0: one half2 store per pair (a quad
      // writes 16 B of a row); EPI 1: quad transpose, then one 16-byte store per lane (a quad
      // writes 64 contiguous bytes), a quarter of the store instructions.
      const int q = lane % 4;
#pragma unroll
      for (int i = 0; i < C::kMI; ++i) {
        const int row0 = m_blk * BM + cw * (BM / 2) + i * 64 + warp * 16 + lane / 4;
        if constexpr (EPI == 0) {
#pragma unroll
          for (int j = 0; j < BN / 8; ++j) {
            const int col = n0 + 8 * j + 2 * q;
            if (col >= g.oc) continue;
            const float2 bv = *reinterpret_cast<const float2*>(bias + col);
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              const int row = row0 + 8 * h;
              if (row < g.m) {
                const float v0 = fmaxf(acc[i][4 * j + 2 * h] + bv.x, 0.f);
                const float v1 = fmaxf(acc[i][4 * j + 2 * h + 1] + bv.y, 0.f);
                *reinterpret_cast<__half2*>(y + size_t(row) * g.oc + col) =
                    __floats2half2_rn(v0, v1);
              }
            }
          }
        } else {
#pragma unroll
          for (int jg = 0; jg < BN / 32; ++jg) {
            float2 bv[4];
#pragma unroll
            for (int t = 0; t < 4; ++t) {
              const int col = n0 + 8 * (4 * jg + t) + 2 * q;
              bv[t] = col < g.oc ? *reinterpret_cast<const float2*>(bias + col) : make_float2(0.f, 0.f);
            }
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              uint32_t w[4];
#pragma unroll
              for (int t = 0; t < 4; ++t) {
                const int j = 4 * jg + t;
                __half2 v = __floats2half2_rn(fmaxf(acc[i][4 * j + 2 * h] + bv[t].x, 0.f),
                                              fmaxf(acc[i][4 * j + 2 * h + 1] + bv[t].y, 0.f));
                w[t] = *reinterpret_cast<uint32_t*>(&v);
              }
              quad_transpose(w, q);
              const int row = row0 + 8 * h, col = n0 + 8 * (4 * jg + q);
              if (row < g.m && col < g.oc)
                *reinterpret_cast<uint4*>(y + size_t(row) * g.oc + col) = make_uint4(w[0], w[1], w[2], w[3]);
            }
          }
        }
      }
    }
  }
  if (CL > 1) cluster_sync_all();  // no CTA leaves while its peer may still arrive on its barriers
#endif
}
}  // namespace lab

