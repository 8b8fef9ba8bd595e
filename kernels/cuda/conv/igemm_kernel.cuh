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
// igemm_smem_bytes (igemm_params.h); the vector A loader walks (tap, channel chunk)
// incrementally, no divisions.
//
// Code shape: the kernel is a loop over passes of IgemmCta's steps (row table, main loop,
// staging, pool), each a __forceinline__ device function, so no function is long and the
// generated code is that of one flat kernel.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/cuda/conv/epilogue.cuh"
#include "kernels/cuda/conv/igemm_params.h"
#include "kernels/cuda/conv/ptx.cuh"

namespace cnnrt::cuda::conv_detail {

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

// One CTA of conv_igemm_kernel: its tile, shared-memory carve-up and loader state, and the steps
// of a pass as device functions.
template <int BM, int BN, int WARPS_M, int WARPS_N, int STAGES, bool GATHER, bool POOL, int BK>
struct IgemmCta {
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
  using Acc = float[MI][NI][4];

  const ConvParams& p;
  __half* s_a;
  __half* s_b;
  int4* s_rows;  // {image|-1, ih0, iw0, 0}
  __half* s_c;   // staging: aliases the ring when single-pass
  int tid, lane, warp, warp_m, warp_n;
  int group, n0;  // n0: column within the group
  const __half* w_tile;
  const float* bias_tile;
  int in_c0;  // vector loader: first input channel of the group
  epilogue::PoolBlock block{0, 0, 0, 0, 0};
  long long m0 = 0;
  int passes;
  int kt_begin = 0, k_tiles;  // K range of this CTA: everything, or one split-K slice
  // Vector loader: this thread's K chunk is the same for all its rows (kThreads % kCh == 0);
  // (tap row, tap column, channel chunk) advance incrementally per k-tile.
  int a_c, a_kc = 0, a_c8 = 0, a_kh = 0, a_kw = 0;

  __device__ __forceinline__ IgemmCta(const ConvParams& params, unsigned char* smem_raw)
      : p(params) {
    s_a = reinterpret_cast<__half*>(smem_raw);
    s_b = s_a + STAGES * kAStage;
    s_rows = reinterpret_cast<int4*>(s_b + STAGES * kBStage);
    tid = threadIdx.x;
    lane = tid & 31;
    warp = tid >> 5;
    warp_m = warp / WARPS_N;
    warp_n = warp % WARPS_N;
    group = blockIdx.y / p.n_tiles;
    n0 = (blockIdx.y % p.n_tiles) * BN;
    w_tile = p.w + (size_t(group) * p.w_rows + n0) * p.w_k;
    bias_tile = p.bias + size_t(group) * p.w_rows + n0;
    in_c0 = group * p.cpg;
    if constexpr (POOL)
      block = epilogue::pool_block_of(blockIdx.x, p.tile, p.pool);
    else
      m0 = (long long)blockIdx.x * BM;
    passes = POOL ? p.tile.passes : 1;
    s_c = passes == 1 ? s_a : reinterpret_cast<__half*>(s_rows + BM);
    k_tiles = p.k_tiles;
    if constexpr (!POOL) {
      if (p.split_k > 0) {
        kt_begin = blockIdx.z * p.split_k;
        k_tiles = min(p.split_k, p.k_tiles - kt_begin);
      }
    }
    a_c = tid % kCh;
  }

