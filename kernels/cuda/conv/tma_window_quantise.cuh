// The int8 window conv's quantising producer (conv_int8_window fed the fp32 graph input: AlexNet
// conv1's quantisation and space-to-depth inside the conv).  Included by tma_window_kernel.cuh.
//
// DESIGN NOTE
// * Why: conv_int8_s2d was three passes — the quantising rearrangement (fp32 x, 154 MB at batch
//   256, read; x' written, 40 MB), the window conv (x' read back) and the pool — and run 49's
//   floors (docs/kernels/space_to_depth.md) put the first alone at ~45 us of conv1's ~150.  Here
//   the window conv's producer warpgroups build each unit's slab themselves from x: the x' bytes
//   are never written to global memory, and the input's DRAM read overlaps the consumers' MMAs
//   instead of preceding them.
// * What a slab row is: x' pixel (n, i, j) = 48 bytes, byte (a * 4 + b) * 3 + c the quantised
//   x[n][c][4i - pad_h + a][4j - pad_w + b] (s2d_s8.cu's order: tap-major, the 3 channels
//   innermost), at 64 bytes a row in the 64-byte swizzle the consumers' descriptors read (16-byte
//   chunk k of row r at chunk k ^ ((r >> 1) & 3): the TMA's SWIZZLE_64B, on address bits).  The
//   16 bytes past 48 are zeroed once; their weights are zero too.
// * Staging: a ring of kRing x' rows, each one 4-D TMA box of x — the columns from -pad_w
//   rounded down to a multiple of 4 (a tiled load's innermost coordinate must be 16-byte
//   aligned: run 51's first try, from -2, stopped on an illegal instruction), the 4 input rows of
//   x' row i from 4i - pad_h, the 3 channels (fp32, no swizzle; the TMA's zero fill is the conv's
//   padding) — so the 4 values of (c, a) for x' column j are two float2 at box column 4j + shift
//   (shift 2 for AlexNet's pad 2; odd pads are not served).  The CTA takes a contiguous range
//   of units (not every grid-th), so consecutive units share x' rows: each row crosses L2 -> SM
//   once per CTA, plus the rows shared at the range's ends.  Producer thread 0 keeps the ring full
//   ahead of the unit being built (a row's slot is reissued once every producer thread is past the
//   units needing it: a named barrier per unit).
// * Work: a unit's slab shares 116 rows with the previous unit's (span 244, 128 new): those are
//   copied from that slab, and only the new rows quantised — by two producer warpgroups (the
//   x' taps a = 0-1 and 2-3 of each row: 256 threads, 8 warps a SM).  Measured (H200,
//   docs/PERFORMANCE.md run 51): the first form (one warpgroup, every row quantised) 0.27 ms at
//   batch 256, this one 0.170 — still slower than the window conv over x' from the
//   rearrangement pass (0.149, three consumers): the producer's steps run in lockstep one unit at
//   a time (~3 us a unit against the consumers' ~2).  A comparison entry, conv_int8_s2d_quantise.
// * Quantisation: s2d_quantise.cuh's QuantiseByReciprocal, the same bits as the conversion step
//   (the values it cannot vouch for redone by the exact division).
// * The slab is written by generic stores and read by wgmma (the async proxy): each writer
//   fences (fence.proxy.async.shared::cta) before its warp's arrive on the stage's full barrier
//   (count 8: one per producer warp).
// * Serves s = 4, 3 channels (48 bytes a pixel: conv1 of the AlexNet family), an even pad_w,
//   boxes of at most kMaxCols columns (blocks_w <= 57 at pad 2) and units spanning at most
//   kRing - 2 x' rows.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "kernels/cuda/conv/ptx.cuh"
#include "kernels/cuda/conv/s2d_quantise.cuh"
#include "kernels/cuda/conv/tma_ptx.cuh"
#include "kernels/cuda/conv/tma_window.h"  // S2dSource

namespace cnnrt::cuda::tma_window {

constexpr int kRing = 10;  // staged x' rows
// One x' row's box (4 rows x 3 channels x cols fp32), a multiple of 1 KB.
constexpr int kSlotBytes = 11264;
constexpr int kMaxCols = kSlotBytes / (4 * 3 * 4);  // 234 columns
// Two producer warpgroups (each unit's new rows: one warpgroup the x' taps a = 0-1 of every row,
// the other a = 2-3), two consumers: 512 threads, 128 registers at entry; setmaxnreg's split.
constexpr int kQuantiseProducers = 2;                                   // warpgroups
constexpr int kQuantiseThreads = 128 * kQuantiseProducers;              // producer threads
constexpr int kQuantiseCtaThreads = kQuantiseThreads + 2 * 128;         // with the consumers
constexpr int kQuantiseProducerRegs = 96, kQuantiseConsumerRegs = 160;  // from 128 at entry
static_assert(kQuantiseThreads * kQuantiseProducerRegs + 256 * kQuantiseConsumerRegs <= 65536 &&
                  kQuantiseCtaThreads * 128 <= 65536,
              "the split fits the register file");

#ifdef CNNRT_WGMMA_DEVICE
using namespace cnnrt::cuda::ptx;

// A tiled 4-D box {col, row, channel, image} of the source into `dst`.
__device__ __forceinline__ void tma_load_4d(uint32_t dst, const CUtensorMap* map, int c0, int c1,
                                            int c2, int c3, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4, %5}], [%6];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
      : "memory");
}

