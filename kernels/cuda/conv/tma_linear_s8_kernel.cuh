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
// * Split K (the mainloop's kSplitK): units (channel tile, batch tile, K slice), a tile's
//   slices consecutive and launched as one thread-block cluster, at most 4 slices and as many
//   as the cluster occupancy keeps within one wave (the host: fc6 is 32 channel tiles x 4 slices
//   of 18 k-tiles).  The slices are reduced inside the cluster through distributed shared
//   memory (TmaLinearS8Epilogue) and the int8 family's epilogue (epilogue_s8.cuh) applied to the
//   full sums (integers: exact in any order), so the result is the integer reference's bit for
//   bit.  Tried first (run 42b-d): a finishing pass over partial sums in global memory read them
//   back from DRAM (5-11 us per layer: the weight stream had evicted them from L2), and the
//   last slice's CTA reducing them from global memory after a fence and an arrival counter
//   added ~10 us per layer whatever its size.
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
  const int32_t* bias = nullptr;      // bias_q [out_c]
  const float* multiplier = nullptr;  // M[c] (int8 out) or D[c] (fp32 out)
  void* y = nullptr;                  // int8 [batch][out_stride] or fp32 [batch][out_stride]
  int batch = 0, out_c = 0, out_stride = 0, float_output = 0;
  int lo = -127, hi = 127;
  float float_lo = 0, float_hi = 0;
  // splits: K slices per tile = the cluster's CTAs (1: no cluster, a persistent grid).
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
// family's epilogue from the registers.  Several (a cluster of `splits` CTAs, one per slice):
// each CTA stages its raw sums in its own ring (free once the mainloop is done) as [sample]
// [kRowInts] int32 rows, cluster barrier, then CTA ks reduces sample rows ks * BN / splits ..
// of the tile, reading the four channels of a quad from every CTA's staging through
// distributed shared memory, and stores their outputs; a second barrier keeps every CTA's
// staging alive until its peers have read it.  No partial sums leave the cluster.
template <int BN, int STAGES>
struct TmaLinearS8Epilogue {
  static constexpr size_t kStaging = 0;
  // A staged sample row: 128 channels + 4 ints of padding, so that a warp's stores from the
  // register layout (4 sample rows x 8 channels) fall in 32 different banks.
  static constexpr int kRowInts = kBM + 4;
  static constexpr uint32_t kRingBytes = STAGES * TmaLinearS8Ring<BN, STAGES>::kStage;
  static_assert(uint32_t(BN) * kRowInts * 4 <= kRingBytes, "the staged sums fit the ring");
#ifdef CNNRT_WGMMA_DEVICE
  template <int MI>
  static __device__ __forceinline__ void store(const int (&acc)[MI][BN / 2],
                                               const TmaLinearS8Params& p,
                                               const tma_detail::TmaUnit& u) {
    static_assert(MI == 1, "one m64 block per consumer warpgroup");
    const int q = u.lane % 4;
    const int ch_local = u.cw * 64 + u.warp * 16 + u.lane / 4;
    if (p.splits == 1) {  // the epilogue from the registers
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int ch = u.m_blk * kBM + ch_local + 8 * h;
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
    int* staged = reinterpret_cast<int*>(u.after_ring - kRingBytes);
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int j = 0; j < BN / 8; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e)
          staged[(8 * j + 2 * q + e) * kRowInts + ch_local + 8 * h] = acc[0][4 * j + 2 * h + e];
    tma_detail::cluster_sync_all();  // every slice's sums staged and visible to the cluster
    reduce_slices(p, u, ptx::smem_u32(staged));
    tma_detail::cluster_sync_all();  // the peers are done reading this CTA's staging
  }

  // The producer warpgroup's part: the two cluster barriers of a split store().
  static __device__ __forceinline__ void producer_join(const TmaLinearS8Params& p) {
    if (p.splits > 1) {
      tma_detail::cluster_sync_all();
      tma_detail::cluster_sync_all();
    }
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

  // A quad of int32 at shared address `addr` of CTA `cta` of the cluster.
  static __device__ __forceinline__ int4 load_cluster(uint32_t addr, uint32_t cta) {
    int4 v;
    asm volatile(
        "{\n.reg .b32 ra;\nmapa.shared::cluster.u32 ra, %4, %5;\n"
        "ld.shared::cluster.v4.s32 {%0, %1, %2, %3}, [ra];\n}\n"
        : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
        : "r"(addr), "r"(cta));
    return v;
  }

  // CTA ks's share of the tile: its sample rows, 32 quads of channels each, kUnroll quads per
  // consumer thread with every CTA's loads issued before any is used.
  static __device__ __forceinline__ void reduce_slices(const TmaLinearS8Params& p,
                                                       const tma_detail::TmaUnit& u,
                                                       uint32_t staged) {
    constexpr int kQuads = kBM / 4, kUnroll = 8;
    const int t = u.cw * 128 + u.warp * 32 + u.lane;
    const int per = (BN + p.splits - 1) / p.splits;
    const int row0 = u.ks * per;
    const int rows = min(min(per, BN - row0), p.batch - u.n0 - row0);
    const int total = rows * kQuads;
    for (int i0 = t; i0 < total; i0 += 256 * kUnroll) {
      int4 sum[kUnroll];
#pragma unroll
      for (int k = 0; k < kUnroll; ++k) sum[k] = make_int4(0, 0, 0, 0);
#pragma unroll
      for (int z = 0; z < kMaxSplits; ++z) {
        if (z >= p.splits) break;
#pragma unroll
        for (int k = 0; k < kUnroll; ++k) {
          const int i = i0 + 256 * k;
          if (i >= total) continue;
          const uint32_t addr =
              staged + uint32_t(((row0 + i / kQuads) * kRowInts + (i % kQuads) * 4) * 4);
          const int4 v = load_cluster(addr, uint32_t(z));
          sum[k].x += v.x;
          sum[k].y += v.y;
          sum[k].z += v.z;
          sum[k].w += v.w;
        }
      }
#pragma unroll
      for (int k = 0; k < kUnroll; ++k) {
        const int i = i0 + 256 * k;
        const int ch = u.m_blk * kBM + (i % kQuads) * 4;
        if (i < total && ch < p.out_stride)
          store_quad(p, size_t(u.n0 + row0 + i / kQuads) * p.out_stride + ch, ch, sum[k]);
      }
    }
  }
#endif  // CNNRT_WGMMA_DEVICE
};

template <int BN, int STAGES>
__global__ void __launch_bounds__(kThreads, 1)
    linear_tma_s8_kernel(const __grid_constant__ CUtensorMap tmap_x,
                         const __grid_constant__ CUtensorMap tmap_w, const TmaLinearS8Params p) {
#ifdef CNNRT_WGMMA_DEVICE
  tma_detail::tma_conv_mainloop<TmaS8Linear, kBM, BN, STAGES, 1, TmaLinearS8Epilogue<BN, STAGES>>(
      tmap_x, tmap_w, p);
#endif
}

}  // namespace cnnrt::cuda::tma_linear_detail
