// Implicit-GEMM fp16 convolution on tensor cores (mma.sync, sm_80+) with a fused bias /
// activation / MaxPool epilogue.
//
// GEMM view (per group): M = output pixels, N = output channels, K = kh*kw*cin.  A rows are
// gathered on the fly from the NHWC input (no im2col buffer); B is the prepacked weight
// [group][n_rows][k] fp16 with K contiguous, zero-padded to a multiple of 64 in K and in N to
// cover every tile config's last N tile (BN = 64 / 96 / 128), so B loads never need a guard.
//
// Two A loaders (template flag GATHER):
//  * vector: K ordered (kh, kw, c8-chunk) over channels padded to 8; one 16-byte cp.async per
//    (row, tap, 8 channels), zero-filled (src-size 0) for padding taps and K tails.
//  * gather: for few input channels (C <= 4, AlexNet conv1): K ordered (kh, kw, c) over the REAL
//    channels (363 instead of 968 for conv1), loaded with 2-byte __ldg gathers into registers
//    one k-tile ahead and stored to shared memory after the MMAs of the current tile, so the
//    loads overlap the tensor-core work.  A warp owns one A row and lane = k column, so the
//    per-row table read is a broadcast and the smem stores are conflict-free.
//
// Shared memory rows are 32 halves + 8 halves padding (80 B): eight consecutive rows hit eight
// distinct 16-byte bank groups, so every ldmatrix phase is conflict-free without a swizzle.
// Pipeline: STAGES-deep cp.async ring, one __syncthreads per k-tile (the slot refilled in
// iteration kt is the one consumed in kt-1, and every thread has passed the barrier).
// MMA: mma.sync m16n8k16 row.col f16 -> f32; fragments via ldmatrix.x4.
//
// Epilogue (shared with every tensor-core conv: epilogue.cuh, pool tiling: pool_tiling.h):
// accumulators + bias (fp32), activation clamp, rounded to fp16 and staged in shared memory;
//  * no pool: 16-byte vector stores of whole 8-channel chunks (padding channels forced to 0);
//  * POOL: the CTA's M tile is a TH x TW spatial tile of ONE image's conv output that covers the
//    whole windows of a PH x PW block of pooled outputs ((PH-1)*stride + kernel rows).  When
//    TH*TW > BM the CTA runs several M passes over the same staging buffer (`passes`), so large
//    tiles (less halo recomputation, less edge waste) are possible.  The pooled outputs are then
//    reduced from shared memory with __hmax2; the pre-pool tensor never reaches device memory.
//    Taking the max after rounding to fp16 equals rounding the fp32 max (rounding is monotone).
//    Row-streaming variant (p.tile.pass_rows > 0): passes of whole conv rows, staging = a small
//    ring of conv rows, pooled rows written as soon as their windows are complete; the staging size
//    no longer grows with the pass count, so one CTA can sweep a whole image (no halo).
//  * split-K (non-pool instances, p.partial set): grid.z slices the K loop and each CTA writes
//    its raw fp32 sums to the workspace; conv_splitk_finish_kernel (igemm_finish.cuh)
//    reduces them with bias / activation / pool.  conv_finish_kernel pools the fp16 output of an
//    unfused launch.
// A single-pass CTA stages its epilogue tile in the (then idle) pipeline ring, see
// igemm_smem_bytes (igemm_params.h); the vector A loader walks (tap, channel chunk) incrementally,
// no divisions.
//
// Code shape: the kernel body is the CTA's schedule (row table, prologue, main loop, epilogue
// per pass); the loaders, the k-tile MMA, the staging epilogue and the write-outs are
// __forceinline__ device functions below, templated on the instance (IgemmCfg) and written
// expression for expression as the single body they replaced, so ptxas sees the same code:
// the SASS of every instance was compared before and after the split (cuobjdump -sass, issue 7).
// An earlier split through a CTA struct and the shared epilogue.cuh write-out changed ptxas's
// register allocation (more spills in the gather instances) and, for the wgmma kernel, cost
// 2-8% on AlexNet (H100 A/B), so this kernel keeps its own copies of those steps.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/cuda/conv/epilogue.cuh"
#include "kernels/cuda/conv/igemm_params.h"
#include "kernels/cuda/conv/pool_tiling.h"
#include "kernels/cuda/conv/ptx.cuh"
#include "kernels/cuda/pdl.cuh"

