// Hopper (sm_90a) TMA-fed, warp-specialised, persistent implicit-GEMM int8 convolution: the
// kernel (conv_int8_tma).  The host side and its design note are tma_s8.cu; docs/kernels/
// conv_int8_tma.md has the measurements.
//
// DESIGN NOTE
// * The mainloop is conv_fp16_tma's: tma_mainloop.cuh's tma_conv_mainloop, instantiated with
//   int8 elements (TmaS8<KB>): one producer thread issues an im2col load of A and a tiled load of
//   B per k-tile into a ring of full / empty mbarriers, two consumer warpgroups (setmaxnreg 232)
//   only issue wgmma, persistent grid, no cluster.  What the traits change: a k-tile row is
//   KB bytes = KB int8 channels (KB 128 with the 128-byte swizzle where the channel stride is a
//   multiple of 128; KB 64 with the 64-byte swizzle where it is 64 mod 128, e.g. AlexNet's 64 /
//   192 channels, so no zero channels are multiplied), wgmma m64nNk32 .s32.s8.s8 (KB / 32 per
//   k-tile, +32 bytes of descriptor each), int32 accumulators.  Where the channel stride is 64
//   mod 128 the default is the paired form (TmaS8Pairs): 128 bytes of K per k-tile from two
//   64-byte im2col boxes, so each mbarrier round trip carries a 128-byte k-tile's MMA work.
// * What is int8's own is the epilogue (TmaS8Epilogue): the int8 family's requantise / dequantise
//   (epilogue_s8.cuh, the reference's one float step) from the int32 registers, with the
//   mainloop's quad transpose for 16-byte int8 stores.  A fused MaxPool (POOL instances, int8
//   out) takes conv_fp16_tma's tiling (tma_pool_tiling.h: tiles of whole pooled rows, first_row
//   the first conv row under a tile's first pooled row, all the mainloop sees of the pool), stages
//   the same requantised bytes of the whole tile after the ring (BM x BN bytes, XOR-swizzled
//   16-byte units) and reduces each window with __vmaxs4 (pool_epilogue_s8).
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/conv/epilogue_s8.cuh"
#include "kernels/cuda/conv/ptx.cuh"
#include "kernels/cuda/conv/tma_mainloop.cuh"
#include "kernels/cuda/conv/tma_pool_tiling.h"
#include "kernels/cuda/pdl.cuh"