  // ---- loaders -------------------------------------------------------------------------------
  __device__ __forceinline__ void load_b(int slot, int kt) {
#pragma unroll
    for (int i = 0; i < BN * kCh / kThreads; ++i) {
      const int id = tid + i * kThreads, r = id / kCh, c = id % kCh;
      cp_async_16(smem_u32(s_b + slot * kBStage + r * kRowHalves + c * 8),
                  w_tile + size_t(r) * p.w_k + kt * BK + c * 8, 16);
    }
  }
  // Called for consecutive k-tiles only (prologue, then one per main-loop iteration): no
  // integer division per k-tile, only this seek at the start of each pass.
  __device__ __forceinline__ void seek_a_vec(int kt) {
    a_kc = kt * kCh + a_c;
    const int tap = a_kc / p.cpg_chunks;
    a_c8 = a_kc - tap * p.cpg_chunks;
    a_kh = tap / p.kw;
    a_kw = tap - a_kh * p.kw;
  }
  __device__ __forceinline__ void load_a_vec(int slot) {
    const int c = a_c, c8 = a_c8;
    const bool k_ok = a_kc < p.k_real;  // past K: zero fill (the tap may run past kh)
    const int dy = a_kh * p.dh, dx = a_kw * p.dw;
    a_kc += kCh;  // advance to the next k-tile
    a_c8 += kCh;
    while (a_c8 >= p.cpg_chunks) {
      a_c8 -= p.cpg_chunks;
      if (++a_kw == p.kw) {
        a_kw = 0;
        ++a_kh;
      }
    }
#pragma unroll
    for (int i = 0; i < BM * kCh / kThreads; ++i) {
      const int r = tid / kCh + i * (kThreads / kCh);
      const int4 info = s_rows[r];
      const __half* src = p.x;  // never read when bytes == 0
      int bytes = 0;
      const int ih = info.y + dy, iw = info.z + dx;
      if (k_ok && info.x >= 0 && unsigned(ih) < unsigned(p.in_h) &&
          unsigned(iw) < unsigned(p.in_w)) {
        src = p.x + ((size_t(info.x) * p.in_h + ih) * p.in_w + iw) * p.in_cs + in_c0 + c8 * 8;
        bytes = 16;
      }
      cp_async_16(smem_u32(s_a + slot * kAStage + r * kRowHalves + c * 8), src, bytes);
    }
  }
  // Gather loader (few channels): lane = k column, warp = row; registers one k-tile ahead.
  __device__ __forceinline__ void gather_a(int kt, uint32_t (&gather_regs)[kGatherPer / 2]) {
    const int k = kt * BK + lane;
    const bool k_ok = k < p.k_real;
    const int tap = k_ok ? k / p.in_c : 0;
    const int ch = k - tap * p.in_c;
    const int r_kh = tap / p.kw, r_kw = tap - r_kh * p.kw;
    const int dy = r_kh * p.dh, dx = r_kw * p.dw;
    const unsigned short* xs = reinterpret_cast<const unsigned short*>(p.x);
#pragma unroll
    for (int i = 0; i < kGatherPer; ++i) {
      const int r = warp + i * (kThreads / 32);
      const int4 info = s_rows[r];
      const int ih = info.y + dy, iw = info.z + dx;
      uint32_t v = 0;
      if (k_ok && info.x >= 0 && unsigned(ih) < unsigned(p.in_h) && unsigned(iw) < unsigned(p.in_w))
        v = __ldg(xs + ((size_t(info.x) * p.in_h + ih) * p.in_w + iw) * p.in_cs + ch);
      if (i % 2 == 0)
        gather_regs[i / 2] = v;
      else
        gather_regs[i / 2] |= v << 16;
    }
  }
  __device__ __forceinline__ void store_gathered(int slot,
                                                 const uint32_t (&gather_regs)[kGatherPer / 2]) {
    unsigned short* dst = reinterpret_cast<unsigned short*>(s_a + slot * kAStage);
#pragma unroll
    for (int i = 0; i < kGatherPer; ++i)
      dst[(warp + i * (kThreads / 32)) * kRowHalves + lane] =
          static_cast<unsigned short>(gather_regs[i / 2] >> (16 * (i % 2)));
  }

