// Hopper (sm_90a) fp16 convolution by shifted windows (conv_fp16_window): stride 1, no padding,
// in_c <= 64, out_c <= 64, up to 9 taps — AlexNet conv1's space-to-depth form (57x57x48 -> 64,
// 3x3).  The host side is tma_window.cu.
//
// DESIGN NOTE
// * Why: the im2col conv (tma_mainloop.cuh) brings every tap's 128-pixel box from L2 on its own,
//   so a 3x3 conv reads each input pixel 9 times; with 64 output channels per k-tile that is
//   128 bytes from L2 per 64 x 64 MACs, and conv1's inner conv ran at ~380 TFLOP/s at best (the
//   64x256 weights-as-A tile; ~890 MB L2 -> SM at batch 256, ~6 TB/s: the L2's pace).
//   Here the output is computed on the *input's* grid: virtual pixel v = (n * in_h + y) * in_w +
//   x, valid where y < out_h and x < out_w (conv1: 55 of 57 rows and columns, 93 %).  Tap (r, s)
//   of virtual pixel v reads input pixel v + r * in_w + s, so the taps of WN consecutive virtual
//   pixels are WN-row windows of ONE slab of WN + (kh - 1) * in_w + kw - 1 input pixels, loaded
//   once by TMA (2-D tiled map over [pixels][channels], 128-byte swizzle, channels past the
//   stored ones and pixels past the tensor zero-filled): each input pixel comes from L2 about
//   (WN + halo) / WN times instead of kh * kw.  The invalid virtual pixels (a row's last kw - 1,
//   an image's last kh - 1 rows) are computed and dropped by the epilogue.
// * The shifted windows are wgmma descriptors: the slab is [pixel][64 channels] in the 128-byte
//   swizzle (rows of 128 bytes, the swizzle's phase = address bits 7-9), tap (r, s)'s B operand
//   starts (r * in_w + s) rows in, a start that is not on the 1024-byte pattern boundary; the
//   descriptor's base offset field carries the row phase (PTX ISA, "matrix descriptor":
//   (start >> 7) & 7), kBaseOffset below (the lab measured both forms, conv_tma_lab "win"/"winb").
// * Roles: weights as A (M = out_c <= 64: one m64 block), the slab as B (N = WN = 128 virtual
//   pixels).  The whole weight ([64][taps x 64] fp16, 8 KB per tap, rows past out_c and channels
//   past in_c zero) stays in shared memory for the CTA's life: one TMA load per CTA.  The k16
//   steps per tap are the stored channels' (c_steps = ceil(in_c / 16): 3 for conv1's 48, so the
//   zero channels 48-63 are never multiplied).
// * Warp roles: warpgroup 0 the producer (one thread issues every TMA; setmaxnreg 40), warpgroups
//   1-2 two independent consumers (setmaxnreg 232): the CTA's j-th unit (WN virtual pixels) goes
//   to consumer j % 2, which owns a ring of 2 stages (one slab each: 2 boxes of 128 pixels, 32
//   KB).  A consumer issues the unit's taps x c_steps wgmma as one group, waits for it, releases
//   the stage and runs the epilogue — while the other consumer's group keeps the tensor pipe
//   busy, so the epilogue overlaps MMA without a third warpgroup.
// * Epilogue: tma_transpose_epilogue.cuh's transpose_store (bias, clamp, fp16, stmatrix.trans
//   into per-warp staging, 16-byte stores), WindowRows mapping virtual pixels to output rows.
// * Shared memory: 1 KB alignment slack + taps x 8 KB of weight + 2 x 2 x 32 KB of slabs + 16 KB
//   of staging: 217 KB for 9 taps.
#pragma once

#include <cuda.h>
#include <cuda_fp16.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/conv/epilogue_params.h"
#include "kernels/cuda/conv/ptx.cuh"
#include "kernels/cuda/conv/tma_mainloop.cuh"
#include "kernels/cuda/conv/tma_transpose_epilogue.cuh"

