// 2:4 sparse implicit-GEMM fp16 convolution on sparse tensor cores with warp-level mma.sp
// (sm_80, sm_86, sm_89, sm_90): the kernel.  Host side and plan: mma_sparse.cu; the weight
// packing: mma_sparse_pack.cpp (CPU-tested against an emulation of this kernel).
//
// GEMM mapping.  Only operand A of a sparse MMA may be 2:4, grouped along K (docs/SPARSITY.md),
// so the weights are A, as in the Hopper sparse convs (wgmma_sparse.cu): M = output channels,
// N = output pixels (batch * conv_h * conv_w), K = kh * kw * pad8(in_c) in the order the dense
// igemm's vector loader walks it — (kh, kw, 8-channel chunk), channels padded to 8 with zero
// weights, so any in_c works and no 4-group straddles two taps.  A weight row keeps 2 of every 4
// consecutive K: K / 2 fp16 values + one 4-bit nibble per group, compressed once at build.
//
// Tile: a CTA computes 128 channels x 128 pixels; 8 warps as 2 (channels) x 4 (pixels), a warp
// tile of 64 channels x 32 pixels = 4 x 4 mma.sp m16n8k32 per 32 of K (64 fp32 accumulators per
// thread).  One k-tile = 64 of dense K: 2 mma.sp steps (kk), 16 MMAs per warp each.
//  * A (weights): 128 rows x 32 kept halves (64 B), rows padded to 40 halves (80 B): the 8 row
//    addresses of an ldmatrix phase land in 8 distinct 16-byte bank groups (igemm's BK-32 rows).
//    The compressed 16 x 16 tile of one m16n8k32 has the dense m16n8k16 A-fragment layout (PTX
//    ISA "Matrix fragments for sparse mma.m16n8k32 with .f16": registers 0 and 2 row g, 1 and 3
//    row g + 8; compressed columns 2t, 2t + 1 in registers 0-1, 8 + 2t, +1 in 2-3), so one
//    ldmatrix.x4 per m16 tile loads it exactly as igemm loads its dense A.
//  * B (activations): 128 pixel rows x 64 halves (128 B), rows padded to 72 halves (144 B,
//    igemm's BK-64 rows: conflict-free), gathered on the fly by igemm's vector loader (one
//    16-byte cp.async per pixel, tap and 8 channels, zero-filled for padding taps and the K tail;
//    the same row table).  The m16n8k32 B fragment is 4 registers, b[i] = K rows 8i + 2t, +1 at
//    column g: one ldmatrix.x4 of an [n][k] tile at row lane & 7, column 8 * (lane >> 3).
//  * Metadata (sparsity selector 0: threads 0 and 1 of each quad supply it).  Thread lane 4g + t
//    of m16 tile `mt`, step kk: bits 0-15 = the nibbles of row 16 mt + g, groups 8 kk + 4 (t % 2)
//    .. +3 of the k-tile's 16 (group j at bits 4 (j % 4), nibble = first index | second << 2),
//    bits 16-31 = the same for row + 8.  This is the per-warp layout the project measured for
//    wgmma.mma_async.sp m64nNk32 on an H100 (docs/SPARSITY.md); the PTX ISA gives mma.sp
//    m16n8k32's as a figure only.  Built once on the host in the order threads read it: per
//    (channel tile, k-tile) 1 KB = 8 m16 tiles x 8 g x 2 (t % 2) x uint2 {kk 0, kk 1}, copied into
//    the stage with the operands; threads t and t + 2 read the same uint2 (broadcast).
// Pipeline: igemm's cp.async ring with one __syncthreads per k-tile (the slot refilled in
// iteration kt is the one consumed in kt - 1), 4 deep.  A stage is 10 KB (A) + 18 KB (B) + 1 KB
// (meta): 116 KB for the ring + 2 KB row table, one CTA per SM on an A100 (164 KB) and an H100
// (227 KB); sm_86 / sm_89 let a block have at most 99 KB, so there the ring is 3 deep (89 KB).
// Why this tile first: it is igemm's 128x128 8-warp shape with the operands swapped, so the
// loaders, the row table and the write-out are igemm's own functions; a sparse MMA does a 16x8x32
// product per instruction (twice a dense m16n8k16), so for the same K the warp issues half the
// MMAs, and per k-tile of 64 the B gather (16 KB) is the same as the dense kernel's A while the
// weights cost half — bytes per MAC 2/128 + 1/128 (+ 1/1024 metadata), dense 128x128: 4/128.
//
// Epilogue: the accumulators are [channel][pixel] (mma row g / g + 8 = channel, column 2t, 2t + 1
// = pixel), so the staging store transposes them into igemm's [pixel][128 + 8] fp16 tile (bias +
// clamp first; with a residual the clamp follows the add, as igemm): scalar 2-byte stores, rows
// 68 words apart, so a warp's 32 stores hit 16 distinct words (2 halves each): conflict-free.
// The tile aliases the drained ring.  From there igemm_write_rows writes 16-byte rows (the
// residual add, zeros in the padding channels).  A fused MaxPool is not done here: the host runs
// the conv into a workspace and then maxpool_fp16 (mma_sparse.cu).
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/cuda/conv/igemm_kernel.cuh"
#include "kernels/cuda/conv/igemm_params.h"
#include "kernels/cuda/conv/mma_sparse_pack.h"
#include "kernels/cuda/conv/ptx.cuh"
#include "kernels/cuda/pdl.cuh"

