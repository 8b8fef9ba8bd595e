// The TMA mainloop's PTX wrappers (tma_mainloop.cuh and the window conv's kernel use them):
// mbarrier expect-tx and cluster arrive, the tiled (2-D to 4-D) / multicast / im2col bulk tensor
// loads, the
// quad transpose of the epilogues' 16-byte stores, and the cluster barrier and rank.  The generic
// wgmma / mbarrier wrappers are ptx.cuh's.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "kernels/cuda/conv/ptx.cuh"
#include "kernels/cuda/gemv_common.cuh"  // l2_evict_first_policy

namespace cnnrt::cuda::tma_detail {

#ifdef CNNRT_WGMMA_DEVICE
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
// Tiled 3-D and 4-D boxes (the window conv's pre-pool bands, its quantising form's fp32 source).
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const CUtensorMap* map, int c0, int c1,
                                            int c2, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
      : "memory");
}
__device__ __forceinline__ void tma_load_4d(uint32_t dst, const CUtensorMap* map, int c0, int c1,
                                            int c2, int c3, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4, %5}], [%6];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
      : "memory");
}
// The same with an L2 cache policy (l2_evict_first_policy): a weight read once per forward (the
// int8 linear's split-K stream) goes first out of L2, so the slices' partial sums its epilogue
// writes are still there when the finish reads them back (docs/PERFORMANCE.md run 45g).
__device__ __forceinline__ void tma_load_2d_hint(uint32_t dst, const CUtensorMap* map, int c0,
                                                 int c1, uint32_t bar, uint64_t policy) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      ".L2::cache_hint [%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(bar), "l"(policy)
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
// 128 pixels x one k-tile row of channels starting at the output pixel whose tap-(0,0) input is
// (w, h) of image n, shifted by the tap (off_w, off_h); zeros outside the bounding box / tensor.
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
// w[t] becomes lane t's former w[q].  Both epilogues use it so every lane stores 16 contiguous
// bytes of a row (8 fp16 columns, or 16 int8 after two byte permutes).
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
#endif  // CNNRT_WGMMA_DEVICE

}  // namespace cnnrt::cuda::tma_detail
