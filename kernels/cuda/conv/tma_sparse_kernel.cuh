// Hopper (sm_90a) 2:4 sparse fp16 convolution on the TMA mainloop: the kernel
// (conv_fp16_sparse24_tma).  The host side is tma_sparse.cu, the measurements and the prediction
// docs/kernels/conv_fp16_sparse_tma.md.
//
// DESIGN NOTE
// * Why: conv_fp16_sparse24_wgmma (wgmma_sparse.cu) gathers its activations with cp.async from
//   all 256 threads, as the old dense wgmma conv did; on AlexNet conv3-conv5 the dense TMA conv
//   (conv_fp16_tma) now runs 2.1-3x that dense kernel, so the cp.async sparse conv (1.04-1.47x
//   the old dense one) lost to the dense TMA conv on every layer.  This is the sparse conv as an
//   instance of the one TMA mainloop (tma_mainloop.cuh, issue 9 item 2 / issue 11 item 3): the
//   ring, mbarriers, producer thread, register split, persistent scheduler and tap walk are the
//   dense instances' code; what is sparse's own is these traits and this epilogue.
// * Roles (TmaSparseF16::kWeightsAreA): only operand A of wgmma.mma_async.sp may be 2:4, so the
//   compressed weights are A (M = output channels, BM per tile) and the im2col boxes B (N =
//   output pixels, BN per tile: BN / 128 boxes of 128 pixels x 64 channels, 128-byte swizzle, the
//   boxes the dense instances load as A).  Per k-tile (64 of dense K: one tap, 64 channels) a
//   stage holds
//   - A: BM rows x 64 bytes (the 32 kept halves of the row's 64 K), one TMA tiled box of the
//     compressed [out_c][K / 2] weight with the 64-byte swizzle (rows past out_c: zero fill);
//   - B: BN rows x 128 bytes, the im2col boxes exactly as the dense instances issue them;
//   Both complete on the stage's full barrier, whose expect_tx is TmaRing::kStage = A + B bytes
//   (the whole boxes: out-of-bounds rows and pixels are filled and counted too).  The metadata
//   (16 nibbles per row and k-tile, 512 bytes per m64 block, packed by tma_sparse.cu in the order
//   the consumer threads read it) does not pass through the ring: each supplying thread (lanes 0-1
//   of a quad, below) copies its 8 bytes per m64 block into a private shared-memory slot by
//   cp.async six k-tiles ahead and reads them back before the fence (tma_mainloop.cuh's design
//   note).  Until run 39 it was a bulk copy into the stage read by every thread, which compute-
//   sanitizer racecheck reported as hazards (it does not take the mbarrier hand-off as order).
// * Consumers: warpgroup cw owns channels cw * BM / 2 .. (kMI = BM / 128 m64 blocks) x all BN
//   pixels, like the dense split of M.  Per k-tile and m64 block two m64nBNk32 wgmma.sp
//   (instruction kk: A + 32 bytes, i.e. +2 in the 64-byte-swizzle descriptor; B + 64 bytes) with
//   sparsity selector 0.  Metadata per thread (warp w, lane 4g + t; verified on an H100 for
//   wgmma_sparse.cu, whose layout this is): bits 0-15 the nibbles of row 16w + g, groups
//   4 (t % 2) .. +3 of the instruction's 8 (group j at bits 4j), bits 16-31 the same for row + 8;
//   stored as one uint2 per (block, thread pair t, t ^ 2) = {kk 0, kk 1}: 64 uint2 = 512 bytes per
//   m64 block and k-tile, thread index (w * 8 + g) * 2 + t % 2.  Under selector 0 only lanes t = 0,
//   1 supply metadata, so lanes 2 and 3 neither copy nor load it (kMetaSuppliers = 128).
// * wgmma.sp reads its metadata register asynchronously (docs/SPARSITY.md: reloading it while
//   the group was in flight gave wrong sums on an H100, and ptxas does not guard it), so the
//   mainloop runs the sparse k-loop two k-tiles at a time with two register sets (Meta even, odd)
//   and keep_alive, a store predicated on a parameter that is always 0 that ptxas cannot drop,
//   holds the previous set alive until the wait that retires its group.
// * Epilogue (TmaSparseEpilogue): the accumulators are [channel][pixel], NHWC wants
//   [pixel][channel]: each warp transposes its own 16 channels through a private 2 KB staging
//   tile (tma_transpose_epilogue.cuh, shared with the dense weights-as-A instance).
// * No fused MaxPool: a pooled layer runs this conv into the step's workspace and the family's
//   maxpool_fp16 pools it (the staged form of conv_fp16_tma, tma_sparse.cu).
// * Registers: kMI x BN / 2 accumulators (128 at 128x256 and 256x128) + 2 x 2 x kMI metadata
//   words within setmaxnreg's 232; the host checks every image starts at 168 (tma_mainloop.cuh).
#pragma once

