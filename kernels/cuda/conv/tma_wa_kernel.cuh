// Hopper (sm_90a) dense fp16 convolution with the weights as the wgmma's A operand, for narrow
// out_c (conv1's space-to-depth form: 64 -> 64 channels, K = 576): an instance of the one TMA
// mainloop (tma_mainloop.cuh) with the consumer warpgroups splitting N.
//
// DESIGN NOTE
// * Why: conv_fp16_tma's BN = 64 tiles run conv1's inner conv at ~300 TFLOP/s on the padded K
//   (docs/kernels/space_to_depth.md), a third of conv3 / conv4's 128x256.  At N = 64 an
//   m64n64k16 wgmma reads 2 KB of A and 2 KB of B from shared memory for 64 K MACs: at the tensor
//   pipe's rate that alone is the SM's 128 B/clk, and the TMA's writes into the ring come on
//   top.  With the weights as A (M = out_c = 64, one m64 block) and the im2col boxes as B (N =
//   pixels), each consumer warpgroup issues m64nWNk16 with WN = BN / 2 up to 256 pixels: 2 KB +
//   8 KB per 256 K MACs, 80 B/clk, the wide tiles' ratio.
// * Roles and split (TmaF16WeightsA: kWeightsAreA, kSplitN, no metadata): a stage holds the
//   tile's BM weight rows (one tiled box of 64 K x BM rows, 128-byte swizzle; rows past out_c
//   zero-filled) and BN / 128 im2col boxes (the dense instances' A boxes, as B).  Both consumer
//   warpgroups read all BM weight rows and their own BN / 2 pixels; units are ordered m (channel
//   tiles) fastest, the mainloop's weights-as-A order.
// * Epilogue: tma_transpose_epilogue.cuh's [channel][pixel] -> NHWC transpose (SPLIT_N), chunks
//   of 32 pixels (the 64 x 512 tile's 3-stage ring leaves 8 KB for staging).  No fused pool: a
//   pooled layer runs staged (into the workspace, then maxpool_fp16).
// * Registers: kMI x WN / 2 accumulators (128 at 64 x 512) within setmaxnreg's 232; the host
//   checks every image starts at 168 (tma_mainloop.cuh).
#pragma once

#include <cuda.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/cuda/conv/tma_mainloop.cuh"
#include "kernels/cuda/conv/tma_sparse_kernel.cuh"
#include "kernels/cuda/conv/tma_transpose_epilogue.cuh"
#include "kernels/cuda/pdl.cuh"

namespace cnnrt::cuda::tma_detail {

// Dense fp16 weights as A, the consumer warpgroups splitting N (tma_mainloop.cuh's traits).
struct TmaF16WeightsA {
  using Acc = float;
  static constexpr bool kWeightsAreA = true, kSplitN = true, kMeta = false, kSplitK = false;
  // Both operands: k-tile rows of 64 halves (128 bytes, the 128-byte swizzle).
  static constexpr int kRowBytes = 128, kTileElems = 64, kARowBytes = 128, kWeightTileElems = 64;
#ifdef CNNRT_WGMMA_DEVICE
  template <int WN, int MI>
  static __device__ __forceinline__ void mma_k_tile(float (&acc)[MI][WN / 2], uint32_t a,
                                                    uint32_t b) {
    dense_k_tile<DenseMma<__half, WN>, 128>(acc, a, b);
  }
#endif
};

// The parameters are the weights-as-A ones (the 2:4 instance's, its metadata fields unused).
using TmaWaParams = tma_sparse_detail::TmaSparseParams;

// The epilogue's pixels per staging pass: 32 where the ring leaves less than 16 KB.
template <int BM, int BN, int STAGES>
constexpr int wa_chunk() {
  return 1024 + size_t(STAGES) * (BM + BN) * 128 + 16384 <= 227 * 1024 - 2048 ? 64 : 32;
}

// BM output channels x BN output pixels per tile, a ring of STAGES; RESIDUAL: y = clamp(conv +
// bias + r).  Dynamic shared memory: TmaRing::kSmem + the epilogue's kStaging (wa_smem_bytes).
template <int BM, int BN, int STAGES, bool RESIDUAL>
using TmaWaEpilogue = TmaTransposeEpilogue<BM, BN, true, RESIDUAL, wa_chunk<BM, BN, STAGES>()>;
template <int BM, int BN, int STAGES, bool RESIDUAL>
constexpr size_t wa_smem_bytes() {
  return TmaRing<TmaF16WeightsA, BM, BN, STAGES>::kSmem +
         TmaWaEpilogue<BM, BN, STAGES, RESIDUAL>::kStaging;
}

template <int BM, int BN, int STAGES, bool RESIDUAL>
__global__ void __launch_bounds__(kThreads, 1)
    conv_tma_wa_kernel(const __grid_constant__ CUtensorMap tmap_x,
                       const __grid_constant__ CUtensorMap tmap_w, const TmaWaParams p) {
  pdl_wait();
#ifdef CNNRT_WGMMA_DEVICE
  tma_conv_mainloop<TmaF16WeightsA, BM, BN, STAGES, 1, TmaWaEpilogue<BM, BN, STAGES, RESIDUAL>>(
      tmap_x, tmap_w, p);
#endif
}

}  // namespace cnnrt::cuda::tma_detail