namespace cnnrt::cuda::conv_detail {

using epilogue::zero_channels_from;
using ptx::cp_async_16;
using ptx::cp_async_commit;
using ptx::cp_async_wait;
using ptx::ldmatrix_x4;
using ptx::mma_16816;
using ptx::smem_u32;

// Minimum resident CTAs promised to ptxas (caps registers per thread).  A 64x64 warp tile holds
// 128 fp32 accumulators per thread, so it gets the whole register file (1 CTA of 8 warps);
// smaller warp tiles keep 2 (8 warps) or 3 (4 warps) CTAs per SM.
constexpr int igemm_min_blocks(int bm, int bn, int warps_m, int warps_n) {
  return (bm / warps_m) * (bn / warps_n) >= 64 * 64 ? (warps_m * warps_n >= 8 ? 1 : 2)
                                                    : (warps_m * warps_n >= 8 ? 2 : 3);
}

// The compile-time shape of one kernel instance.
template <int BM_, int BN_, int WARPS_M_, int WARPS_N_, int STAGES_, bool GATHER_, bool POOL_,
          int BK_>
struct IgemmCfg {
  static constexpr int BM = BM_, BN = BN_, WARPS_M = WARPS_M_, WARPS_N = WARPS_N_;
  static constexpr int STAGES = STAGES_, BK = BK_;
  static constexpr bool GATHER = GATHER_, POOL = POOL_;
  static constexpr int kThreads = WARPS_M * WARPS_N * 32;
  static constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N;
  static constexpr int MI = WM / 16, NI = WN / 8;
  static_assert(WM % 16 == 0 && WN % 16 == 0, "warp tile must be a multiple of 16x16");
  static constexpr int kCh = BK / 8;         // 16-byte chunks per smem row
  static constexpr int kRowHalves = BK + 8;  // padded smem row: 80 B (BK 32) / 144 B (BK 64)
  static_assert(BK == 32 || (BK == 64 && !GATHER), "BK 64: vector loader only");
  static_assert((BM * kCh) % kThreads == 0 && (BN * kCh) % kThreads == 0, "loader split");
  static_assert(kThreads % kCh == 0, "a thread's K chunk must be the same for all its rows");
  static_assert((BM * BK) % kThreads == 0, "gather split");
  static constexpr int kAStage = BM * kRowHalves, kBStage = BN * kRowHalves;
  static constexpr int kCRow = BN + 8;  // staging row (halves); +8: conflict-free half2 stores
  static_assert(igemm_staging_bytes(BM, BN, 1) <= igemm_ring_bytes(BM, BN, STAGES, BK),
                "a single-pass staging tile must fit in the ring it aliases");
  static constexpr int kGatherPer = GATHER ? BM * BK / kThreads : 2;
  static_assert(kGatherPer % 2 == 0, "gathered halves are held in pairs");
};

// Where this CTA's output lies: its group, first column, and (POOL) its block of pooled outputs
// or (flat) its first output pixel.
struct IgemmTile {
  int group, n0, image, tile_y, tile_x, cy0, cx0;
  long long m0;
};

// Staging pixel of conv-tile position (ly, lx): packed passes keep the whole tile, the
// row-streaming mode a ring of stage_rows rows.
__device__ __forceinline__ int igemm_stage_pixel(const ConvParams& p, int stream_rows, int ly,
                                                 int lx) {
  return (stream_rows > 0 ? ly % p.tile.stage_rows : ly) * p.tile.tile_tw + lx;
}

// ---- loaders ------------------------------------------------------------------------------------

template <class C>
__device__ __forceinline__ void igemm_load_b(const ConvParams& p, __half* s_b, const __half* w_tile,
                                             int tid, int slot, int kt) {
#pragma unroll
  for (int i = 0; i < C::BN * C::kCh / C::kThreads; ++i) {
    const int id = tid + i * C::kThreads, r = id / C::kCh, c = id % C::kCh;
    cp_async_16(smem_u32(s_b + slot * C::kBStage + r * C::kRowHalves + c * 8),
                w_tile + size_t(r) * p.w_k + kt * C::BK + c * 8, 16);
  }
}

// Vector A loader state.  kThreads is a multiple of kCh, so this thread's K chunk
// (kc = kt * kCh + c) is the same for all its rows.  The loader is called for consecutive k-tiles
// only (prologue, then one per main-loop iteration), so (tap row, tap column, channel chunk)
// advance incrementally: no integer division per k-tile, only a seek at the start of each pass.
struct VecLoader {
  int c, kc, c8, kh, kw;
};

template <class C>
__device__ __forceinline__ void igemm_seek_a(VecLoader& a, const ConvParams& p, int kt) {
  a.kc = kt * C::kCh + a.c;
  const int tap = a.kc / p.cpg_chunks;
  a.c8 = a.kc - tap * p.cpg_chunks;
  a.kh = tap / p.kw;
  a.kw = tap - a.kh * p.kw;
}

template <class C>
__device__ __forceinline__ void igemm_load_a_vec(VecLoader& a, const ConvParams& p, __half* s_a,
                                                 const int4* s_rows, int tid, int in_c0, int slot) {
  const int c = a.c, c8 = a.c8;
  const bool k_ok = a.kc < p.k_real;  // past K: zero fill (the tap may run past kh)
  const int dy = a.kh * p.dh, dx = a.kw * p.dw;
  a.kc += C::kCh;  // advance to the next k-tile
  a.c8 += C::kCh;
  while (a.c8 >= p.cpg_chunks) {
    a.c8 -= p.cpg_chunks;
    if (++a.kw == p.kw) {
      a.kw = 0;
      ++a.kh;
    }
  }
#pragma unroll
  for (int i = 0; i < C::BM * C::kCh / C::kThreads; ++i) {
    const int r = tid / C::kCh + i * (C::kThreads / C::kCh);
    const int4 info = s_rows[r];
    const __half* src = p.x;  // never read when bytes == 0
    int bytes = 0;
    const int ih = info.y + dy, iw = info.z + dx;
    if (k_ok && info.x >= 0 && unsigned(ih) < unsigned(p.in_h) && unsigned(iw) < unsigned(p.in_w)) {
      src = p.x + ((size_t(info.x) * p.in_h + ih) * p.in_w + iw) * p.in_cs + in_c0 + c8 * 8;
      bytes = 16;
    }
    cp_async_16(smem_u32(s_a + slot * C::kAStage + r * C::kRowHalves + c * 8), src, bytes);
  }
}

// Gather loader: a warp owns A rows warp, warp + warps, ...; lane = k column.  Two rows' halves
// per register halves the registers held across the MMAs.
template <class C>
__device__ __forceinline__ void igemm_gather_a(uint32_t (&regs)[C::kGatherPer / 2],
                                               const ConvParams& p, const int4* s_rows, int warp,
                                               int lane, int kt) {
  const int k = kt * C::BK + lane;
  const bool k_ok = k < p.k_real;
  const int tap = k_ok ? k / p.in_c : 0;
  const int ch = k - tap * p.in_c;
  const int r_kh = tap / p.kw, r_kw = tap - r_kh * p.kw;
  const int dy = r_kh * p.dh, dx = r_kw * p.dw;
  const unsigned short* xs = reinterpret_cast<const unsigned short*>(p.x);
#pragma unroll
  for (int i = 0; i < C::kGatherPer; ++i) {
    const int r = warp + i * (C::kThreads / 32);
    const int4 info = s_rows[r];
    const int ih = info.y + dy, iw = info.z + dx;
    uint32_t v = 0;
    if (k_ok && info.x >= 0 && unsigned(ih) < unsigned(p.in_h) && unsigned(iw) < unsigned(p.in_w))
      v = __ldg(xs + ((size_t(info.x) * p.in_h + ih) * p.in_w + iw) * p.in_cs + ch);
    if (i % 2 == 0)
      regs[i / 2] = v;
    else
      regs[i / 2] |= v << 16;
  }
}

template <class C>
__device__ __forceinline__ void igemm_store_gathered(const uint32_t (&regs)[C::kGatherPer / 2],
                                                     __half* s_a, int warp, int lane, int slot) {
  unsigned short* dst = reinterpret_cast<unsigned short*>(s_a + slot * C::kAStage);
#pragma unroll
  for (int i = 0; i < C::kGatherPer; ++i)
    dst[(warp + i * (C::kThreads / 32)) * C::kRowHalves + lane] =
        static_cast<unsigned short>(regs[i / 2] >> (16 * (i % 2)));
}

// ---- row table: which input window each A row of this pass reads ---------------------------

template <class C>
__device__ __forceinline__ void igemm_fill_rows(const ConvParams& p, int4* s_rows, int tid,
                                                int pass, int stream_rows, const IgemmTile& t) {
  for (int r = tid; r < C::BM; r += C::kThreads) {
    int4 info = make_int4(-1, 0, 0, 0);
    if constexpr (C::POOL) {
      int ly, lx;
      bool in_tile;
      if (stream_rows > 0) {
        ly = pass * stream_rows + r / p.tile.tile_tw;
        lx = r % p.tile.tile_tw;
        in_tile = r < stream_rows * p.tile.tile_tw && ly < p.tile.tile_th;
      } else {
        const int rg = pass * C::BM + r;
        ly = rg / p.tile.tile_tw;
        lx = rg % p.tile.tile_tw;
        in_tile = rg < p.tile.tile_th * p.tile.tile_tw;
      }
      if (in_tile) {
        const int cy = t.cy0 + ly, cx = t.cx0 + lx;
        if (cy >= 0 && cy < p.conv_h && cx >= 0 && cx < p.conv_w)
          info = make_int4(t.image, cy * p.sh - p.ph, cx * p.sw - p.pw, 0);
      }
    } else {
      const long long m = t.m0 + r;
      if (m < p.m_total) {
        const int cx = int(m % p.conv_w);
        const long long q = m / p.conv_w;
        const int cy = int(q % p.conv_h), n = int(q / p.conv_h);
        info = make_int4(n, cy * p.sh - p.ph, cx * p.sw - p.pw, 0);
      }
    }
    s_rows[r] = info;
  }
}

// ---- one k-tile of MMAs from the ring slot (a_tile, b_tile) ---------------------------------

template <class C>
__device__ __forceinline__ void igemm_mma_ktile(float (&acc)[C::MI][C::NI][4], const __half* a_tile,
                                                const __half* b_tile, int warp_m, int warp_n,
                                                int lane) {
#pragma unroll
  for (int kk = 0; kk < C::BK / 16; ++kk) {
    uint32_t af[C::MI][4], bf[C::NI][2];
#pragma unroll
    for (int mi = 0; mi < C::MI; ++mi) {
      const int row = warp_m * C::WM + mi * 16 + (lane & 15);
      const int col = kk * 16 + (lane >> 4) * 8;
      ldmatrix_x4(af[mi], smem_u32(a_tile + row * C::kRowHalves + col));
    }
#pragma unroll
    for (int nj = 0; nj < C::NI / 2; ++nj) {
      const int row = warp_n * C::WN + nj * 16 + (lane & 7) + ((lane >> 4) << 3);
      const int col = kk * 16 + ((lane >> 3) & 1) * 8;
      uint32_t r[4];
      ldmatrix_x4(r, smem_u32(b_tile + row * C::kRowHalves + col));
      bf[2 * nj][0] = r[0];
      bf[2 * nj][1] = r[1];
      bf[2 * nj + 1][0] = r[2];
      bf[2 * nj + 1][1] = r[3];
    }
#pragma unroll
    for (int mi = 0; mi < C::MI; ++mi)
#pragma unroll
      for (int ni = 0; ni < C::NI; ++ni) mma_16816(acc[mi][ni], af[mi], bf[ni][0], bf[ni][1]);
  }
}

// ---- epilogue ---------------------------------------------------------------------------------

// Split-K slice: raw fp32 sums straight from registers to the workspace, no staging.
template <class C>
__device__ __forceinline__ void igemm_store_partial(const float (&acc)[C::MI][C::NI][4],
                                                    const ConvParams& p, const IgemmTile& t,
                                                    int warp_m, int warp_n, int lane) {
  float* dst = p.partial + size_t(blockIdx.z) * size_t(p.m_total) * p.n_limit;
#pragma unroll
  for (int mi = 0; mi < C::MI; ++mi)
#pragma unroll
    for (int ni = 0; ni < C::NI; ++ni) {
      const int col = t.n0 + warp_n * C::WN + ni * 8 + (lane & 3) * 2;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const long long m = t.m0 + warp_m * C::WM + mi * 16 + (lane >> 2) + 8 * h;
        if (m < p.m_total && col < p.n_limit)
          *reinterpret_cast<float2*>(dst + m * p.n_limit + col) =
              make_float2(acc[mi][ni][2 * h], acc[mi][ni][2 * h + 1]);
      }
    }
}