#include <cuda.h>
#include <cuda_fp16.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/conv/epilogue.cuh"
#include "kernels/cuda/conv/epilogue_params.h"
#include "kernels/cuda/conv/ptx.cuh"
#include "kernels/cuda/conv/ptx_sparse.cuh"
#include "kernels/cuda/conv/tma_mainloop.cuh"
#include "kernels/cuda/conv/tma_transpose_epilogue.cuh"
#include "kernels/cuda/pdl.cuh"

namespace cnnrt::cuda::tma_sparse_detail {

constexpr int kThreads = tma_detail::kThreads;

// Everything the kernel reads besides the two tensor maps.  GEMM view: M = out_c (channel tiles
// of BM), N = batch * conv_h * conv_w output pixels (blocks of BN), K = kh * kw * in_c in (kh,
// kw, c) order, in_c % 64 == 0, stored compressed as K / 2 halves per row.
struct TmaSparseParams {
  const float* bias = nullptr;       // [out_c] (zeros when the layer has none)
  __half* y = nullptr;               // [m][out_c]
  const __half* residual = nullptr;  // [m][out_c], RESIDUAL instances only
  const uint8_t* meta = nullptr;     // [k_tiles][meta_blocks][512 bytes] (tma_sparse.cu)
  int m = 0, out_c = 0;
  int conv_h = 0, conv_w = 0;
  int sh = 1, sw = 1, pad_top = 0, pad_left = 0;
  int kw = 1;
  int c_blocks = 0, k_tiles = 0;  // in_c / 64, kh * kw * c_blocks
  int m_tiles = 0, units = 0;     // channel tiles; (pixel block, channel tile) pairs
  int meta_blocks = 0;            // m64 blocks of metadata per k-tile (out_c rounded up to 256)
  int zero = 0;                   // always 0 (keep_alive's predicate)
  EpilogueClamp act;              // after the bias (and the residual)
};

// The sparse element traits of tma_conv_mainloop (its design note lists what they declare).
struct TmaSparseF16 {
  using Acc = float;
  static constexpr bool kWeightsAreA = true, kSplitN = false, kMeta = true, kSplitK = false;
  // B: im2col rows of 64 channels (128 bytes, the 128-byte swizzle), the k-tile's TMA channel step.
  static constexpr int kRowBytes = 128, kTileElems = 64;
  // A: the 32 kept halves of a row's 64 K (64 bytes, the 64-byte swizzle), the weight box's step.
  static constexpr int kARowBytes = 64, kWeightTileElems = 32;
  // Metadata: 16 nibbles per row and k-tile; 512 bytes per m64 block.
  static constexpr int kMetaRowBytes = 8, kMetaBlockBytes = 64 * kMetaRowBytes;
  // A consumer thread's bytes of one m64 block and k-tile (a uint2: {kk 0, kk 1}).
  static constexpr int kMetaThreadBytes = 8;
  // Sparsity selector 0: lanes 0 and 1 of each quad supply the metadata (lanes 2 and 3 hold the
  // same words, not read), so 128 of a CTA's 256 consumer threads copy and load it.
  static constexpr int kMetaSuppliers = 128;

