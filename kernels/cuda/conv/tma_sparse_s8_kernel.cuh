// Hopper (sm_90a) 2:4 sparse int8 convolution on the TMA mainloop: the kernel
// (conv_int8_sparse24_tma).  The host side is tma_sparse_s8.cu, the design and the prediction
// docs/kernels/conv_int8_sparse_tma.md.
//
// DESIGN NOTE
// * Why: int8 2:4 is the last combination of issue 11 item 3.  The dense int8 TMA conv
//   (conv_int8_tma) and the fp16 2:4 TMA conv (conv_fp16_sparse24_tma) are both instances of
//   tma_mainloop.cuh's tma_conv_mainloop; this is a third instance with int8 sparse traits
//   (TmaSparseS8<KB>) and the int8 family's epilogue, transposed.  No loop code of its own: the
//   ring, mbarriers, producer thread, register split, tap walk, scheduler, the metadata slots and
//   the two metadata register sets that outlive their asynchronous wgmma.sp are the mainloop's.
// * What 2:4 means for 8-bit operands: wgmma.mma_async.sp .s8/.u8/.e4m3/.e5m2 (m64nNk64) take A
//   2:4 per ELEMENT, as fp16 does: each chunk of 4 consecutive int8 of a row holds 2 non-zeros,
//   whose 2-bit indices make one metadata nibble (the pair-wise "4:8" granularity is the 4-bit
//   operands' of mma.sp, not 8-bit ones').  So the project's format (kernels/cpu/sparse24.h: 4
//   consecutive input channels at one tap, two kept in increasing order, nibble = the two
//   indices, low bits first) is exactly what the hardware reads; nothing is refused for the
//   pattern.  The int8 weights are the per-channel quantisation of the pruned fp32 weights,
//   whose zeros stay zeros, so a 2:4 fp32 weight is a 2:4 int8 weight.
// * GEMM mapping (weights as A: only A may be sparse): M = output channels (BM per tile), N =
//   output pixels (BN: BN / 128 im2col boxes), K = kh * kw * in_stride in (r, s, c) order, the
//   dense int8 family's K over the NHWC/16 channel stride.  A k-tile is one tap and KB channels
//   (KB 128 where in_stride % 128 == 0, else 64, as conv_int8_tma chooses):
//   - B: BN rows x KB bytes, the im2col boxes conv_int8_tma loads as its A (swizzle KB);
//   - A: BM rows x KB / 2 bytes, the kept int8 of the row's KB K, one TMA tiled box of the
//     compressed [out_c][K / 2] int8 weight with the KB / 2-byte swizzle (64 B, or 32 B: layout
//     type 3 of the descriptor, tma_mainloop.cuh's desc_of<32>; rows past out_c zero fill);
//   - metadata: BM rows x KB / 8 bytes (KB / 4 nibbles), packed by tma_sparse_s8.cu in the
//     consumer threads' order; not in the ring: each thread copies its words of a k-tile into a
//     private shared-memory slot by cp.async up to six k-tiles ahead (as the fp16 instance).
//   Per k-tile and m64 block, KB / 64 wgmma.sp m64nBNk64 .s32.s8.s8: instruction kk reads A + 32
//   bytes (the 32 kept int8 of 64 K) and B + 64 bytes.  The byte geometry at KB 128 is the fp16
//   instance's exactly (A rows 64 B, B rows 128 B, two instructions at +32 / +64): a k64 int8
//   instruction covers the bytes a k32 fp16 one does.
// * Metadata per thread (sparsity selector 0: all four threads of a quad supply it; a warp's 16
//   rows x 16 groups = 1024 bits = 32 words): thread (warp w, lane 4g + t), instruction kk of
//   k-tile kt, m64 block b: the eight nibbles of ONE row, 64b + 16w + g + 8·(t & 1), groups
//   16 kk + 8·(t >> 1) .. +7 of the k-tile (group j at bits 4j).  Not fp16's arrangement (there
//   a thread holds 4 groups of rows g and g + 8 in its two halves): the first guess, that one
//   widened to four threads, failed every random-pattern test on an H100 while the uniform
//   pattern (test_tma_sparse_s8.cpp, independent of the layout) passed (docs/PERFORMANCE.md run
//   38d); this one is CUTLASS's published 64x64 sparse GMMA metadata layout (lane bit 0: row
//   + 8, lane bit 1: K + 32).  tma_sparse_s8_pack.cpp's pack_metadata is the one place that
//   writes it.  Stored as [k-tile][block][thread 0-127][kk]
//   words: 512 B (KB 64) or 1 KB (KB 128) per block and k-tile, one cp.async and one ld.shared(.v2)
//   per thread.
// * Epilogue (TmaSparseS8Epilogue): the accumulators are [channel][pixel] (register 4j + 2h + q
//   of block i: channel 64i + 16w + g + 8h of the warpgroup's, pixel 8j + 2t + q); each warp
//   owns 16 consecutive channels, i.e. one 16-byte NHWC/16 channel group.  int8 out: acc +
//   bias_q, s8::requantize (epilogue_s8.cuh, the reference's one float step: bit for bit
//   ref::conv2d_int8), bytes written into the warp's private 1 KB staging tile (64 pixels x 16
//   channels per pass; lanes of one store hit 8 distinct banks), then each lane reads one pixel's
//   16 bytes and stores them (two passes of 32 pixels per 64).  (tma_transpose_epilogue.cuh's
//   stmatrix form, transpose_store_s8, ran conv4 / conv5 at 256 3-4 % slower here — run 41h —
//   so this one keeps its byte stores.)  Channels out_c..out_stride-1 are
//   written as zeros, channel groups at or past out_stride not at all.  fp32 out (the graph
//   output only): s8::dequantize, stored straight from the registers (8 lanes write 32
//   contiguous bytes of a pixel), no staging.  No fused MaxPool: the entry pools after it
//   (maxpool_nhwc_s8, exact: max commutes with the monotonic requantisation), as the dense int8
//   entries do.
// * Shared memory (tma_sparse_s8.cu's table): KB 128 stages are 40 KB (128x256) / 32 KB
//   (256x128), KB 64 ones 20 / 16 KB, + 6-7 metadata slots of 1-4 KB (the mainloop fits as many as
//   the opt-in leaves: 6 for 256x128 at KB 128, 7 elsewhere); 5 / 6 / 10 / 12 stages + 8 KB
//   of staging + the 1 KB alignment slack stay within the 227 KB opt-in with the static barriers.
// * Registers: BM x BN / 256 = 128 accumulators + 2 x kMI x KB / 64 metadata words per thread
//   within setmaxnreg's 232 (the host checks every image starts at 168).
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/conv/epilogue_s8.cuh"
#include "kernels/cuda/conv/ptx.cuh"
#include "kernels/cuda/conv/ptx_sparse.cuh"
#include "kernels/cuda/conv/tma_mainloop.cuh"
#include "kernels/cuda/pdl.cuh"

