// The fused-MaxPool tiling of the tensor-core convs, written once for the host planners and the
// kernels (kernels/cuda/conv/epilogue.cuh reads the same structs on the device).
//
// Why a tiling: a conv with a fused pool never writes its pre-pool tensor.  A CTA owns a PH x PW
// block of pooled outputs of ONE image and computes the TH x TW conv tile under their windows,
// TH = (PH - 1) * stride + kernel (same for W), then reduces the windows from shared memory.  A
// tile larger than one M tile of BM rows is computed in passes, two ways:
//  * packed passes (pass_rows == 0): the tile's TH * TW pixels, row-major, in passes of BM
//    pixels; every pass's fp16 rows are staged until the pool (staging grows with the passes);
//  * row streaming (pass_rows > 0): passes of pass_rows = BM / TW WHOLE conv rows; the rows go to
//    a ring of stage_rows conv rows and each pass pools the pooled rows its rows complete, so the
//    staging no longer grows with the pass count and one CTA can sweep a whole image (no halo).
// The pass geometry is the kernels' contract: pooled_rows_after() is the recurrence the host's
// ring size (stream_stage_rows) and the shared epilogue follow; the igemm and wgmma kernels
// evaluate the same formula in their own lambdas (see epilogue.cuh for why).
//
// The planners (which tiling, by a kernel-specific cost model and shared-memory formula) stay with
// each kernel; this header gives them the candidates' geometry.
#pragma once

#include <cuda_runtime.h>

#include <optional>

#include "graph/ir.h"

namespace cnnrt::cuda {

// The fused max-pool window; kernel 1 / stride 1 / pad 0 (the default) is the identity.
struct PoolWindow {
  int pk_h = 1, pk_w = 1, ps_h = 1, ps_w = 1, pp_h = 0, pp_w = 0;
};

inline PoolWindow pool_window_of(const std::optional<PoolAttrs>& pool) {
  PoolWindow w;
  if (pool) {
    w.pk_h = pool->kernel_h;
    w.pk_w = pool->kernel_w;
    w.ps_h = pool->stride_h;
    w.ps_w = pool->stride_w;
    w.pp_h = pool->pad_h;
    w.pp_w = pool->pad_w;
  }
  return w;
}

// One tiling of the pooled output: blockIdx.x = (image * tiles_y + tile_y) * tiles_x + tile_x
// owns pooled outputs [tile_y * tile_ph, +tile_ph) x [tile_x * tile_pw, +tile_pw), whose windows
// cover the conv tile tile_th x tile_tw starting at conv pixel
// (tile_y * tile_ph * ps_h - pp_h, tile_x * tile_pw * ps_w - pp_w).
struct PoolTile {
  int tile_ph = 1, tile_pw = 1, tile_th = 1, tile_tw = 1, tiles_y = 1, tiles_x = 1;
  int passes = 1;
  int pass_rows = 0;   // 0: packed passes; > 0: row streaming, conv rows per pass
  int stage_rows = 0;  // row streaming: conv rows in the staging ring
};

// Row streaming: the pooled rows of the block whose windows lie within the conv rows of passes
// 0..q (all of them after the last pass).
__host__ __device__ __forceinline__ int pooled_rows_after(const PoolTile& t, const PoolWindow& w,
                                                          int q) {
  if (q + 1 >= t.passes) return t.tile_ph;
  const int done = (q + 1) * t.pass_rows < t.tile_th ? (q + 1) * t.pass_rows : t.tile_th;
  if (done < w.pk_h) return 0;
  const int rows = (done - w.pk_h) / w.ps_h + 1;
  return rows < t.tile_ph ? rows : t.tile_ph;
}

// ---- host-side candidates ----------------------------------------------------------------------

inline int ceil_div_int(long long a, long long b) { return static_cast<int>((a + b - 1) / b); }

// The PH x PW block of an out_h x out_w pooled output: its conv tile and the blocks per image,
// computed in one pass of bm pixels or packed passes of bm pixels.
inline PoolTile packed_pool_tile(int out_h, int out_w, const PoolWindow& w, int ph, int pw,
                                 int bm) {
  PoolTile t;
  t.tile_ph = ph;
  t.tile_pw = pw;
  t.tile_th = (ph - 1) * w.ps_h + w.pk_h;
  t.tile_tw = (pw - 1) * w.ps_w + w.pk_w;
  t.tiles_y = ceil_div_int(out_h, ph);
  t.tiles_x = ceil_div_int(out_w, pw);
  t.passes = ceil_div_int((long long)t.tile_th * t.tile_tw, bm);
  return t;
}

// Ring rows a row-streaming tile needs: while pass q + 1 writes its conv rows, the rows from the
// first row of the first pooled row not yet written (after pass q) onward are still live.
inline int stream_stage_rows(const PoolTile& t, const PoolWindow& w) {
  int need = t.pass_rows;
  for (int q = 0; q + 1 < t.passes; ++q) {
    const int end = (q + 2) * t.pass_rows < t.tile_th ? (q + 2) * t.pass_rows : t.tile_th;
    const int live = end - pooled_rows_after(t, w, q) * w.ps_h;
    if (live > need) need = live;
  }
  return need < t.tile_th ? need : t.tile_th;
}

// The same block computed by row streaming: passes of bm / TW whole conv rows.  Nothing when a
// conv row of the tile is wider than bm.
inline std::optional<PoolTile> streamed_pool_tile(int out_h, int out_w, const PoolWindow& w, int ph,
                                                  int pw, int bm) {
  PoolTile t = packed_pool_tile(out_h, out_w, w, ph, pw, bm);
  if (t.tile_tw > bm) return std::nullopt;
  t.pass_rows = bm / t.tile_tw;
  t.passes = ceil_div_int(t.tile_th, t.pass_rows);
  t.stage_rows = stream_stage_rows(t, w);
  return t;
}

}  // namespace cnnrt::cuda
