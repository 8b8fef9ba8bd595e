// Hopper wgmma implicit-GEMM fp16 convolution (+ bias + ReLU).  Experimental; sm_90a only.
//
// Why: the mma.sync implicit GEMM (conv_fp16_igemm.cuh) tops out near 200-220 TFLOP/s on
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
// Epilogue: accumulators (wgmma m64nN layout: warp w of the warpgroup owns rows 16w..16w+15;
// register 4j + 2h + {0,1} holds row lane/4 + 8h, columns 8j + 2(lane%4) + {0,1}) + bias, ReLU,
// rounded to fp16, staged in shared memory (the drained ring), then written as 16-byte rows.
// out_c % 64 == 0, so the output has no padding channels to zero.
//
// Fused MaxPool (POOL instances): a CTA computes the TH x TW conv tile of ONE image under the
// windows of a PH x PW block of pooled outputs (host: choose_pool_tiling, per batch), gathered
// through the same row table; the staged fp16 rows are reduced with __hmax2 and only pooled
// pixels are stored, so the pre-pool tensor never reaches memory.  TH * TW <= 128: one pass,
// staged in the drained ring.  Larger tiles (less halo, fewer part-empty M tiles) stream: the
// CTA loops over passes of 128 / TW whole conv rows, keeps only the rows unfinished pool windows
// still need in a staging ring outside the pipeline ring, and pools each pooled row as soon as
// its window rows are complete (the row-streaming mode of conv_fp16_igemm.cuh).
//
// Build: the kernel body exists only under __CUDA_ARCH_FEAT_SM90_ALL (the sm_90a image, which
// CMake adds for this file when 90 is among the CUDA architectures).  Other images get a body
// that traps; device_supported() runs a probe kernel from the same fatbinary to learn which
// image the driver loaded, so the trapping one is never launched.
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "cnnrt/error.h"
#include "kernels/cuda/conv_fp16_wgmma.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/wgmma_conv_common.h"
#include "kernels/cuda/wgmma_ptx.cuh"

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define CNNRT_WGMMA_DEVICE 1
#endif