namespace cnnrt::cuda::tma_sparse_s8_detail {

constexpr int kThreads = tma_detail::kThreads;

// Everything the kernel reads besides the two tensor maps.  GEMM view: M = out_c (channel tiles
// of BM), N = batch * conv_h * conv_w output pixels (blocks of BN), K = kh * kw * in_stride in
// (r, s, c) order, stored compressed as K / 2 int8 per row.
struct TmaSparseS8Params {
  const int32_t* bias = nullptr;      // bias_q [out_c]
  const float* multiplier = nullptr;  // M[c] (int8 out) or D[c] (fp32 out)
  const uint8_t* meta = nullptr;      // [k_tiles][meta_blocks][kMetaBlockBytes] (host packing)
  void* y = nullptr;                  // int8 NHWC/16 or fp32 NHWC/8 [m][out_stride]
  int m = 0, out_c = 0, out_stride = 0;
  int conv_h = 0, conv_w = 0;
  int sh = 1, sw = 1, pad_top = 0, pad_left = 0;
  int kw = 1;
  int c_blocks = 0, k_tiles = 0;  // in_stride / KB, kh * kw * c_blocks
  int m_tiles = 0, units = 0;     // channel tiles; (pixel block, channel tile) pairs
  int meta_blocks = 0;            // m64 blocks of metadata per k-tile (out_c rounded up to 256)
  int zero = 0;                   // always 0 (keep_alive's predicate)
  int lo = -127, hi = 127;
  float float_lo = 0, float_hi = 0;
};

// The int8 sparse element traits of tma_conv_mainloop (its design note lists what they declare).
// KB: dense K (= int8 channels) per k-tile, 128 or 64.
template <int KB>
struct TmaSparseS8 {
  static_assert(KB == 128 || KB == 64, "k-tiles of 128 or 64 channels");
  using Acc = int;
  static constexpr bool kWeightsAreA = true, kSplitN = false, kMeta = true, kSplitK = false;
  // B: im2col rows of KB channels (KB bytes, the KB-byte swizzle), the k-tile's TMA channel step.
  static constexpr int kRowBytes = KB, kTileElems = KB;
  // A: the KB / 2 kept int8 of a row's KB K, the weight box's K step.
  static constexpr int kARowBytes = KB / 2, kWeightTileElems = KB / 2;
  // wgmma.sp m64nNk64 per k-tile and m64 block; metadata: KB / 4 nibbles per row and k-tile.
  static constexpr int kMmas = KB / 64;
  static constexpr int kMetaRowBytes = KB / 8, kMetaBlockBytes = 64 * kMetaRowBytes;
  // A consumer thread's bytes of one m64 block and k-tile (one word per wgmma.sp).
  static constexpr int kMetaThreadBytes = kMmas * 4;
  // Sparsity selector 0 with 8-bit operands: all four threads of a quad supply metadata.
  static constexpr int kMetaSuppliers = 256;

