// Hopper wgmma implicit-GEMM fp16 convolution (+ bias + activation + fused MaxPool): the kernel.
// sm_90a only; host side in wgmma.cu.
//
// Why: the mma.sync implicit GEMM (igemm_kernel.cuh) tops out near 200-220 TFLOP/s on
// AlexNet conv3/conv4 on an H200; Hopper reaches its peak only through warpgroup MMA (wgmma),
// which reads both operands straight from shared memory (no ldmatrix, no register fragments)
// and runs asynchronously to the issuing threads.
//
// GEMM view: M = output pixels (batch * conv_h * conv_w), N = output channels, K = kh*kw*in_c in
// (kh, kw, c) order — the same NHWC conventions as the mma.sync kernel.  A rows are gathered on
// the fly from the NHWC input, one 16-byte cp.async per (row, tap, 8-channel chunk), zero-filled
// (src-size 0) for padding taps and the K tail; B is the prepacked weight [out_c][w_k] fp16,
// K contiguous, zero-padded in K to a multiple of 64, so B loads need no guard.
//
// Tile: CTA = 2 warpgroups (256 threads), BM = 128 (64 rows per warpgroup), BN = 128 (192 when
// out_c % 192 == 0 but not % 128, e.g. conv2: one N tile; else 64; 96 or 32 for channel counts
// 64 does not divide), BK = 64 halves = one 128-byte row per A/B row.  Shared memory holds the rows
// in the canonical K-major 128-byte-swizzle layout wgmma expects: row r of a tile at r * 128 bytes,
// its 16-byte chunk c at chunk (c ^ (r % 8)); every tile starts 1024-byte aligned (the swizzle is a
// function of address bits 4-9).  Descriptor: start >> 4, LBO unused (1), SBO = 1024 bytes (8
// rows), swizzle mode 1 (128B).  The 4 k16 steps of a k-tile advance the start address by 32 bytes
// within the swizzled row, exactly as the hardware's swizzle expects.
//
// Pipeline (no producer warps): all 256 threads issue cp.async for the tiles STAGES-2 ahead;
// per k-tile: cp.async.wait -> fence.proxy.async.shared::cta (the cp.async writes are generic
// proxy, wgmma reads are async proxy) -> __syncthreads -> refill slot (kt-2) % STAGES ->
// wgmma.fence, 4 x wgmma, commit -> wgmma.wait_group 1.  Keeping one wgmma group in flight
// lets the tensor cores run while the threads go through the next barrier and issue loads; the
// slot refilled at iteration kt was last read by the group of kt-2, which every warpgroup has
// retired (wait_group 1 at the end of kt-1) before the barrier of kt.
//
// Epilogue (epilogue.cuh, shared with every tensor-core conv): accumulators (wgmma m64nN
// layout: warp w of the warpgroup owns rows 16w..16w+15;
// register 4j + 2h + {0,1} holds row lane/4 + 8h, columns 8j + 2(lane%4) + {0,1}) + bias, clamp,
// rounded to fp16, staged in shared memory (the drained ring), then written as 16-byte rows.
// out_c % 32 == 0, so the output has no padding channels to zero.
//
// Fused MaxPool (POOL instances): a CTA computes the TH x TW conv tile of ONE image under the
// windows of a PH x PW block of pooled outputs (host: plan(batch), pool_tiling.h), gathered
// through the same row table; the staged fp16 rows are reduced with __hmax2 and only pooled
// pixels are stored, so the pre-pool tensor never reaches memory.  TH * TW <= 128: one pass,
// staged in the drained ring.  Larger tiles (less halo, fewer part-empty M tiles) stream: the
// CTA loops over passes of 128 / TW whole conv rows, keeps only the rows unfinished pool windows
// still need in a staging ring outside the pipeline ring, and pools each pooled row as soon as
// its window rows are complete (the row-streaming mode of igemm_kernel.cuh).
//
// Element types: the mainloop (wg_mainloop), the loaders and the row table are templates over
// the parameter struct, so the int8 kernel (wgmma_s8.cu: wgmma m64nNk32 s8, int32 accumulators,
// the int8 epilogue) is an instance of this pipeline, not a copy; this fp16 kernel's SASS was
// byte-identical before and after that change (issue 10, docs/PERFORMANCE.md run 16).
//
// Build: the kernel body exists only under __CUDA_ARCH_FEAT_SM90_ALL (the sm_90a image, which
// CMake adds for wgmma.cu when 90 is among the CUDA architectures).  Other images get a body
// that traps; device_supported() runs a probe kernel from the same fatbinary to learn which
// image the driver loaded, so the trapping one is never launched.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/cuda/conv/epilogue.cuh"
#include "kernels/cuda/conv/pool_tiling.h"
#include "kernels/cuda/conv/ptx.cuh"
#include "kernels/cuda/conv/wgmma_common.h"
#include "kernels/cuda/pdl.cuh"