// Bias + activation clamp -> fp16 staging rows of this pass.  One clamp for every activation:
// unlike the wgmma epilogue, the igemm one showed no cost from the upper bound (H100 A/B,
// issue 7), and one path keeps ptxas's allocation as before.
template <class C>
__device__ __forceinline__ void igemm_stage_acc(const float (&acc)[C::MI][C::NI][4], __half* s_c,
                                                const float* bias_tile, const ConvParams& p,
                                                int pass, int stream_rows, int warp_m, int warp_n,
                                                int lane) {
#pragma unroll
  for (int mi = 0; mi < C::MI; ++mi) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int local = warp_m * C::WM + mi * 16 + (lane >> 2) + 8 * h;  // row within the pass
      int row = pass * C::BM + local;
      if (C::POOL && stream_rows > 0) {  // ring slot; rows past the pass's conv rows dropped
        const int ly = pass * stream_rows + local / p.tile.tile_tw;
        row = local < stream_rows * p.tile.tile_tw && ly < p.tile.tile_th
                  ? igemm_stage_pixel(p, stream_rows, ly, local % p.tile.tile_tw)
                  : -1;
      }
      if (row < 0) continue;
#pragma unroll
      for (int ni = 0; ni < C::NI; ++ni) {
        const int col = warp_n * C::WN + ni * 8 + (lane & 3) * 2;
        float v0 = acc[mi][ni][2 * h] + bias_tile[col];
        float v1 = acc[mi][ni][2 * h + 1] + bias_tile[col + 1];
        if (p.act.on) {
          v0 = fminf(fmaxf(v0, p.act.lo), p.act.hi);
          v1 = fminf(fmaxf(v1, p.act.lo), p.act.hi);
        }
        *reinterpret_cast<__half2*>(s_c + row * C::kCRow + col) = __floats2half2_rn(v0, v1);
      }
    }
  }
}

