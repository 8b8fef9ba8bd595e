// Hopper (sm_90a) convolution by shifted windows, fp16 (conv_fp16_window) and int8
// (conv_int8_window): stride 1, no padding, 3x3, 64 input channels per pixel, out_c <= 64 —
// AlexNet conv1's space-to-depth form (57x57x48 -> 64).  The host side is tma_window.cu.
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
//   once by TMA (2-D tiled map over [pixels][channels], channels past the stored ones and pixels
//   past the tensor zero-filled): each input pixel comes from L2 about (WN + halo) / WN times
//   instead of kh * kw.  The invalid virtual pixels (a row's last kw - 1, an image's last kh - 1
//   rows) are computed and dropped by the epilogue.
// * The shifted windows are wgmma descriptors: the slab is [pixel][64 channels] swizzled (fp16:
//   128-byte rows, the 128-byte swizzle; int8: 64-byte rows, the 64-byte one), tap (r, s)'s B
//   operand starts (r * in_w + s) rows in, a start off the swizzle pattern's boundary.  The
//   hardware swizzles on the address bits, so the plain start address places the window: the lab
//   also tried the descriptor's base-offset field set to the row phase, which was wrong on every
//   element (docs/PERFORMANCE.md run 41b).
// * Roles: weights as A (M = out_c <= 64: one m64 block), the slab as B (N = WN = 128 virtual
//   pixels).  The whole weight ([64][taps x 64] elements, rows past out_c and channels past in_c
//   zero) stays in shared memory for the CTA's life: one TMA load per CTA.  fp16's k16 steps per
//   tap are the stored channels' (c_steps = ceil(in_c / 16): 3 for conv1's 48, so the zero
//   channels 48-63 are never multiplied); int8's are two k32 (64 bytes: the zero channels too).
// * Warp roles: warpgroup 0 the producer (one thread issues every TMA; setmaxnreg 40), warpgroups
//   1-2 two independent consumers (setmaxnreg 232): the CTA's j-th unit (WN virtual pixels) goes
//   to consumer j % 2, which owns a ring of 2 stages (one slab each: 2 boxes of 128 pixels, 32 /
//   16 KB).  A consumer issues the unit's taps x c_steps wgmma as one group, waits for it,
//   releases the stage and runs the epilogue — while the other consumer's group keeps the tensor
//   pipe busy, so the epilogue overlaps MMA without a third warpgroup.
// * Epilogue: tma_transpose_epilogue.cuh's transpose_store (fp16: bias, clamp, stmatrix.trans
//   into per-warp staging, 16-byte stores) or transpose_store_s8 (int8: the family's
//   requantisation, bit for bit the integer reference), WindowRows mapping virtual pixels to
//   output rows.
// * Shared memory: 1 KB alignment slack + taps x 8 / 4 KB of weight + 2 x 2 x 32 / 16 KB of slabs
//   + 16 / 8 KB of staging: 217 / 109 KB for 9 taps (fp16 / int8).
// * Three consumers (int8 only; C = 3, tma_roles.h's TmaRoles<3>: 512 threads, setmaxnreg 32 /
//   160): the j-th unit to consumer j % 3, each with its 2-stage ring; 1 + 36 + 3 x 2 x 16 + 12 KB
//   = 145 KB (fp16's slabs would need 265).  Why: the int8 window conv ran its tensor pipe ~a
//   third of the time (run 41k: 97 us at batch 256 for ~31 us of MMA at the peak) with warps
//   waiting rather than issuing.  The hypothesis: each unit's epilogue (64 requantised outputs a
//   thread) outlasts its 18 MMAs, so two consumers leave the pipe idle while both are in their
//   epilogues, and a third keeps one more unit's MMAs ready.  Measured (H200, docs/PERFORMANCE.md
//   runs 50-51): -6 to -7 % at batch 256, slower where a CTA has one unit (batch 1 and 4):
//   ConvS8Window::consumers_at takes three where the CTAs take more than one unit.
// * Quantising (int8 only; WindowS8Q, tma_window_quantise.cuh): two producer warpgroups build the
//   slabs from the fp32 graph input themselves (512 threads, setmaxnreg 96 / 160, a ring of x'
//   rows after the staging, the full barriers counting 8 warp arrivals, a contiguous range of
//   units per CTA); a comparison entry (conv_int8_s2d_quantise: slower, run 51).
// * Pooling (int8 only; WindowS8P, conv_window_pool_kernel, tma_window_pool.cuh): the producer
//   warpgroup's warps 1..C pool the output by bands of two pooled rows as the consumers store it
//   (a stored / freed barrier ring per consumer, band counters in global memory, the last
//   contributor pools from L2 by a TMA box): no pool pass; C x 20 KB of band buffers after the
//   staging (three consumers: 205 KB).  2x slower than the pool pass (run 52): a comparison
//   entry, conv_int8_s2d_window3_pool.
#pragma once

