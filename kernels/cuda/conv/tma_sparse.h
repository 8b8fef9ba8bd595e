// Hopper (sm_90a) 2:4 sparse fp16 convolution on the TMA mainloop (conv_fp16_sparse24_tma) —
// interface.  Design note atop tma_sparse.cu (host) and tma_sparse_kernel.cuh (device);
// docs/kernels/conv_fp16_sparse_tma.md.
//
// Serves the convs conv_fp16_tma's mainloop can describe (groups 1, dilation 1, in_c % 64 == 0,
// out_c % 8 == 0, kernel <= 64 x 64, stride 1-8, padding (asymmetric too) within the im2col
// box) whose weight is 2:4 along the input channels at every tap (docs/SPARSITY.md), with bias,
// any clamp and the fused residual; a fused MaxPool runs staged (the conv into the step's
// workspace, then maxpool_fp16; no residual with a pool).  NHWC fp16 in and out, channel stride =
// the channel count.  The weights are operand A (M = output channels), compressed with their
// metadata once at construction; forward() never sees the dense weight.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/conv/conv_shape.h"
#include "kernels/cuda/conv/tma_conv.h"  // ConvFp16TmaInput: the same im2col map

namespace cnnrt::cuda {

class ConvFp16Sparse24TmaImpl;

// One launch: a tile (index into tile_names()) and its persistent grid; a layer with a fused pool
// always runs staged (the conv into the workspace, then maxpool_fp16).
struct ConvFp16Sparse24TmaPlan {
  int variant = 0;             // tile index: a stable launch id
  std::string name;            // e.g. "tma_sp_128x256_s5", "tma_sp_256x128_s6+maxpool"
  long long units = 0;         // output tiles at the planned batch
  int ctas = 0;                // persistent CTAs (<= SMs)
  bool staged = false;         // conv into the workspace, then maxpool_fp16
  size_t workspace_bytes = 0;  // staged: the pre-pool tensor (batch x conv_h x conv_w x out_c)
  double estimated_us = 0;     // the wave model's time (tma_sparse.cu)
};

class ConvFp16Sparse24Tma {
 public:
  // Shape rule only (no device query, no weight check): see the header comment.
  static bool supports(const ConvShape& shape);
  // Compute capability 9.0 with the sm_90a image loaded (conv_fp16_tma's probe).
  static bool device_supported();
  // The tiles, output channels x output pixels ("128x256", "256x128", "128x128"), indexed by
  // ConvFp16Sparse24TmaPlan::variant.
  static const std::vector<std::string>& tile_names();

  // Checks that `weight` [out_c, in_c, kh, kw] is 2:4 along in_c at every tap (throws
  // cnnrt::Error naming `layer`, the output channel, the tap and the channels when not),
  // compresses it, packs the metadata in the consumer threads' order, uploads both with the bias,
  // encodes the weight maps and checks the kernel images' register count.  Throws cnnrt::Error
  // when the shape is not supported or the device cannot run the kernel.
  ConvFp16Sparse24Tma(const ConvShape& shape, const float* weight, const float* bias,
                      const std::string& layer);
  ~ConvFp16Sparse24Tma();
  ConvFp16Sparse24Tma(const ConvFp16Sparse24Tma&) = delete;
  ConvFp16Sparse24Tma& operator=(const ConvFp16Sparse24Tma&) = delete;

  // The tile with the least modelled time at `batch`; a pinned tile.
  ConvFp16Sparse24TmaPlan plan(int batch) const;
  ConvFp16Sparse24TmaPlan plan(int batch, int variant) const;

  // The input's im2col map (conv_fp16_tma's); encode once per (x, batch) and keep it.
  ConvFp16TmaInput encode_input(const void* x, int batch) const;

  // y = clamp(conv(x) + b (+ residual)) (then pooled): launches tile `variant` on `stream`.
  // residual must be non-null exactly when the shape has one; workspace: the plan's
  // workspace_bytes (pooled shapes only).
  void forward(int variant, const ConvFp16TmaInput& input, const void* residual, void* y,
               cudaStream_t stream, void* workspace = nullptr) const;
  // Tests: encodes the map and launches.
  void forward(int variant, const void* x, const void* residual, void* y, int batch,
               cudaStream_t stream, void* workspace = nullptr) const {
    forward(variant, encode_input(x, batch), residual, y, stream, workspace);
  }
  // Kept values + metadata + bias: what the kernel reads.
  size_t weight_bytes() const;

 private:
  std::unique_ptr<ConvFp16Sparse24TmaImpl> impl_;
};

}  // namespace cnnrt::cuda