  // ---- one pass: row table, pipelined K loop -------------------------------------------------
  __device__ __forceinline__ void fill_rows(int pass) {
    const epilogue::RowGeometry g{p.conv_h, p.conv_w, p.sh, p.sw, p.ph, p.pw};
    epilogue::fill_row_table<BM, kThreads, POOL>(s_rows, tid, g, p.tile, pass, block, m0,
                                                 p.m_total);
    __syncthreads();
  }
  // The MMAs of the k-tile in ring slot `slot`: fragments by ldmatrix.x4, mma m16n8k16.
  __device__ __forceinline__ void mma_slot(Acc& acc, int slot) const {
    const __half* a_tile = s_a + slot * kAStage;
    const __half* b_tile = s_b + slot * kBStage;
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {
      uint32_t af[MI][4], bf[NI][2];
#pragma unroll
      for (int mi = 0; mi < MI; ++mi) {
        const int row = warp_m * WM + mi * 16 + (lane & 15);
        const int col = kk * 16 + (lane >> 4) * 8;
        ldmatrix_x4(af[mi], smem_u32(a_tile + row * kRowHalves + col));
      }
#pragma unroll
      for (int nj = 0; nj < NI / 2; ++nj) {
        const int row = warp_n * WN + nj * 16 + (lane & 7) + ((lane >> 4) << 3);
        const int col = kk * 16 + ((lane >> 3) & 1) * 8;
        uint32_t r[4];
        ldmatrix_x4(r, smem_u32(b_tile + row * kRowHalves + col));
        bf[2 * nj][0] = r[0];
        bf[2 * nj][1] = r[1];
        bf[2 * nj + 1][0] = r[2];
        bf[2 * nj + 1][1] = r[3];
      }
#pragma unroll
      for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int ni = 0; ni < NI; ++ni) mma_16816(acc[mi][ni], af[mi], bf[ni][0], bf[ni][1]);
    }
  }
  // STAGES-deep cp.async ring, one __syncthreads per k-tile (the slot refilled in iteration kt
  // is the one consumed in kt-1, and every thread has passed the barrier).  Ends drained and
  // behind a barrier: the ring and the row table are free for the staging tile / next pass.
  __device__ __forceinline__ void mainloop(Acc& acc) {
    uint32_t gather_regs[kGatherPer / 2];  // two rows' halves per register
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
      for (int ni = 0; ni < NI; ++ni)
#pragma unroll
        for (int q = 0; q < 4; ++q) acc[mi][ni][q] = 0.f;
    if constexpr (!GATHER) seek_a_vec(kt_begin);
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
      if (s < k_tiles) {
        load_b(s, kt_begin + s);
        if constexpr (GATHER) {
          gather_a(kt_begin + s, gather_regs);
          store_gathered(s, gather_regs);
        } else {
          load_a_vec(s);
        }
      }
      cp_async_commit();
    }
    for (int kt = 0; kt < k_tiles; ++kt) {
      cp_async_wait<STAGES - 2>();
      __syncthreads();
      const int k_next = kt + STAGES - 1;
      const int slot_next = k_next % STAGES;
      if (k_next < k_tiles) {
        load_b(slot_next, kt_begin + k_next);
        if constexpr (GATHER)
          gather_a(kt_begin + k_next, gather_regs);
        else
          load_a_vec(slot_next);
      }
      cp_async_commit();
      mma_slot(acc, kt % STAGES);
      if constexpr (GATHER) {
        if (k_next < k_tiles) store_gathered(slot_next, gather_regs);
      }
    }
    cp_async_wait<0>();
    __syncthreads();  // ring and row table are reused by the next pass (or by the staging tile)
  }

  // ---- epilogue ------------------------------------------------------------------------------
  // Split-K slice: raw fp32 sums straight from registers into partial[z][m][n_limit].
  __device__ __forceinline__ void write_partial(const Acc& acc) const {
    float* dst = p.partial + size_t(blockIdx.z) * size_t(p.m_total) * p.n_limit;
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
      for (int ni = 0; ni < NI; ++ni) {
        const int col = n0 + warp_n * WN + ni * 8 + (lane & 3) * 2;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const long long m = m0 + warp_m * WM + mi * 16 + (lane >> 2) + 8 * h;
          if (m < p.m_total && col < p.n_limit)
            *reinterpret_cast<float2*>(dst + m * p.n_limit + col) =
                make_float2(acc[mi][ni][2 * h], acc[mi][ni][2 * h + 1]);
        }
      }
  }
  // Bias + activation -> fp16 staging (mma.sync fragment: row lane/4 + 8h, columns 2(lane%4)).
  __device__ __forceinline__ void stage(const Acc& acc, int pass) const {
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int local = warp_m * WM + mi * 16 + (lane >> 2) + 8 * h;  // row within the pass
        const int row = POOL ? epilogue::staging_row<BM>(p.tile, pass, local) : local;
        if (row < 0) continue;
#pragma unroll
        for (int ni = 0; ni < NI; ++ni) {
          const int col = warp_n * WN + ni * 8 + (lane & 3) * 2;
          epilogue::stage_pair(s_c + row * kCRow + col, acc[mi][ni][2 * h], acc[mi][ni][2 * h + 1],
                               bias_tile[col], bias_tile[col + 1], p.act);
        }
      }
    }
  }
  __device__ __forceinline__ epilogue::TileOutput output() const {
    return {p.y, p.out_cs, group * p.opg + n0, p.n_limit - n0, p.out_c};
  }
  __device__ __forceinline__ void pool_rows(int py_begin, int py_end) const {
    epilogue::pool_out<BN, kThreads, true>(s_c, p.tile, p.pool, block, p.conv_h, p.conv_w, p.out_h,
                                           p.out_w, output(), tid, py_begin, py_end);
  }
  // Row streaming: pool the pooled rows whose windows the rows so far complete.  The next pass
  // only writes ring slots of rows no pending pooled row needs (host: stage_rows), and its
  // row-table barrier orders these reads before its epilogue writes.
  __device__ __forceinline__ void pool_streamed_rows(int pass) const {
    if (p.tile.pass_rows == 0) return;
    const int py_begin = pass == 0 ? 0 : pooled_rows_after(p.tile, p.pool, pass - 1);
    const int py_end = pooled_rows_after(p.tile, p.pool, pass);
    __syncthreads();
    if (py_end > py_begin) pool_rows(py_begin, py_end);
  }
  // After the last pass (behind a barrier): the flat tile's rows, or the packed pool tile.
  __device__ __forceinline__ void write_out() const {
    if constexpr (!POOL)
      epilogue::store_rows<BM, BN, kThreads, true, true>(s_c, tid, m0, p.m_total, output());
    else if (p.tile.pass_rows == 0)
      pool_rows(0, p.tile.tile_ph);
  }
};

template <int BM, int BN, int WARPS_M, int WARPS_N, int STAGES, bool GATHER, bool POOL,
          int BK = kBK>
__global__ void __launch_bounds__(WARPS_M* WARPS_N * 32, igemm_min_blocks(BM, BN, WARPS_M, WARPS_N))
    conv_igemm_kernel(const ConvParams p) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  using Cta = IgemmCta<BM, BN, WARPS_M, WARPS_N, STAGES, GATHER, POOL, BK>;
  Cta cta(p, smem_raw);
  for (int pass = 0; pass < cta.passes; ++pass) {
    cta.fill_rows(pass);
    typename Cta::Acc acc;
    cta.mainloop(acc);
    if constexpr (!POOL) {
      if (p.partial) {
        cta.write_partial(acc);
        return;  // uniform across the CTA: no barrier follows for anyone
      }
    }
    cta.stage(acc, pass);
    if constexpr (POOL) cta.pool_streamed_rows(pass);
  }
  __syncthreads();
  cta.write_out();
}

}  // namespace cnnrt::cuda::conv_detail
