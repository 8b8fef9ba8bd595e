// Hopper (sm_90a) TMA-fed warp-specialised fp16 convolution (conv_fp16_tma) — interface.
//
// Serves convolutions with groups 1, dilation 1, in_c % 32 == 0 (the TMA im2col box of one
// k-tile row: 64 channels in 128 bytes where in_c % 64 == 0, else 32 in 64 bytes), out_c % 8 == 0,
// any kernel up to 64 x 64, stride 1-8, padding (asymmetric too) that the im2col bounding box can
// express, bias, any clamp activation (identity, ReLU, ReLU6, Clip) and the fused residual or a
// fused MaxPool (no residual with it; tiles of whole pooled rows, the design note atop
// tma_conv.cu).  NHWC fp16 in and out, channel stride = the channel count (in_c % 32 and out_c % 8
// leave no padding channels).  The design note is atop tma_conv.cu; the device code
// (tma_kernel.cuh) exists only in the sm_90a image.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/conv/conv_shape.h"
#include "kernels/cuda/conv/epilogue_params.h"

namespace cnnrt::cuda {

class ConvFp16TmaImpl;

// One launch: which tile runs (a stable index into ConvFp16Tma::tile_names()) and its grid.
// A fused MaxPool runs either "fused" (the pooled instance of a tile) or "staged": the unpooled
// instance of the best unpooled tile writes the pre-pool tensor into a workspace and the family's
// maxpool_fp16 pools it (variant = kStagedVariant + tile; workspace_bytes > 0).
struct ConvFp16TmaPlan {
  int variant = 0;             // tile index, or kStagedVariant + tile: a stable launch id
  std::string name;            // e.g. "tma_128x256_s4", "tma_128x192_s5+maxpool"
  long long units = 0;         // output tiles at the planned batch
  int ctas = 0;                // persistent CTAs (<= SMs)
  bool staged = false;         // conv into the workspace, then maxpool_fp16
  size_t workspace_bytes = 0;  // staged: the pre-pool tensor (batch x conv_h x conv_w x out_c)
  double estimated_us = 0;     // the cost model's time (tma_conv.cu: "Fused or staged")
};

// The im2col tensor map of one input buffer at one batch (host data, ~1 us to encode).
struct ConvFp16TmaInput {
  CUtensorMap map;
  const void* x = nullptr;
  int batch = 0;
};

class ConvFp16Tma {
 public:
  // Shape rule only (no device query): see the header comment.
  static bool supports(const ConvShape& shape);
  // ... and tile `tile` (index into tile_names()) serves it: a fused pool needs a tile with a
  // pooled instance whose tiling covers every window (tma_conv.cu's design note).
  static bool supports(const ConvShape& shape, int tile);
  // Compute capability 9.0 with the sm_90a image loaded (ConvFp16Wgmma's probe), or a described
  // sm_90a target when planning without a device.
  static bool device_supported();
  // The tiles ("128x128", "128x192", "128x256", "256x128", "256x96", "256x64", "128x64"),
  // indexed by ConvFp16TmaPlan::variant; each with 128- and 64-byte k-tile rows (the shape's
  // in_c picks which: plan names of 64-byte rows carry "_k64").
  static const std::vector<std::string>& tile_names();

  // Uploads weight [out_c, in_c, kh, kw] fp32 as fp16 KRSC and bias (nullable), encodes the
  // weight's tiled tensor map of every tile, checks the kernel images' register count.  Throws
  // cnnrt::Error when the shape is not supported or the device cannot run the kernel.
  // stored_in_c (0: shape.in_c): the channels the input tensor actually holds per pixel, a
  // multiple of 8 in the last k-tile row's channel block ((in_c - 64, in_c] where in_c % 64 ==
  // 0, (in_c - 32, in_c] otherwise); the TMA reads the missing ones as zeros (out-of-bounds
  // fill), so a 48-channel tensor feeds an in_c = 64 conv whose extra weights are zero without a
  // 64-channel copy (conv1's space-to-depth form).
  ConvFp16Tma(const ConvShape& shape, const float* weight, const float* bias, int stored_in_c = 0);
  ~ConvFp16Tma();
  ConvFp16Tma(const ConvFp16Tma&) = delete;
  ConvFp16Tma& operator=(const ConvFp16Tma&) = delete;

  // Launch ids at and above this are the staged form of tile (id - kStagedVariant).
  static constexpr int kStagedVariant = 16;

  // The default for `batch`: the tile with the least modelled time (waves x tile time, see
  // tma_conv.cu); with a fused pool, the cheaper of plan_fused(batch) and plan_staged(batch).
  ConvFp16TmaPlan plan(int batch) const;
  // A pinned tile (index into tile_names()), fused with the pool when the shape has one.
  ConvFp16TmaPlan plan(int batch, int variant) const;
  // Fused pool only (throws otherwise): the best fused tile / the staged form on the best
  // unpooled tile for the pre-pool shape.
  ConvFp16TmaPlan plan_fused(int batch) const;
  ConvFp16TmaPlan plan_staged(int batch) const;

  // The input's im2col map; encode once per (x, batch) and keep it (the entry caches it per
  // context).  Host only; checked.
  ConvFp16TmaInput encode_input(const void* x, int batch) const;

  // y = clamp(conv(x) + b (+ residual)) (then pooled): launches `variant` (a plan's) on
  // `stream`.  input.x is the x read; residual must be non-null exactly when the shape has one;
  // workspace: the plan's workspace_bytes (staged variants only).
  void forward(int variant, const ConvFp16TmaInput& input, const void* residual, void* y,
               cudaStream_t stream, void* workspace = nullptr) const;
  // Tests: encodes the map and launches.
  void forward(int variant, const void* x, const void* residual, void* y, int batch,
               cudaStream_t stream, void* workspace = nullptr) const {
    forward(variant, encode_input(x, batch), residual, y, stream, workspace);
  }
  size_t weight_bytes() const;

 private:
  std::unique_ptr<ConvFp16TmaImpl> impl_;
};

// What the fp16 TMA convs (conv_fp16_tma, conv_fp16_sparse24_tma) fill alike: the mainloop's conv
// geometry (tma_mainloop.cuh's duck-typed parameters) for k-tile rows of `row_elems` channels,
// out_c and the clamp.  Each family's parameter struct keeps its own layout.
template <class P>
void fill_tma_conv_geometry(const ConvShape& s, int row_elems, P& p) {
  const ConvAttrs& a = s.conv;
  p.out_c = s.out_c;
  p.conv_h = s.conv_h;
  p.conv_w = s.conv_w;
  p.sh = a.stride_h;
  p.sw = a.stride_w;
  p.pad_top = a.pad_h;
  p.pad_left = a.pad_w;
  p.kw = a.kernel_w;
  p.c_blocks = s.in_c / row_elems;
  p.k_tiles = a.kernel_h * a.kernel_w * p.c_blocks;
  p.act = epilogue_clamp_of(s);
}

// The fp16 TMA convs' im2col map of x (NHWC, stored_in_c channels; the channels past it up to
// the k-tile read as zeros): boxes of 128 output pixels x row_elems channels with the swizzle of
// row_bytes, corners in tensor-dimension order (W, H).  `kernel` names errors.  Host only.
ConvFp16TmaInput encode_fp16_im2col(const char* kernel, const ConvShape& s, int stored_in_c,
                                    int row_elems, int row_bytes, const void* x, int batch);

}  // namespace cnnrt::cuda
