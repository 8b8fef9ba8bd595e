// The tiled space-to-depth plan (s2d_tile.h); the kernel is in s2d_tile.cuh.
#include "kernels/cuda/conv/s2d_tile.h"

#include <algorithm>
#include <climits>

namespace cnnrt::cuda {
namespace {

constexpr int kLanes = 32;

long long ceil_div(long long a, long long b) { return (a + b - 1) / b; }

// Tiles of a block row when each lane takes `cols_per_lane` source columns: as many blocks as
// the warp's columns hold, then evened out over the row (57 blocks at 16 per tile: 4 tiles of
// 15/15/15/12 rather than 16/16/16/9), which trims the idle lanes of the last tile.
// The warp's shared-memory tile holds a slot for every lane, idle ones too (ceil(32·cols / block)
// blocks), so the kernel's stores need no lane guard.
struct RowTiling {
  int tile_blocks = 0, tiles_per_row = 0, lane_blocks = 0;
  long long tiles = 0;
  long long smem_bytes(const S2dTileShape& s) const {
    return static_cast<long long>(lane_blocks) * s.out_stride * s.out_bytes;
  }
};
RowTiling row_tiling(const S2dTileShape& s, int batch, int cols_per_lane) {
  RowTiling t;
  const int max_blocks = kLanes * cols_per_lane / s.block;
  t.tiles_per_row = static_cast<int>(ceil_div(s.out_w, max_blocks));
  t.tile_blocks = static_cast<int>(ceil_div(s.out_w, t.tiles_per_row));
  t.lane_blocks = static_cast<int>(ceil_div(kLanes * cols_per_lane, s.block));
  t.tiles = static_cast<long long>(batch) * s.out_h * t.tiles_per_row;
  return t;
}

}  // namespace

S2dTilePlan s2d_tile_plan(const S2dTileShape& shape, int batch, uintptr_t x_address) {
  S2dTilePlan plan;
  const S2dTileShape& s = shape;
  if (batch <= 0 || s.c <= 0 || s.h <= 0 || s.w <= 0 || s.out_h <= 0 || s.out_w <= 0) return plan;
  if (s.block < 1 || s.block > kLanes || s.pad_h < 0 || s.pad_w < 0) return plan;
  if ((s.out_bytes != 1 && s.out_bytes != 2) ||
      s.out_stride < static_cast<long long>(s.block) * s.block * s.c ||
      s.out_stride * s.out_bytes % 16 != 0)
    return plan;
  // A lane takes columns 2j and 2j + 1 of the tile: with an even block, row length and column
  // offset (pad_w), those are one 8-byte-aligned float2 in the same block, both inside the image
  // or both outside.  Worth it once the batch gives enough tiles; at batch 1 the single-column
  // tiles (half as wide, twice as many) fill the GPU instead.
  const bool pairs_fit =
      s.block % 2 == 0 && s.w % 2 == 0 && s.pad_w % 2 == 0 && x_address % sizeof(float[2]) == 0;
  // Offsets inside one sample (rows up to a block past the image included) are ints in the
  // kernel.
  if ((static_cast<long long>(s.c) * s.h + s.block) * s.w > INT_MAX) return plan;
  RowTiling t = row_tiling(s, batch, 1);
  if (pairs_fit) {
    const RowTiling wide = row_tiling(s, batch, 2);
    if (wide.tiles >= kS2dMinCtas && wide.smem_bytes(s) <= kS2dMaxTileBytes) {
      t = wide;
      plan.pairs = true;
    }
  }
  // The kernel's tile index and its grid stride are ints.
  if (t.smem_bytes(s) > kS2dMaxTileBytes || t.tiles > INT_MAX / 2) return S2dTilePlan{};
  plan.tile_blocks = t.tile_blocks;
  plan.tiles_per_row = t.tiles_per_row;
  plan.tiles = static_cast<int>(t.tiles);
  plan.tile_chunks = static_cast<int>(t.smem_bytes(s) / 16);
  plan.warps_per_cta = kS2dMaxWarpsPerCta;
  while (plan.warps_per_cta > 1 &&
         t.tiles < static_cast<long long>(plan.warps_per_cta) * kS2dMinCtas)
    plan.warps_per_cta /= 2;
  plan.ctas = static_cast<int>(ceil_div(t.tiles, plan.warps_per_cta));
  plan.smem_bytes = static_cast<size_t>(plan.warps_per_cta) * plan.tile_chunks * 16;
  plan.tiled = true;
  return plan;
}

}  // namespace cnnrt::cuda