namespace cnnrt::cuda::wgmma_detail {

using namespace ptx;

constexpr int kBM = 128;  // rows per CTA (2 warpgroups x 64)
constexpr int kBK = 64;   // halves per k-tile: one 128-byte swizzled row
constexpr int kThreads = 256;
constexpr int kStages = 4;

// The shared geometry (wgmma_common.h; w/bias rows = out_c), then the fused pool: its window,
// the pooled extent and the CTA tiling (pool_tiling.h).  tile.passes == 1: the conv tile
// (tile_th * tile_tw <= kBM) is one M tile, staged in the drained ring.  tile.pass_rows > 0 (row
// streaming): pass q computes conv-tile rows [q * pass_rows, (q + 1) * pass_rows) (pass_rows *
// tile_tw <= kBM), staged in a ring of stage_rows conv rows kept after the row table (outside
// the pipeline ring, which the next pass refills), and pools the pooled rows those rows complete.
struct WgmmaParams : WgmmaConvParams {
  PoolWindow pool;
  int out_h = 0, out_w = 0;
  PoolTile tile;
};

constexpr size_t smem_bytes(int bn, int stages) {
  // 1024 bytes of slack to align the ring, the ring, the row table.
  return 1024 + size_t(stages) * (kBM + bn) * 128 + size_t(kBM) * 16;
}
// Row-streaming pool: plus the staging ring of stage_rows conv rows of tile_tw pixels, fp16,
// BN + 8 halves per pixel (the +8 keeps the half2 epilogue stores conflict-free).
constexpr size_t stream_smem_bytes(int bn, int stages, int stage_rows, int tile_tw) {
  return smem_bytes(bn, stages) + size_t(stage_rows) * tile_tw * (bn + 8) * 2;
}

// Code shape: the kernel body is the CTA's schedule (row table, prologue, main loop, epilogue
// per pass); the loaders, the staging epilogue and the write-outs are __forceinline__ device
// functions below, written expression for expression as the single body they replaced so that
// ptxas sees the same code (the SASS of every instance was compared before and after, issue 7).
// They are not the shared epilogue.cuh ones: building this kernel on those cost 2-8% on AlexNet
// (H100 A/B, issue 7) through a different register allocation.

// Where this CTA's output lies: its first column and (POOL) its block of pooled outputs or
// (flat) its first output pixel.
struct WgTile {
  int n0, m0, image, tile_y, tile_x, cy0, cx0;
};

// Loader state: the thread owns 16-byte chunk c of rows r0 + 32 i (all of them share r0 % 8,
// hence one swizzled chunk offset `off`).  The A loader runs for consecutive k-tiles only, so
// the (tap row, tap column, channel chunk) of its K chunk advance incrementally: no division
// per k-tile, one seek per pass.
struct WgLoader {
  int c, r0;
  uint32_t off;
  int kc, c8, kh, kw;
};

// The mainloop, loaders and row table below are shared by the fp16 kernel (WgmmaParams) and the
// int8 one (wgmma_s8_kernel.cuh, WgmmaS8Params): they move 16-byte chunks of 128-byte K-major
// rows and never look at an element, so they are templates over the parameter struct P, whose
// x / w element type fixes how many elements a chunk (kChunk) and a k-tile row (kTile) hold.  P's
// extents are in elements: in_c = channel stride, w_k = weight row, c_chunks = in_c / kChunk.
template <class P>
struct WgElem {
  using T = std::remove_cv_t<std::remove_pointer_t<decltype(P::x)>>;
  static constexpr int kChunk = 16 / int(sizeof(T));
  static constexpr int kTile = 128 / int(sizeof(T));
};
constexpr int kRowChunks = 8;  // 16-byte chunks per 128-byte k-tile row

template <int BN, class P>
__device__ __forceinline__ void wg_load_b(const P& p, const WgLoader& ld, uint32_t ring,
                                          const typename WgElem<P>::T* w_tile, int slot, int kt) {
  constexpr int kStage = (kBM + BN) * 128;
#pragma unroll
  for (int i = 0; i < BN * 8 / kThreads; ++i) {
    const int r = ld.r0 + 32 * i;
    cp_async_16(ring + slot * kStage + kBM * 128 + ld.off + i * 32 * 128,
                w_tile + size_t(r) * p.w_k + kt * WgElem<P>::kTile + ld.c * WgElem<P>::kChunk, 16);
  }
}

template <class P>
__device__ __forceinline__ void wg_seek_a(WgLoader& ld, const P& p) {
  ld.kc = ld.c;
  const int tap = ld.kc / p.c_chunks;
  ld.c8 = ld.kc - tap * p.c_chunks;
  ld.kh = tap / p.kw;
  ld.kw = tap - ld.kh * p.kw;
}

// The gather of one k-tile row chunk per A row into the 128 swizzled rows at `dst` (also the
// activation operand B of the 2:4 sparse kernel, wgmma_sparse.cu).
template <class P>
__device__ __forceinline__ void wg_gather_rows(WgLoader& ld, const P& p, uint32_t dst,
                                               const int4* s_rows) {
  using T = typename WgElem<P>::T;
  const bool k_ok = ld.kc < p.k_chunks;  // past K: zero fill (the tap may run past kh)
  const int dy = ld.kh, dx = ld.kw;
  const T* x_c = p.x + ld.c8 * WgElem<P>::kChunk;
  ld.kc += kRowChunks;
  ld.c8 += kRowChunks;
  while (ld.c8 >= p.c_chunks) {
    ld.c8 -= p.c_chunks;
    if (++ld.kw == p.kw) {
      ld.kw = 0;
      ++ld.kh;
    }
  }
#pragma unroll
  for (int i = 0; i < kBM * 8 / kThreads; ++i) {
    const int4 info = s_rows[ld.r0 + 32 * i];
    const int ih = info.y + dy, iw = info.z + dx;
    const T* src = p.x;  // never read when bytes == 0
    int bytes = 0;
    if (k_ok && info.x >= 0 && unsigned(ih) < unsigned(p.in_h) && unsigned(iw) < unsigned(p.in_w)) {
      src = x_c + ((size_t(info.x) * p.in_h + ih) * p.in_w + iw) * p.in_c;
      bytes = 16;
    }
    cp_async_16(dst + ld.off + i * 32 * 128, src, bytes);
  }
}

template <int BN, class P>
__device__ __forceinline__ void wg_load_a(WgLoader& ld, const P& p, uint32_t ring,
                                          const int4* s_rows, int slot) {
  constexpr int kStage = (kBM + BN) * 128;
  wg_gather_rows(ld, p, ring + slot * kStage, s_rows);
}

// This CTA's output tile (the sparse kernel's; conv_wgmma_kernel keeps its measured inline copy):
// channel tile blockIdx.y of `bn` channels, and (POOL) its block of
// pooled outputs from blockIdx.x or (flat) its first output pixel.
template <bool POOL, class P>
__device__ __forceinline__ WgTile wg_tile_of(const P& p, int bn) {
  WgTile t{};
  t.n0 = blockIdx.y * bn;
  if constexpr (POOL) {
    int b = blockIdx.x;
    t.tile_x = b % p.tile.tiles_x;
    b /= p.tile.tiles_x;
    t.tile_y = b % p.tile.tiles_y;
    t.image = b / p.tile.tiles_y;
    t.cy0 = t.tile_y * p.tile.tile_ph * p.pool.ps_h - p.pool.pp_h;
    t.cx0 = t.tile_x * p.tile.tile_pw * p.pool.ps_w - p.pool.pp_w;
  } else {
    t.m0 = blockIdx.x * kBM;
  }
  return t;
}

// The gather loader of thread `tid`: 16-byte chunk tid % 8 of rows tid / 8 + 32 i.
__device__ __forceinline__ WgLoader wg_loader_of(int tid) {
  WgLoader ld{};
  ld.c = tid & 7;
  ld.r0 = tid >> 3;
  ld.off = uint32_t(ld.r0) * 128 + (uint32_t(ld.c ^ (ld.r0 & 7)) << 4);
  return ld;
}

// Row table: A row r = output pixel m0 + r, or (POOL) conv-tile pixel (ly, lx) of this pass.
// Rows outside the conv output (tile overhang, pool padding, M tail, the pass's unused rows) are
// zero-filled and never read back.
template <bool POOL, class P>
__device__ __forceinline__ void wg_fill_rows(const P& p, int4* s_rows, int tid, int pass,
                                             int passes, const WgTile& t) {
  for (int r = tid; r < kBM; r += kThreads) {
    int4 info = make_int4(-1, 0, 0, 0);
    if constexpr (POOL) {
      int ly, lx;
      bool in_tile;
      if (passes == 1) {
        ly = r / p.tile.tile_tw;
        lx = r - ly * p.tile.tile_tw;
        in_tile = ly < p.tile.tile_th;
      } else {
        const int q = r / p.tile.tile_tw;
        ly = pass * p.tile.pass_rows + q;
        lx = r - q * p.tile.tile_tw;
        in_tile = q < p.tile.pass_rows && ly < p.tile.tile_th;
      }
      const int cy = t.cy0 + ly, cx = t.cx0 + lx;
      if (in_tile && cy >= 0 && cy < p.conv_h && cx >= 0 && cx < p.conv_w)
        info = make_int4(t.image, cy * p.sh - p.ph, cx * p.sw - p.pw, 0);
    } else {
      const int m = t.m0 + r;
      if (m < p.m_total) {
        const int cx = m % p.conv_w, q = m / p.conv_w;
        const int cy = q % p.conv_h, n = q / p.conv_h;
        info = make_int4(n, cy * p.sh - p.ph, cx * p.sw - p.pw, 0);
      }
    }
    s_rows[r] = info;
  }
}

// Bias + activation -> fp16 staging.  Accumulator rows row0 and row0 + 8 (wgmma m64nN layout);
// a streamed pass's rows past its conv rows are dropped.  CLAMP: the activation has an upper
// bound (ReLU6, Clip); without it the epilogue is exactly the ReLU one (max with lo).
template <int BN, bool POOL, bool CLAMP>
__device__ __forceinline__ void wg_stage_acc(const float (&acc)[BN / 2], __half* s_c,
                                             const WgmmaParams& p, int n0, int pass, int passes,
                                             int row0, int lane) {
  constexpr int kCRow = BN + 8;
  int srow[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = row0 + 8 * h;
    srow[h] = r;
    if (POOL && passes > 1) {
      const int q = r / p.tile.tile_tw, ly = pass * p.tile.pass_rows + q;
      srow[h] = q < p.tile.pass_rows && ly < p.tile.tile_th
                    ? (ly % p.tile.stage_rows) * p.tile.tile_tw + (r - q * p.tile.tile_tw)
                    : -1;
    }
  }
#pragma unroll
  for (int j = 0; j < BN / 8; ++j) {
    const int col = j * 8 + (lane & 3) * 2;
    const float b0 = p.bias[n0 + col], b1 = p.bias[n0 + col + 1];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float v0 = acc[4 * j + 2 * h] + b0, v1 = acc[4 * j + 2 * h + 1] + b1;
      if (p.act.on) {
        if constexpr (CLAMP) {
          v0 = fminf(fmaxf(v0, p.act.lo), p.act.hi);
          v1 = fminf(fmaxf(v1, p.act.lo), p.act.hi);
        } else {
          v0 = fmaxf(v0, p.act.lo);
          v1 = fmaxf(v1, p.act.lo);
        }
      }
      if (srow[h] >= 0)
        *reinterpret_cast<__half2*>(s_c + srow[h] * kCRow + col) = __floats2half2_rn(v0, v1);
    }
  }
}