  // One k-tile's metadata registers of a consumer thread: per m64 block, one word per wgmma.sp.
  template <int MI>
  struct Meta {
    uint32_t w[MI][kMmas];
  };

#ifdef CNNRT_WGMMA_DEVICE
  // This consumer thread's place among the kMetaSuppliers (every one supplies).
  static __device__ __forceinline__ int meta_supplier_index() { return threadIdx.x - 128; }
  // This thread's first metadata word of k-tile 0 for consumer warpgroup cw of channel tile
  // m_blk (BM rows: BM / 64 consecutive blocks per k-tile, the warpgroup's MI of them); k-tile kt
  // is p.meta_blocks * kMetaBlockBytes * kt further.
  template <int BM, int MI>
  static __device__ __forceinline__ const uint8_t* meta_source(const TmaSparseS8Params& p,
                                                               int m_blk, int cw) {
    return p.meta + (size_t(m_blk) * (BM / 64) + cw * MI) * kMetaBlockBytes +
           (threadIdx.x % 128) * kMetaThreadBytes;
  }
  // Copies this thread's words of one k-tile (src: meta_source's, moved to the k-tile) into its
  // slot (block i at slot + i * kMetaSuppliers * kMetaThreadBytes), by cp.async.
  template <int MI>
  static __device__ __forceinline__ void copy_meta(uint32_t slot, const uint8_t* src) {
#pragma unroll
    for (int i = 0; i < MI; ++i)
      ptx::cp_async_small<kMetaThreadBytes>(slot + i * kMetaSuppliers * kMetaThreadBytes,
                                            src + i * kMetaBlockBytes);
  }
  // The words copy_meta put in the slot, into the registers the wgmma.sp read.
  template <int MI>
  static __device__ __forceinline__ void load_meta(Meta<MI>& m, uint32_t slot) {
#pragma unroll
    for (int i = 0; i < MI; ++i) {
      const uint32_t at = slot + i * kMetaSuppliers * kMetaThreadBytes;
      if constexpr (kMmas == 2)
        asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];\n"
                     : "=r"(m.w[i][0]), "=r"(m.w[i][1])
                     : "r"(at)
                     : "memory");
      else
        asm volatile("ld.shared.u32 %0, [%1];\n" : "=r"(m.w[i][0]) : "r"(at) : "memory");
    }
  }
  // The wgmma.sp of one k-tile: per 64 of dense K (kk), one m64nBNk64 per m64 block sharing B.
  template <int BN, int MI>
  static __device__ __forceinline__ void mma_k_tile(int (&acc)[MI][BN / 2], uint32_t a, uint32_t b,
                                                    const Meta<MI>& m) {
#pragma unroll
    for (int kk = 0; kk < kMmas; ++kk)
#pragma unroll
      for (int i = 0; i < MI; ++i)
        ptx::SpMmaS8<BN>::run(acc[i],
                              tma_detail::desc_of<kARowBytes>(a + i * 64 * kARowBytes + kk * 32),
                              tma_detail::desc_of<kRowBytes>(b + kk * 64), m.w[i][kk]);
  }
  // A use of every register of `m` that ptxas cannot remove (a store predicated on p.zero, which
  // is 0 at run time; never executed), so the set stays allocated up to this point.
  template <int MI>
  static __device__ __forceinline__ void keep_alive(const Meta<MI>& m, const TmaSparseS8Params& p,
                                                    uint32_t addr) {
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
      for (int kk = 0; kk < kMmas; ++kk)
        asm volatile(
            "{\n.reg .pred p;\nsetp.ne.b32 p, %1, 0;\n@p st.shared.u32 [%2], %0;\n}\n" ::"r"(
                m.w[i][kk]),
            "r"(p.zero), "r"(addr)
            : "memory");
  }
#endif
};