// Pooled rows [py0, py1) of the CTA's block: window max (__hmax2) over the staging tile.
template <class C>
__device__ __forceinline__ void igemm_pool_out(const ConvParams& p, const __half* s_c,
                                               const IgemmTile& t, int stream_rows, int tid,
                                               int py0, int py1) {
  constexpr int kChunks = C::BN / 8;
  const __half2 neg_inf = __float2half2_rn(-INFINITY);
  for (int id = tid; id < (py1 - py0) * p.tile.tile_pw * kChunks; id += C::kThreads) {
    const int c = id % kChunks, q = id / kChunks;
    const int px = q % p.tile.tile_pw, py = py0 + q / p.tile.tile_pw;
    const int oy = t.tile_y * p.tile.tile_ph + py, ox = t.tile_x * p.tile.tile_pw + px;
    const int col = t.n0 + c * 8;
    if (oy >= p.out_h || ox >= p.out_w || col >= p.n_limit) continue;
    __half2 best[4] = {neg_inf, neg_inf, neg_inf, neg_inf};
    for (int i = 0; i < p.pool.pk_h; ++i) {
      const int ly = py * p.pool.ps_h + i, cy = t.cy0 + ly;
      if (cy < 0 || cy >= p.conv_h) continue;
      for (int j = 0; j < p.pool.pk_w; ++j) {
        const int lx = px * p.pool.ps_w + j, cx = t.cx0 + lx;
        if (cx < 0 || cx >= p.conv_w) continue;
        const uint4 v = *reinterpret_cast<const uint4*>(
            s_c + igemm_stage_pixel(p, stream_rows, ly, lx) * C::kCRow + c * 8);
        const uint32_t w4[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          __half2 h;
          *reinterpret_cast<uint32_t*>(&h) = w4[k];
          best[k] = __hmax2(best[k], h);
        }
      }
    }
    uint4 out;
    out.x = *reinterpret_cast<uint32_t*>(&best[0]);
    out.y = *reinterpret_cast<uint32_t*>(&best[1]);
    out.z = *reinterpret_cast<uint32_t*>(&best[2]);
    out.w = *reinterpret_cast<uint32_t*>(&best[3]);
    const int ch = t.group * p.opg + col;
    out = zero_channels_from(out, ch, p.out_c);
    *reinterpret_cast<uint4*>(p.y + ((size_t(t.image) * p.out_h + oy) * p.out_w + ox) * p.out_cs +
                              ch) = out;
  }
}