namespace cnnrt::cuda {
namespace wgmma_detail {

constexpr int kBM = 128;  // rows per CTA (2 warpgroups x 64)
constexpr int kBK = 64;   // halves per k-tile: one 128-byte swizzled row
constexpr int kThreads = 256;
constexpr int kStages = 4;

// The shared geometry (wgmma_conv_common.h; w/bias rows = out_c), then the fused pool.
struct WgmmaParams : WgmmaConvParams {
  // Fused max-pool (POOL instances): window/stride/padding, pooled extent, and the CTA tiling:
  // blockIdx.x = (image * tiles_y + tile_y) * tiles_x + tile_x owns pooled outputs
  // [tile_y * tile_ph, +tile_ph) x [tile_x * tile_pw, +tile_pw), whose windows cover the conv
  // tile tile_th x tile_tw (tile_th * tile_tw <= kBM) starting at conv pixel
  // (tile_y * tile_ph * ps_h - pp_h, tile_x * tile_pw * ps_w - pp_w).
  int pk_h = 1, pk_w = 1, ps_h = 1, ps_w = 1, pp_h = 0, pp_w = 0;
  int out_h = 0, out_w = 0;
  int tile_ph = 1, tile_pw = 1, tile_th = 1, tile_tw = 1, tiles_y = 1, tiles_x = 1;
  // passes == 1: the conv tile (tile_th * tile_tw <= kBM) is one M tile, staged in the drained
  // ring.  passes > 1 (row streaming): pass q computes conv-tile rows [q * pass_rows,
  // (q + 1) * pass_rows) (pass_rows * tile_tw <= kBM), staged in a ring of stage_rows conv rows
  // kept after the row table (outside the pipeline ring, which the next pass refills), and pools
  // the pooled rows whose windows those rows complete.
  int passes = 1, pass_rows = 1, stage_rows = 0;
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

template <int BN, int STAGES, bool POOL>
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
    tile_x = t % p.tiles_x;
    t /= p.tiles_x;
    tile_y = t % p.tiles_y;
    image = t / p.tiles_y;
    cy0 = tile_y * p.tile_ph * p.ps_h - p.pp_h;
    cx0 = tile_x * p.tile_pw * p.ps_w - p.pp_w;
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
  const int passes = POOL ? p.passes : 1;
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
    const int items = (py_end - py_begin) * p.tile_pw * kChunks;
    for (int id = tid; id < items; id += kThreads) {
      const int c = id % kChunks, t = id / kChunks;
      const int px = t % p.tile_pw, py = py_begin + t / p.tile_pw;
      const int oy = tile_y * p.tile_ph + py, ox = tile_x * p.tile_pw + px;
      if (oy >= p.out_h || ox >= p.out_w) continue;
      __half2 best[4] = {neg_inf, neg_inf, neg_inf, neg_inf};
      for (int i = 0; i < p.pk_h; ++i) {
        const int ly = py * p.ps_h + i, cy = cy0 + ly;
        if (cy < 0 || cy >= p.conv_h) continue;
        const int srow = (passes == 1 ? ly : ly % p.stage_rows) * p.tile_tw;
        for (int j = 0; j < p.pk_w; ++j) {
          const int lx = px * p.ps_w + j, cx = cx0 + lx;
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
    if (q + 1 >= passes) return p.tile_ph;
    const int done = min((q + 1) * p.pass_rows, p.tile_th);
    return done < p.pk_h ? 0 : min(p.tile_ph, (done - p.pk_h) / p.ps_h + 1);
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
          ly = r / p.tile_tw;
          lx = r - ly * p.tile_tw;
          in_tile = ly < p.tile_th;
        } else {
          const int q = r / p.tile_tw;
          ly = pass * p.pass_rows + q;
          lx = r - q * p.tile_tw;
          in_tile = q < p.pass_rows && ly < p.tile_th;
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
        const int q = r / p.tile_tw, ly = pass * p.pass_rows + q;
        srow[h] = q < p.pass_rows && ly < p.tile_th
                      ? (ly % p.stage_rows) * p.tile_tw + (r - q * p.tile_tw)
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
        if (p.relu) {
          v0 = fmaxf(v0, 0.f);
          v1 = fmaxf(v1, 0.f);
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

}  // namespace wgmma_detail

using wgmma_detail::WgmmaParams;

// One pool tiling: PH x PW pooled block per CTA, its TH x TW conv tile, and how it is computed.
struct PoolTiling {
  int ph = 1, pw = 1, th = 1, tw = 1, tiles_y = 1, tiles_x = 1;
  int passes = 1, pass_rows = 1, stage_rows = 0;
  size_t smem = 0;
  int per_sm = 1;  // CTAs resident per SM (shared memory bound)
};

class ConvFp16WgmmaImpl {
 public:
  ConvShape shape;
  WgmmaParams base;  // everything but x, y, the batch and (pool) the tiling
  int bn = 128;
  int sms = 132;                     // SM count of the device at construction
  size_t smem_optin = 0;             // largest dynamic shared memory per CTA
  size_t smem_per_sm = 0;            // shared memory per SM (occupancy)
  int forced_ph = 0, forced_pw = 0;  // force_pool_block(); 0 = cost model
  // Pool: every feasible tiling (batch independent, built once so that the per-forward choice
  // is a short loop) and the single-pass reference (fewest CTAs, then smallest conv tile).
  std::vector<PoolTiling> tilings;
  PoolTiling single;
  __half* w = nullptr;
  float* bias = nullptr;
  size_t bytes = 0;
  bool pool() const { return shape.pool.has_value(); }
  ~ConvFp16WgmmaImpl() {
    cudaFree(w);  // destructors never throw; a failed free here leaks at worst
    cudaFree(bias);
  }
};

namespace {

int ceil_div_int(int a, int b) { return (a + b - 1) / b; }

// Builds the tiling of a PH x PW pooled block; false when it cannot run (conv row wider than
// the 128 M rows, or shared memory over the device limit).  TH x TW <= 128: one pass staged in
// the ring.  Else row streaming: passes of pass_rows = 128 / TW whole conv rows; stage_rows is
// the largest span of conv rows alive at once: rows still needed by pooled rows not yet
// written, up to the end of the next pass (same rule as the kernel's pooled_rows_after).
bool make_pool_tiling(const ConvFp16WgmmaImpl& m, int ph, int pw, PoolTiling& t) {
  const ConvShape& s = m.shape;
  const PoolAttrs& pa = *s.pool;
  t.ph = ph;
  t.pw = pw;
  t.th = (ph - 1) * pa.stride_h + pa.kernel_h;
  t.tw = (pw - 1) * pa.stride_w + pa.kernel_w;
  t.tiles_y = ceil_div_int(s.out_h, ph);
  t.tiles_x = ceil_div_int(s.out_w, pw);
  constexpr int kBM = wgmma_detail::kBM, kStages = wgmma_detail::kStages;
  if (t.tw > kBM) return false;
  if (t.th * t.tw <= kBM) {
    t.passes = 1;
    t.pass_rows = t.th;
    t.stage_rows = 0;
    t.smem = wgmma_detail::smem_bytes(m.bn, kStages);
  } else {
    t.pass_rows = kBM / t.tw;
    t.passes = ceil_div_int(t.th, t.pass_rows);
    auto after = [&](int q) {
      if (q + 1 >= t.passes) return ph;
      const int done = std::min((q + 1) * t.pass_rows, t.th);
      return done < pa.kernel_h ? 0 : std::min(ph, (done - pa.kernel_h) / pa.stride_h + 1);
    };
    t.stage_rows = t.pass_rows;
    for (int q = 0; q + 1 < t.passes; ++q)
      t.stage_rows =
          std::max(t.stage_rows, std::min((q + 2) * t.pass_rows, t.th) - after(q) * pa.stride_h);
    t.smem = wgmma_detail::stream_smem_bytes(m.bn, kStages, t.stage_rows, t.tw);
  }
  if (t.smem > m.smem_optin) return false;
  t.per_sm = 2 * (t.smem + 1024) <= m.smem_per_sm ? 2 : 1;  // +1 KB the runtime reserves per CTA
  return true;
}

// Fills m.tilings and m.single (constructor).
void enumerate_pool_tilings(ConvFp16WgmmaImpl& m) {
  const ConvShape& s = m.shape;
  bool have_single = false;
  for (int ph = 1; ph <= s.out_h; ++ph)
    for (int pw = 1; pw <= s.out_w; ++pw) {
      PoolTiling t;
      if (!make_pool_tiling(m, ph, pw, t)) continue;
      m.tilings.push_back(t);
      if (t.passes != 1) continue;
      const long long tiles = (long long)t.tiles_y * t.tiles_x;
      const long long best = (long long)m.single.tiles_y * m.single.tiles_x;
      if (!have_single || tiles < best ||
          (tiles == best && t.th * t.tw < m.single.th * m.single.tw)) {
        m.single = t;
        have_single = true;
      }
    }
  // supports() keeps one window within 128 pixels, so the 1 x 1 block always fits.
  if (!have_single) throw Error("conv_fp16_wgmma: no pool tiling fits");
}

// Cost model (docs/kernels/conv_fp16_wgmma.md): an SM runs one CTA's MMAs at a time, a pass
// costs k_tiles + 3 k-tile times (prologue fill, drain, epilogue/pool), so
// time ~ ceil(ctas / (sms * per_sm)) * per_sm * passes * (k_tiles + 3).  Ties: fewer pass-units
// per image (less gathered data).  Tilings that leave SMs idle while the single-pass tiling would
// fill them are not considered, so ctas(batch) reaches the SM count where it did before (the
// registry's small-batch threshold relies on that).
// Row streaming needs a K loop long enough to hide each pass's fill and drain: on an H200 the
// s2d conv1 (K = 432, 7 k-tiles) went from 0.426 to 0.556 ms at batch 256 when streamed, while
// conv2 (25 k-tiles) gained 20% (docs/PERFORMANCE.md, run 6).
constexpr int kMinStreamKTiles = 16;

PoolTiling choose_pool_tiling(const ConvFp16WgmmaImpl& m, int batch) {
  const long long n_tiles = m.shape.out_c / m.bn;
  if (m.forced_ph > 0) {
    PoolTiling t;
    make_pool_tiling(m, m.forced_ph, m.forced_pw, t);  // checked by force_pool_block
    return t;
  }
  const long long min_ctas =
      std::min<long long>(m.sms, (long long)batch * n_tiles * m.single.tiles_y * m.single.tiles_x);
  PoolTiling best = m.single;
  long long best_cost = -1, best_units = 0;
  for (const PoolTiling& t : m.tilings) {
    const long long ctas = (long long)batch * n_tiles * t.tiles_y * t.tiles_x;
    if (ctas < min_ctas) continue;
    if (t.passes > 1 && m.base.k_tiles < kMinStreamKTiles) continue;
    const long long slots = (long long)m.sms * t.per_sm;
    const long long cost = (ctas + slots - 1) / slots * t.per_sm * t.passes * (m.base.k_tiles + 3);
    const long long units = (long long)t.passes * t.tiles_y * t.tiles_x;
    if (best_cost < 0 || cost < best_cost || (cost == best_cost && units < best_units)) {
      best = t;
      best_cost = cost;
      best_units = units;
    }
  }
  return best;
}

void apply_pool_tiling(const PoolTiling& t, WgmmaParams& p) {
  p.tile_ph = t.ph;
  p.tile_pw = t.pw;
  p.tile_th = t.th;
  p.tile_tw = t.tw;
  p.tiles_y = t.tiles_y;
  p.tiles_x = t.tiles_x;
  p.passes = t.passes;
  p.pass_rows = t.pass_rows;
  p.stage_rows = t.stage_rows;
}

template <int BN, bool POOL>
void set_smem_limit(size_t bytes) {
  CNNRT_CUDA_CHECK(
      cudaFuncSetAttribute(wgmma_detail::conv_wgmma_kernel<BN, wgmma_detail::kStages, POOL>,
                           cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
}
template <int BN>
void set_smem_limit(bool pool, size_t bytes) {
  if (pool)
    set_smem_limit<BN, true>(bytes);
  else
    set_smem_limit<BN, false>(bytes);
}

template <int BN, bool POOL>
void launch(const dim3& grid, size_t smem, const WgmmaParams& p, cudaStream_t stream) {
  constexpr int S = wgmma_detail::kStages;
  wgmma_detail::conv_wgmma_kernel<BN, S, POOL><<<grid, wgmma_detail::kThreads, smem, stream>>>(p);
}
template <int BN>
void launch(bool pool, const dim3& grid, size_t smem, const WgmmaParams& p, cudaStream_t stream) {
  if (pool)
    launch<BN, true>(grid, smem, p, stream);
  else
    launch<BN, false>(grid, smem, p, stream);
}

}  // namespace

bool ConvFp16Wgmma::supports(const ConvShape& s) {
  // The common rule (the ConvFp16 fallback's check also validates the pool attributes: pad <=
  // kernel / 2, non-empty output); one pool window must fit the 128 rows.
  if (!wgmma_conv_shape_ok(s)) return false;
  if (s.pool) {
    const PoolAttrs& pa = *s.pool;
    if (pa.kernel_h * pa.kernel_w > wgmma_detail::kBM || s.out_h <= 0 || s.out_w <= 0) return false;
  }
  return true;
}

bool ConvFp16Wgmma::device_supported() {
  static const bool supported = [] {
    int device = 0;
    cudaDeviceProp prop;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
      cudaGetLastError();  // leave no sticky error behind for the caller
      return false;
    }
    if (prop.major != 9 || prop.minor != 0) return false;
    // Which image did the driver load for this fatbinary?  Only the sm_90a one has wgmma.
    int* flag = nullptr;
    int has_wgmma = 0;
    bool ok = cudaMalloc(&flag, sizeof(int)) == cudaSuccess;
    if (ok) {
      wgmma_detail::wgmma_probe_kernel<<<1, 1>>>(flag);
      ok = cudaGetLastError() == cudaSuccess &&
           cudaMemcpy(&has_wgmma, flag, sizeof(int), cudaMemcpyDeviceToHost) == cudaSuccess;
      cudaFree(flag);
    }
    cudaGetLastError();
    return ok && has_wgmma == 1;
  }();
  return supported;
}

ConvFp16Wgmma::ConvFp16Wgmma(const ConvShape& shape_in, const float* weight, const float* bias)
    : impl_(std::make_unique<ConvFp16WgmmaImpl>()) {
  ConvFp16WgmmaImpl& m = *impl_;
  m.shape = shape_in;
  m.shape.derive();
  const ConvShape& s = m.shape;
  if (!supports(s))
    throw Error(
        "conv_fp16_wgmma: unsupported shape (needs groups 1, dilation 1, "
        "in_c % 8 == 0, out_c % 64 == 0, a valid pool window of <= 128 pixels)");
  if (!device_supported())
    throw Error("conv_fp16_wgmma: needs a compute capability 9.0 device and the sm_90a build");
  if (weight == nullptr) throw Error("conv_fp16_wgmma: no weight");
  // 128 where it divides (conv3/conv4, measured); 192 serves out_c = 192 (conv2) in one N tile,
  // so the A gather is done once per pixel instead of three times; else 64.
  m.bn = s.out_c % 128 == 0 ? 128 : s.out_c % 192 == 0 ? 192 : 64;

  WgmmaParams& p = m.base;
  fill_wgmma_conv_params(s, wgmma_detail::kBK, p);
  p.out_h = s.out_h;
  p.out_w = s.out_w;
  if (s.pool) {
    const PoolAttrs& pa = *s.pool;
    p.pk_h = pa.kernel_h;
    p.pk_w = pa.kernel_w;
    p.ps_h = pa.stride_h;
    p.ps_w = pa.stride_w;
    p.pp_h = pa.pad_h;
    p.pp_w = pa.pad_w;
  }
  int device = 0;
  int sms = 0, optin = 0, per_sm = 0;
  CNNRT_CUDA_CHECK(cudaGetDevice(&device));
  CNNRT_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  CNNRT_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  CNNRT_CUDA_CHECK(
      cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device));
  m.sms = std::max(sms, 1);
  m.smem_optin = size_t(optin);
  m.smem_per_sm = size_t(per_sm);
  if (m.smem_optin < wgmma_detail::smem_bytes(m.bn, wgmma_detail::kStages))
    throw Error("conv_fp16_wgmma: the device offers too little shared memory per block");
  if (m.pool()) enumerate_pool_tilings(m);

  m.bytes = upload_wgmma_weights(s, weight, bias, p.w_k, s.out_c, &m.w, &m.bias);
  p.w = m.w;
  p.bias = m.bias;
  // Pool: the row-streaming tilings need up to the device limit; the attribute only permits,
  // occupancy follows the size each launch asks for.
  const size_t limit =
      m.pool() ? m.smem_optin : wgmma_detail::smem_bytes(m.bn, wgmma_detail::kStages);
  if (m.bn == 128)
    set_smem_limit<128>(m.pool(), limit);
  else if (m.bn == 192)
    set_smem_limit<192>(m.pool(), limit);
  else
    set_smem_limit<64>(m.pool(), limit);
}

ConvFp16Wgmma::~ConvFp16Wgmma() = default;

long long ConvFp16Wgmma::ctas(int batch) const {
  const ConvFp16WgmmaImpl& m = *impl_;
  if (batch <= 0) return 0;
  const long long n_tiles = m.shape.out_c / m.bn;
  if (m.pool()) {
    const PoolTiling t = choose_pool_tiling(m, batch);
    return (long long)batch * t.tiles_y * t.tiles_x * n_tiles;
  }
  const long long m_total = (long long)batch * m.shape.conv_h * m.shape.conv_w;
  return (m_total + wgmma_detail::kBM - 1) / wgmma_detail::kBM * n_tiles;
}

void ConvFp16Wgmma::forward(const void* x, void* y, int batch, cudaStream_t stream) const {
  const ConvFp16WgmmaImpl& m = *impl_;
  if (batch <= 0) return;
  const long long m_total = (long long)batch * m.shape.conv_h * m.shape.conv_w;
  WgmmaParams p = m.base;
  size_t smem = wgmma_detail::smem_bytes(m.bn, wgmma_detail::kStages);
  long long grid_x = (m_total + wgmma_detail::kBM - 1) / wgmma_detail::kBM;
  if (m.pool()) {
    const PoolTiling t = choose_pool_tiling(m, batch);
    apply_pool_tiling(t, p);
    smem = t.smem;
    grid_x = (long long)batch * t.tiles_y * t.tiles_x;
  }
  if (m_total > (1LL << 30) || grid_x > (1LL << 30))
    throw Error("conv_fp16_wgmma: batch " + std::to_string(batch) + " too large for int indexing");
  p.x = static_cast<const __half*>(x);
  p.y = static_cast<__half*>(y);
  p.m_total = static_cast<int>(m_total);
  const dim3 grid(static_cast<unsigned>(grid_x), static_cast<unsigned>(m.shape.out_c / m.bn));
  if (m.bn == 128)
    launch<128>(m.pool(), grid, smem, p, stream);
  else if (m.bn == 192)
    launch<192>(m.pool(), grid, smem, p, stream);
  else
    launch<64>(m.pool(), grid, smem, p, stream);
  CNNRT_CUDA_CHECK_LAUNCH();
}

size_t ConvFp16Wgmma::weight_bytes() const { return impl_->bytes; }

std::string ConvFp16Wgmma::variant() const { return variant(0); }

std::string ConvFp16Wgmma::variant(int batch) const {
  const ConvFp16WgmmaImpl& m = *impl_;
  std::string v =
      "wgmma_128x" + std::to_string(m.bn) + "x64_s" + std::to_string(wgmma_detail::kStages);
  if (m.pool()) {
    if (batch <= 0 && m.forced_ph == 0) return v + "_pool(per batch)";
    const PoolTiling t = choose_pool_tiling(m, std::max(batch, 1));
    v += "_pool" + std::to_string(t.ph) + "x" + std::to_string(t.pw);
    if (t.passes > 1)
      v += "_stream" + std::to_string(t.passes) + "x" + std::to_string(t.pass_rows) + "r";
  }
  return v;
}

bool ConvFp16Wgmma::force_pool_block(int ph, int pw) {
  ConvFp16WgmmaImpl& m = *impl_;
  if (!m.pool()) return false;
  if (ph == 0 && pw == 0) {
    m.forced_ph = m.forced_pw = 0;
    return true;
  }
  if (ph < 1 || pw < 1 || ph > m.shape.out_h || pw > m.shape.out_w) return false;
  PoolTiling t;
  if (!make_pool_tiling(m, ph, pw, t)) return false;
  m.forced_ph = ph;
  m.forced_pw = pw;
  return true;
}

int ConvFp16Wgmma::pool_passes(int batch) const {
  const ConvFp16WgmmaImpl& m = *impl_;
  return m.pool() ? choose_pool_tiling(m, std::max(batch, 1)).passes : 1;
}

}  // namespace cnnrt::cuda
