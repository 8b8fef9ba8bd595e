// The fused MaxPool's tiling of the TMA convs (conv_fp16_tma: tma_kernel.cuh / tma_conv.cu,
// conv_int8_tma: tma_s8_kernel.cuh / tma_s8.cu), written once for the host planners and both
// kernels: what a pooled tile owns and which conv pixels it computes does not depend on the
// element type, only the epilogue that stages and reduces them does.
//
// A tile owns `count` consecutive pooled rows g (global: image g / out_h, row g % out_h) and
// computes the BM conv pixels from the first conv row under its first pooled row on: one
// contiguous M range (the im2col box crosses image boundaries), which the host checked covers
// every window of its pooled rows.  The host packs pooled rows greedily into tiles (as many as the
// BM pixels cover, across image boundaries) until a tile ends with an image: a period of whole
// images, whose tile table the kernel reads; tile t is entry t % period_tiles of the table,
// shifted by (t / period_tiles) * period_rows pooled rows.  Windows that overlap two tiles are
// recomputed, never combined across CTAs, so the result is exact and deterministic.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <optional>

namespace cnnrt::cuda::tma_detail {

constexpr int kMaxPoolTiles = 64;
struct TmaPoolTiling {
  int out_h = 0, out_w = 0;  // pooled extent
  int pk_h = 1, pk_w = 1, ps_h = 1, ps_w = 1, pp_h = 0, pp_w = 0;
  int rows_total = 0;  // batch * out_h (set per launch)
  int period_rows = 0, period_tiles = 0;
  int first[kMaxPoolTiles] = {}, count[kMaxPoolTiles] = {};
};

// Pooled row g's conv rows as an M range [lo, hi) of whole conv rows (clipped to its image).  P:
// any parameter struct with conv_h, conv_w and the tiling as `pool` (TmaConvParams, TmaS8Params).
template <class P>
__host__ __device__ __forceinline__ int pool_conv_lo(const P& p, int g) {
  const int img = g / p.pool.out_h, cy = (g - img * p.pool.out_h) * p.pool.ps_h - p.pool.pp_h;
  return (img * p.conv_h + (cy > 0 ? cy : 0)) * p.conv_w;
}
template <class P>
__host__ __device__ __forceinline__ int pool_conv_hi(const P& p, int g) {
  const int img = g / p.pool.out_h;
  const int end = (g - img * p.pool.out_h) * p.pool.ps_h - p.pool.pp_h + p.pool.pk_h;
  return (img * p.conv_h + (end < p.conv_h ? end : p.conv_h)) * p.conv_w;
}
// Tile t of the pooled tiling: its first pooled row and how many it owns (the batch's last tile
// may own fewer).
__host__ __device__ __forceinline__ void pool_tile_rows(const TmaPoolTiling& t, int tile, int& g0,
                                                        int& count) {
  const int period = tile / t.period_tiles, j = tile - period * t.period_tiles;
  g0 = period * t.period_rows + t.first[j];
  count = t.rows_total - g0 < t.count[j] ? t.rows_total - g0 : t.count[j];
}

// The cells of pooled pixel (row g, column px)'s window that lie inside the conv output (pool
// padding and ceil-mode overhang skipped): cell(local) for each, local its row in a tile whose
// first conv pixel is m_first.  Both fused-MaxPool epilogues walk their staged tile with it.
template <class P, class Cell>
__device__ __forceinline__ void for_each_window_cell(const P& p, int g, int px, int m_first,
                                                     Cell&& cell) {
  const TmaPoolTiling& t = p.pool;
  const int img = g / t.out_h, py = g - img * t.out_h;
  for (int a = 0; a < t.pk_h; ++a) {
    const int cy = py * t.ps_h - t.pp_h + a;
    if (cy < 0 || cy >= p.conv_h) continue;
    for (int b = 0; b < t.pk_w; ++b) {
      const int cx = px * t.ps_w - t.pp_w + b;
      if (cx < 0 || cx >= p.conv_w) continue;
      cell((img * p.conv_h + cy) * p.conv_w + cx - m_first);
    }
  }
}

}  // namespace cnnrt::cuda::tma_detail

namespace cnnrt::cuda::tma {

// The window of a max-pool (kernel, stride, padding per axis) over a conv_h x conv_w conv output
// with an out_h x out_w pooled output, as a tiling without tiles (pool_tiling_of fills those).
inline tma_detail::TmaPoolTiling pool_window(int out_h, int out_w, int kernel_h, int kernel_w,
                                             int stride_h, int stride_w, int pad_h, int pad_w) {
  tma_detail::TmaPoolTiling t;
  t.out_h = out_h;
  t.out_w = out_w;
  t.pk_h = kernel_h;
  t.pk_w = kernel_w;
  t.ps_h = stride_h;
  t.ps_w = stride_w;
  t.pp_h = pad_h;
  t.pp_w = pad_w;
  return t;
}

// Every window holds a conv cell (padding at most half the window: the frameworks' rule), so a
// fused epilogue's max over the window's real cells is defined; the TMA convs fuse only such
// pools.
inline bool pool_window_ok(const tma_detail::TmaPoolTiling& w) {
  return w.pk_h >= 1 && w.pk_w >= 1 && w.ps_h >= 1 && w.ps_w >= 1 && w.pp_h >= 0 && w.pp_w >= 0 &&
         w.pp_h * 2 <= w.pk_h && w.pp_w * 2 <= w.pk_w && w.out_h >= 1 && w.out_w >= 1;
}

// The fused pool's tiling for tiles of bm rows over a conv_h x conv_w conv output (`window`:
// pool_window's): greedy, each tile takes as many consecutive pooled rows as the bm conv pixels
// from its first pooled row's first conv row cover, crossing image boundaries, until a tile ends
// with an image (the period); if that takes more than kMaxPoolTiles tiles, tiles stop at every
// image's end (period 1 image).  Nothing when one pooled row's windows span more than bm pixels.
inline std::optional<tma_detail::TmaPoolTiling> pool_tiling_of(
    int conv_h, int conv_w, const tma_detail::TmaPoolTiling& window, int bm) {
  struct Geometry {
    int conv_h, conv_w;
    tma_detail::TmaPoolTiling pool;
  } p{conv_h, conv_w, window};
  tma_detail::TmaPoolTiling& t = p.pool;
  for (bool cross : {true, false}) {
    int g = 0, tiles = 0;
    bool closed = false;
    while (tiles < tma_detail::kMaxPoolTiles) {
      const int lo = tma_detail::pool_conv_lo(p, g), image_end = (g / t.out_h + 1) * t.out_h;
      int count = 0;
      while ((cross || g + count < image_end) && tma_detail::pool_conv_hi(p, g + count) - lo <= bm)
        ++count;
      if (count == 0) return std::nullopt;
      t.first[tiles] = g;
      t.count[tiles] = count;
      ++tiles;
      g += count;
      if (g % t.out_h == 0) {
        closed = true;
        break;
      }
    }
    if (closed) {
      t.period_rows = g;
      t.period_tiles = tiles;
      return t;
    }
  }
  return std::nullopt;
}

// M tiles of a pooled tiling at `batch`.
inline long long pool_m_tiles(const tma_detail::TmaPoolTiling& t, int batch) {
  const long long rows = (long long)std::max(batch, 1) * t.out_h;
  long long tiles = rows / t.period_rows * t.period_tiles;
  const long long rest = rows % t.period_rows;
  for (int j = 0; j < t.period_tiles; ++j) tiles += t.first[j] < rest ? 1 : 0;
  return tiles;
}

}  // namespace cnnrt::cuda::tma
