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
//   slowest, at most 4 slices and as many as keep the units within one wave of the SMs (the
//   host: fc6 is 32 channel tiles x 4 slices of 18 k-tiles).  The slices are reduced in the
//   kernel: each writes its raw int32 sums to partial[ks][n][out_stride] and counts itself in on
//   its tile's counter; the last to arrive adds the others' sums (integers: exact, in any order)
//   and applies the int8 family's epilogue (epilogue_s8.cuh), so the result is the integer
//   reference's bit for bit.  A separate finishing pass (run 42b) read the partial sums back
//   from DRAM (the weight stream had evicted them from L2): 5-11 us per layer.  A store or load
//   instruction covers 8 consecutive channels (32 bytes, one sector) of 4 samples.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/conv/epilogue_s8.cuh"
#include "kernels/cuda/conv/ptx.cuh"
#include "kernels/cuda/conv/tma_mainloop.cuh"

namespace cnnrt::cuda::tma_linear_detail {

constexpr int kThreads = tma_detail::kThreads;
constexpr int kBM = 128;       // out features per tile: one m64 block per consumer warpgroup
constexpr int kMaxSplits = 4;  // K slices at most (linear_s8_tma.cu's split choice)

// What the mainloop and the epilogue read besides the two tensor maps.  GEMM view: M = out
// features (m_tiles of kBM), N = batch (n_tiles of BN), K = in_stride in k_tiles of 128 bytes,
// k_per_split of them per slice.
struct TmaLinearS8Params {
  int* partial = nullptr;             // [splits][batch][out_stride] int32 (splits > 1)
  int* counters = nullptr;            // [m_tiles * n_tiles] zeros: slices arrived (splits > 1)
  const int32_t* bias = nullptr;      // bias_q [out_c]
  const float* multiplier = nullptr;  // M[c] (int8 out) or D[c] (fp32 out)
  void* y = nullptr;                  // int8 [batch][out_stride] or fp32 [batch][out_stride]
  int batch = 0, out_c = 0, out_stride = 0, float_output = 0;
  int lo = -127, hi = 127;
  float float_lo = 0, float_hi = 0;
  int m_tiles = 0, n_tiles = 0, k_tiles = 0, k_per_split = 0, splits = 1, units = 0;
  // The mainloop's conv geometry, unused by the split-K producer (duck-typed fields).
  int conv_h = 1, conv_w = 1, sh = 1, sw = 1, pad_top = 0, pad_left = 0, kw = 1, c_blocks = 1;
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

// The epilogue.  m64nBN register layout: warp w holds channels 16w + lane / 4 + 8h of its
// warpgroup's m64 block, reg 4j + 2h + e the sample 8j + 2 (lane % 4) + e.  One slice: the int8
// family's epilogue from the registers.  Several: every slice's CTA writes its raw sums to
// partial[ks], then counts itself in on its tile's counter (after a fence); the last to arrive
// adds the other slices' sums (read through L2: they were written moments ago) to its own
// registers, applies the epilogue and resets the counter for the next run.
template <int BN>
struct TmaLinearS8Epilogue {
  static constexpr size_t kStaging = 16;  // the "last slice" flag the consumers share
#ifdef CNNRT_WGMMA_DEVICE
  template <int MI>
  static __device__ __forceinline__ void store(const int (&acc)[MI][BN / 2],
                                               const TmaLinearS8Params& p,
                                               const tma_detail::TmaUnit& u) {
    static_assert(MI == 1, "one m64 block per consumer warpgroup");
    const int q = u.lane % 4;
    const int ch0 = u.m_blk * kBM + u.cw * 64 + u.warp * 16 + u.lane / 4;
    const size_t slice_elems = size_t(p.batch) * p.out_stride;
    if (p.splits > 1) {
      int* slice = p.partial + size_t(u.ks) * slice_elems;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int ch = ch0 + 8 * h;
        if (ch >= p.out_stride) continue;
#pragma unroll
        for (int j = 0; j < BN / 8; ++j)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int n = u.n0 + 8 * j + 2 * q + e;
            if (n < p.batch) slice[size_t(n) * p.out_stride + ch] = acc[0][4 * j + 2 * h + e];
          }
      }
      __threadfence();                  // the sums are visible device-wide before the count says so
      ptx::named_barrier_sync(1, 256);  // the two consumer warpgroups
      int* last = reinterpret_cast<int*>(u.after_ring);
      if (u.cw == 0 && u.warp == 0 && u.lane == 0) {
        int* counter = p.counters + u.m_blk + p.m_tiles * (u.n0 / BN);
        const int arrived = atomicAdd(counter, 1) + 1;
        *last = arrived == p.splits;
        if (arrived == p.splits) *counter = 0;  // every slice has counted: ready for the next run
      }
      ptx::named_barrier_sync(1, 256);  // the two consumer warpgroups
      if (*last == 0) return;
      __threadfence();  // the other slices' sums are read after their counts
    }
    if (p.splits == 1) {  // the epilogue from the registers
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int ch = ch0 + 8 * h;
        if (ch >= p.out_stride) continue;
#pragma unroll
        for (int j = 0; j < BN / 8; ++j)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int n = u.n0 + 8 * j + 2 * q + e;
            if (n < p.batch)
              store_one(p, size_t(n) * p.out_stride + ch, ch, acc[0][4 * j + 2 * h + e]);
          }
      }
      return;
    }
    reduce_slices(p, u);
  }

  // One output: channel ch's epilogue on the full sum v, at element `at` of y (padding lanes
  // out_c .. out_stride - 1 get zeros).
  static __device__ __forceinline__ void store_one(const TmaLinearS8Params& p, size_t at, int ch,
                                                   int v) {
    const bool real = ch < p.out_c;
    const int bias = real ? __ldg(p.bias + ch) : 0;
    const float mult = real ? __ldg(p.multiplier + ch) : 0.f;
    if (p.float_output)
      static_cast<float*>(p.y)[at] =
          real ? s8::dequantize(v + bias, mult, p.float_lo, p.float_hi) : 0.f;
    else
      static_cast<int8_t*>(p.y)[at] = real ? s8::requantize(v + bias, mult, p.lo, p.hi) : 0;
  }

  // Four consecutive channels' outputs from their full sums: one 4-byte (int8) or 16-byte
  // (fp32) store (out_stride % 4 == 0 and ch % 4 == 0 keep them aligned).
  static __device__ __forceinline__ void store_quad(const TmaLinearS8Params& p, size_t at, int ch,
                                                    const int4& v) {
    const int sums[4] = {v.x, v.y, v.z, v.w};
    float f[4];
    uint32_t word = 0;
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const bool real = ch + c < p.out_c;
      const int bias = real ? __ldg(p.bias + ch + c) : 0;
      const float mult = real ? __ldg(p.multiplier + ch + c) : 0.f;
      if (p.float_output)
        f[c] = real ? s8::dequantize(sums[c] + bias, mult, p.float_lo, p.float_hi) : 0.f;
      else
        word |= uint32_t(uint8_t(real ? s8::requantize(sums[c] + bias, mult, p.lo, p.hi) : 0))
                << (8 * c);
    }
    if (p.float_output)
      *reinterpret_cast<float4*>(static_cast<float*>(p.y) + at) =
          make_float4(f[0], f[1], f[2], f[3]);
    else
      *reinterpret_cast<uint32_t*>(static_cast<int8_t*>(p.y) + at) = word;
  }

  // The last slice's CTA: the tile's sums of every slice (its own included) read back through
  // L2 four channels at a time (int4, coalesced: a warp reads 512 contiguous bytes of a row),
  // kUnroll quads per thread with all their loads issued before any is used (run 42c: one
  // element at a time, each load waiting on L2 before the next, took ~250 us on fc6), added up
  // and stored by store_one.
  static __device__ __forceinline__ void reduce_slices(const TmaLinearS8Params& p,
                                                       const tma_detail::TmaUnit& u) {
    constexpr int kQuads = kBM / 4, kUnroll = 8;
    const int t = u.cw * 128 + u.warp * 32 + u.lane;
    const int rows = min(BN, p.batch - u.n0);
    const int total = rows * kQuads;
    const size_t slice_elems = size_t(p.batch) * p.out_stride;
    const int4* __restrict__ partial = reinterpret_cast<const int4*>(p.partial);
    for (int i0 = t; i0 < total; i0 += 256 * kUnroll) {
      int4 sum[kUnroll];
      size_t at[kUnroll];
      int ch[kUnroll];
      bool in[kUnroll];
#pragma unroll
      for (int k = 0; k < kUnroll; ++k) {
        const int i = i0 + 256 * k;
        ch[k] = u.m_blk * kBM + (i % kQuads) * 4;
        in[k] = i < total && ch[k] < p.out_stride;
        at[k] = in[k] ? size_t(u.n0 + i / kQuads) * p.out_stride + ch[k] : 0;
        sum[k] = in[k] ? __ldcg(partial + at[k] / 4) : make_int4(0, 0, 0, 0);
      }
#pragma unroll
      for (int z = 1; z < kMaxSplits; ++z) {
        if (z >= p.splits) break;
#pragma unroll
        for (int k = 0; k < kUnroll; ++k) {
          if (!in[k]) continue;
          const int4 v = __ldcg(partial + (z * slice_elems + at[k]) / 4);
          sum[k].x += v.x;
          sum[k].y += v.y;
          sum[k].z += v.z;
          sum[k].w += v.w;
        }
      }
#pragma unroll
      for (int k = 0; k < kUnroll; ++k)
        if (in[k]) store_quad(p, at[k], ch[k], sum[k]);
    }
  }
#endif  // CNNRT_WGMMA_DEVICE
};

template <int BN, int STAGES>
__global__ void __launch_bounds__(kThreads, 1)
    linear_tma_s8_kernel(const __grid_constant__ CUtensorMap tmap_x,
                         const __grid_constant__ CUtensorMap tmap_w, const TmaLinearS8Params p) {
#ifdef CNNRT_WGMMA_DEVICE
  tma_detail::tma_conv_mainloop<TmaS8Linear, kBM, BN, STAGES, 1, TmaLinearS8Epilogue<BN>>(
      tmap_x, tmap_w, p);
#endif
}

}  // namespace cnnrt::cuda::tma_linear_detail