// x' pixel (n, i, j) quantised into its slab row (`row`, index r: the swizzle phase) straight
// from the fp32 NCHW source: for each x' tap a (input row 4i - pad_h + a) and channel c, the 4
// columns from 4j - pad_w as two 8-byte loads (pad_w even and w % 4 == 0: a pair is wholly inside
// or outside the row), zeros outside the image (the conv's padding).  All 24 loads are issued
// before the first value is used.
__device__ __forceinline__ void quantise_pixel(const float* __restrict__ x, const S2dSource& s,
                                               int n, int i, int j, uint8_t* row, int r) {
  const int col = 4 * j - s.pad_w;
  float2 v[4][3][2];  // [a][c][column pair]
#pragma unroll
  for (int a = 0; a < 4; ++a) {
    const int y = 4 * i - s.pad_h + a;
    const bool row_in = y >= 0 && y < s.h;
#pragma unroll
    for (int c = 0; c < 3; ++c) {
      const float* src = x + ((static_cast<long long>(n) * 3 + c) * s.h + y) * s.w + col;
#pragma unroll
      for (int h = 0; h < 2; ++h)
        v[a][c][h] = row_in && col + 2 * h >= 0 && col + 2 * h < s.w
                         ? __ldg(reinterpret_cast<const float2*>(src + 2 * h))
                         : make_float2(0.f, 0.f);
    }
  }
  const s2d_quantise::QuantiseByReciprocal quantise{s.scale, s.reciprocal};
  const uint32_t phase = uint32_t((r >> 1) & 3) << 4;
#pragma unroll
  for (int a = 0; a < 4; ++a) {
    float f[12];  // value k = b * 3 + c: byte 12a + k of the pixel
#pragma unroll
    for (int c = 0; c < 3; ++c) {
      f[c] = v[a][c][0].x;
      f[3 + c] = v[a][c][0].y;
      f[6 + c] = v[a][c][1].x;
      f[9 + c] = v[a][c][1].y;
    }
    uint32_t deferred = 0, bytes[12];
#pragma unroll
    for (int k = 0; k < 12; ++k) bytes[k] = quantise(f[k], deferred, 1u << k);
    if (deferred != 0) {  // rare: within 2^-12 of a rounding boundary, or NaN
#pragma unroll
      for (int k = 0; k < 12; ++k)
        if (deferred & (1u << k)) bytes[k] = quantise.exact(f[k]);
    }
#pragma unroll
    for (int w = 0; w < 3; ++w) {
      const uint32_t word = __byte_perm(__byte_perm(bytes[4 * w], bytes[4 * w + 1], 0x0040),
                                        __byte_perm(bytes[4 * w + 2], bytes[4 * w + 3], 0x0040),
                                        0x5410);
      *reinterpret_cast<uint32_t*>(row + ((uint32_t(12 * a + 4 * w)) ^ phase)) = word;
    }
  }
}

// Producer warpgroup w of the two builds the slabs of the CTA's units [first, end) that consumer
// w takes (the j-th unit goes to consumer j % 2, as its (j / 2)-th): all of a unit's span rows,
// each thread its rows r = t, t + 128 (design note), then the stage's full barrier (count 4: one
// arrival per warp of the warpgroup).  No warpgroup waits for the other.
template <int kStages, int kWN, uint32_t kSlabBytes, class Params>
__device__ __forceinline__ void quantise_producer(const Params& p, uint8_t* smem,
                                                  uint32_t slabs_off, uint64_t (*full_bar)[kStages],
                                                  uint64_t (*empty_bar)[kStages], long long first,
                                                  long long end) {
  const int w = threadIdx.x / 128, t = threadIdx.x % 128;
  const int span = kWN + (p.kh - 1) * p.in_w + p.kw - 1, hw = p.in_h * p.in_w;
  long long round = 0;
  for (long long u = first + w; u < end; u += 2, ++round) {
    const int s = int(round % kStages);
    mbarrier_wait_parity(smem_u32(&empty_bar[w][s]), (uint32_t(round / kStages) & 1) ^ 1);
    uint8_t* slab = smem + slabs_off + (w * kStages + s) * kSlabBytes;
    const int v0 = int(u * kWN);
    // Rows past the tensor (the last unit's tail) are left as they are: they feed only virtual
    // pixels past the images, which the epilogue drops.
    const int rows = span < p.pixels - v0 ? span : p.pixels - v0;
    for (int r = t; r < rows; r += 128) {
      const int v = v0 + r, n = v / hw, rem = v - n * hw, i = rem / p.in_w;
      quantise_pixel(p.x, p.src, n, i, rem - i * p.in_w, slab + r * 64, r);
    }
    fence_proxy_async_shared();  // the generic stores, before the consumers' wgmma reads them
    __syncwarp();
    if (t % 32 == 0) mbarrier_arrive(smem_u32(&full_bar[w][s]));
  }
}
#endif  // CNNRT_WGMMA_DEVICE

}  // namespace cnnrt::cuda::tma_window
