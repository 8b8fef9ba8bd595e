// The fused-pool launch planning of the Hopper wgmma convolutions (host only): which pooled
// blocks a CTA can take (one pass staged in the drained ring, or row-streamed passes with a
// staging ring of their own), and which of them a batch should run.  The dense fp16 kernel
// (wgmma.cu) and the 2:4 sparse one (wgmma_sparse.cu) share it, so their pool tiles follow one
// rule and one cost model; only their shared-memory sizes differ (passed in).  Also the launch
// setup their forward() share (set_wgmma_launch).
#pragma once

#include <cuda_fp16.h>

#include <algorithm>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "cnnrt/error.h"
#include "kernels/cuda/conv/conv_shape.h"
#include "kernels/cuda/conv/pool_tiling.h"

namespace cnnrt::cuda {

// One feasible pool tiling (pool_tiling.h) with what the launch and the cost model need.
struct WgmmaTiling {
  PoolTile tile;
  size_t smem = 0;
  int per_sm = 1;  // CTAs resident per SM (shared memory bound)
};

// What a kernel needs from shared memory, and what the device offers.
struct WgmmaPoolSmem {
  size_t single = 0;  // a single-pass tile (staged in the ring)
  std::function<size_t(int stage_rows, int tile_tw)> streamed;  // a row-streamed tile
  size_t optin = 0;   // largest dynamic shared memory per CTA
  size_t per_sm = 0;  // shared memory per SM (occupancy)
};

// Every feasible PH x PW pooled block of an out_h x out_w pooled output over `rows` M rows per
// CTA, and the index of the single-pass reference (fewest CTAs, then smallest conv tile) in
// *single.  Throws when not even the 1 x 1 block fits.
inline std::vector<WgmmaTiling> enumerate_wgmma_pool_tilings(int out_h, int out_w,
                                                             const PoolWindow& window, int rows,
                                                             const WgmmaPoolSmem& smem, int* single,
                                                             const char* name) {
  std::vector<WgmmaTiling> tilings;
  *single = -1;
  for (int ph = 1; ph <= out_h; ++ph)
    for (int pw = 1; pw <= out_w; ++pw) {
      WgmmaTiling t;
      t.tile = packed_pool_tile(out_h, out_w, window, ph, pw, rows);
      if (t.tile.tile_tw > rows) continue;
      if (t.tile.passes == 1) {
        t.smem = smem.single;
      } else {
        const std::optional<PoolTile> streamed =
            streamed_pool_tile(out_h, out_w, window, ph, pw, rows);
        if (!streamed) continue;
        t.tile = *streamed;
        t.smem = smem.streamed(t.tile.stage_rows, t.tile.tile_tw);
      }
      if (t.smem > smem.optin) continue;
      // +1 KB the runtime reserves per CTA; at most 3 (the 3-stage narrow kernels: 72 registers
      // or fewer, 3 × 256 threads fit the register file).
      t.per_sm = static_cast<int>(std::clamp<size_t>(smem.per_sm / (t.smem + 1024), 1, 3));
      tilings.push_back(t);
      if (t.tile.passes != 1) continue;
      const PoolTile& a = t.tile;
      const long long tiles = (long long)a.tiles_y * a.tiles_x;
      if (*single >= 0) {
        const PoolTile& b = tilings[*single].tile;
        const long long best = (long long)b.tiles_y * b.tiles_x;
        if (tiles > best || (tiles == best && a.tile_th * a.tile_tw >= b.tile_th * b.tile_tw))
          continue;
      }
      *single = int(tilings.size()) - 1;
    }
  // supports() keeps one window within the M rows, so the 1 x 1 block always fits.
  if (*single < 0) throw Error(std::string(name) + ": no pool tiling fits");
  return tilings;
}

// Cost model (docs/kernels/conv_fp16_wgmma.md): an SM runs one CTA's MMAs at a time, a pass
// costs k_tiles + 3 k-tile times (prologue fill, drain, epilogue/pool), so
// time ~ ceil(ctas / (sms * per_sm)) * per_sm * passes * (k_tiles + 3).  Ties: fewer pass-units
// per image (less gathered data).  Tilings that leave SMs idle while the single-pass tiling would
// fill them are not considered, so ctas(batch) reaches the SM count where it did before (the
// registry's small-batch threshold relies on that).
// Row streaming needs a K loop long enough to hide each pass's fill and drain (min_stream_k_tiles:
// on an H200 the s2d conv1, 7 k-tiles of 64, went from 0.426 to 0.556 ms at batch 256 when
// streamed, while conv2, 25 k-tiles, gained 20%: docs/PERFORMANCE.md, run 6).
inline int choose_wgmma_pool_tiling(const std::vector<WgmmaTiling>& tilings, int single,
                                    long long n_tiles, int k_tiles, int min_stream_k_tiles, int sms,
                                    int batch) {
  const PoolTile& one = tilings[single].tile;
  const long long min_ctas =
      std::min<long long>(sms, (long long)batch * n_tiles * one.tiles_y * one.tiles_x);
  int best = single;
  long long best_cost = -1, best_units = 0;
  for (size_t i = 0; i < tilings.size(); ++i) {
    const WgmmaTiling& t = tilings[i];
    const long long ctas = (long long)batch * n_tiles * t.tile.tiles_y * t.tile.tiles_x;
    if (ctas < min_ctas) continue;
    if (t.tile.passes > 1 && k_tiles < min_stream_k_tiles) continue;
    const long long slots = (long long)sms * t.per_sm;
    const long long cost = (ctas + slots - 1) / slots * t.per_sm * t.tile.passes * (k_tiles + 3);
    const long long units = (long long)t.tile.passes * t.tile.tiles_y * t.tile.tiles_x;
    if (best_cost < 0 || cost < best_cost || (cost == best_cost && units < best_units)) {
      best = int(i);
      best_cost = cost;
      best_units = units;
    }
  }
  return best;
}

// One launch of a wgmma conv: its grid's x extent and dynamic shared memory.
struct WgmmaLaunch {
  unsigned grid_x = 0;
  size_t smem = 0;
};

// The per-launch fields of a wgmma conv's parameters P (WgmmaParams or one derived from it: x, y,
// residual, m_total, tile): the pointers, the output pixels of `batch` and, with a fused
// pool, the tiling `variant` picks; `rows` output pixels per CTA otherwise, with `flat_smem`
// bytes.  Checks what forward() was handed (the residual the shape needs, or none; the variant;
// int indexing); `name` words the errors.  grid_x 0: nothing to launch (batch <= 0).  Shared by
// the dense and the sparse kernels' forward().
template <class P>
WgmmaLaunch set_wgmma_launch(const char* name, const ConvShape& s,
                             const std::vector<WgmmaTiling>& tilings, int rows, size_t flat_smem,
                             int variant, const void* x, const void* residual, void* y, int batch,
                             P& p) {
  if (s.residual != (residual != nullptr))
    throw Error(std::string(name) + (s.residual ? ": the fused residual is missing"
                                                : ": a residual given to a conv without one"));
  if (batch <= 0) return {};
  const long long m_total = (long long)batch * s.conv_h * s.conv_w;
  long long grid_x = (m_total + rows - 1) / rows;
  size_t smem = flat_smem;
  if (s.pool) {
    if (variant < 0 || variant >= int(tilings.size()))
      throw Error(std::string(name) + ": variant " + std::to_string(variant) + " out of range");
    const WgmmaTiling& t = tilings[variant];
    p.tile = t.tile;
    smem = t.smem;
    grid_x = (long long)batch * t.tile.tiles_y * t.tile.tiles_x;
  }
  if (m_total > (1LL << 30) || grid_x > (1LL << 30))
    throw Error(std::string(name) + ": batch " + std::to_string(batch) +
                " too large for int indexing");
  p.x = static_cast<const __half*>(x);
  p.y = static_cast<__half*>(y);
  p.residual = static_cast<const __half*>(residual);
  p.m_total = static_cast<int>(m_total);
  return {static_cast<unsigned>(grid_x), smem};
}

}  // namespace cnnrt::cuda