namespace cnnrt::cuda::tma_s8_detail {

constexpr int kThreads = tma_detail::kThreads;
using tma_detail::threads_for_rows;

// Everything the kernel reads besides the two tensor maps.  GEMM view: M = batch * conv_h *
// conv_w output pixels, N = out_c, K = kh * kw * in_stride in (kh, kw, c) order.
struct TmaS8Params {
  const int32_t* bias = nullptr;      // bias_q [out_c]
  const float* multiplier = nullptr;  // M[c] (int8 out) or D[c] (fp32 out)
  void* y = nullptr;                  // int8 NHWC/16 or fp32 NHWC/8 [m][out_stride]
  int m = 0, out_c = 0, out_stride = 0;
  int conv_h = 0, conv_w = 0;
  int sh = 1, sw = 1, pad_top = 0, pad_left = 0;
  int kw = 1;
  int c_blocks = 0, k_tiles = 0;  // in_stride / KB, kh * kw * c_blocks
  int n_tiles = 0, units = 0;
  int lo = -127, hi = 127;
  float float_lo = 0, float_hi = 0;
  int a_blocks = 0;  // paired rows: the 64-byte blocks of K (kh * kw * c_blocks)
};
// The POOL instances' parameters: the fused MaxPool's tiling (tma_pool_tiling.h) besides.  A
// struct of their own, so the unpooled instances keep their small parameter block (ptxas loads
// it into registers up front; with the 0.5 KB tiling in it, it read the parameters where used
// instead and every unpooled instance's code changed).
struct TmaS8PoolParams : TmaS8Params {
  tma_detail::TmaPoolTiling pool;
};
template <bool POOL>
using TmaS8ParamsOf = std::conditional_t<POOL, TmaS8PoolParams, TmaS8Params>;

// int8 whose channel stride is 64 mod 128 (AlexNet conv2: 64 channels, conv3: 192): a k-tile is
// two consecutive 64-byte blocks of K (two taps, or two channel blocks of one tap), each brought
// by its own im2col box of 64-byte rows (64-byte swizzle) into its half of the stage's A, and
// 128 bytes of K of the weight rows (128-byte swizzle) as B; four k32 wgmma per m64 block, two
// from each half.  Why: with one 64-byte block per k-tile (TmaS8<64>) every mbarrier round trip
// carries half the MMA work of a 128-byte one, and the int8 consumers' per-k-tile cost, not the
// bytes, bounds them (docs/PERFORMANCE.md runs 40b, 43).  The host counts k-tiles as
// ceil(blocks / 2); an odd last block's partner repeats it against zero weights (K past k_total
// is the weight map's zero fill).
struct TmaS8Pairs {
  using Acc = int;
  static constexpr bool kWeightsAreA = false, kSplitN = false, kMeta = false, kSplitK = false;
  static constexpr int kRowBytes = 128, kTileElems = 128;  // B rows; the weight's K step
  static constexpr int kARowBytes = 64, kABlocks = 2, kABlockElems = 64;
#ifdef CNNRT_WGMMA_DEVICE
  // a: this warpgroup's first A row in the first block's half (MI m64 blocks of 64-byte rows);
  // the second half is BM rows (the tile's) further.
  template <int BN, int MI, int BM>
  static __device__ __forceinline__ void mma_k_tile(int (&acc)[MI][BN / 2], uint32_t a,
                                                    uint32_t b) {
#pragma unroll
    for (int k = 0; k < 4; ++k)
#pragma unroll
      for (int i = 0; i < MI; ++i)
        ptx::MmaS8<BN>::run(
            acc[i], tma_detail::desc_of<64>(a + (k / 2) * BM * 64 + i * 64 * 64 + (k % 2) * 32),
            tma_detail::desc_of<128>(b + k * 32));
  }
#endif
};

// A k-tile's rows: KB = 64 or 128 bytes (TmaS8<KB>), or kPairedRows: two 64-byte blocks of K per
// k-tile (TmaS8Pairs, tma_mainloop.cuh).
constexpr int kPairedRows = 1;
template <int KB>
using S8Traits = std::conditional_t<KB == kPairedRows, TmaS8Pairs, tma_detail::TmaS8<KB>>;

template <int BM, int BN, int STAGES, int KB>
using TmaS8Tile =
    tma_detail::TmaRing<S8Traits<KB>, BM, BN, STAGES, 0, tma_detail::consumers_for_rows(BM)>;

// The fused MaxPool's staging (POOL instances), after the ring: the whole tile's int8 values, BM
// rows of BN bytes (32 KB for 256x128 and 128x256: with their 4-stage rings 225 KB in all).
// 16-byte unit k of row r lies at unit k ^ (4 (r & 1)) of the row (staged_at): a quarter warp's
// 16-byte stores (rows r and r + 1, units 4g..4g + 3 each) and the reduction's loads (8 units of
// one cell) then each touch all 32 banks once.
template <int BM, int BN>
constexpr size_t kPoolStaging = size_t(BM) * BN;

#ifdef CNNRT_WGMMA_DEVICE
template <int BN>
__device__ __forceinline__ int staged_at(int row, int unit) {
  static_assert(BN % 128 == 0, "whole 128-byte bank rows: the swizzle stays within the row");
  return row * BN + ((unit ^ ((row & 1) << 2)) << 4);
}

// The int8 output of one tile from its accumulators, 16 consecutive bytes at a time: acc +
// bias_q, requantize (epilogue_s8.cuh: the reference's float step; channels >= out_c are the
// padding lanes, zeros), then sink(row, col, bytes) with the row (0..BM) and the first column (a
// multiple of 16) relative to the tile.  Register layout of m64nN: warp w rows 16w..16w+15; reg
// 4j+2h+{0,1} = row lane/4 + 8h, cols 8j + 2(lane%4) + {0,1}.  Per 64 columns: lane q packs j =
// 2t, 2t + 1 (cols 16t + 2q.., 16t + 8 + 2q..) into word t; the quad transpose gives lane q cols
// 16q + 2t.. and 16q + 8 + 2t.. from lane t, which two byte permutes order into 16 consecutive
// bytes (a quad's four sinks cover 64 contiguous columns of a row).
template <int BM, int BN, int MI, class Sink>
__device__ __forceinline__ void requantised_tile(const int (&acc)[MI][BN / 2], const TmaS8Params& p,
                                                 const tma_detail::TmaUnit& u, Sink&& sink) {
  using tma_detail::quad_transpose;
  const int q = u.lane % 4;
  const float lo = __int2float_rn(p.lo), hi = __int2float_rn(p.hi);  // once, not per output
#pragma unroll
  for (int i = 0; i < MI; ++i) {
    const int row0 = (u.cw * MI + i) * 64 + u.warp * 16 + u.lane / 4;  // consumer cw: MI blocks
#pragma unroll
    for (int g = 0; g < BN / 64; ++g) {
      int bq[8][2];
      float mq[8][2];
#pragma unroll
      for (int jj = 0; jj < 8; ++jj)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int col = u.n0 + 64 * g + 8 * jj + 2 * q + e;
          bq[jj][e] = col < p.out_c ? __ldg(p.bias + col) : 0;
          mq[jj][e] = col < p.out_c ? __ldg(p.multiplier + col) : 0.f;
        }
      // The 64 columns' bytes: requantised for every column (bias and multiplier are 0 past
      // out_c, so nothing there can misbehave), the padding lanes then zeroed — by a select only
      // in a group that reaches past out_c, so a whole group runs no per-output compare.
      auto pack = [&](auto whole_group) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          uint32_t w[4];
#pragma unroll
          for (int t = 0; t < 4; ++t) {
            uint32_t word = 0;
#pragma unroll
            for (int half = 0; half < 2; ++half)
#pragma unroll
              for (int e = 0; e < 2; ++e) {
                const int jj = 2 * t + half, j = 8 * g + jj;
                const int col = u.n0 + 64 * g + 8 * jj + 2 * q + e;
                int8_t v = s8::requantize(acc[i][4 * j + 2 * h + e] + bq[jj][e], mq[jj][e], lo, hi);
                if constexpr (!decltype(whole_group)::value) v = col < p.out_c ? v : int8_t{0};
                word |= uint32_t(uint8_t(v)) << (8 * (2 * half + e));
              }
            w[t] = word;
          }
          quad_transpose(w, q);
          sink(row0 + 8 * h, 64 * g + 16 * q,
               make_uint4(__byte_perm(w[0], w[1], 0x5410), __byte_perm(w[2], w[3], 0x5410),
                          __byte_perm(w[0], w[1], 0x7632), __byte_perm(w[2], w[3], 0x7632)));
        }
      };
      if (u.n0 + 64 * (g + 1) <= p.out_c)
        pack(std::true_type{});
      else
        pack(std::false_type{});
    }
  }
}