// Pooled rows [py_begin, py_end) of the block: window max over the staged conv rows with
// __hmax2.  Window cells outside the conv output (pool padding, ceil_mode overhang) are
// skipped, i.e. act as -inf; every window holds at least one real cell (pad <= kernel / 2,
// PyTorch's ceil_mode rule), so -inf never reaches the output.  out_c % 32 == 0: no padding
// channels exist.
template <int BN>
__device__ __forceinline__ void wg_pool_out(const WgmmaParams& p, const __half* s_c,
                                            const WgTile& t, int passes, int tid, int py_begin,
                                            int py_end) {
  constexpr int kChunks = BN / 8, kCRow = BN + 8;
  const __half2 neg_inf = __float2half2_rn(-INFINITY);
  const int items = (py_end - py_begin) * p.tile.tile_pw * kChunks;
  for (int id = tid; id < items; id += kThreads) {
    const int c = id % kChunks, q = id / kChunks;
    const int px = q % p.tile.tile_pw, py = py_begin + q / p.tile.tile_pw;
    const int oy = t.tile_y * p.tile.tile_ph + py, ox = t.tile_x * p.tile.tile_pw + px;
    if (oy >= p.out_h || ox >= p.out_w) continue;
    __half2 best[4] = {neg_inf, neg_inf, neg_inf, neg_inf};
    for (int i = 0; i < p.pool.pk_h; ++i) {
      const int ly = py * p.pool.ps_h + i, cy = t.cy0 + ly;
      if (cy < 0 || cy >= p.conv_h) continue;
      const int srow = (passes == 1 ? ly : ly % p.tile.stage_rows) * p.tile.tile_tw;
      for (int j = 0; j < p.pool.pk_w; ++j) {
        const int lx = px * p.pool.ps_w + j, cx = t.cx0 + lx;
        if (cx < 0 || cx >= p.conv_w) continue;
        const uint4 v = *reinterpret_cast<const uint4*>(s_c + (srow + lx) * kCRow + c * 8);
        const uint32_t w4[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          __half2 h;
          memcpy(&h, &w4[k], sizeof(h));
          best[k] = __hmax2(best[k], h);
        }
      }
    }
    uint4 out;
    memcpy(&out.x, &best[0], 4);
    memcpy(&out.y, &best[1], 4);
    memcpy(&out.z, &best[2], 4);
    memcpy(&out.w, &best[3], 4);
    *reinterpret_cast<uint4*>(p.y + ((size_t(t.image) * p.out_h + oy) * p.out_w + ox) * p.out_c +
                              t.n0 + c * 8) = out;
  }
}

