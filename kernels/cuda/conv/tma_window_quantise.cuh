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

// One slab row (x' pixel) from its staged x' row: `src` the staging bytes of (c 0, a 0, box
// column 4j + shift), `row` the slab row's bytes, r its index (the swizzle phase).
// Its x' taps a0 and a0 + 1 (half of the pixel's 48 bytes).
__device__ __forceinline__ void quantise_pixel(const uint8_t* src, uint8_t* row, int r,
                                               const S2dSource& s, int a0) {
  const s2d_quantise::QuantiseByReciprocal quantise{s.scale, s.reciprocal};
  const int plane = s.cols * 4;  // bytes of one (c, a) row of the box
  const uint32_t phase = uint32_t((r >> 1) & 3) << 4;
#pragma unroll
  for (int a = a0; a < a0 + 2; ++a) {
    float v[12];  // value k = b * 3 + c: byte 12a + k of the pixel
#pragma unroll
    for (int c = 0; c < 3; ++c) {
      const float2 lo = *reinterpret_cast<const float2*>(src + (c * 4 + a) * plane);
      const float2 hi = *reinterpret_cast<const float2*>(src + (c * 4 + a) * plane + 8);
      v[c] = lo.x;
      v[3 + c] = lo.y;
      v[6 + c] = hi.x;
      v[9 + c] = hi.y;
    }
    uint32_t deferred = 0, bytes[12];
#pragma unroll
    for (int k = 0; k < 12; ++k) bytes[k] = quantise(v[k], deferred, 1u << k);
    if (deferred != 0) {  // rare: within 2^-12 of a rounding boundary, or NaN
#pragma unroll
      for (int k = 0; k < 12; ++k)
        if (deferred & (1u << k)) bytes[k] = quantise.exact(v[k]);
    }
#pragma unroll
    for (int w = 0; w < 3; ++w) {
      const uint32_t word = (bytes[4 * w] & 0xffu) | (bytes[4 * w + 1] & 0xffu) << 8 |
                            (bytes[4 * w + 2] & 0xffu) << 16 | (bytes[4 * w + 3] & 0xffu) << 24;
      *reinterpret_cast<uint32_t*>(row + ((uint32_t(12 * a + 4 * w)) ^ phase)) = word;
    }
  }
}

// The producer warpgroups' loop (all kQuantiseThreads threads): for the CTA's units [first, end),
// the j-th to consumer j % C's stage, build the slab from the ring.  smem: the kernel's dynamic
// shared memory (generic pointer) and its address; offsets of the slabs and the ring from it.
// Geometry: in_h, in_w the x' map, pixels its virtual pixels, span the slab rows a unit's MMAs
// read.
template <int C, int kStages, int kWN, uint32_t kSlabBytes, class Params, class ConsumerOf,
          class RoundOf>
__device__ __forceinline__ void quantise_producer(const CUtensorMap& tmap_x, const Params& p,
                                                  uint8_t* smem, uint32_t smem_addr,
                                                  uint32_t slabs_off, uint32_t ring_off,
                                                  uint64_t (*full_bar)[kStages],
                                                  uint64_t (*empty_bar)[kStages], uint64_t* row_bar,
                                                  long long first, long long end,
                                                  ConsumerOf consumer_of, RoundOf round_of) {
  const int t = threadIdx.x % kQuantiseThreads, lane_row = t % 128, a0 = 2 * (t / 128);
  const int in_w = p.in_w, in_h = p.in_h;
  const int span = kWN + (p.kh - 1) * in_w + p.kw - 1;
  const int row0 = int(first * kWN / in_w);         // the CTA's first x' row (flat over the images)
  const long long last_v = (end - 1) * kWN + span;  // one past the CTA's last slab row
  const int row_last = int(((last_v < p.pixels ? last_v : p.pixels) - 1) / in_w);
  int issued = row0;  // thread 0's next row to load
  long long j = 0;
  for (long long u = first; u < end; ++u, ++j) {
    const int v0 = int(u * kWN);
    const int vend = v0 + span < p.pixels ? v0 + span : p.pixels;
    const int rlo = v0 / in_w, rhi = (vend - 1) / in_w;
    if (t == 0) {  // keep the ring full: the rows before rlo are done (last unit's barrier)
      const int upto = rlo + kRing - 1 < row_last ? rlo + kRing - 1 : row_last;
      for (; issued <= upto; ++issued) {
        const int slot = (issued - row0) % kRing;
        const uint32_t bar = smem_u32(&row_bar[slot]);
        tma_detail::mbar_expect_tx(bar, p.src.box_bytes);
        const int n = issued / in_h, i = issued - n * in_h;
        tma_detail::tma_load_4d(smem_addr + ring_off + slot * kSlotBytes, &tmap_x, p.src.col0,
                                4 * i - p.src.pad_h, 0, n, bar);
      }
    }
    const int c = consumer_of(j), s = int(round_of(j) % kStages);
    const uint32_t phase = uint32_t(round_of(j) / kStages) & 1;
    mbarrier_wait_parity(smem_u32(&empty_bar[c][s]), phase ^ 1);
    for (int row = rlo; row <= rhi; ++row) {
      const int k = row - row0;
      mbarrier_wait_parity(smem_u32(&row_bar[k % kRing]), uint32_t(k / kRing) & 1);
    }
    uint8_t* slab = smem + slabs_off + (c * kStages + s) * kSlabBytes;
    // Rows [kWN, span) of the previous unit's slab are this one's [0, span - kWN): copied (the
    // same swizzle phase, kWN % 8 == 0; that slab is not rewritten before unit j + 3), so only
    // the kWN new rows are quantised.  The CTA's first unit quantises all of its rows.
    int first_new = 0;
    if (j > 0) {
      const uint8_t* prev = smem + slabs_off +
                            (consumer_of(j - 1) * kStages + round_of(j - 1) % kStages) * kSlabBytes;
      for (int k = t; k < (span - kWN) * 4; k += kQuantiseThreads)
        reinterpret_cast<uint4*>(slab)[k] = reinterpret_cast<const uint4*>(prev + kWN * 64)[k];
      first_new = span - kWN;
    }
    for (int r = first_new + lane_row; r < vend - v0; r += 128) {
      const int v = v0 + r, row = v / in_w, col = v - row * in_w;
      const uint8_t* src =
          smem + ring_off + ((row - row0) % kRing) * kSlotBytes + (4 * col + p.src.shift) * 4;
      quantise_pixel(src, slab + r * 64, r, p.src, a0);
    }
    fence_proxy_async_shared();
    __syncwarp();
    if (t % 32 == 0) mbarrier_arrive(smem_u32(&full_bar[c][s]));
    named_barrier_sync(1, kQuantiseThreads);  // every producer thread past this unit's rows
  }
}
#endif  // CNNRT_WGMMA_DEVICE

}  // namespace cnnrt::cuda::tma_window