namespace cnnrt::cuda::mma_sp_detail {

using conv_detail::ConvParams;
using ptx::cp_async_16;
using ptx::cp_async_commit;
using ptx::cp_async_wait;
using ptx::ldmatrix_x4;
using ptx::mma_sp_16832;
using ptx::smem_u32;

// kBC (channels), kBN (pixels), kKTile (dense K) per CTA and k-tile, kMetaStage: mma_sparse_pack.h
constexpr int kMaxStages = 4, kMinStages = 3;  // cp.async ring depth (design note)
constexpr int kThreads = 256;                  // 8 warps: 2 (channels) x 4 (pixels)
constexpr int kWRow = kKTile / 2 + 8;          // A smem row, halves (32 kept + 8 pad)
constexpr int kXRow = kKTile + 8;              // B smem row, halves (64 + 8 pad)
constexpr int kWStage = kBC * kWRow;           // halves
constexpr int kXStage = kBN * kXRow;           // halves
constexpr size_t ring_bytes(int stages) {
  return size_t(stages) * ((kWStage + kXStage) * sizeof(__half) + kMetaStage * sizeof(uint32_t));
}
constexpr size_t smem_bytes(int stages) { return ring_bytes(stages) + size_t(kBN) * 16; }

struct SpConvParams : ConvParams {
  const uint4* meta = nullptr;  // [channel tiles][k_tiles][kMetaStage / 4]
  int w_row = 0;                // compressed weight row, halves (k_tiles * 32)
};

// The shape igemm's loader, row table and write-out read (igemm_kernel.cuh): their "A" (BM rows)
// is this kernel's B (pixels), their N (BN columns) is this kernel's M (channels).
struct SpCfg {
  static constexpr int BM = kBN, BN = kBC, BK = kKTile, kThreads = mma_sp_detail::kThreads;
  static constexpr int kCh = BK / 8, kRowHalves = kXRow, kAStage = kXStage, kCRow = BN + 8;
  static constexpr bool GATHER = false, POOL = false;
};
static_assert(size_t(kBN) * SpCfg::kCRow * 2 <= size_t(kMinStages) * kXStage * 2,
              "the staging tile must fit in the activation ring it aliases");
static_assert((kBN * SpCfg::kCh) % kThreads == 0, "loader split");

// One k-tile's compressed weights (128 rows x 4 chunks of 16 B) and metadata (64 x 16 B).
__device__ __forceinline__ void sp_load_w(const SpConvParams& p, __half* s_w, uint32_t* s_meta,
                                          const __half* w_tile, const uint4* meta_tile, int tid,
                                          int slot, int kt) {
#pragma unroll
  for (int i = 0; i < kBC * 4 / kThreads; ++i) {
    const int id = tid + i * kThreads, r = id >> 2, c = id & 3;
    cp_async_16(smem_u32(s_w + slot * kWStage + r * kWRow + c * 8),
                w_tile + size_t(r) * p.w_row + kt * (kKTile / 2) + c * 8, 16);
  }
  if (tid < kMetaStage / 4)
    cp_async_16(smem_u32(s_meta + slot * kMetaStage + tid * 4),
                meta_tile + size_t(kt) * (kMetaStage / 4) + tid, 16);
}

// One k-tile of MMAs from ring slot `slot`: 2 steps of K 32, each 4 x 4 mma.sp per warp.
__device__ __forceinline__ void sp_mma_ktile(float (&acc)[4][4][4], const __half* w_slot,
                                             const __half* x_slot, const uint32_t* meta_slot,
                                             int warp_m, int warp_n, int lane) {
  // The metadata of this warp's 4 m16 tiles, both steps: uint2 {kk 0, kk 1} (design note).
  uint2 e[4];
  const int meta_lane = (lane >> 2) * 2 + (lane & 1);
#pragma unroll
  for (int mt = 0; mt < 4; ++mt)
    e[mt] = reinterpret_cast<const uint2*>(meta_slot)[(warp_m * 4 + mt) * 16 + meta_lane];
#pragma unroll
  for (int kk = 0; kk < 2; ++kk) {
    uint32_t af[4][4], bf[4][4];
#pragma unroll
    for (int mt = 0; mt < 4; ++mt) {
      const int row = warp_m * 64 + mt * 16 + (lane & 15);
      const int col = kk * 16 + (lane >> 4) * 8;  // compressed columns of this K 32
      ldmatrix_x4(af[mt], smem_u32(w_slot + row * kWRow + col));
    }
#pragma unroll
    for (int nt = 0; nt < 4; ++nt) {
      const int row = warp_n * 32 + nt * 8 + (lane & 7);
      const int col = kk * 32 + (lane >> 3) * 8;
      ldmatrix_x4(bf[nt], smem_u32(x_slot + row * kXRow + col));
    }
#pragma unroll
    for (int mt = 0; mt < 4; ++mt) {
      const uint32_t meta = kk == 0 ? e[mt].x : e[mt].y;
#pragma unroll
      for (int nt = 0; nt < 4; ++nt) mma_sp_16832(acc[mt][nt], af[mt], bf[nt], meta);
    }
  }
}

// Bias + clamp -> fp16 staging [pixel][kBC + 8], transposing the [channel][pixel] accumulators.
__device__ __forceinline__ void sp_stage_acc(const float (&acc)[4][4][4], __half* s_c,
                                             const float* bias_tile, const SpConvParams& p,
                                             int warp_m, int warp_n, int lane) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int mt = 0; mt < 4; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int ch = warp_m * 64 + mt * 16 + g + 8 * h;
      const float b = bias_tile[ch];
#pragma unroll
      for (int nt = 0; nt < 4; ++nt)
#pragma unroll
        for (int q = 0; q < 2; ++q) {
          const int px = warp_n * 32 + nt * 8 + 2 * t + q;
          float v = acc[mt][nt][2 * h + q] + b;
          if (p.act.on) v = fminf(fmaxf(v, p.act.lo), p.act.hi);
          s_c[px * SpCfg::kCRow + ch] = __float2half_rn(v);
        }
    }
}

