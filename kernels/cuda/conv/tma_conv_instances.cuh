// conv_fp16_tma's instance table: its tiles (the shared tile shapes with fp16's stages) and the
// kernel instance of every (tile, epilogue kind, k-tile row bytes).  Included by tma_conv.cu
// (the host side; the 128-byte-row instances are instantiated there) and tma_conv_k64.cu (the
// 64-byte-row instances, in_c % 64 == 32: their own translation unit so the two sets compile in
// parallel and tma_conv.cu stays one file's length).
#pragma once

#include <cuda.h>

#include <cstddef>

#include "kernels/cuda/conv/tma_encode.h"
#include "kernels/cuda/conv/tma_kernel.cuh"

namespace cnnrt::cuda::tma_f16 {

// The shared tile shapes (tma_encode.h: bm, bn, the lab's speed, name) with fp16's stages.
struct TileInfo : tma::TileShape {
  int stages;             // with 128-byte k-tile rows; 64-byte rows: twice (stages_of)
  bool unpooled_default;  // a candidate of plan(batch) for convs without a pool
  bool pool;              // has a fused-pool instance (staging fits beside the ring)
};
// 256x96 (two n tiles of 96 on out_c 192, 100 % useful columns) serves AlexNet conv2's pooled
// tiling: 9 conv rows of 27 per tile against 4 for BM 128.  Its speed (0.9) was a guess until
// conv_lab --tma measured it (docs/PERFORMANCE.md run 36d: model / measured 0.94-1.03 on conv3
// and conv4 at batch 64 and 256, and the fastest tile of conv4 at batch 64, 16 % ahead of the
// 128x256 the model had to pick without it), so it is an unpooled candidate too.  The BN = 64 tiles
// (speeds guessed too, tma_encode.h) are candidates everywhere: they are the only tiles that do not
// compute padding columns on out_c <= 64 (conv1's space-to-depth form, ResNet's 64-channel
// convs), and on wider convs the model prefers the faster wide tiles anyway.  Stages: as many as
// 227 KB hold with the fused pool's staging (256x64: 5 x 40 KB + 20 KB; 128x64: 8 x 24 KB + 18
// KB).
inline constexpr TileInfo kTiles[] = {
    {tma::kTileShapes[0], 7, true, false}, {tma::kTileShapes[1], 5, true, true},
    {tma::kTileShapes[2], 4, true, true},  {tma::kTileShapes[3], 4, true, true},
    {tma::kTileShapes[4], 4, true, true},  {tma::kTileShapes[5], 5, true, true},
    {tma::kTileShapes[6], 8, true, true},
};
inline constexpr int kTileCount = sizeof(kTiles) / sizeof(kTiles[0]);

// A 64-byte stage is half a 128-byte one, so twice the stages fill the same ring bytes (the
// int8 instance's rule for its 64-byte rows): the same bytes in flight cover the same L2 latency,
// and the shared memory (ring + pool staging) is the 128-byte instance's to the byte.
constexpr int stages_of(const TileInfo& t, int row_bytes) {
  return row_bytes == 128 ? t.stages : 2 * t.stages;
}

using KernelFn = void (*)(CUtensorMap, CUtensorMap, tma_detail::TmaConvParams);

// Epilogue kinds: plain, residual, fused pool (tiles with TileInfo::pool only).
enum Kind { kPlain = 0, kResidual = 1, kPooled = 2 };

template <int RB, int T, bool RES, bool POOL>
KernelFn kernel_instance() {
  constexpr TileInfo t = kTiles[T];
  constexpr bool kPool = POOL && t.pool;
  return tma_detail::conv_tma_kernel<t.bm, t.bn, stages_of(t, RB), 1, RES, kPool, RB>;
}
template <int RB, int T>
KernelFn kernel_kind(int kind) {
  return kind == kResidual ? kernel_instance<RB, T, true, false>()
         : kind == kPooled ? kernel_instance<RB, T, false, true>()
                           : kernel_instance<RB, T, false, false>();
}
// The instance of tile `tile` (index into kTiles) and epilogue `kind` with RB-byte k-tile rows.
template <int RB>
KernelFn kernel_of_rows(int tile, int kind) {
  static_assert(kTileCount == 7, "one case per tile");
  switch (tile) {
    case 0:
      return kernel_kind<RB, 0>(kind);
    case 1:
      return kernel_kind<RB, 1>(kind);
    case 2:
      return kernel_kind<RB, 2>(kind);
    case 3:
      return kernel_kind<RB, 3>(kind);
    case 4:
      return kernel_kind<RB, 4>(kind);
    case 5:
      return kernel_kind<RB, 5>(kind);
    default:
      return kernel_kind<RB, 6>(kind);
  }
}
// kernel_of_rows<64>, instantiated in tma_conv_k64.cu.
KernelFn kernel_of_rows64(int tile, int kind);

}  // namespace cnnrt::cuda::tma_f16
