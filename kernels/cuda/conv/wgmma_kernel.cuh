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
// out_c % 192 == 0 but not % 128, e.g. conv2: one N tile; else 64), BK = 64 halves = one 128-byte
// row per A/B row.  Shared memory holds the rows in the canonical K-major 128-byte-swizzle layout
// wgmma expects: row r of a tile at r * 128 bytes, its 16-byte chunk c at chunk (c ^ (r % 8));
// every tile starts 1024-byte aligned (the swizzle is a function of address bits 4-9).  Descriptor:
// start >> 4, LBO unused (1), SBO = 1024 bytes (8 rows), swizzle mode 1 (128B).  The 4 k16 steps of
// a k-tile advance the start address by 32 bytes within the swizzled row, exactly as the hardware's
// swizzle expects.
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
// out_c % 64 == 0, so the output has no padding channels to zero.
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
// Build: the kernel body exists only under __CUDA_ARCH_FEAT_SM90_ALL (the sm_90a image, which
// CMake adds for wgmma.cu when 90 is among the CUDA architectures).  Other images get a body
// that traps; device_supported() runs a probe kernel from the same fatbinary to learn which
// image the driver loaded, so the trapping one is never launched.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>

#include "kernels/cuda/conv/epilogue.cuh"
#include "kernels/cuda/conv/pool_tiling.h"
#include "kernels/cuda/conv/ptx.cuh"
#include "kernels/cuda/conv/wgmma_common.h"

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

