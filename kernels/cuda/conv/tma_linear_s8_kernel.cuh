// Hopper (sm_90a) int8 linear layer on the TMA mainloop, split over K (linear_int8_tma): the
// kernel.  The host side is kernels/cuda/linear_s8_tma.cu.
//
// DESIGN NOTE
// * Why: at batch 16-256 AlexNet's int8 classifier ran no faster than fp16's (docs/PERFORMANCE.md
//   run 40c: cuBLASLt's int8 GEMM took 46 us for fc6 at 256, 419 TOP/s, and ~20 us whatever
//   the size below that), and a streaming mma.sync kernel with 16-byte cp.async loads stayed
//   latency-bound at 1.2-1.7 TB/s (runs 40f-i).  The weight (fc6: 37.7 MB) should be read once
//   at DRAM speed by bulk copies, as the conv mainloop reads its operands.
// * So this is tma_mainloop.cuh's mainloop with int8 weights as A (M = out features, tiles of
//   BM = 128: one m64 block per consumer warpgroup) and the input rows as B (N = the batch,
//   tiles of BN = 64, 128 or 256: one tiled TMA box of BN rows x 128 bytes per k-tile, rows past
//   the batch zero-filled), m64nBNk32 .s32.s8.s8 wgmma, 128-byte k-tiles with the 128-byte
//   swizzle.  The weight's rows and the input's K are zero past in_stride (the boxes' fill).
// * Split K (the mainloop's kSplitK): units (channel tile, batch tile, K slice), the slice
//   slowest, as many slices as keep the units within one wave of the SMs (the host: fc6 at 256
//   is 32 channel tiles x 4 slices of 18 k-tiles).  The epilogue writes the raw int32 sums of
//   its slice to partial[ks][n][out_stride] (no bias); finish_s8_split adds the slices (integer
//   sums: exact, in any order) and applies the int8 family's epilogue, so the result is the
//   integer reference's bit for bit.  A store instruction writes 8 consecutive channels (32
//   bytes, one sector) of 4 samples.
// * Tried and measured on an H100 (docs/PERFORMANCE.md run 42), not kept: the weight packed in
//   16 KB tiles so that each TMA box is one contiguous block (streamed no faster); the last
//   slice's CTA reducing the sums from global memory after a fence and an arrival counter (the
//   finishing pass gone, but ~10 us more per layer whatever its size); a tile's slices as one
//   thread-block cluster reducing through distributed shared memory (the fastest per layer run
//   alone, but in the CUDA graph the whole network 1-6 % slower than with this form: clusters
//   of 3 CTAs found fewer SMs, 96 instead of 128, and started later after the previous layer).
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/conv/ptx.cuh"
#include "kernels/cuda/conv/tma_mainloop.cuh"
#include "kernels/cuda/pdl.cuh"

namespace cnnrt::cuda::tma_linear_detail {

constexpr int kThreads = tma_detail::kThreads;
constexpr int kBM = 128;  // out features per tile: one m64 block per consumer warpgroup

// What the mainloop and the epilogue read besides the two tensor maps.  GEMM view: M = out
// features (m_tiles of kBM), N = batch (n_tiles of BN), K = in_stride in k_tiles of 128 bytes,
// k_per_split of them per slice.
struct TmaLinearS8Params {
  int* partial = nullptr;  // [splits][batch][out_stride] int32
  int batch = 0, out_stride = 0;
  int m_tiles = 0, n_tiles = 0, k_tiles = 0, k_per_split = 0, units = 0;
};

// int8 weights as A, the batch as B, split K (tma_mainloop.cuh's traits).
struct TmaS8Linear {
  using Acc = int;
  static constexpr bool kWeightsAreA = true, kSplitN = false, kMeta = false, kSplitK = true;
  static constexpr int kRowBytes = 128, kTileElems = 128, kARowBytes = 128, kWeightTileElems = 128;
#ifdef CNNRT_WGMMA_DEVICE
  template <int WN, int MI>
  static __device__ __forceinline__ void mma_k_tile(int (&acc)[MI][WN / 2], uint32_t a,
                                                    uint32_t b) {
    tma_detail::dense_k_tile<tma_detail::DenseMma<int8_t, WN>, 128>(acc, a, b);
  }
#endif
};

template <int BN, int STAGES>
using TmaLinearS8Ring = tma_detail::TmaRing<TmaS8Linear, kBM, BN, STAGES>;

// The slice's raw sums.  m64nBN register layout: warp w holds channels 16w + lane / 4 + 8h of
// its warpgroup's m64 block, reg 4j + 2h + e the sample 8j + 2 (lane % 4) + e.
template <int BN>
struct TmaLinearS8Epilogue {
  static constexpr size_t kStaging = 0;  // stores from registers: no staging after the ring
#ifdef CNNRT_WGMMA_DEVICE
  template <int MI>
  static __device__ __forceinline__ void store(const int (&acc)[MI][BN / 2],
                                               const TmaLinearS8Params& p,
                                               const tma_detail::TmaUnit& u) {
    static_assert(MI == 1, "one m64 block per consumer warpgroup");
    int* slice = p.partial + size_t(u.ks) * p.batch * p.out_stride;
    const int q = u.lane % 4;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int ch = u.m_blk * kBM + u.cw * 64 + u.warp * 16 + u.lane / 4 + 8 * h;
      if (ch >= p.out_stride) continue;
#pragma unroll
      for (int j = 0; j < BN / 8; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int n = u.n0 + 8 * j + 2 * q + e;
          if (n < p.batch) slice[size_t(n) * p.out_stride + ch] = acc[0][4 * j + 2 * h + e];
        }
    }
  }
#endif  // CNNRT_WGMMA_DEVICE
};

template <int BN, int STAGES>
__global__ void __launch_bounds__(kThreads, 1)
    linear_tma_s8_kernel(const __grid_constant__ CUtensorMap tmap_x,
                         const __grid_constant__ CUtensorMap tmap_w, const TmaLinearS8Params p) {
  pdl_wait();
#ifdef CNNRT_WGMMA_DEVICE
  tma_detail::tma_conv_mainloop<TmaS8Linear, kBM, BN, STAGES, 1, TmaLinearS8Epilogue<BN>>(
      tmap_x, tmap_w, p);
#endif
}

}  // namespace cnnrt::cuda::tma_linear_detail