// The fused-MaxPool epilogue of one tile (tma_pool_tiling.h's tiling; tma_s8.cu's design note),
// run by both consumer warpgroups (256 threads, named barrier 1): the tile's int8 values into the
// staging (requantised_tile: the unpooled epilogue's bytes), then every (pooled pixel, 16
// channels) of the tile's pooled rows takes the byte-wise signed max (__vmaxs4) of its window's
// staged cells and stores 16 bytes.  Max commutes with the monotone requantisation (and the
// clamp), so this is the reference's conv -> requantise -> maxpool bit for bit.  Window cells
// outside the conv output (pool padding, ceil-mode overhang) are skipped; every window holds a
// real cell (the host's pool_window_ok), so the -128 start never survives.  Channels out_c..
// out_stride - 1 are the max of staged zeros: zeros.  The first barrier keeps the previous tile's
// readers ahead of the new writes (the ring already holds the next tile: the staging is its own).
template <int BM, int BN, int MI>
__device__ __forceinline__ void pool_epilogue_s8(const int (&acc)[MI][BN / 2],
                                                 const TmaS8PoolParams& p,
                                                 const tma_detail::TmaUnit& u) {
  constexpr int kVecs = BN / 16;
  uint8_t* stg = u.after_ring;
  const tma_detail::TmaPoolTiling& t = p.pool;
  int g0, count;
  tma_detail::pool_tile_rows(t, u.m_blk, g0, count);
  const int m_first = tma_detail::pool_conv_lo(p, g0), tid = threadIdx.x - 128;
  ptx::named_barrier_sync(1, 256);
  requantised_tile<BM, BN>(acc, p, u, [&](int row, int col, const uint4& bytes) {
    *reinterpret_cast<uint4*>(stg + staged_at<BN>(row, col / 16)) = bytes;
  });
  ptx::named_barrier_sync(1, 256);
  int8_t* y = static_cast<int8_t*>(p.y);
  for (int id = tid; id < count * t.out_w * kVecs; id += 256) {
    const int v = id % kVecs, rest = id / kVecs, px = rest % t.out_w, g = g0 + rest / t.out_w;
    const int col = u.n0 + 16 * v;
    if (col >= p.out_stride) continue;
    uint32_t best[4] = {0x80808080u, 0x80808080u, 0x80808080u, 0x80808080u};  // -128 per byte
    tma_detail::for_each_window_cell(p, g, px, m_first, [&](int local) {
      const uint4 cell = *reinterpret_cast<const uint4*>(stg + staged_at<BN>(local, v));
      best[0] = __vmaxs4(best[0], cell.x);
      best[1] = __vmaxs4(best[1], cell.y);
      best[2] = __vmaxs4(best[2], cell.z);
      best[3] = __vmaxs4(best[3], cell.w);
    });
    *reinterpret_cast<uint4*>(y + (size_t(g) * t.out_w + px) * p.out_stride + col) =
        make_uint4(best[0], best[1], best[2], best[3]);
  }
}