#include <cuda.h>
#include <cuda_fp16.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/conv/epilogue_params.h"
#include "kernels/cuda/conv/ptx.cuh"
#include "kernels/cuda/conv/tma_mainloop.cuh"
#include "kernels/cuda/conv/tma_roles.h"
#include "kernels/cuda/conv/tma_transpose_epilogue.cuh"
#include "kernels/cuda/conv/tma_window_pool.cuh"
#include "kernels/cuda/conv/tma_window_quantise.cuh"
#include "kernels/cuda/pdl.cuh"

namespace cnnrt::cuda::tma_window {

constexpr int kThreads = tma_detail::kThreads;
constexpr int kWN = 128;            // virtual pixels per unit (one consumer's tile)
constexpr int kSlabRows = 2 * 128;  // two boxes of 128 input pixels
constexpr int kMaxTaps = 9;
constexpr int kStages = 2;  // per consumer
constexpr int kChunk = 64;  // epilogue pixels per staging pass

// What the kernel reads besides the tensor maps and the element's own epilogue fields.
struct WindowGeometry {
  int out_c = 0;
  int in_h = 0, in_w = 0, out_h = 0, out_w = 0;
  int kh = 1, kw = 1, taps = 1;  // taps = kh * kw <= kMaxTaps
  int c_steps = 4;               // MMA k steps per tap (fp16: ceil(in_c / 16); int8: 2)
  int pixels = 0;                // n * in_h * in_w: the virtual pixels (the last unit's tail: none)
  long long units = 0;           // ceil(pixels / kWN)
};
// conv_fp16_window's parameters.
struct TmaWindowParams : WindowGeometry {
  const float* bias = nullptr;  // [out_c] (zeros when the layer has none)
  __half* y = nullptr;          // [n * out_h * out_w][out_c]
  EpilogueClamp act;
};
// conv_int8_window's (the int8 family's epilogue: acc + bias_q, requantise by M[c], clamp).
struct TmaWindowS8Params : WindowGeometry {
  const int32_t* bias = nullptr;      // bias_q [out_c]
  const float* multiplier = nullptr;  // M[c]
  int8_t* y = nullptr;                // int8 NHWC/16 [n * out_h * out_w][out_stride]
  int out_stride = 0;
  int lo = -127, hi = 127;
  int small_sums = 0;  // every |acc + bias| < 2^22: the conversion-free requantisation
};
// The quantising instance's (tma_window_quantise.cuh): the same, and the fp32 source's geometry.
struct TmaWindowS8QParams : TmaWindowS8Params {
  S2dSource src;
};
// The pooling instance's (tma_window_pool.cuh): y is the pre-pool tensor, pool.y the output.
struct TmaWindowS8PParams : TmaWindowS8Params {
  WindowPool pool;
};

// Element traits: a k-tile row of kRowBytes (one tap's 64 channels: 64 halves, the 128-byte
// swizzle, or 64 int8, the 64-byte one), the accumulator, the parameters and the staging.
// kQuantise: the producer builds the slabs from the fp32 source (tma_window_quantise.cuh).
// kPool: helper warps pool the output by bands as it is stored (tma_window_pool.cuh).
struct WindowF16 {
  using Acc = float;
  using Params = TmaWindowParams;
  static constexpr bool kQuantise = false, kPool = false;
  static constexpr uint32_t kRowBytes = 128;
  static constexpr size_t kStaging = 8 * kChunk * 16 * 2;  // 8 warps x 64 pixels x 16 halves
};
struct WindowS8 {
  using Acc = int;
  using Params = TmaWindowS8Params;
  static constexpr bool kQuantise = false, kPool = false;
  static constexpr uint32_t kRowBytes = 64;
  static constexpr size_t kStaging = 8 * kChunk * 16;  // 8 warps x 64 pixels x 16 bytes
};
struct WindowS8Q : WindowS8 {
  using Params = TmaWindowS8QParams;
  static constexpr bool kQuantise = true;
};
struct WindowS8P : WindowS8 {
  using Params = TmaWindowS8PParams;
  static constexpr bool kPool = true;
};
template <class E>
constexpr uint32_t slab_bytes() {
  return kSlabRows * E::kRowBytes;
}
template <class E>
constexpr uint32_t tap_bytes() {
  return 64 * E::kRowBytes;  // 64 weight rows
}
// Staging per consumer warp (4 warps a consumer).
template <class E>
constexpr size_t staging_per_warp() {
  return E::kStaging / 8;
}
// The quantising instance's ring of staged x' rows, or the pooling one's band buffers: their
// offset from the aligned base (after the staging; a multiple of 1 KB).
template <class E, int C = 2>
constexpr size_t ring_offset(int taps) {
  return size_t(taps) * tap_bytes<E>() + C * kStages * size_t(slab_bytes<E>()) +
         4 * C * staging_per_warp<E>();
}
// Dynamic shared memory for `taps` taps and C consumers.
template <class E, int C = 2>
constexpr size_t smem_bytes(int taps) {
  return 1024 + ring_offset<E, C>(taps) + (E::kQuantise ? size_t(kRing) * kSlotBytes : 0) +
         (E::kPool ? size_t(C) * kPoolBufBytes : 0);
}
static_assert(smem_bytes<WindowF16>(kMaxTaps) <= 227 * 1024 - 2048 &&
                  smem_bytes<WindowS8, 3>(kMaxTaps) <= 227 * 1024 - 2048 &&
                  smem_bytes<WindowS8Q>(kMaxTaps) <= 227 * 1024 - 2048 &&
                  smem_bytes<WindowS8P, 3>(kMaxTaps) <= 227 * 1024 - 2048,
              "fits the opt-in with the static part");
static_assert(ring_offset<WindowS8Q>(kMaxTaps) % 1024 == 0 && kSlotBytes % 1024 == 0 &&
                  ring_offset<WindowS8P, 3>(kMaxTaps) % 1024 == 0 && kPoolBufBytes % 1024 == 0,
              "the ring's and the band buffers' TMA boxes start 1 KB-aligned");

// The output rows of a lane's virtual pixels v, v + 16, ... (transpose_store's cursor): none past
// the images (the last unit's tail), nor in a row's last kw - 1 columns or an image's last kh - 1
// rows.  (n, y, x) advance with v, so only the first pixel costs divisions.
struct WindowRows {
  int v, n, y, x;
  int pixels, in_h, in_w, out_h, out_w, step;
  __host__ __device__ WindowRows(const WindowGeometry& p, int first, int step_)
      : v(first),
        pixels(p.pixels),
        in_h(p.in_h),
        in_w(p.in_w),
        out_h(p.out_h),
        out_w(p.out_w),
        step(step_) {
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
    v += step;
    x += step;
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

// One MMA k step of a unit: the weight tap's and the slab window's K-major descriptors, any row
// start (design note), 32 bytes of K (fp16 m64n128k16 in the 128-byte swizzle, int8 m64n128k32
// in the 64-byte one).
__device__ __forceinline__ void window_mma(float (&acc)[kWN / 2], uint32_t a, uint32_t b) {
  Mma<kWN>::run(acc, make_desc(a), make_desc(b));
}
__device__ __forceinline__ void window_mma(int (&acc)[kWN / 2], uint32_t a, uint32_t b) {
  MmaS8<kWN>::run(acc, tma_detail::desc_of<64>(a), tma_detail::desc_of<64>(b));
}

// The CTA's j-th unit (j >= 0) goes to consumer j % C as that consumer's (j / C)-th, its round
// (the mask and shift for two: the two-consumer images compile as they did before C existed).
template <int C>
__device__ __forceinline__ int consumer_of(long long j) {
  if constexpr (C == 2) return int(j & 1);
  return int(j % C);
}
template <int C>
__device__ __forceinline__ long long round_of(long long j) {
  if constexpr (C == 2) return j >> 1;
  return j / C;
}

template <class E, int KH, int KW, int CSTEPS, int C>
__device__ __forceinline__ void window_kernel_body(const CUtensorMap& tmap_x,
                                                   const CUtensorMap& tmap_w,
                                                   const typename E::Params& p,
                                                   const CUtensorMap* tmap_pre = nullptr) {
  using Roles = tma_detail::TmaRoles<C>;
  constexpr bool kQ = E::kQuantise;
  static_assert(!kQ || C == 2, "the quantising producer: two consumers");
  constexpr int kProducerRegs = kQ ? kQuantiseProducerRegs : Roles::kProducerRegs;
  constexpr int kConsumerRegs = kQ ? kQuantiseConsumerRegs : Roles::kConsumerRegs;
  constexpr uint32_t kSlabBytes = slab_bytes<E>(), kTapBytes = tap_bytes<E>();
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  __shared__ __align__(8) uint64_t full_bar[C][kStages], empty_bar[C][kStages], w_bar;
  __shared__ __align__(8) uint64_t row_bar[kQ ? kRing : 1];  // the quantising ring's rows
  constexpr int kPC = E::kPool ? C : 1;  // the pooling hand-off (tma_window_pool.cuh)
  __shared__ __align__(8) uint64_t stored_bar[kPC][kPoolSlots], freed_bar[kPC][kPoolSlots],
      pool_bar[kPC];
  const uint32_t base = (smem_u32(smem_raw) + 1023u) & ~1023u;
  const uint32_t wsm = base;
  const uint32_t slabs = wsm + uint32_t(p.taps) * kTapBytes;
  const uint32_t staging_off = slabs + C * kStages * kSlabBytes - smem_u32(smem_raw);
  const int wg = threadIdx.x / 128;
  if (threadIdx.x == 0) {
    for (int c = 0; c < C; ++c)
      for (int s = 0; s < kStages; ++s) {
        // The quantising producer's warps each arrive; the TMA's one thread with its bytes.
        mbarrier_init(smem_u32(&full_bar[c][s]), kQ ? 4 * kQuantiseProducers : 1);
        mbarrier_init(smem_u32(&empty_bar[c][s]), 1);
      }
    mbarrier_init(smem_u32(&w_bar), 1);
    if constexpr (kQ)
      for (int r = 0; r < kRing; ++r) mbarrier_init(smem_u32(&row_bar[r]), 1);
    if constexpr (E::kPool)
      for (int c = 0; c < C; ++c) {
        for (int s = 0; s < kPoolSlots; ++s) {
          mbarrier_init(smem_u32(&stored_bar[c][s]), 4);  // the consumer's four warps
          mbarrier_init(smem_u32(&freed_bar[c][s]), 1);   // its helper's lane 0
        }
        mbarrier_init(smem_u32(&pool_bar[c]), 1);
      }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  // The quantising producer never writes a row's last 16 bytes (channels 48-63): zero them once,
  // for the async proxy's reads too.
  if constexpr (kQ) {
    uint4* slab_words = reinterpret_cast<uint4*>(smem_raw + (slabs - smem_u32(smem_raw)));
    for (uint32_t i = threadIdx.x; i < C * kStages * kSlabBytes / 16; i += blockDim.x)
      slab_words[i] = make_uint4(0, 0, 0, 0);
    fence_proxy_async_shared();
  }
  // The quantising instance's CTA takes a contiguous range of units (its x' rows shared by
  // consecutive units); the TMA instances every grid-th unit.
  const long long first = kQ ? blockIdx.x * p.units / gridDim.x : blockIdx.x;
  const long long end = kQ ? (blockIdx.x + 1) * p.units / gridDim.x : p.units;
  const long long step = kQ ? 1 : gridDim.x;
  __syncthreads();

  constexpr int kProducers = kQ ? kQuantiseProducers : 1;  // producer warpgroups
  if (wg < kProducers) {  // ---------------- producer: the weight once, then a slab per unit
    setmaxnreg_dec<kProducerRegs>();
    if (threadIdx.x == 0) {
      const uint32_t wb = smem_u32(&w_bar);
      tma_detail::mbar_expect_tx(wb, uint32_t(p.taps) * kTapBytes);
      for (int t = 0; t < p.taps; ++t)
        tma_detail::tma_load_2d(wsm + t * kTapBytes, &tmap_w, t * 64, 0, wb);
    }
    if constexpr (kQ) {
      quantise_producer<C, kStages, kWN, kSlabBytes>(
          tmap_x, p, smem_raw, smem_u32(smem_raw), slabs - smem_u32(smem_raw),
          uint32_t(base - smem_u32(smem_raw) + ring_offset<E, C>(p.taps)), full_bar, empty_bar,
          row_bar, first, end, [](long long j) { return consumer_of<C>(j); },
          [](long long j) { return round_of<C>(j); });
    } else if (E::kPool && threadIdx.x >= 32 && threadIdx.x < 32 * (C + 1)) {
      // Warps 1..C: the pooling helpers of consumers 0..C-1 (only where E::kPool).
      if constexpr (E::kPool) {
        const int h = threadIdx.x / 32 - 1;
        uint8_t* buf =
            smem_raw + (base - smem_u32(smem_raw)) + ring_offset<E, C>(p.taps) + h * kPoolBufBytes;
        pool_helper(*tmap_pre, p, stored_bar[h], freed_bar[h], buf, &pool_bar[h], first + h * step,
                    end, C * step, kWN, threadIdx.x % 32);
      }
    } else if (threadIdx.x == 0) {
      long long j = 0;
      for (long long u = blockIdx.x; u < p.units; u += gridDim.x, ++j) {
        const int c = consumer_of<C>(j), s = int(round_of<C>(j) % kStages);
        const uint32_t phase = uint32_t(round_of<C>(j) / kStages) & 1;
        mbarrier_wait_parity(smem_u32(&empty_bar[c][s]), phase ^ 1);
        const uint32_t fb = smem_u32(&full_bar[c][s]);
        tma_detail::mbar_expect_tx(fb, kSlabBytes);
        const uint32_t dst = slabs + (c * kStages + s) * kSlabBytes;
        const int v0 = int(u * kWN);
        tma_detail::tma_load_2d(dst, &tmap_x, 0, v0, fb);
        tma_detail::tma_load_2d(dst + 128 * E::kRowBytes, &tmap_x, 0, v0 + 128, fb);
      }
    }
  } else {  // ---------------- consumers: the unit's taps as one wgmma group, then the epilogue
    setmaxnreg_inc<kConsumerRegs>();
    const int cw = wg - kProducers, warp = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32;
    uint8_t* stg = smem_raw + staging_off + (cw * 4 + warp) * staging_per_warp<E>();
    const int in_w = p.in_w;
    typename E::Acc acc[1][kWN / 2];
    mbarrier_wait_parity(smem_u32(&w_bar), 0);
    long long j = cw;
    for (long long u = first + cw * step; u < end; u += C * step, j += C) {
      const int s = int(round_of<C>(j) % kStages);
      const uint32_t phase = uint32_t(round_of<C>(j) / kStages) & 1;
      mbarrier_wait_parity(smem_u32(&full_bar[cw][s]), phase);
      const uint32_t slab = slabs + (cw * kStages + s) * kSlabBytes;
#pragma unroll
      for (int i = 0; i < kWN / 2; ++i) acc[0][i] = 0;
      fence_operands(acc[0]);
      wgmma_fence();
      // Every loop unrolled: a wgmma inside a run-time loop makes ptxas inject a warpgroup
      // fence before it (C7519), serialising the group.
#pragma unroll
      for (int r = 0; r < KH; ++r)
#pragma unroll
        for (int q = 0; q < KW; ++q) {
          const uint32_t a = wsm + (r * KW + q) * kTapBytes;
          const uint32_t b = slab + uint32_t(r * in_w + q) * E::kRowBytes;
#pragma unroll
          for (int k = 0; k < CSTEPS; ++k) window_mma(acc[0], a + k * 32, b + k * 32);
        }
      wgmma_commit();
      fence_operands(acc[0]);
      wgmma_wait<0>();
      fence_operands(acc[0]);
      if (threadIdx.x % 128 == 0) mbarrier_arrive(smem_u32(&empty_bar[cw][s]));
      if constexpr (std::is_same_v<E, WindowF16>)
        tma_detail::transpose_store<kWN, kChunk, false>(acc, p, reinterpret_cast<__half*>(stg), 0,
                                                        warp, lane,
                                                        WindowRows(p, int(u * kWN) + lane / 2, 16));
      else
        p.small_sums ? tma_detail::transpose_store_s8<kWN, kChunk, true>(
                           acc, p, reinterpret_cast<int8_t*>(stg), 0, warp, lane,
                           WindowRows(p, int(u * kWN) + lane, 32))
                     : tma_detail::transpose_store_s8<kWN, kChunk, false>(
                           acc, p, reinterpret_cast<int8_t*>(stg), 0, warp, lane,
                           WindowRows(p, int(u * kWN) + lane, 32));
      if constexpr (E::kPool) {
        // The unit's rows are stored: hand them to the helper (tma_window_pool.cuh), the slot
        // once it has read the slot's previous use.
        const long long t = round_of<C>(j);
        const int slot = int(t % kPoolSlots);
        __syncwarp();
        if (lane == 0) {
          mbarrier_wait_parity(smem_u32(&freed_bar[cw][slot]), (uint32_t(t / kPoolSlots) & 1) ^ 1);
          mbarrier_arrive(smem_u32(&stored_bar[cw][slot]));
        }
      }
    }
  }
}
#endif  // CNNRT_WGMMA_DEVICE

// A KH x KW conv of element E (WindowF16, WindowS8) over CSTEPS MMA k steps per tap (p.kh,
// p.kw, p.c_steps say the same), on C consumer warpgroups (2, or 3: int8 only).
template <class E, int KH, int KW, int CSTEPS, int C = 2>
__global__ void __launch_bounds__(E::kQuantise ? kQuantiseCtaThreads
                                               : tma_detail::TmaRoles<C>::kThreads,
                                  1)
    conv_window_kernel(const __grid_constant__ CUtensorMap tmap_x,
                       const __grid_constant__ CUtensorMap tmap_w, const typename E::Params p) {
  static_assert(C == 2 || (C == 3 && std::is_same_v<E, WindowS8>),
                "three consumers: int8 only (fp16's slabs do not fit)");
  pdl_wait();
#ifdef CNNRT_WGMMA_DEVICE
  window_kernel_body<E, KH, KW, CSTEPS, C>(tmap_x, tmap_w, p);
#endif
}

// The pooling instance (int8, WindowS8P): the same, and the pre-pool tensor's map [n * out_h rows]
// [out_w columns][out_stride bytes] of boxes of five rows (tma_window_pool.cuh).
template <int C>
__global__ void __launch_bounds__(tma_detail::TmaRoles<C>::kThreads, 1)
    conv_window_pool_kernel(const __grid_constant__ CUtensorMap tmap_x,
                            const __grid_constant__ CUtensorMap tmap_w,
                            const __grid_constant__ CUtensorMap tmap_pre,
                            const TmaWindowS8PParams p) {
  pdl_wait();
#ifdef CNNRT_WGMMA_DEVICE
  window_kernel_body<WindowS8P, 3, 3, 2, C>(tmap_x, tmap_w, p, &tmap_pre);
#endif
}

}  // namespace cnnrt::cuda::tma_window