// Row streaming: pooled rows whose windows lie within the conv rows of passes 0..q.
__device__ __forceinline__ int wg_pooled_rows_after(const WgmmaParams& p, int passes, int q) {
  if (q + 1 >= passes) return p.tile.tile_ph;
  const int done = min((q + 1) * p.tile.pass_rows, p.tile.tile_th);
  return done < p.pool.pk_h ? 0 : min(p.tile.tile_ph, (done - p.pool.pk_h) / p.pool.ps_h + 1);
}

// No pool: the staged rows to their output pixels, 16-byte chunks.
template <int BN>
__device__ __forceinline__ void wg_write_rows(const WgmmaParams& p, const __half* s_c,
                                              const WgTile& t, int tid) {
  constexpr int kChunks = BN / 8, kCRow = BN + 8;
  for (int id = tid; id < kBM * kChunks; id += kThreads) {
    const int r = id / kChunks, c = id % kChunks;
    const int m = t.m0 + r;
    if (m >= p.m_total) continue;
    const size_t offset = size_t(m) * p.out_c + t.n0 + c * 8;
    uint4 v = *reinterpret_cast<const uint4*>(s_c + r * kCRow + c * 8);
    if (p.residual != nullptr)  // staged without the clamp: it follows the add
      v = epilogue::add_residual(v, p.residual + offset, p.residual_act);
    *reinterpret_cast<uint4*>(p.y + offset) = v;
  }
}