// conv_int8_tma's side of tma_conv_mainloop: tiles of BM consecutive rows (POOL: the host's
// pooled tiling, p.pool, whose tiles start at the first conv row under their first pooled row),
// the int8 epilogue.  FLOAT_OUT: dequantised fp32 output; POOL: the fused MaxPool (int8 out).
template <int BM, int BN, bool FLOAT_OUT, bool POOL>
struct TmaS8Epilogue {
  using Params = TmaS8ParamsOf<POOL>;
  static __device__ __forceinline__ int first_row(const Params& p, int m_blk) {
    if constexpr (POOL) {
      int g0, count;
      tma_detail::pool_tile_rows(p.pool, m_blk, g0, count);
      return tma_detail::pool_conv_lo(p, g0);
    } else {
      return m_blk * BM;
    }
  }
  template <int MI>
  static __device__ __forceinline__ void store(const int (&acc)[MI][BN / 2], const Params& p,
                                               const tma_detail::TmaUnit& u) {
    if constexpr (POOL) {
      pool_epilogue_s8<BM, BN>(acc, p, u);
    } else if constexpr (FLOAT_OUT) {
      // Register layout as requantised_tile's; channels >= out_c are the padding lanes (zeros),
      // columns >= out_stride are not stored.
      const int q = u.lane % 4;
      float* y = static_cast<float*>(p.y);
#pragma unroll
      for (int i = 0; i < MI; ++i) {
        const int row0 = u.m_blk * BM + (u.cw * MI + i) * 64 + u.warp * 16 + u.lane / 4;
#pragma unroll
        for (int j = 0; j < BN / 8; ++j) {
          const int col = u.n0 + 8 * j + 2 * q;
          const bool in0 = col < p.out_c, in1 = col + 1 < p.out_c;
          const int b0 = in0 ? __ldg(p.bias + col) : 0, b1 = in1 ? __ldg(p.bias + col + 1) : 0;
          const float d0 = in0 ? __ldg(p.multiplier + col) : 0.f,
                      d1 = in1 ? __ldg(p.multiplier + col + 1) : 0.f;
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int row = row0 + 8 * h;
            if (row >= p.m || col >= p.out_stride) continue;
            const float2 v = make_float2(
                in0 ? s8::dequantize(acc[i][4 * j + 2 * h] + b0, d0, p.float_lo, p.float_hi) : 0.f,
                in1 ? s8::dequantize(acc[i][4 * j + 2 * h + 1] + b1, d1, p.float_lo, p.float_hi)
                    : 0.f);
            *reinterpret_cast<float2*>(y + size_t(row) * p.out_stride + col) = v;
          }
        }
      }
    } else {
      int8_t* y = static_cast<int8_t*>(p.y);
      requantised_tile<BM, BN>(acc, p, u, [&](int r, int c, const uint4& bytes) {
        const int row = u.m_blk * BM + r, col = u.n0 + c;
        if (row < p.m && col < p.out_stride)
          *reinterpret_cast<uint4*>(y + size_t(row) * p.out_stride + col) = bytes;
      });
    }
  }
};
#endif  // CNNRT_WGMMA_DEVICE

// BM x BN tiles, a ring of STAGES, k-tiles of KB bytes (or kPairedRows); FLOAT_OUT: dequantised
// fp32 output.
// BM = 192: three consumer warpgroups of one m64 block each (threads_for_rows), one im2col box
// of 192 pixels per 64- or 128-byte block (the host's 192-pixel input map).
template <int BM, int BN, int STAGES, int KB, bool FLOAT_OUT>
__global__ void __launch_bounds__(threads_for_rows(BM), 1)
    conv_tma_s8_kernel(const __grid_constant__ CUtensorMap tmap_x,
                       const __grid_constant__ CUtensorMap tmap_w, const TmaS8Params p) {
  pdl_wait();
#ifdef CNNRT_WGMMA_DEVICE
  tma_detail::tma_conv_mainloop<S8Traits<KB>, BM, BN, STAGES, 1,
                                TmaS8Epilogue<BM, BN, FLOAT_OUT, false>,
                                tma_detail::consumers_for_rows(BM)>(tmap_x, tmap_w, p);
#endif
}

// The same with the fused MaxPool over p.pool's tiling, int8 output (dynamic shared memory: the
// ring + kPoolStaging<BM, BN>).  A kernel of its own for its own parameter struct.
template <int BM, int BN, int STAGES, int KB>
__global__ void __launch_bounds__(kThreads, 1)
    conv_tma_s8_pool_kernel(const __grid_constant__ CUtensorMap tmap_x,
                            const __grid_constant__ CUtensorMap tmap_w, const TmaS8PoolParams p) {
  pdl_wait();
#ifdef CNNRT_WGMMA_DEVICE
  tma_detail::tma_conv_mainloop<S8Traits<KB>, BM, BN, STAGES, 1,
                                TmaS8Epilogue<BM, BN, false, true>>(tmap_x, tmap_w, p);
#endif
}

}  // namespace cnnrt::cuda::tma_s8_detail