// CLAMP: the activation has an upper bound (ReLU6, Clip); without it the epilogue is exactly the
// ReLU one (max with lo when the activation is on).
template <int BN, int STAGES, bool POOL, bool CLAMP>
__global__ void __launch_bounds__(kThreads, 1) conv_wgmma_kernel(const WgmmaParams p) {
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
  const int n0 = blockIdx.y * BN;
  const __half* w_tile = p.w + size_t(n0) * p.w_k;
  int m0 = 0, image = 0, tile_y = 0, tile_x = 0, cy0 = 0, cx0 = 0;
  if constexpr (POOL) {
    int t = blockIdx.x;
    tile_x = t % p.tile.tiles_x;
    t /= p.tile.tiles_x;
    tile_y = t % p.tile.tiles_y;
    image = t / p.tile.tiles_y;
    cy0 = tile_y * p.tile.tile_ph * p.pool.ps_h - p.pool.pp_h;
    cx0 = tile_x * p.tile.tile_pw * p.pool.ps_w - p.pool.pp_w;
  } else {
    m0 = blockIdx.x * kBM;
  }

  // ---- loaders: thread owns 16-byte chunk ld_c of rows ld_r0 + 32 i -----------------------
  const int ld_c = tid & 7, ld_r0 = tid >> 3;
  // All of a thread's rows share row % 8, hence one swizzled chunk offset.
  const uint32_t ld_off = uint32_t(ld_r0) * 128 + (uint32_t(ld_c ^ (ld_r0 & 7)) << 4);
  auto load_b = [&](int slot, int kt) {
#pragma unroll
    for (int i = 0; i < BN * 8 / kThreads; ++i) {
      const int r = ld_r0 + 32 * i;
      cp_async_16(ring + slot * kStage + kAStage + ld_off + i * 32 * 128,
                  w_tile + size_t(r) * p.w_k + kt * kBK + ld_c * 8, 16);
    }
  };
  // The loader runs for consecutive k-tiles only, so the (tap row, tap column, channel chunk)
  // of this thread's K chunk advance incrementally: no division per k-tile, one seek per pass.
  int a_kc = 0, a_c8 = 0, a_kh = 0, a_kw = 0;
  auto seek_a = [&]() {
    a_kc = ld_c;
    const int tap = a_kc / p.c_chunks;
    a_c8 = a_kc - tap * p.c_chunks;
    a_kh = tap / p.kw;
    a_kw = tap - a_kh * p.kw;
  };
  auto load_a = [&](int slot) {
    const bool k_ok = a_kc < p.k_chunks;  // past K: zero fill (the tap may run past kh)
    const int dy = a_kh, dx = a_kw;
    const __half* x_c = p.x + a_c8 * 8;
    a_kc += kBK / 8;
    a_c8 += kBK / 8;
    while (a_c8 >= p.c_chunks) {
      a_c8 -= p.c_chunks;
      if (++a_kw == p.kw) {
        a_kw = 0;
        ++a_kh;
      }
    }
#pragma unroll
    for (int i = 0; i < kBM * 8 / kThreads; ++i) {
      const int4 info = s_rows[ld_r0 + 32 * i];
      const int ih = info.y + dy, iw = info.z + dx;
      const __half* src = p.x;  // never read when bytes == 0
      int bytes = 0;
      if (k_ok && info.x >= 0 && unsigned(ih) < unsigned(p.in_h) &&
          unsigned(iw) < unsigned(p.in_w)) {
        src = x_c + ((size_t(info.x) * p.in_h + ih) * p.in_w + iw) * p.in_c;
        bytes = 16;
      }
      cp_async_16(ring + slot * kStage + ld_off + i * 32 * 128, src, bytes);
    }
  };

  // Staging: a single-pass tile aliases the drained ring; the row-streaming ring of stage_rows
  // conv rows lives after the row table, because the next pass refills the pipeline ring while
  // earlier rows still wait for their pool windows.
  const int passes = POOL ? p.tile.passes : 1;
  __half* const s_c =
      passes == 1 ? reinterpret_cast<__half*>(ring_ptr) : reinterpret_cast<__half*>(s_rows + kBM);
  constexpr int kChunks = BN / 8;

  // Pooled rows [py_begin, py_end) of the block: window max over the staged conv rows with
  // __hmax2.  Window cells outside the conv output (pool padding, ceil_mode overhang) are
  // skipped, i.e. act as -inf; every window holds at least one real cell (pad <= kernel / 2,
  // PyTorch's ceil_mode rule), so -inf never reaches the output.  out_c % 64 == 0: no padding
  // channels exist.
  auto pool_out = [&](int py_begin, int py_end) {
    const __half2 neg_inf = __float2half2_rn(-INFINITY);
    const int items = (py_end - py_begin) * p.tile.tile_pw * kChunks;
    for (int id = tid; id < items; id += kThreads) {
      const int c = id % kChunks, t = id / kChunks;
      const int px = t % p.tile.tile_pw, py = py_begin + t / p.tile.tile_pw;
      const int oy = tile_y * p.tile.tile_ph + py, ox = tile_x * p.tile.tile_pw + px;
      if (oy >= p.out_h || ox >= p.out_w) continue;
      __half2 best[4] = {neg_inf, neg_inf, neg_inf, neg_inf};
      for (int i = 0; i < p.pool.pk_h; ++i) {
        const int ly = py * p.pool.ps_h + i, cy = cy0 + ly;
        if (cy < 0 || cy >= p.conv_h) continue;
        const int srow = (passes == 1 ? ly : ly % p.tile.stage_rows) * p.tile.tile_tw;
        for (int j = 0; j < p.pool.pk_w; ++j) {
          const int lx = px * p.pool.ps_w + j, cx = cx0 + lx;
          if (cx < 0 || cx >= p.conv_w) continue;
          const uint4 v = *reinterpret_cast<const uint4*>(s_c + (srow + lx) * kCRow + c * 8);
          const uint32_t w4[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
          for (int q = 0; q < 4; ++q) {
            __half2 h;
            memcpy(&h, &w4[q], sizeof(h));
            best[q] = __hmax2(best[q], h);
          }
        }
      }
      uint4 out;
      memcpy(&out.x, &best[0], 4);
      memcpy(&out.y, &best[1], 4);
      memcpy(&out.z, &best[2], 4);
      memcpy(&out.w, &best[3], 4);
      *reinterpret_cast<uint4*>(p.y + ((size_t(image) * p.out_h + oy) * p.out_w + ox) * p.out_c +
                                n0 + c * 8) = out;
    }
  };
  // Row streaming: pooled rows whose windows lie within the conv rows of passes 0..q.
  auto pooled_rows_after = [&](int q) {
    if (q + 1 >= passes) return p.tile.tile_ph;
    const int done = min((q + 1) * p.tile.pass_rows, p.tile.tile_th);
    return done < p.pool.pk_h ? 0 : min(p.tile.tile_ph, (done - p.pool.pk_h) / p.pool.ps_h + 1);
  };

  const int row0 = wg * 64 + (warp & 3) * 16 + (lane >> 2);  // accumulator rows row0, row0 + 8
  for (int pass = 0; pass < passes; ++pass) {
    // Row table: A row r = output pixel m0 + r, or (POOL) conv-tile pixel (ly, lx) of this
    // pass.  Rows outside the conv output (tile overhang, pool padding, M tail, the pass's
    // unused rows) are zero-filled and never read back.  The previous pass's loads are all
    // waited for and behind a barrier, so the table can be rewritten.
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
        const int cy = cy0 + ly, cx = cx0 + lx;
        if (in_tile && cy >= 0 && cy < p.conv_h && cx >= 0 && cx < p.conv_w)
          info = make_int4(image, cy * p.sh - p.ph, cx * p.sw - p.pw, 0);
      } else {
        const int m = m0 + r;
        if (m < p.m_total) {
          const int cx = m % p.conv_w, t = m / p.conv_w;
          const int cy = t % p.conv_h, n = t / p.conv_h;
          info = make_int4(n, cy * p.sh - p.ph, cx * p.sw - p.pw, 0);
        }
      }
      s_rows[r] = info;
    }
    __syncthreads();  // also orders the previous pass's pool reads before this pass's staging

    seek_a();
    float acc[kAcc];
#pragma unroll
    for (int i = 0; i < kAcc; ++i) acc[i] = 0.f;
    fence_operands(acc);

    // ---- prologue: tiles 0 .. STAGES-3 --------------------------------------------------------
#pragma unroll
    for (int s = 0; s < STAGES - 2; ++s) {
      if (s < p.k_tiles) {
        load_b(s, s);
        load_a(s);
      }
      cp_async_commit();
    }

    // ---- main loop ------------------------------------------------------------------------
    for (int kt = 0; kt < p.k_tiles; ++kt) {
      cp_async_wait<STAGES - 3>();  // this thread's copies of tile kt have landed
      fence_proxy_async_shared();
      __syncthreads();  // ... everyone's; and wgmma of kt-2 is retired everywhere
      const int k_next = kt + STAGES - 2;
      if (k_next < p.k_tiles) {
        load_b(k_next % STAGES, k_next);
        load_a(k_next % STAGES);
      }
      cp_async_commit();

      const uint32_t a_base = ring + (kt % STAGES) * kStage + wg * 64 * 128;
      const uint32_t b_base = ring + (kt % STAGES) * kStage + kAStage;
      const uint64_t desc_a = make_desc(a_base), desc_b = make_desc(b_base);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kBK / 16; ++kk)  // +32 bytes per k16 step = +2 in the start field
        Mma<BN>::run(acc, desc_a + 2 * kk, desc_b + 2 * kk);
      wgmma_commit();
      wgmma_wait<1>();
    }
    wgmma_wait<0>();
    fence_operands(acc);
    cp_async_wait<0>();
    __syncthreads();  // the ring is drained and no warpgroup reads it (single pass: staging)

    // ---- epilogue: bias + ReLU -> fp16 staging ------------------------------------------
    // Staging pixel of each accumulator row; -1: a streamed pass's unused row (dropped).
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
    __syncthreads();

    if constexpr (POOL) {
      // The next pass only writes staging rows no pending pooled row needs (host: stage_rows),
      // and its row-table barrier orders these reads before its epilogue writes.
      const int py_begin = pass == 0 ? 0 : pooled_rows_after(pass - 1);
      const int py_end = pooled_rows_after(pass);
      if (py_end > py_begin) pool_out(py_begin, py_end);
    } else {
      for (int id = tid; id < kBM * kChunks; id += kThreads) {
        const int r = id / kChunks, c = id % kChunks;
        const int m = m0 + r;
        if (m >= p.m_total) continue;
        *reinterpret_cast<uint4*>(p.y + size_t(m) * p.out_c + n0 + c * 8) =
            *reinterpret_cast<const uint4*>(s_c + r * kCRow + c * 8);
      }
    }
  }
#else
  __trap();  // not the sm_90a image: device_supported() keeps this from ever being launched
#endif
}

__global__ void wgmma_probe_kernel(int* has_wgmma) {
#ifdef CNNRT_WGMMA_DEVICE
  *has_wgmma = 1;
#else
  *has_wgmma = 0;
#endif
}

}  // namespace cnnrt::cuda::wgmma_detail