#ifdef CNNRT_WGMMA_DEVICE
// The K loop of one pass (either element type; MMA: Mma<BN> fp16 k16 or MmaS8<BN> int8 k32,
// both 32 bytes of K per instruction, so 4 instructions per 128-byte k-tile and the same +2
// descriptor step).  Zeroes acc, gathers and multiplies every k-tile, and returns with every
// wgmma retired and every cp.async landed; the caller's barrier then frees the ring.
template <int BN, int STAGES, class MMA, class P, class Acc, int N>
__device__ __forceinline__ void wg_mainloop(const P& p, WgLoader& ld, uint32_t ring,
                                            const int4* s_rows, const typename WgElem<P>::T* w_tile,
                                            int wg, Acc (&acc)[N]) {
  constexpr int kAStage = kBM * 128, kStage = kAStage + BN * 128;
  wg_seek_a(ld, p);
#pragma unroll
  for (int i = 0; i < N; ++i) acc[i] = Acc(0);
  fence_operands(acc);

  // ---- prologue: tiles 0 .. STAGES-3 ----------------------------------------------------------
#pragma unroll
  for (int s = 0; s < STAGES - 2; ++s) {
    if (s < p.k_tiles) {
      wg_load_b<BN>(p, ld, ring, w_tile, s, s);
      wg_load_a<BN>(ld, p, ring, s_rows, s);
    }
    cp_async_commit();
  }

  // ---- main loop --------------------------------------------------------------------------------
  for (int kt = 0; kt < p.k_tiles; ++kt) {
    cp_async_wait<STAGES - 3>();  // this thread's copies of tile kt have landed
    fence_proxy_async_shared();
    __syncthreads();  // ... everyone's; and wgmma of kt-2 is retired everywhere
    const int k_next = kt + STAGES - 2;
    if (k_next < p.k_tiles) {
      wg_load_b<BN>(p, ld, ring, w_tile, k_next % STAGES, k_next);
      wg_load_a<BN>(ld, p, ring, s_rows, k_next % STAGES);
    }
    cp_async_commit();

    const uint32_t a_base = ring + (kt % STAGES) * kStage + wg * 64 * 128;
    const uint32_t b_base = ring + (kt % STAGES) * kStage + kAStage;
    const uint64_t desc_a = make_desc(a_base), desc_b = make_desc(b_base);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)  // +32 bytes of K per instruction = +2 in the start field
      MMA::run(acc, desc_a + 2 * kk, desc_b + 2 * kk);
    wgmma_commit();
    wgmma_wait<1>();
  }
  wgmma_wait<0>();
  fence_operands(acc);
  cp_async_wait<0>();
}