// grid: x = pixel tiles of 128, y = channel tiles of 128.
template <int kStages>
__global__ void __launch_bounds__(kThreads, 1) conv_mma_sp_kernel(const SpConvParams p) {
  pdl_wait();
  using C = SpCfg;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  __half* s_x = reinterpret_cast<__half*>(smem_raw);  // activations ring (B)
  __half* s_w = s_x + kStages * kXStage;              // compressed weights ring (A)
  uint32_t* s_meta = reinterpret_cast<uint32_t*>(s_w + kStages * kWStage);
  int4* s_rows = reinterpret_cast<int4*>(s_meta + kStages * kMetaStage);

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int warp_m = warp / 4, warp_n = warp % 4;

  conv_detail::IgemmTile t{};
  t.group = 0;
  t.n0 = blockIdx.y * kBC;
  t.m0 = (long long)blockIdx.x * kBN;
  const __half* w_tile = p.w + size_t(t.n0) * p.w_row;
  const uint4* meta_tile = p.meta + size_t(blockIdx.y) * p.k_tiles * (kMetaStage / 4);
  const float* bias_tile = p.bias + t.n0;

  conv_detail::igemm_fill_rows<C>(p, s_rows, tid, 0, 0, t);
  __syncthreads();

  float acc[4][4][4];
#pragma unroll
  for (int mt = 0; mt < 4; ++mt)
#pragma unroll
    for (int nt = 0; nt < 4; ++nt)
#pragma unroll
      for (int q = 0; q < 4; ++q) acc[mt][nt][q] = 0.f;

  conv_detail::VecLoader va{tid % C::kCh, 0, 0, 0, 0};
  conv_detail::igemm_seek_a<C>(va, p, 0);
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < p.k_tiles) {
      sp_load_w(p, s_w, s_meta, w_tile, meta_tile, tid, s, s);
      conv_detail::igemm_load_a_vec<C>(va, p, s_x, s_rows, tid, 0, s);
    }
    cp_async_commit();
  }
  for (int kt = 0; kt < p.k_tiles; ++kt) {
    cp_async_wait<kStages - 2>();
    __syncthreads();
    const int k_next = kt + kStages - 1;
    if (k_next < p.k_tiles) {
      const int slot_next = k_next % kStages;
      sp_load_w(p, s_w, s_meta, w_tile, meta_tile, tid, slot_next, k_next);
      conv_detail::igemm_load_a_vec<C>(va, p, s_x, s_rows, tid, 0, slot_next);
    }
    cp_async_commit();
    const int slot = kt % kStages;
    sp_mma_ktile(acc, s_w + slot * kWStage, s_x + slot * kXStage, s_meta + slot * kMetaStage,
                 warp_m, warp_n, lane);
  }
  cp_async_wait<0>();
  __syncthreads();  // the ring is drained: it becomes the staging tile

  __half* s_c = s_x;
  sp_stage_acc(acc, s_c, bias_tile, p, warp_m, warp_n, lane);
  __syncthreads();
  conv_detail::igemm_write_rows<C>(p, s_c, t, tid);
}

}  // namespace cnnrt::cuda::mma_sp_detail
