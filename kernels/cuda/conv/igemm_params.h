// What the mma.sync implicit-GEMM conv's host planner and its kernels share: the kernel
// parameters, the tile constants, and the shared-memory footprint of each launch (host and
// device compile it; no device code here).
#pragma once

#include <cuda_fp16.h>

#include <cstddef>

#include "kernels/cuda/conv/epilogue_params.h"
#include "kernels/cuda/conv/pool_tiling.h"

namespace cnnrt::cuda::conv_detail {

constexpr int kBK = 32;               // K per pipeline stage (halves), default config
constexpr int kMaxBK = 64;            // the BK64 config; packed K is padded to this
constexpr int kWeightRowAlign = 128;  // packed weight rows per group: at least a multiple
                                      // of this, and of every config's BN coverage

struct ConvParams {
  const __half* x = nullptr;
  const __half* w = nullptr;    // igemm: [groups][w_rows][w_k]; direct: [oc][kh][kw][cpg]
  const float* bias = nullptr;  // igemm: [groups][w_rows]; direct: [oc]
  __half* y = nullptr;
  int batch = 0;
  int in_h = 0, in_w = 0, in_cs = 0, in_c = 0;
  int conv_h = 0, conv_w = 0;
  int kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
  int groups = 1, cpg = 0;  // real input channels per group
  int cpg_chunks = 0;       // vector loader: channels per group / 8
  int k_real = 0;           // vector: K in 8-chunks; gather: K in elements
  int k_tiles = 0;          // of the launched config's BK (32 or 64)
  int w_k = 0, w_rows = 0;  // packed weight row stride (halves) and rows per group
  int n_limit = 0;          // columns per group to write (padded OC if groups == 1)
  int n_tiles = 0;          // N tiles per group
  int opg = 0;              // real output channels per group
  int out_c = 0, out_cs = 0;
  EpilogueClamp act;  // the fused activation
  // Pool (the identity window when absent; the direct kernel relies on that) and its tiling
  // (kernels/cuda/conv/pool_tiling.h; the split-K finish kernel reuses `tile` for its own).
  PoolWindow pool;
  int out_h = 0, out_w = 0;  // final (pooled) extent
  PoolTile tile;
  long long m_total = 0;  // no pool: batch * conv_h * conv_w
  // Split-K (non-pool instances only): CTA z covers k-tiles [z * split_k, (z + 1) * split_k)
  // and writes its raw fp32 sums to partial[z][m][n_limit] (groups == 1) instead of y.
  int split_k = 0;  // 0: no split, the kernel finishes the tile itself
  float* partial = nullptr;
  // Fused residual (ConvShape::residual): r [m][out_cs] fp16, added to the finished conv value
  // and then clamped with residual_act; `act` is then the identity (the clamp comes after the
  // add).  nullptr: no residual.  No pool layer has one.
  const __half* residual = nullptr;
  EpilogueClamp residual_act;
};

// Shared-memory layout: [cp.async ring][row table][staging, multi-pass only].  A single-pass
// CTA stages its fp16 tile in the ring itself: after the last cp_async_wait<0> + __syncthreads
// no copy is in flight and no warp reads the ring any more.  That takes the staging buffer off
// the footprint (128x128: 98 KB -> 63.5 KB), which is what lets 2-3 CTAs share an SM.  A
// multi-pass CTA keeps every pass's tile until the pool, while the ring is reused by the next
// pass, so its staging stays separate.
// bk: K per stage (32, or 64 for the BK64 config); smem rows are bk + 8 halves (80 / 144 B:
// both keep the 8 row addresses of an ldmatrix phase in 8 distinct 16-byte bank groups).
constexpr size_t igemm_ring_bytes(int bm, int bn, int stages, int bk = kBK) {
  return size_t(stages) * (bm + bn) * (bk + 8) * 2;
}
constexpr size_t igemm_pipeline_bytes(int bm, int bn, int stages, int bk = kBK) {
  return igemm_ring_bytes(bm, bn, stages, bk) + size_t(bm) * 16;
}
constexpr size_t igemm_staging_bytes(int bm, int bn, int passes) {
  return size_t(passes) * bm * (bn + 8) * 2;
}
constexpr size_t igemm_smem_bytes(int bm, int bn, int stages, int passes, int bk = kBK) {
  return igemm_pipeline_bytes(bm, bn, stages, bk) +
         (passes == 1 ? 0 : igemm_staging_bytes(bm, bn, passes));
}
// Row-streaming pool: a ring of stage_rows conv rows of tile_tw pixels (never aliased: the
// pipeline ring is busy with the next pass while earlier rows wait for their pool windows).
constexpr size_t igemm_stream_smem_bytes(int bm, int bn, int stages, int stage_rows, int tile_tw,
                                         int bk = kBK) {
  return igemm_pipeline_bytes(bm, bn, stages, bk) + size_t(stage_rows) * tile_tw * (bn + 8) * 2;
}

// Split-K finish (igemm_finish.cuh): one CTA reduces a region of <= kFinishMaxPixels conv
// pixels x kFinishChunks 8-channel chunks in fp32 shared memory.
constexpr int kFinishChunks = 4;  // 8-channel chunks per finish CTA (32 channels)
constexpr int kFinishMaxPixels = 96;
constexpr int kFinishThreads = 256;
constexpr int kFinishUnroll = 8;  // slices loaded per thread before they are summed
constexpr size_t finish_smem_bytes(int th, int tw) {
  return size_t(th) * tw * kFinishChunks * 8 * sizeof(float);
}

}  // namespace cnnrt::cuda::conv_detail
