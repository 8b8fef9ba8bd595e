// Hopper (sm_90a) TMA-fed, warp-specialised, persistent implicit-GEMM int8 convolution: the
// kernel (conv_int8_tma).  The design note is atop tma_s8.cu; docs/kernels/conv_int8_tma.md has
// the measurements.
//
// The mainloop is conv_fp16_tma's (tma_kernel.cuh, whose TMA / mbarrier / quad-transpose PTX
// wrappers this file uses): one producer thread issues an im2col load of A and a tiled load of B
// per k-tile into a ring of full / empty mbarriers, two consumer warpgroups (setmaxnreg 232) only
// issue wgmma.  What differs is the element: a k-tile row is KB bytes = KB int8 channels (KB 128
// with the 128-byte swizzle where the channel stride is a multiple of 128; KB 64 with the 64-byte
// swizzle where it is 64 mod 128, e.g. AlexNet's 64 / 192 channels, so no zero channels are
// multiplied), wgmma m64nNk32 .s32.s8.s8 (KB / 32 per k-tile, +32 bytes of descriptor each),
// int32 accumulators and the int8 family's epilogue (epilogue_s8.cuh's requantize / dequantize,
// the reference's one float step).
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/conv/epilogue_s8.cuh"
#include "kernels/cuda/conv/ptx.cuh"
#include "kernels/cuda/conv/tma_kernel.cuh"

