// conv_int8_tma's instance table: its tiles (the shared tile shapes with int8's stages, and the
// cluster tiles) and the kernel instance of every (tile, k-tile row bytes, output).  Included by
// tma_s8.cu (the host side; the one-CTA instances are instantiated there) and
// tma_s8_cluster.cu (the cluster instances: their own translation unit, so the two sets compile
// in parallel).
#pragma once

#include <cuda.h>

#include "kernels/cuda/conv/tma_encode.h"
#include "kernels/cuda/conv/tma_s8_kernel.cuh"

namespace cnnrt::cuda::tma_s8_detail {

// A tile with the stages of each k-tile row (KB 64 halves the bytes of a stage, so twice the
// stages fill the same ring) and its cluster size along M: 1, or 2 for the cluster tiles (each
// CTA of the pair loads half of the weight tile and multicasts it to both: tma_s8.cu's design
// note).  A cluster tile's ring is its one-CTA twin's to the byte.
struct TileInfo : tma::TileShape {
  int stages128, stages64;
  int cl;
};
// The one-CTA tiles: the shared shapes (tma_encode.h) but fp16's pooled-conv2 tile 256x96; the
// BN = 64 tiles serve out_c <= 64 (conv1's space-to-depth form) without padding columns.  Then
// the cluster tiles: the three wide tiles of AlexNet conv2-conv5 in pairs.  Their speed is their
// twin's until conv_lab --s8 has measured them (docs/kernels/conv_int8_tma.md).
inline constexpr TileInfo kTiles[] = {
    {tma::kTileShapes[0], 7, 12, 1},          {tma::kTileShapes[1], 5, 10, 1},
    {tma::kTileShapes[2], 4, 8, 1},           {tma::kTileShapes[3], 4, 8, 1},
    {tma::kTileShapes[5], 5, 10, 1},          {tma::kTileShapes[6], 8, 16, 1},
    {{128, 192, 1.0, "128x192c2"}, 5, 10, 2}, {{128, 256, 1.0, "128x256c2"}, 4, 8, 2},
    {{256, 128, 0.95, "256x128c2"}, 4, 8, 2},
};
inline constexpr int kTileCount = sizeof(kTiles) / sizeof(kTiles[0]);
inline constexpr int kFirstClusterTile = 6;  // kTiles[kFirstClusterTile..] have cl 2

using KernelFn = void (*)(CUtensorMap, CUtensorMap, TmaS8Params);

template <int T, int KB, bool F>
KernelFn instance() {
  constexpr TileInfo t = kTiles[T];
  return conv_tma_s8_kernel < t.bm, t.bn, KB == 128 ? t.stages128 : t.stages64, KB, F, t.cl > ;
}
template <int T>
KernelFn instance_of(int kb, bool float_out) {
  if (kb == 128) return float_out ? instance<T, 128, true>() : instance<T, 128, false>();
  return float_out ? instance<T, 64, true>() : instance<T, 64, false>();
}
// The cluster tiles' instances (tma_s8_cluster.cu): tile kFirstClusterTile + i.
KernelFn cluster_kernel_of(int tile, int kb, bool float_out);

}  // namespace cnnrt::cuda::tma_s8_detail
