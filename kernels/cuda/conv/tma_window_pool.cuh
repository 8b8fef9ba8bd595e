// The int8 window conv's fused max-pool (conv_int8_window pooling its own output: AlexNet conv1's
// 3x3 / 2 pool without a pool pass).  Included by tma_window_kernel.cuh.
//
// DESIGN NOTE
// * Why: int8 conv1 is three passes — the quantising rearrangement, the window conv, the pool
//   (docs/kernels/space_to_depth.md) — and the pool pass re-reads the 50 MB pre-pool tensor at
//   batch 256 from DRAM after the conv has finished writing it (about 15-20 us of conv1's ~149 on
//   the H200), with its own launch and tail.  Here the window conv pools while it runs: each
//   band of pooled rows is pooled as soon as the conv rows under it are stored, from L2, by warps
//   the conv leaves idle — the producer warpgroup's warps 1..C (its warp 0 issues the TMA loads).
// * Why not in the epilogue: a unit is 128 virtual pixels (2.25 rows of 57) and a pooled row
//   needs three conv rows, so the rows under a pooled row come from two to four units, which the
//   round-robin schedule gives to different CTAs.  Pooling by band as units complete needs no
//   change to the units, the slabs or the epilogue.
// * Bands: band b of an image is pooled rows [2b, 2b + 2) (the last may have one), i.e. conv rows
//   [4b, 2 * last + 3): five rows, the last shared with band b + 1.  count[n][b] (in the
//   workspace, zeroed by the host before each launch) sums the virtual pixels stored of those
//   rows, junk columns included; it is complete at rows x in_w.
// * Hand-off, per consumer warpgroup cw: after its epilogue's global stores each consumer warp
//   __syncwarp()s (ordering its lanes' stores) and lane 0 arrives on stored[cw][slot] (count 4,
//   release at CTA scope).  Helper warp cw + 1 waits on it (acquire), then every lane fences at
//   GPU scope (fence.acq_rel.gpu: with the CTA-scope synchronisation before it, a release of
//   the four warps' stores) and the lanes add the unit's pixels of each row to the row's bands
//   (atomicAdd; up to four rows, two bands each).  A lane whose add completes a band fences again
//   (the acquire of every other contributor's release: the last-arriver pattern), and the warp
//   pools the band: lane 0 orders the generic-proxy state before the async proxy
//   (fence.proxy.async.global), loads the band's five conv rows by one 3-D TMA box into the
//   helper's buffer, and the lanes take the max of 3x3 16-byte windows (__vmaxs4) from shared
//   memory and store 16 bytes of a pooled pixel each.  No CTA ever waits for another: the last
//   contributor pools, so the kernel cannot deadlock whatever the residency.
// * Back-pressure: kPoolSlots barrier pairs per consumer; before arriving on a slot's stored
//   barrier again, the consumer waits for the helper's arrival on freed[cw][slot] (made as soon as
//   it has read the slot).  The parity protocol needs it to be exact; the design expected the
//   helpers to keep up, so that it would never wait.  They do not (measured, below), and this wait
//   is what slows the consumers.
// * Exact: the max is taken over the int8 outputs the epilogue wrote, as the pool pass does
//   (maxpool_nhwc_s8), so the bytes are the staged form's (test_window_quantise.cpp's WindowPool).
// * Measured (H200, docs/PERFORMANCE.md run 52): correct, but 2x slower than the window conv with
//   the pool pass (conv1 0.315 against 0.148 ms at batch 256; +8 us at batch 1, where the units
//   alone are 13 us).  Each helper's work is one serial latency chain per unit — the stored
//   barrier, a GPU-scope fence, the atomics, a second fence, the band's TMA load, the pooling —
//   about 10 us where the consumer's unit takes ~4, so the consumers wait on the freed barriers.
//   A comparison entry (conv_int8_s2d_window3_pool), never a default.
// * Serves a 3x3 stride-2 unpadded floor-mode pool of the whole conv output, out_w <= 64 (the
//   helper's buffer: 5 rows x 64 columns x 64 bytes).
#pragma once

#include <cuda.h>

#include <cstdint>

#include "kernels/cuda/conv/ptx.cuh"
#include "kernels/cuda/conv/tma_ptx.cuh"