// Row-streaming mode: pooled rows whose windows lie within the conv rows of passes 0..q.
__device__ __forceinline__ int igemm_pooled_rows_after(const ConvParams& p, int passes,
                                                       int stream_rows, int q) {
  if (q + 1 >= passes) return p.tile.tile_ph;
  const int done = min((q + 1) * stream_rows, p.tile.tile_th);
  return done < p.pool.pk_h ? 0 : min(p.tile.tile_ph, (done - p.pool.pk_h) / p.pool.ps_h + 1);
}

// No pool: the staged rows to their output pixels, 16-byte chunks.
template <class C>
__device__ __forceinline__ void igemm_write_rows(const ConvParams& p, const __half* s_c,
                                                 const IgemmTile& t, int tid) {
  constexpr int kChunks = C::BN / 8;
  for (int id = tid; id < C::BM * kChunks; id += C::kThreads) {
    const int r = id / kChunks, c = id % kChunks;
    const long long m = t.m0 + r;
    const int col = t.n0 + c * 8;
    if (m >= p.m_total || col >= p.n_limit) continue;
    const int ch = t.group * p.opg + col;
    uint4 v = *reinterpret_cast<const uint4*>(s_c + r * C::kCRow + c * 8);
    if (p.residual != nullptr)  // staged without the clamp: it follows the add
      v = epilogue::add_residual(v, p.residual + m * p.out_cs + ch, p.residual_act);
    v = zero_channels_from(v, ch, p.out_c);
    *reinterpret_cast<uint4*>(p.y + m * p.out_cs + ch) = v;
  }
}

