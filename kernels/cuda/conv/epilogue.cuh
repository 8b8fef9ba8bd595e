// The epilogue pieces every tensor-core conv can share: bias + activation clamp rounded to fp16
// into a shared-memory staging tile, the A-row table that maps GEMM rows to conv pixels (flat M
// tiles or the pass of a fused-pool tile), the fused MaxPool write-out from the staging tile,
// and the 16-byte row write-out without a pool.  The warp-specialised wgmma kernel (wgmma_ws.cu)
// is built from them, the finish and direct kernels use the value helpers; a new family (int8,
// 2:4 sparse) plugs its accumulator layout into stage_pair() and reuses the rest.
//
// Why the mma.sync (igemm_kernel.cuh) and wgmma (wgmma_kernel.cuh) kernels keep their own copies
// of these steps: calling these functions from them changed ptxas's allocation and schedule —
// measured on an H100 (issue 7): AlexNet fp16 2-8% slower with the wgmma kernel built on them,
// more spills in the igemm gather instances.  Their copies follow the same conventions (below)
// and the same pool tiling (pool_tiling.h), so a change here must be mirrored there.
//
// Conventions: the staging tile has rows of BN + 8 halves (the +8 keeps half2 stores from
// eight lanes of a row group conflict-free); a row table entry is {image | -1, ih0, iw0, 0}
// (image -1: the row is outside the conv output and gathers zeros); the pool tiling is
// kernels/cuda/conv/pool_tiling.h.  Everything is __forceinline__.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/cuda/conv/epilogue_params.h"
#include "kernels/cuda/conv/pool_tiling.h"

namespace cnnrt::cuda::epilogue {

// ---- values ----------------------------------------------------------------------------------

__device__ __forceinline__ float activate(float v, const EpilogueClamp& a) {
  return a.on ? fminf(fmaxf(v, a.lo), a.hi) : v;
}

// Accumulator pair + bias, clamped, rounded to fp16 and stored at `dst` (staging).
__device__ __forceinline__ void stage_pair(__half* dst, float v0, float v1, float b0, float b1,
                                           const EpilogueClamp& a) {
  v0 += b0;
  v1 += b1;
  if (a.on) {
    v0 = fminf(fmaxf(v0, a.lo), a.hi);
    v1 = fminf(fmaxf(v1, a.lo), a.hi);
  }
  *reinterpret_cast<__half2*>(dst) = __floats2half2_rn(v0, v1);
}

// Zeroes the halves of an 8-channel chunk whose channel index (first + i) is >= limit.
__device__ __forceinline__ uint4 zero_channels_from(uint4 v, int first, int limit) {
  if (first + 8 <= limit) return v;
  uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 8; ++i)
    if (first + i >= limit) w[i / 2] &= (i & 1) ? 0x0000ffffu : 0xffff0000u;
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// clamp(v + r) of a staged 8-channel chunk v and the residual's chunk at `r` (fp32 sum, rounded
// once more: the staged v was already rounded to fp16).
__device__ __forceinline__ uint4 add_residual(uint4 v, const __half* r, const EpilogueClamp& a) {
  const uint4 rv = *reinterpret_cast<const uint4*>(r);
  __half2* hv = reinterpret_cast<__half2*>(&v);
  const __half2* hr = reinterpret_cast<const __half2*>(&rv);
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const float2 x = __half22float2(hv[q]), y = __half22float2(hr[q]);
    hv[q] = __floats2half2_rn(activate(x.x + y.x, a), activate(x.y + y.y, a));
  }
  return v;
}

// ---- the A-row table ---------------------------------------------------------------------------

// What the row table needs of the conv: output extent, stride, (top/left) padding.
struct RowGeometry {
  int conv_h, conv_w, sh, sw, ph, pw;
};

// Where a pooled CTA's block lies: blockIdx.x = (image * tiles_y + tile_y) * tiles_x + tile_x,
// and its conv tile's first pixel (cy0, cx0) (negative under pool padding).
struct PoolBlock {
  int image, tile_y, tile_x, cy0, cx0;
};