namespace cnnrt::cuda::tma_window {

constexpr int kPoolSlots = 4;         // stored / freed barrier pairs per consumer
constexpr int kPoolBandConvRows = 5;  // a band's conv rows (two pooled rows of a 3x3 / 2 pool)
constexpr int kPoolMaxCols = 64;      // the conv output's columns the buffer holds
constexpr uint32_t kPoolBufBytes = kPoolBandConvRows * kPoolMaxCols * 64;  // per helper, 20 KB

// The pooled output and the band counters (TmaWindowS8PParams::pool).
struct WindowPool {
  int8_t* y = nullptr;   // [n][pool_h][pool_w][out_stride]
  int* count = nullptr;  // [n][bands], zero at launch
  int pool_h = 0, pool_w = 0, bands = 0;
};

#ifdef CNNRT_WGMMA_DEVICE
using namespace cnnrt::cuda::ptx;

// One past band b's last conv row.
__device__ __forceinline__ int band_end(int b, int pool_h) {
  return 2 * min(2 * b + 1, pool_h - 1) + 3;
}
// Adds `pixels` of conv row y of image n to band b; the band's id where that completed it, else
// -1.
template <class P>
__device__ __forceinline__ int add_to_band(const P& p, int n, int b, int y, int pixels) {
  if (b < 0 || b >= p.pool.bands || y >= band_end(b, p.pool.pool_h)) return -1;
  const int id = n * p.pool.bands + b;
  const int full = (band_end(b, p.pool.pool_h) - 4 * b) * p.in_w;
  return atomicAdd(p.pool.count + id, pixels) + pixels == full ? id : -1;
}

// Pools band `id` (n * bands + b) from its conv rows in global memory (design note): the whole
// warp; `phase` is the warp's pool barrier's next parity.
template <class P>
__device__ __forceinline__ void pool_band(const CUtensorMap& tmap_pre, const P& p, int id,
                                          uint8_t* buf, uint32_t bar, uint32_t& phase, int lane) {
  const int n = id / p.pool.bands, b = id - n * p.pool.bands;
  const int stride = p.out_stride, chunks = stride / 16;
  if (lane == 0) {
    fence_proxy_async_global();  // the rows' generic stores, acquired, before the TMA reads them
    fence_proxy_async_shared();  // the last band's reads of buf before the TMA writes it
    tma_detail::mbar_expect_tx(bar, uint32_t(kPoolBandConvRows * p.out_w * stride));
    tma_detail::tma_load_3d(smem_u32(buf), &tmap_pre, 0, 0, n * p.out_h + 4 * b, bar);
  }
  mbarrier_wait_parity(bar, phase);
  phase ^= 1;
  const int rows = min(2, p.pool.pool_h - 2 * b);
  const int per_row = p.pool.pool_w * chunks;
  for (int k = lane; k < rows * per_row; k += 32) {
    const int r = k / per_row, rem = k - r * per_row;
    const int c = rem / chunks, q = rem - c * chunks;
    const uint8_t* base = buf + ((2 * r) * p.out_w + 2 * c) * stride + q * 16;
    uint4 m = *reinterpret_cast<const uint4*>(base);
#pragma unroll
    for (int t = 1; t < 9; ++t) {
      const uint4 v = *reinterpret_cast<const uint4*>(base + ((t / 3) * p.out_w + t % 3) * stride);
      m = make_uint4(__vmaxs4(m.x, v.x), __vmaxs4(m.y, v.y), __vmaxs4(m.z, v.z),
                     __vmaxs4(m.w, v.w));
    }
    const long long pixel =
        (static_cast<long long>(n) * p.pool.pool_h + 2 * b + r) * p.pool.pool_w + c;
    *reinterpret_cast<uint4*>(p.pool.y + pixel * stride + q * 16) = m;
  }
  __syncwarp();  // buf is free again
}

// Helper warp of one consumer warpgroup: that consumer's units u = first, first + step, ... < end
// (the consumer's own sequence), its barrier ring `stored` / `freed`, its buffer and pool barrier.
template <class P>
__device__ __forceinline__ void pool_helper(const CUtensorMap& tmap_pre, const P& p,
                                            uint64_t* stored, uint64_t* freed, uint8_t* buf,
                                            uint64_t* pool_bar, long long first, long long end,
                                            long long step, int kWN_, int lane) {
  uint32_t phase = 0;
  long long t = 0;
  for (long long u = first; u < end; u += step, ++t) {
    const int slot = int(t % kPoolSlots);
    mbarrier_wait_parity(smem_u32(&stored[slot]), uint32_t(t / kPoolSlots) & 1);
    fence_acq_rel_gpu();  // release, at GPU scope, of the consumer's stores acquired above
    __syncwarp();
    if (lane == 0) mbarrier_arrive(smem_u32(&freed[slot]));
    // The unit's virtual pixels [v0, v1) lie on global virtual rows g0..g1 (n * in_h + y): lane i
    // takes row g0 + i (at most four: 128 pixels over rows of at least 33).
    const int v0 = int(u * kWN_), v1 = min(v0 + kWN_, p.pixels);
    const int g0 = v0 / p.in_w, g1 = (v1 - 1) / p.in_w;
    int done[2] = {-1, -1};
    if (lane <= g1 - g0) {
      const int g = g0 + lane, n = g / p.in_h, y = g - n * p.in_h;
      const int pixels = min(v1, (g + 1) * p.in_w) - max(v0, g * p.in_w);
      done[0] = add_to_band(p, n, y >> 2, y, pixels);
      if ((y & 3) == 0) done[1] = add_to_band(p, n, (y >> 2) - 1, y, pixels);
    }
    const unsigned any = __ballot_sync(~0u, done[0] >= 0 || done[1] >= 0);
    if (any == 0) continue;
    fence_acq_rel_gpu();  // acquire: every contributor's release, seen through the count
    __syncwarp();
#pragma unroll
    for (int h = 0; h < 2; ++h)
      for (unsigned m = __ballot_sync(~0u, done[h] >= 0); m != 0; m &= m - 1) {
        const int id = __shfl_sync(~0u, done[h], __ffs(m) - 1);
        pool_band(tmap_pre, p, id, buf, smem_u32(pool_bar), phase, lane);
      }
  }
}
#endif  // CNNRT_WGMMA_DEVICE

}  // namespace cnnrt::cuda::tma_window