  // One k-tile's metadata registers of a consumer thread: per m64 block {kk 0, kk 1}.
  template <int MI>
  struct Meta {
    uint2 w[MI];
  };

#ifdef CNNRT_WGMMA_DEVICE
  // This thread's first metadata word of k-tile 0 for consumer warpgroup cw of channel tile
  // m_blk (BM rows: BM / 64 consecutive blocks per k-tile, the warpgroup's MI of them); k-tile kt
  // is p.meta_blocks * kMetaBlockBytes * kt further.
  template <int BM, int MI>
  static __device__ __forceinline__ const uint8_t* meta_source(const TmaSparseParams& p, int m_blk,
                                                               int cw) {
    return p.meta + (size_t(m_blk) * (BM / 64) + cw * MI) * kMetaBlockBytes +
           block_word_index() * kMetaThreadBytes;
  }
  // This consumer thread's place among the kMetaSuppliers (its warpgroup's 64, then its uint2
  // in a block), or -1 (lanes 2 and 3 of a quad).
  static __device__ __forceinline__ int meta_supplier_index() {
    if (threadIdx.x & 2) return -1;
    return (threadIdx.x - 128) / 128 * 64 + block_word_index();
  }
  // The uint2 of an m64 block's 64 this thread's lane pair reads (design note: warp w in the
  // warpgroup, lane 4g + t: (8w + g) * 2 + t % 2).
  static __device__ __forceinline__ int block_word_index() {
    const int lane = threadIdx.x % 32, warp = (threadIdx.x % 128) / 32;
    return (warp * 8 + lane / 4) * 2 + (lane & 1);
  }
  // Copies this thread's words of one k-tile (src: meta_source's, moved to the k-tile) into its
  // slot (block i at slot + i * kMetaSuppliers * kMetaThreadBytes), by cp.async.
  template <int MI>
  static __device__ __forceinline__ void copy_meta(uint32_t slot, const uint8_t* src) {
#pragma unroll
    for (int i = 0; i < MI; ++i)
      ptx::cp_async_small<8>(slot + i * kMetaSuppliers * kMetaThreadBytes,
                             src + i * kMetaBlockBytes);
  }
  // The words copy_meta put in the slot, into the registers the wgmma.sp read.
  template <int MI>
  static __device__ __forceinline__ void load_meta(Meta<MI>& m, uint32_t slot) {
#pragma unroll
    for (int i = 0; i < MI; ++i)
      asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];\n"
                   : "=r"(m.w[i].x), "=r"(m.w[i].y)
                   : "r"(slot + i * kMetaSuppliers * kMetaThreadBytes)
                   : "memory");
  }
  // The wgmma.sp of one k-tile: per 32 of dense K (kk), one m64nBNk32 per m64 block sharing B.
  template <int BN, int MI>
  static __device__ __forceinline__ void mma_k_tile(float (&acc)[MI][BN / 2], uint32_t a,
                                                    uint32_t b, const Meta<MI>& m) {
#pragma unroll
    for (int kk = 0; kk < 2; ++kk)
#pragma unroll
      for (int i = 0; i < MI; ++i)
        ptx::SpMma<BN>::run(acc[i], tma_detail::desc_of<64>(a + i * 64 * kARowBytes + kk * 32),
                            tma_detail::desc_of<128>(b + kk * 64), kk == 0 ? m.w[i].x : m.w[i].y);
  }
  // A use of every register of `m` that ptxas cannot remove (a store predicated on p.zero, which
  // is 0 at run time; never executed), so the set stays allocated up to this point.
  template <int MI>
  static __device__ __forceinline__ void keep_alive(const Meta<MI>& m, const TmaSparseParams& p,
                                                    uint32_t addr) {
#pragma unroll
    for (int i = 0; i < MI; ++i)
      asm volatile(
          "{\n.reg .pred p;\nsetp.ne.b32 p, %2, 0;\n@p st.shared.v2.u32 [%3], {%0, %1};\n}\n" ::"r"(
              m.w[i].x),
          "r"(m.w[i].y), "r"(p.zero), "r"(addr)
          : "memory");
  }
#endif
};

// conv_fp16_sparse24_tma's side of the mainloop: [channel][pixel] accumulators out to NHWC
// through each warp's staging tile (design note; tma_transpose_epilogue.cuh).
template <int BM, int BN, bool RESIDUAL>
using TmaSparseEpilogue = tma_detail::TmaTransposeEpilogue<BM, BN, false, RESIDUAL>;

// BM output channels x BN output pixels per tile, a ring of STAGES; RESIDUAL: y = clamp(conv +
// bias + r) instead of clamp(conv + bias).  Dynamic shared memory: TmaRing::kSmem +
// TmaSparseEpilogue::kStaging.
template <int BM, int BN, int STAGES, bool RESIDUAL>
__global__ void __launch_bounds__(kThreads, 1)
    conv_tma_sparse_kernel(const __grid_constant__ CUtensorMap tmap_x,
                           const __grid_constant__ CUtensorMap tmap_w, const TmaSparseParams p) {
  pdl_wait();
#ifdef CNNRT_WGMMA_DEVICE
  tma_detail::tma_conv_mainloop<TmaSparseF16, BM, BN, STAGES, 1,
                                TmaSparseEpilogue<BM, BN, RESIDUAL>>(tmap_x, tmap_w, p);
#endif
}

}  // namespace cnnrt::cuda::tma_sparse_detail
