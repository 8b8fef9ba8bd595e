// Hopper (sm_90a) 2:4 sparse int8 convolution on the TMA mainloop (conv_int8_sparse24_tma) —
// interface.  Design notes atop tma_sparse_s8.cu (host) and tma_sparse_s8_kernel.cuh (device);
// docs/kernels/conv_int8_sparse_tma.md.
//
// Serves the int8 convs conv_int8_tma serves (tma_s8_serves: groups 1, dilation 1, channel
// stride % 64 == 0, kernel <= 64, stride 1-8, padding the im2col box expresses, any out_c with
// zero padding lanes; int8 NHWC/16 or fp32 NHWC/8 out) whose int8 weight is 2:4 along the input
// channels at every tap (docs/SPARSITY.md).  conv_s8.h's contract: bit for bit the integer
// reference (ref::conv2d_int8) on the same weights — a 2:4 conv on pruned weights is the dense
// conv on them.  No fused pool, no residual (the entry pools after it, as the int8 family does).
// The weights are operand A (M = output channels), compressed with their metadata once at
// construction; forward() never sees the dense weight.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/conv/conv_s8.h"
#include "kernels/cuda/conv/tma_s8.h"  // ConvS8TmaInput: the same im2col map

namespace cnnrt::cuda {

class ConvS8Sparse24TmaImpl;

struct ConvS8Sparse24TmaPlan {
  int variant = 0;      // tile index into ConvS8Sparse24Tma::tile_names()
  std::string name;     // e.g. "tma_sp_s8_128x256_k128_s5"
  long long units = 0;  // output tiles at the planned batch
  int ctas = 0;         // persistent CTAs (<= SMs)
};

class ConvS8Sparse24Tma {
 public:
  // Shape rule only (no device query, no weight check): tma_s8_serves(conv).
  static bool supports(const S8Conv& conv);
  // Compute capability 9.0 with the sm_90a image (conv_int8_tma's probe).
  static bool device_supported();
  // The tiles, output channels x output pixels ("128x256", "256x128").
  static const std::vector<std::string>& tile_names();

  // `conv`: the geometry and the epilogue's scalars (out_stride, float_output, lo / hi, float
  // bounds; its weight / bias / multiplier pointers are not read).  weight: the int8 weight
  // [out_c][in_c][kh][kw] (ref::Int8Layer::weight), bias: bias_q [out_c], multiplier: M[c] or
  // D[c] [out_c], all host memory.  Checks 2:4 along in_c at every tap (cnnrt::Error naming
  // `layer`, the output channel, the tap and the channels), compresses, packs the metadata in
  // the consumer threads' order, uploads, encodes the weight maps and checks the kernel images'
  // register count.  Throws cnnrt::Error when the shape is not supported or the device cannot
  // run the kernel.
  ConvS8Sparse24Tma(const S8Conv& conv, const int8_t* weight, const int32_t* bias,
                    const float* multiplier, const std::string& layer);
  ~ConvS8Sparse24Tma();
  ConvS8Sparse24Tma(const ConvS8Sparse24Tma&) = delete;
  ConvS8Sparse24Tma& operator=(const ConvS8Sparse24Tma&) = delete;

  ConvS8Sparse24TmaPlan plan(int batch) const;               // the wave model's tile
  ConvS8Sparse24TmaPlan plan(int batch, int variant) const;  // a pinned tile
  // conv_int8_tma's im2col map of x (boxes of 128 pixels x KB channels); encode once per (x,
  // batch) and keep it.
  ConvS8TmaInput encode_input(const void* x, int batch) const;
  void forward(int variant, const ConvS8TmaInput& input, void* y, cudaStream_t stream) const;
  void forward(int variant, const void* x, void* y, int batch, cudaStream_t stream) const {
    forward(variant, encode_input(x, batch), y, stream);
  }
  // Kept values + metadata + bias + multipliers: what the kernel reads.
  size_t weight_bytes() const;
  // Channels per k-tile (128 or 64): the design note's KB.
  int k_tile_channels() const;

 private:
  std::unique_ptr<ConvS8Sparse24TmaImpl> impl_;
};

}  // namespace cnnrt::cuda