// conv_int8_sparse24_tma's side of the mainloop: [channel][pixel] int32 accumulators out to
// NHWC/16 int8 through each warp's staging tile, or to fp32 NHWC/8 from the registers (design
// note).
template <int BM, int BN, bool FLOAT_OUT>
struct TmaSparseS8Epilogue {
  static constexpr int kChunk = 64;                     // pixels per staging pass
  static constexpr int kWarpStaging = kChunk * 16;      // 64 pixels x 16 channels int8
  static constexpr size_t kStaging = 8 * kWarpStaging;  // 8 consumer warps (fp32 out: unused)
  static_assert(BN % kChunk == 0, "whole staging passes");

#ifdef CNNRT_WGMMA_DEVICE
  template <int MI>
  static __device__ __forceinline__ void store(const int (&acc)[MI][BN / 2],
                                               const TmaSparseS8Params& p,
                                               const tma_detail::TmaUnit& u) {
    const int g = u.lane / 4, t = u.lane % 4;
#pragma unroll
    for (int i = 0; i < MI; ++i) {
      const int ch0 = u.m_blk * BM + u.cw * (BM / 2) + 64 * i + 16 * u.warp;  // the warp's 16
      if (ch0 >= p.out_stride) continue;  // warp-uniform: a channel group past the tensor
      const int c[2] = {ch0 + g, ch0 + g + 8};
      const bool in[2] = {c[0] < p.out_c, c[1] < p.out_c};
      const int bias[2] = {in[0] ? __ldg(p.bias + c[0]) : 0, in[1] ? __ldg(p.bias + c[1]) : 0};
      const float mult[2] = {in[0] ? __ldg(p.multiplier + c[0]) : 0.f,
                             in[1] ? __ldg(p.multiplier + c[1]) : 0.f};
      if constexpr (FLOAT_OUT) {
        float* y = static_cast<float*>(p.y);
#pragma unroll
        for (int j = 0; j < BN / 8; ++j)
#pragma unroll
          for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int q = 0; q < 2; ++q) {
              const int pixel = u.n0 + 8 * j + 2 * t + q;
              if (pixel >= p.m || c[h] >= p.out_stride) continue;
              y[size_t(pixel) * p.out_stride + c[h]] =
                  in[h] ? s8::dequantize(acc[i][4 * j + 2 * h + q] + bias[h], mult[h], p.float_lo,
                                         p.float_hi)
                        : 0.f;
            }
      } else {
        int8_t* stg = reinterpret_cast<int8_t*>(u.after_ring + (u.cw * 4 + u.warp) * kWarpStaging);
        int8_t* y = static_cast<int8_t*>(p.y);
        const float lo = __int2float_rn(p.lo), hi = __int2float_rn(p.hi);
#pragma unroll
        for (int c0 = 0; c0 < BN; c0 += kChunk) {
          __syncwarp();  // the previous pass's reads are done
#pragma unroll
          for (int jj = 0; jj < kChunk / 8; ++jj)
#pragma unroll
            for (int h = 0; h < 2; ++h)
#pragma unroll
              for (int q = 0; q < 2; ++q) {
                // Requantised whatever in[h] says (its bias and multiplier are 0 otherwise),
                // then selected: no branch per output.
                const int v = acc[i][4 * (c0 / 8 + jj) + 2 * h + q] + bias[h];
                const int8_t r = s8::requantize(v, mult[h], lo, hi);
                stg[(8 * jj + 2 * t + q) * 16 + g + 8 * h] = in[h] ? r : int8_t{0};
              }
          __syncwarp();
#pragma unroll
          for (int r = 0; r < kChunk / 32; ++r) {
            const int px = u.lane + 32 * r, pixel = u.n0 + c0 + px;
            const uint4 out = *reinterpret_cast<const uint4*>(stg + px * 16);
            if (pixel < p.m)
              *reinterpret_cast<uint4*>(y + size_t(pixel) * p.out_stride + ch0) = out;
          }
        }
      }
    }
  }
#endif
};

// BM output channels x BN output pixels per tile, a ring of STAGES, KB-channel k-tiles;
// FLOAT_OUT: dequantised fp32 output.  Dynamic shared memory: TmaRing::kSmem +
// TmaSparseS8Epilogue::kStaging.
template <int BM, int BN, int STAGES, int KB, bool FLOAT_OUT>
__global__ void __launch_bounds__(kThreads, 1)
    conv_tma_sparse_s8_kernel(const __grid_constant__ CUtensorMap tmap_x,
                              const __grid_constant__ CUtensorMap tmap_w,
                              const TmaSparseS8Params p) {
  pdl_wait();
#ifdef CNNRT_WGMMA_DEVICE
  tma_detail::tma_conv_mainloop<TmaSparseS8<KB>, BM, BN, STAGES, 1,
                                TmaSparseS8Epilogue<BM, BN, FLOAT_OUT>>(tmap_x, tmap_w, p);
#endif
}

}  // namespace cnnrt::cuda::tma_sparse_s8_detail