namespace cnnrt::cuda::tma_window {

constexpr int kThreads = tma_detail::kThreads;
constexpr int kWN = 128;            // virtual pixels per unit (one consumer's tile)
constexpr int kSlabRows = 2 * 128;  // two boxes of 128 input pixels
constexpr uint32_t kSlabBytes = kSlabRows * 128;
constexpr uint32_t kTapBytes = 64 * 128;  // 64 weight rows x 64 halves
constexpr int kMaxTaps = 9;
constexpr int kStages = 2;  // per consumer
constexpr int kChunk = 64;  // epilogue pixels per staging pass
constexpr size_t kStaging = 8 * kChunk * 16 * 2;
// Dynamic shared memory for `taps` taps.
constexpr size_t smem_bytes(int taps) {
  return 1024 + size_t(taps) * kTapBytes + 2 * kStages * size_t(kSlabBytes) + kStaging;
}
static_assert(smem_bytes(kMaxTaps) <= 227 * 1024 - 2048, "fits the opt-in with the static part");

// Everything the kernel reads besides the two tensor maps.
struct TmaWindowParams {
  const float* bias = nullptr;  // [out_c] (zeros when the layer has none)
  __half* y = nullptr;          // [n * out_h * out_w][out_c]
  int out_c = 0;
  int in_h = 0, in_w = 0, out_h = 0, out_w = 0;
  int kh = 1, kw = 1, taps = 1;  // taps = kh * kw <= kMaxTaps
  int c_steps = 4;               // k16 steps per tap: ceil(in_c / 16)
  int pixels = 0;                // n * in_h * in_w: the virtual pixels (the last unit's tail: none)
  long long units = 0;           // ceil(pixels / kWN)
  EpilogueClamp act;
};

// The output rows of a lane's virtual pixels v, v + 16, ... (transpose_store's cursor): none past
// the images (the last unit's tail), nor in a row's last kw - 1 columns or an image's last kh - 1
// rows.  (n, y, x) advance with v, so only the first pixel costs divisions.
struct WindowRows {
  int v, n, y, x;
  int pixels, in_h, in_w, out_h, out_w;
  __host__ __device__ WindowRows(const TmaWindowParams& p, int first)
      : v(first), pixels(p.pixels), in_h(p.in_h), in_w(p.in_w), out_h(p.out_h), out_w(p.out_w) {
    const int hw = in_h * in_w;
    n = v / hw;
    const int rem = v - n * hw;
    y = rem / in_w;
    x = rem - y * in_w;
  }
  __host__ __device__ long long next() {
    const long long row = v < pixels && y < out_h && x < out_w
                              ? (static_cast<long long>(n) * out_h + y) * out_w + x
                              : -1;
    v += 16;
    x += 16;
    while (x >= in_w) {
      x -= in_w;
      if (++y == in_h) {
        y = 0;
        ++n;
      }
    }
    return row;
  }
};

#ifdef CNNRT_WGMMA_DEVICE
using namespace cnnrt::cuda::ptx;

// The 128-byte-swizzle K-major descriptor of a slab window starting at any row (design note).
template <bool kBaseOffset>
__device__ __forceinline__ uint64_t window_desc(uint32_t addr) {
  uint64_t d = make_desc(addr);
  if constexpr (kBaseOffset) d |= uint64_t((addr >> 7) & 7) << 49;
  return d;
}

template <int KH, int KW, int CSTEPS, bool kBaseOffset>
__device__ __forceinline__ void window_kernel_body(const CUtensorMap& tmap_x,
                                                   const CUtensorMap& tmap_w,
                                                   const TmaWindowParams& p) {
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  __shared__ __align__(8) uint64_t full_bar[2][kStages], empty_bar[2][kStages], w_bar;
  const uint32_t base = (smem_u32(smem_raw) + 1023u) & ~1023u;
  const uint32_t wsm = base;
  const uint32_t slabs = wsm + uint32_t(p.taps) * kTapBytes;
  const uint32_t staging_off = slabs + 2 * kStages * kSlabBytes - smem_u32(smem_raw);
  const int wg = threadIdx.x / 128;
  if (threadIdx.x == 0) {
    for (int c = 0; c < 2; ++c)
      for (int s = 0; s < kStages; ++s) {
        mbarrier_init(smem_u32(&full_bar[c][s]), 1);
        mbarrier_init(smem_u32(&empty_bar[c][s]), 1);
      }
    mbarrier_init(smem_u32(&w_bar), 1);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  if (wg == 0) {  // ---------------- producer: the weight once, then a slab per unit
    setmaxnreg_dec<tma_detail::kProducerRegs>();
    if (threadIdx.x == 0) {
      const uint32_t wb = smem_u32(&w_bar);
      tma_detail::mbar_expect_tx(wb, uint32_t(p.taps) * kTapBytes);
      for (int t = 0; t < p.taps; ++t)
        tma_detail::tma_load_2d(wsm + t * kTapBytes, &tmap_w, t * 64, 0, wb);
      long long j = 0;
      for (long long u = blockIdx.x; u < p.units; u += gridDim.x, ++j) {
        const int c = int(j & 1), s = int((j >> 1) % kStages);
        const uint32_t phase = uint32_t((j >> 1) / kStages) & 1;
        mbarrier_wait_parity(smem_u32(&empty_bar[c][s]), phase ^ 1);
        const uint32_t fb = smem_u32(&full_bar[c][s]);
        tma_detail::mbar_expect_tx(fb, kSlabBytes);
        const uint32_t dst = slabs + (c * kStages + s) * kSlabBytes;
        const int v0 = int(u * kWN);
        tma_detail::tma_load_2d(dst, &tmap_x, 0, v0, fb);
        tma_detail::tma_load_2d(dst + 128 * 128, &tmap_x, 0, v0 + 128, fb);
      }
    }
  } else {  // ---------------- consumers: the unit's taps as one wgmma group, then the epilogue
    setmaxnreg_inc<tma_detail::kConsumerRegs>();
    const int cw = wg - 1, warp = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32;
    __half* stg = reinterpret_cast<__half*>(smem_raw + staging_off) + (cw * 4 + warp) * kChunk * 16;
    const int in_w = p.in_w;
    float acc[1][kWN / 2];
    mbarrier_wait_parity(smem_u32(&w_bar), 0);
    long long j = cw;
    for (long long u = blockIdx.x + cw * static_cast<long long>(gridDim.x); u < p.units;
         u += 2 * static_cast<long long>(gridDim.x), j += 2) {
      const int s = int((j >> 1) % kStages);
      const uint32_t phase = uint32_t((j >> 1) / kStages) & 1;
      mbarrier_wait_parity(smem_u32(&full_bar[cw][s]), phase);
      const uint32_t slab = slabs + (cw * kStages + s) * kSlabBytes;
#pragma unroll
      for (int i = 0; i < kWN / 2; ++i) acc[0][i] = 0.f;
      fence_operands(acc[0]);
      wgmma_fence();
      // Every loop unrolled: a wgmma inside a run-time loop makes ptxas inject a warpgroup
      // fence before it (C7519), serialising the group.
#pragma unroll
      for (int r = 0; r < KH; ++r)
#pragma unroll
        for (int q = 0; q < KW; ++q) {
          const uint32_t a = wsm + (r * KW + q) * kTapBytes;
          const uint32_t b = slab + uint32_t(r * in_w + q) * 128;
#pragma unroll
          for (int k = 0; k < CSTEPS; ++k)
            Mma<kWN>::run(acc[0], make_desc(a + k * 32), window_desc<kBaseOffset>(b + k * 32));
        }
      wgmma_commit();
      fence_operands(acc[0]);
      wgmma_wait<0>();
      fence_operands(acc[0]);
      if (threadIdx.x % 128 == 0) mbarrier_arrive(smem_u32(&empty_bar[cw][s]));
      tma_detail::transpose_store<kWN, kChunk, false>(acc, p, stg, 0, warp, lane,
                                                      WindowRows(p, int(u * kWN) + lane / 2));
    }
  }
}
#endif  // CNNRT_WGMMA_DEVICE

// A KH x KW conv over CSTEPS k16 steps of channels per tap (p.kh, p.kw, p.c_steps say the
// same); kBaseOffset: the window descriptors carry the row phase in the base-offset field
// (design note).
template <int KH, int KW, int CSTEPS, bool kBaseOffset>
__global__ void __launch_bounds__(kThreads, 1)
    conv_window_kernel(const __grid_constant__ CUtensorMap tmap_x,
                       const __grid_constant__ CUtensorMap tmap_w, const TmaWindowParams p) {
#ifdef CNNRT_WGMMA_DEVICE
  window_kernel_body<KH, KW, CSTEPS, kBaseOffset>(tmap_x, tmap_w, p);
#endif
}

}  // namespace cnnrt::cuda::tma_window
