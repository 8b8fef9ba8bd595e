// conv_int8_tma's cluster instances (tiles of two CTAs along M that share the weight tile by TMA
// multicast: tma_s8.cu's design note), one translation unit of their own so they compile beside
// the one-CTA instances in tma_s8.cu.
#include "kernels/cuda/conv/tma_s8_instances.cuh"

namespace cnnrt::cuda::tma_s8_detail {

static_assert(kTileCount - kFirstClusterTile == 3, "one case per cluster tile");
static_assert(kTiles[kFirstClusterTile].cl == 2 && kTiles[kTileCount - 1].cl == 2 &&
                  kTiles[kFirstClusterTile - 1].cl == 1,
              "the cluster tiles close the table");

KernelFn cluster_kernel_of(int tile, int kb, bool float_out) {
  switch (tile - kFirstClusterTile) {
    case 0:
      return instance_of<kFirstClusterTile>(kb, float_out);
    case 1:
      return instance_of<kFirstClusterTile + 1>(kb, float_out);
    default:
      return instance_of<kFirstClusterTile + 2>(kb, float_out);
  }
}

}  // namespace cnnrt::cuda::tma_s8_detail
