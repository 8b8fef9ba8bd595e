// Hopper (sm_90a) TMA-fed warp-specialised int8 convolution (conv_int8_tma) — interface.
//
// The int8 instance of conv_fp16_tma's mainloop (tma_kernel.cuh): TMA im2col loads of the int8
// NHWC/16 activations, TMA tiled loads of the [out_c][k_pad] int8 weight rows conv_s8_igemm /
// conv_s8_wgmma read, wgmma m64nNk32 s8 with int32 accumulators, the int8 family's epilogue
// (conv_s8.h's contract: bit for bit the integer reference).  Serves tma_s8_serves(conv): groups
// 1, dilation 1, channel stride a multiple of 64 (64-byte k-tiles where it is not a multiple of
// 128), kernel <= 64, stride 1-8, padding the im2col bounding box expresses (the bottom/right
// padding is whatever out_h/out_w imply: TF-SAME included), any out_c (padding lanes written as
// zeros); int8 NHWC/16 or fp32 NHWC/8 out.  A max-pool after the conv (given at construction)
// runs fused with it on int8 outputs where a tile's pooled instance and the cost model say so
// (plan(batch): fused or staged, tma_s8.cu's design note); staged, the caller pools the conv's
// output (the registry entry: maxpool_nhwc_s8).  No split-K: the entry falls back to
// conv_s8_igemm at batches that leave SMs idle.  The design note is atop tma_s8.cu.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/cuda/conv/conv_s8.h"

namespace cnnrt::cuda {

class ConvS8TmaImpl;

// One launch: which tile runs and its grid.  With a max-pool the launch is either fused (the
// tile's pooled instance writes the pooled tensor: variant = ConvS8Tma::kFusedVariant + tile, the
// name ends in "_fusedpool") or the conv alone (variant = tile), after which the caller pools.
struct ConvS8TmaPlan {
  int variant = 0;          // tile index into ConvS8Tma::tile_names(), or kFusedVariant + tile
  std::string name;         // e.g. "tma_s8_128x256_k128_s4", "tma_s8_256x128_k128_s4_fusedpool"
  long long units = 0;      // output tiles at the planned batch
  int ctas = 0;             // persistent CTAs (<= SMs)
  bool fused_pool = false;  // y is the pooled tensor: no pool pass after it
  double estimated_us = 0;  // the wave model's time (staged: the pool pass included)
};

// The im2col tensor map of one input buffer at one batch (host data, ~1 us to encode).
struct ConvS8TmaInput {
  CUtensorMap map;
  CUtensorMap map192;  // boxes of 192 pixels: the 192x192 tile's (conv_int8_tma only)
  const void* x = nullptr;
  int batch = 0;
};

bool tma_s8_serves(const S8Conv& conv);
// conv_int8_tma's input map for `batch` images: boxes of box_pixels (128, or 192 for the 192x192
// tile) x kb channels, the kb-byte swizzle.  The 2:4 int8 kernel reads the 128-pixel map as its B
// operand, so both encode it here.
CUtensorMap tma_s8_input_map(const char* kernel, const S8Conv& conv, const void* x, int batch,
                             int kb, int box_pixels = 128);

class ConvS8Tma {
 public:
  // Compute capability 9.0 with the sm_90a image (wgmma_s8_device_supported()).
  static bool device_supported();
  // "128x128", "128x192", "128x256", "256x128", "256x64", "128x64", "192x192".
  static const std::vector<std::string>& tile_names();

  // Whether pinned tile `tile` runs `pool` fused after `conv` (int8 output, the default k-tile
  // rows): it has a pooled instance and its pooled tiling covers every window (no device query).
  static bool tile_fuses_pool(const S8Conv& conv, const NhwcPool& pool, int tile);

  // Whether the int8 entry runs this kernel at batches whose tiles leave SMs idle too, rather
  // than the mma.sync split-K GEMM (conv_s8_igemm): where one unit's K, kh·kw·in_stride, is at
  // most kSmallBatchMaxK bytes.  A short K is a short serial chain per tile, which the smallest
  // tiles (the wave model's pick at such batches: 128x64) finish sooner than split-K's slices
  // and their reduction; a long one is what split-K cuts.  Measured at batch 1 (H200, `profile
  // --compare`, docs/PERFORMANCE.md run 49): AlexNet conv2 (1600 bytes), conv3 (1728) and conv5
  // (2304) 1.4-2.3 us faster on their TMA plans than on split-K, conv4 (3456) 1.0 us slower.
  static constexpr int kSmallBatchMaxK = 2560;
  static bool runs_small_batches(const S8Conv& conv);

  // `conv` describes the layer with its weight, bias and multipliers already on the device (the
  // int8 entry's upload: rows of k_pad bytes, k_pad a multiple of 64); they must outlive this.
  // Encodes the weight maps, checks the kernel images' register count.  Throws cnnrt::Error.
  // k_bytes: the k-tile row, 0 for the default (128 where the channel stride is a multiple of
  // 128, else two 64-byte blocks); 64 forces the 64-byte rows on any stride (conv_lab --s8 times
  // both; no pooled instance has them).  pool: the max-pool after the conv (pre-pool extent =
  // conv.out_h x out_w), which int8 outputs may run fused.
  explicit ConvS8Tma(const S8Conv& conv, int k_bytes = 0,
                     const std::optional<NhwcPool>& pool = std::nullopt);
  ~ConvS8Tma();
  ConvS8Tma(const ConvS8Tma&) = delete;
  ConvS8Tma& operator=(const ConvS8Tma&) = delete;

  // Launch ids at and above this are the fused-pool instance of tile (id - kFusedVariant).
  static constexpr int kFusedVariant = 16;
  static bool is_fused(int variant) { return variant >= kFusedVariant; }

  // The default for `batch`: the wave model's tile; with a pool it can fuse, the cheaper in
  // modelled time of plan_fused(batch) and plan_staged(batch).
  ConvS8TmaPlan plan(int batch) const;
  // A pinned tile (index into tile_names()): fused with the pool where the tile can fuse it
  // (tile_fuses_pool and int8 output), else the conv alone.
  ConvS8TmaPlan plan(int batch, int variant) const;
  // With a pool only (throws otherwise): the best fused tile (plan_fused also throws where no
  // tile fuses the pool), and the staged form: the default tile's conv alone, its estimate with
  // the pool pass (tma::staged_pool_seconds) the caller runs after it.
  ConvS8TmaPlan plan_fused(int batch) const;
  ConvS8TmaPlan plan_staged(int batch) const;
  // Whether some tile fuses the pool (int8 output and a pool given).
  bool fuses_pool() const;

  ConvS8TmaInput encode_input(const void* x, int batch) const;
  // y: the conv's output, or the pooled tensor where `variant` is fused.
  void forward(int variant, const ConvS8TmaInput& input, void* y, cudaStream_t stream) const;
  void forward(int variant, const void* x, void* y, int batch, cudaStream_t stream) const {
    forward(variant, encode_input(x, batch), y, stream);
  }

 private:
  std::unique_ptr<ConvS8TmaImpl> impl_;
};

}  // namespace cnnrt::cuda