__device__ __forceinline__ PoolBlock pool_block_of(int block, const PoolTile& t,
                                                   const PoolWindow& w) {
  PoolBlock b;
  b.tile_x = block % t.tiles_x;
  block /= t.tiles_x;
  b.tile_y = block % t.tiles_y;
  b.image = block / t.tiles_y;
  b.cy0 = b.tile_y * t.tile_ph * w.ps_h - w.pp_h;
  b.cx0 = b.tile_x * t.tile_pw * w.ps_w - w.pp_w;
  return b;
}

// Conv-tile pixel (ly, lx) of A row r in pass `pass`; false for rows past the tile (a packed
// tile's last pass, a streamed pass's unused rows or rows past the last conv row).
template <int BM>
__device__ __forceinline__ bool tile_pixel_of_row(const PoolTile& t, int pass, int r, int& ly,
                                                  int& lx) {
  if (t.pass_rows > 0) {
    ly = pass * t.pass_rows + r / t.tile_tw;
    lx = r % t.tile_tw;
    return r < t.pass_rows * t.tile_tw && ly < t.tile_th;
  }
  const int rg = pass * BM + r;
  ly = rg / t.tile_tw;
  lx = rg % t.tile_tw;
  return rg < t.tile_th * t.tile_tw;
}

// Fills s_rows[0, BM) for one pass: pooled CTAs map rows to their tile's conv pixels, flat ones
// to output pixels m0 + r (batch-major: m = (n * conv_h + cy) * conv_w + cx).  Rows outside the
// conv output (tile overhang, pool padding, the M tail, a pass's unused rows) get image -1.
// Callers synchronise before the loaders read it.
template <int BM, int THREADS, bool POOL, typename Index>
__device__ __forceinline__ void fill_row_table(int4* s_rows, int tid, const RowGeometry& g,
                                               const PoolTile& t, int pass, const PoolBlock& b,
                                               Index m0, Index m_total) {
  for (int r = tid; r < BM; r += THREADS) {
    int4 info = make_int4(-1, 0, 0, 0);
    if constexpr (POOL) {
      int ly, lx;
      if (tile_pixel_of_row<BM>(t, pass, r, ly, lx)) {
        const int cy = b.cy0 + ly, cx = b.cx0 + lx;
        if (cy >= 0 && cy < g.conv_h && cx >= 0 && cx < g.conv_w)
          info = make_int4(b.image, cy * g.sh - g.ph, cx * g.sw - g.pw, 0);
      }
    } else {
      const Index m = m0 + r;
      if (m < m_total) {
        const int cx = int(m % g.conv_w);
        const Index rest = m / g.conv_w;
        const int cy = int(rest % g.conv_h), n = int(rest / g.conv_h);
        info = make_int4(n, cy * g.sh - g.ph, cx * g.sw - g.pw, 0);
      }
    }
    s_rows[r] = info;
  }
}

// ---- staging ---------------------------------------------------------------------------------

// Staging row of conv-tile pixel (ly, lx): packed passes keep the whole tile, row streaming a
// ring of stage_rows conv rows.
__device__ __forceinline__ int stage_pixel(const PoolTile& t, int ly, int lx) {
  return (t.pass_rows > 0 ? ly % t.stage_rows : ly) * t.tile_tw + lx;
}

// Staging row of A row `local` of pass `pass` of a pooled CTA; -1: a streamed pass's row that
// lies past its conv rows (dropped).
template <int BM>
__device__ __forceinline__ int staging_row(const PoolTile& t, int pass, int local) {
  if (t.pass_rows == 0) return pass * BM + local;
  const int ly = pass * t.pass_rows + local / t.tile_tw;
  return local < t.pass_rows * t.tile_tw && ly < t.tile_th ? stage_pixel(t, ly, local % t.tile_tw)
                                                           : -1;
}

// ---- write-out -------------------------------------------------------------------------------

// Where a CTA's output columns go: channel ch0 + c of each output pixel (stride out_cs halves),
// for tile columns c < n_valid; channels >= out_c are padding and written as +0.
struct TileOutput {
  __half* y;
  int out_cs, ch0, n_valid, out_c;
};