// ---- the kernel: the CTA's schedule -----------------------------------------------------------

template <int BM, int BN, int WARPS_M, int WARPS_N, int STAGES, bool GATHER, bool POOL,
          int BK = kBK>
__global__ void __launch_bounds__(WARPS_M* WARPS_N * 32, igemm_min_blocks(BM, BN, WARPS_M, WARPS_N))
    conv_igemm_kernel(const ConvParams p) {
  using C = IgemmCfg<BM, BN, WARPS_M, WARPS_N, STAGES, GATHER, POOL, BK>;
  // K range of this CTA: everything, or one split-K slice (grid.z) of it.  Its weight rows are
  // pulled into L2 before the wait (pdl.cuh), while the kernel before it still runs.
  int kt_begin = 0, k_tiles = p.k_tiles;
  if constexpr (!POOL) {
    if (p.split_k > 0) {
      kt_begin = blockIdx.z * p.split_k;
      k_tiles = min(p.split_k, p.k_tiles - kt_begin);
    }
  }
  {
    const int group = blockIdx.y / p.n_tiles, n0 = (blockIdx.y % p.n_tiles) * BN;
    prefetch_rows_l2(p.w + (size_t(group) * p.w_rows + n0) * p.w_k, size_t(p.w_k) * 2, BN,
                     size_t(kt_begin) * BK * 2, size_t(kt_begin + k_tiles) * BK * 2, blockIdx.x,
                     gridDim.x);
  }
  pdl_wait();
  extern __shared__ __align__(16) unsigned char smem_raw[];
  __half* s_a = reinterpret_cast<__half*>(smem_raw);
  __half* s_b = s_a + STAGES * C::kAStage;
  int4* s_rows = reinterpret_cast<int4*>(s_b + STAGES * C::kBStage);  // {image|-1, ih0, iw0, 0}

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int warp_m = warp / WARPS_N, warp_n = warp % WARPS_N;

  IgemmTile t{};
  t.group = blockIdx.y / p.n_tiles;
  t.n0 = (blockIdx.y % p.n_tiles) * BN;  // column within the group
  const __half* w_tile = p.w + (size_t(t.group) * p.w_rows + t.n0) * p.w_k;
  const float* bias_tile = p.bias + size_t(t.group) * p.w_rows + t.n0;
  const int in_c0 = t.group * p.cpg;  // vector loader: first input channel of the group
  if constexpr (POOL) {
    int b = blockIdx.x;
    t.tile_x = b % p.tile.tiles_x;
    b /= p.tile.tiles_x;
    t.tile_y = b % p.tile.tiles_y;
    t.image = b / p.tile.tiles_y;
    t.cy0 = t.tile_y * p.tile.tile_ph * p.pool.ps_h - p.pool.pp_h;
    t.cx0 = t.tile_x * p.tile.tile_pw * p.pool.ps_w - p.pool.pp_w;
  } else {
    t.m0 = (long long)blockIdx.x * BM;
  }
  const int passes = POOL ? p.tile.passes : 1;
  const int stream_rows = POOL ? p.tile.pass_rows : 0;  // > 0: row-streaming pool
  // The staging tile aliases the ring when single-pass.
  __half* s_c = passes == 1 ? s_a : reinterpret_cast<__half*>(s_rows + BM);
  VecLoader va{tid % C::kCh, 0, 0, 0, 0};
  uint32_t gather_regs[C::kGatherPer / 2];

  for (int pass = 0; pass < passes; ++pass) {
    igemm_fill_rows<C>(p, s_rows, tid, pass, stream_rows, t);
    __syncthreads();

    float acc[C::MI][C::NI][4];
#pragma unroll
    for (int mi = 0; mi < C::MI; ++mi)
#pragma unroll
      for (int ni = 0; ni < C::NI; ++ni)
#pragma unroll
        for (int q = 0; q < 4; ++q) acc[mi][ni][q] = 0.f;

    // ---- prologue ---------------------------------------------------------------------
    if constexpr (!GATHER) igemm_seek_a<C>(va, p, kt_begin);
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
      if (s < k_tiles) {
        igemm_load_b<C>(p, s_b, w_tile, tid, s, kt_begin + s);
        if constexpr (GATHER) {
          igemm_gather_a<C>(gather_regs, p, s_rows, warp, lane, kt_begin + s);
          igemm_store_gathered<C>(gather_regs, s_a, warp, lane, s);
        } else {
          igemm_load_a_vec<C>(va, p, s_a, s_rows, tid, in_c0, s);
        }
      }
      cp_async_commit();
    }

    // ---- main loop: refill the slot consumed last iteration, then MMA this one ------------
    for (int kt = 0; kt < k_tiles; ++kt) {
      cp_async_wait<STAGES - 2>();
      __syncthreads();
      const int k_next = kt + STAGES - 1;
      const int slot_next = k_next % STAGES;
      if (k_next < k_tiles) {
        igemm_load_b<C>(p, s_b, w_tile, tid, slot_next, kt_begin + k_next);
        if constexpr (GATHER)
          igemm_gather_a<C>(gather_regs, p, s_rows, warp, lane, kt_begin + k_next);
        else
          igemm_load_a_vec<C>(va, p, s_a, s_rows, tid, in_c0, slot_next);
      }
      cp_async_commit();

      const int slot = kt % STAGES;
      igemm_mma_ktile<C>(acc, s_a + slot * C::kAStage, s_b + slot * C::kBStage, warp_m, warp_n,
                         lane);
      if constexpr (GATHER) {
        if (k_next < k_tiles) igemm_store_gathered<C>(gather_regs, s_a, warp, lane, slot_next);
      }
    }
    cp_async_wait<0>();
    __syncthreads();  // ring and row table are reused by the next pass (or by the staging tile)

    if constexpr (!POOL) {
      if (p.partial) {
        igemm_store_partial<C>(acc, p, t, warp_m, warp_n, lane);
        return;  // uniform across the CTA: no barrier follows for anyone
      }
    }

    igemm_stage_acc<C>(acc, s_c, bias_tile, p, pass, stream_rows, warp_m, warp_n, lane);
    if constexpr (POOL) {
      if (stream_rows > 0) {
        // Pool the pooled rows whose windows the rows so far complete.  The next pass only
        // writes ring slots of rows no pending pooled row needs (host: stage_rows), and its
        // row-table barrier orders these reads before its epilogue writes.
        const int py_begin =
            pass == 0 ? 0 : igemm_pooled_rows_after(p, passes, stream_rows, pass - 1);
        const int py_end = igemm_pooled_rows_after(p, passes, stream_rows, pass);
        __syncthreads();
        if (py_end > py_begin) igemm_pool_out<C>(p, s_c, t, stream_rows, tid, py_begin, py_end);
      }
    }
  }
  __syncthreads();

  // ---- write-out -----------------------------------------------------------------------------
  if constexpr (!POOL)
    igemm_write_rows<C>(p, s_c, t, tid);
  else if (stream_rows == 0)
    igemm_pool_out<C>(p, s_c, t, stream_rows, tid, 0, p.tile.tile_ph);
}

}  // namespace cnnrt::cuda::conv_detail