#endif  // CNNRT_WGMMA_DEVICE

template <int BN, int STAGES, bool POOL, bool CLAMP>
__global__ void __launch_bounds__(kThreads, 1) conv_wgmma_kernel(const WgmmaParams p) {
  pdl_wait();
#ifdef CNNRT_WGMMA_DEVICE
  static_assert(STAGES >= 3, "the ring keeps one tile under wgmma and one being refilled");
  constexpr int kAStage = kBM * 128, kBStage = BN * 128, kStage = kAStage + kBStage;
  constexpr int kAcc = BN / 2;   // fp32 accumulators per thread (m64nBN over 128 threads)
  constexpr int kCRow = BN + 8;  // staging row (halves); +8 keeps the half2 stores conflict-free
  static_assert(kBM * kCRow * 2 <= STAGES * kStage, "the fp16 staging tile aliases the ring");

  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t raw_base = smem_u32(smem_raw);
  const uint32_t ring = (raw_base + 1023u) & ~1023u;  // swizzle atoms need 1024-byte alignment
  unsigned char* ring_ptr = smem_raw + (ring - raw_base);
  int4* s_rows = reinterpret_cast<int4*>(ring_ptr + STAGES * kStage);  // {image|-1, ih0, iw0, 0}

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int wg = warp >> 2;  // warpgroup: rows 64 * wg .. 64 * wg + 63
  // The tile and the loader written out as wg_tile_of / wg_loader_of compute them: calling those
  // reordered this kernel's parameter loads (PTX diff), and a change to this kernel's code is
  // adopted only after an A/B on the GPU (docs/kernels/conv_family.md).
  WgTile t{};
  t.n0 = blockIdx.y * BN;
  const __half* w_tile = p.w + size_t(t.n0) * p.w_k;
  if constexpr (POOL) {
    int b = blockIdx.x;
    t.tile_x = b % p.tile.tiles_x;
    b /= p.tile.tiles_x;
    t.tile_y = b % p.tile.tiles_y;
    t.image = b / p.tile.tiles_y;
    t.cy0 = t.tile_y * p.tile.tile_ph * p.pool.ps_h - p.pool.pp_h;
    t.cx0 = t.tile_x * p.tile.tile_pw * p.pool.ps_w - p.pool.pp_w;
  } else {
    t.m0 = blockIdx.x * kBM;
  }
  WgLoader ld{};
  ld.c = tid & 7;
  ld.r0 = tid >> 3;
  ld.off = uint32_t(ld.r0) * 128 + (uint32_t(ld.c ^ (ld.r0 & 7)) << 4);

  // Staging: a single-pass tile aliases the drained ring; the row-streaming ring of stage_rows
  // conv rows lives after the row table, because the next pass refills the pipeline ring while
  // earlier rows still wait for their pool windows.
  const int passes = POOL ? p.tile.passes : 1;
  __half* const s_c =
      passes == 1 ? reinterpret_cast<__half*>(ring_ptr) : reinterpret_cast<__half*>(s_rows + kBM);

  const int row0 = wg * 64 + (warp & 3) * 16 + (lane >> 2);  // accumulator rows row0, row0 + 8
  for (int pass = 0; pass < passes; ++pass) {
    // The previous pass's loads are all waited for and behind a barrier, so the table can be
    // rewritten.
    wg_fill_rows<POOL>(p, s_rows, tid, pass, passes, t);
    __syncthreads();  // also orders the previous pass's pool reads before this pass's staging

    float acc[kAcc];
    wg_mainloop<BN, STAGES, Mma<BN>>(p, ld, ring, s_rows, w_tile, wg, acc);
    __syncthreads();  // the ring is drained and no warpgroup reads it (single pass: staging)

    wg_stage_acc<BN, POOL, CLAMP>(acc, s_c, p, t.n0, pass, passes, row0, lane);
    __syncthreads();

    if constexpr (POOL) {
      // The next pass only writes staging rows no pending pooled row needs (host: stage_rows),
      // and its row-table barrier orders these reads before its epilogue writes.
      const int py_begin = pass == 0 ? 0 : wg_pooled_rows_after(p, passes, pass - 1);
      const int py_end = wg_pooled_rows_after(p, passes, pass);
      if (py_end > py_begin) wg_pool_out<BN>(p, s_c, t, passes, tid, py_begin, py_end);
    } else {
      wg_write_rows<BN>(p, s_c, t, tid);
    }
  }
#else
  __trap();  // not the sm_90a image: device_supported() keeps this from ever being launched
#endif
}

}  // namespace cnnrt::cuda::wgmma_detail