// Pooled rows [py_begin, py_end) of the CTA's block: window max over the staged fp16 conv tile
// with __hmax2 (max after fp16 rounding equals the rounded fp32 max: rounding is monotone),
// 16-byte stores, one (pooled pixel, 8-channel chunk) per thread step.  Window cells outside the
// conv output (pool padding, ceil_mode overhang) are skipped, i.e. act as -inf; every window
// holds a real cell (pad <= kernel / 2 and PyTorch's ceil_mode rule), so -inf never reaches the
// output.  GUARDED: check tile columns against n_valid and zero the padding channels (layers
// whose out_c is not a multiple of BN / of 8).
template <int BN, int THREADS, bool GUARDED>
__device__ __forceinline__ void pool_out(const __half* s_c, const PoolTile& t, const PoolWindow& w,
                                         const PoolBlock& b, int conv_h, int conv_w, int out_h,
                                         int out_w, const TileOutput& o, int tid, int py_begin,
                                         int py_end) {
  constexpr int kChunks = BN / 8, kCRow = BN + 8;
  const __half2 neg_inf = __float2half2_rn(-INFINITY);
  for (int id = tid; id < (py_end - py_begin) * t.tile_pw * kChunks; id += THREADS) {
    const int c = id % kChunks, rest = id / kChunks;
    const int px = rest % t.tile_pw, py = py_begin + rest / t.tile_pw;
    const int oy = b.tile_y * t.tile_ph + py, ox = b.tile_x * t.tile_pw + px;
    if (oy >= out_h || ox >= out_w || (GUARDED && c * 8 >= o.n_valid)) continue;
    __half2 best[4] = {neg_inf, neg_inf, neg_inf, neg_inf};
    for (int i = 0; i < w.pk_h; ++i) {
      const int ly = py * w.ps_h + i, cy = b.cy0 + ly;
      if (cy < 0 || cy >= conv_h) continue;
      for (int j = 0; j < w.pk_w; ++j) {
        const int lx = px * w.ps_w + j, cx = b.cx0 + lx;
        if (cx < 0 || cx >= conv_w) continue;
        const uint4 v =
            *reinterpret_cast<const uint4*>(s_c + stage_pixel(t, ly, lx) * kCRow + c * 8);
        const uint32_t w4[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          __half2 h;
          *reinterpret_cast<uint32_t*>(&h) = w4[q];
          best[q] = __hmax2(best[q], h);
        }
      }
    }
    uint4 out;
    out.x = *reinterpret_cast<uint32_t*>(&best[0]);
    out.y = *reinterpret_cast<uint32_t*>(&best[1]);
    out.z = *reinterpret_cast<uint32_t*>(&best[2]);
    out.w = *reinterpret_cast<uint32_t*>(&best[3]);
    const int ch = o.ch0 + c * 8;
    if (GUARDED) out = zero_channels_from(out, ch, o.out_c);
    *reinterpret_cast<uint4*>(o.y + ((size_t(b.image) * out_h + oy) * out_w + ox) * o.out_cs + ch) =
        out;
  }
}

// Staged rows [0, BM) of a flat M tile to output pixels m0 + r < m_total, 16-byte chunks;
// `first` is this thread's first item (its index among the THREADS storing threads).
// GUARD_N: skip tile columns >= n_valid; ZERO_PAD: write +0 into channels >= out_c.
template <int BM, int BN, int THREADS, bool GUARD_N, bool ZERO_PAD, typename Index>
__device__ __forceinline__ void store_rows(const __half* s_c, int first, Index m0, Index m_total,
                                           const TileOutput& o) {
  constexpr int kChunks = BN / 8, kCRow = BN + 8;
  for (int id = first; id < BM * kChunks; id += THREADS) {
    const int r = id / kChunks, c = id % kChunks;
    const Index m = m0 + r;
    if (m >= m_total || (GUARD_N && c * 8 >= o.n_valid)) continue;
    const int ch = o.ch0 + c * 8;
    uint4 v = *reinterpret_cast<const uint4*>(s_c + r * kCRow + c * 8);
    if (ZERO_PAD) v = zero_channels_from(v, ch, o.out_c);
    *reinterpret_cast<uint4*>(o.y + static_cast<size_t>(m) * o.out_cs + ch) = v;
  }
}

}  // namespace cnnrt::cuda::epilogue