namespace cnnrt::cuda::tma_s8_detail {

constexpr int kThreads = tma_detail::kThreads;

// Everything the kernel reads besides the two tensor maps.  GEMM view: M = batch * conv_h *
// conv_w output pixels, N = out_c, K = kh * kw * in_stride in (kh, kw, c) order.
struct TmaS8Params {
  const int32_t* bias = nullptr;      // bias_q [out_c]
  const float* multiplier = nullptr;  // M[c] (int8 out) or D[c] (fp32 out)
  void* y = nullptr;                  // int8 NHWC/16 or fp32 NHWC/8 [m][out_stride]
  int m = 0, out_c = 0, out_stride = 0;
  int conv_h = 0, conv_w = 0;
  int sh = 1, sw = 1, pad_top = 0, pad_left = 0;
  int kw = 1;
  int c_blocks = 0, k_tiles = 0;  // in_stride / KB, kh * kw * c_blocks
  int n_tiles = 0, units = 0;
  int lo = -127, hi = 127;
  float float_lo = 0, float_hi = 0;
};

template <int BM, int BN, int STAGES, int KB>
struct TmaS8Tile {
  static constexpr uint32_t kA = BM * KB, kB = BN * KB, kStage = kA + kB;
  static constexpr size_t kSmem = 1024 + size_t(STAGES) * kStage;  // +1024: ring alignment
  static constexpr int kMI = BM / 128;                             // m64 blocks per consumer
};

#ifdef CNNRT_WGMMA_DEVICE
using namespace cnnrt::cuda::ptx;

// K-major shared-memory descriptor of a KB-byte swizzled row layout: 128 B (ptx::make_desc,
// 8-row groups 1024 B apart) or 64 B (layout type 2, 8-row groups 512 B apart).
template <int KB>
__device__ __forceinline__ uint64_t desc_of(uint32_t smem_addr) {
  if constexpr (KB == 128) {
    return make_desc(smem_addr);
  } else {
    static_assert(KB == 64, "k-tile rows of 64 or 128 bytes");
    return uint64_t((smem_addr & 0x3FFFF) >> 4) | (uint64_t(1) << 16) | (uint64_t(512 >> 4) << 32) |
           (uint64_t(2) << 62);
  }
}
#endif  // CNNRT_WGMMA_DEVICE

// BM x BN tiles, a ring of STAGES, KB-byte k-tiles; FLOAT_OUT: dequantised fp32 output.
template <int BM, int BN, int STAGES, int KB, bool FLOAT_OUT>
__global__ void __launch_bounds__(kThreads, 1)
    conv_tma_s8_kernel(const __grid_constant__ CUtensorMap tmap_x,
                       const __grid_constant__ CUtensorMap tmap_w, const TmaS8Params p) {
#ifdef CNNRT_WGMMA_DEVICE
  using namespace tma_detail;
  using C = TmaS8Tile<BM, BN, STAGES, KB>;
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  __shared__ __align__(8) uint64_t full_bar[STAGES], empty_bar[STAGES];
  const uint32_t ring = (smem_u32(smem_raw) + 1023u) & ~1023u;
  const int wg = threadIdx.x / 128;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbarrier_init(smem_u32(&full_bar[s]), 1);
      mbarrier_init(smem_u32(&empty_bar[s]), 2);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  const int first = blockIdx.x, step = gridDim.x;

  if (wg == 0) {  // ---------------- producer warpgroup: one thread issues every TMA
    setmaxnreg_dec<kProducerRegs>();
    if (threadIdx.x == 0) {
      int stage = 0;
      uint32_t phase = 0;
      const int pix = p.conv_h * p.conv_w;
      for (int u = first; u < p.units; u += step) {
        const int m_blk = u / p.n_tiles, n0 = (u % p.n_tiles) * BN;
        int aw[C::kMI], ah[C::kMI], an[C::kMI];
#pragma unroll
        for (int i = 0; i < C::kMI; ++i) {
          const int m = m_blk * BM + 128 * i, img = m / pix, rem = m - img * pix;
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
            tma_load_im2col(a_dst + i * 128 * KB, &tmap_x, cb * KB, aw[i], ah[i], an[i],
                            uint16_t(s), uint16_t(r), fb);
          tma_load_2d(b_dst, &tmap_w, kt * KB, n0, fb);
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
  } else {  // ---------------- consumer warpgroups: wgmma, then the int8 epilogue
    setmaxnreg_inc<kConsumerRegs>();
    const int cw = wg - 1, warp = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32;
    int acc[C::kMI][BN / 2];
    int stage = 0;
    uint32_t phase = 0;
    auto release = [&](int st) {
      if (threadIdx.x % 128 == 0) mbarrier_arrive(smem_u32(&empty_bar[st]));
    };
    for (int u = first; u < p.units; u += step) {
      const int m_blk = u / p.n_tiles, n0 = (u % p.n_tiles) * BN;
#pragma unroll
      for (int i = 0; i < C::kMI; ++i)
#pragma unroll
        for (int j = 0; j < BN / 2; ++j) acc[i][j] = 0;
      int prev = -1;
      for (int kt = 0; kt < p.k_tiles; ++kt) {
        mbarrier_wait_parity(smem_u32(&full_bar[stage]), phase);
        const uint32_t a = ring + stage * C::kStage + cw * (BM / 2) * KB;
        const uint32_t b = ring + stage * C::kStage + C::kA;
#pragma unroll
        for (int i = 0; i < C::kMI; ++i) fence_operands(acc[i]);
        wgmma_fence();
#pragma unroll
        for (int k32 = 0; k32 < KB / 32; ++k32)
#pragma unroll
          for (int i = 0; i < C::kMI; ++i)
            MmaS8<BN>::run(acc[i], desc_of<KB>(a + i * 64 * KB + k32 * 32),
                           desc_of<KB>(b + k32 * 32));
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
      // Epilogue: register layout of m64nN: warp w rows 16w..16w+15; reg 4j+2h+{0,1} = row
      // lane/4 + 8h, cols 8j + 2(lane%4) + {0,1}.  Channels >= out_c are the padding lanes
      // (zeros); columns >= out_stride are not stored.
      const int q = lane % 4;
#pragma unroll
      for (int i = 0; i < C::kMI; ++i) {
        const int row0 = m_blk * BM + cw * (BM / 2) + i * 64 + warp * 16 + lane / 4;
        if constexpr (FLOAT_OUT) {
          float* y = static_cast<float*>(p.y);
#pragma unroll
          for (int j = 0; j < BN / 8; ++j) {
            const int col = n0 + 8 * j + 2 * q;
            const bool in0 = col < p.out_c, in1 = col + 1 < p.out_c;
            const int b0 = in0 ? __ldg(p.bias + col) : 0, b1 = in1 ? __ldg(p.bias + col + 1) : 0;
            const float d0 = in0 ? __ldg(p.multiplier + col) : 0.f,
                        d1 = in1 ? __ldg(p.multiplier + col + 1) : 0.f;
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              const int row = row0 + 8 * h;
              if (row >= p.m || col >= p.out_stride) continue;
              const float2 v = make_float2(
                  in0 ? s8::dequantize(acc[i][4 * j + 2 * h] + b0, d0, p.float_lo, p.float_hi)
                      : 0.f,
                  in1 ? s8::dequantize(acc[i][4 * j + 2 * h + 1] + b1, d1, p.float_lo, p.float_hi)
                      : 0.f);
              *reinterpret_cast<float2*>(y + size_t(row) * p.out_stride + col) = v;
            }
          }
        } else {
          // Per 64 columns: lane q packs j = 2t, 2t + 1 (cols 16t + 2q.., 16t + 8 + 2q..) into
          // word t; the quad transpose gives lane q cols 16q + 2t.. and 16q + 8 + 2t.. from lane
          // t, which two byte permutes order into 16 consecutive bytes (one 16-byte store).
          int8_t* y = static_cast<int8_t*>(p.y);
#pragma unroll
          for (int g = 0; g < BN / 64; ++g) {
            int bq[8][2];
            float mq[8][2];
#pragma unroll
            for (int jj = 0; jj < 8; ++jj)
#pragma unroll
              for (int e = 0; e < 2; ++e) {
                const int col = n0 + 64 * g + 8 * jj + 2 * q + e;
                bq[jj][e] = col < p.out_c ? __ldg(p.bias + col) : 0;
                mq[jj][e] = col < p.out_c ? __ldg(p.multiplier + col) : 0.f;
              }
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              uint32_t w[4];
#pragma unroll
              for (int t = 0; t < 4; ++t) {
                uint32_t word = 0;
#pragma unroll
                for (int half = 0; half < 2; ++half)
#pragma unroll
                  for (int e = 0; e < 2; ++e) {
                    const int jj = 2 * t + half, j = 8 * g + jj;
                    const int col = n0 + 64 * g + 8 * jj + 2 * q + e;
                    const int8_t v = col < p.out_c
                                         ? s8::requantize(acc[i][4 * j + 2 * h + e] + bq[jj][e],
                                                          mq[jj][e], p.lo, p.hi)
                                         : int8_t{0};
                    word |= uint32_t(uint8_t(v)) << (8 * (2 * half + e));
                  }
                w[t] = word;
              }
              quad_transpose(w, q);
              const int row = row0 + 8 * h, col = n0 + 64 * g + 16 * q;
              if (row < p.m && col < p.out_stride) {
                const uint4 out =
                    make_uint4(__byte_perm(w[0], w[1], 0x5410), __byte_perm(w[2], w[3], 0x5410),
                               __byte_perm(w[0], w[1], 0x7632), __byte_perm(w[2], w[3], 0x7632));
                *reinterpret_cast<uint4*>(y + size_t(row) * p.out_stride + col) = out;
              }
            }
          }
        }
      }
    }
  }
#endif
}

}  // namespace cnnrt::cuda::tma_s8_detail
