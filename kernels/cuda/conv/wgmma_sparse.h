// Hopper (sm_90a) 2:4 sparse implicit-GEMM fp16 convolution on sparse tensor cores
// (wgmma.mma_async.sp) — interface.  Design note and measurements: wgmma_sparse.cu,
// docs/SPARSITY.md.
//
// Serves the convs the dense wgmma kernel serves (groups 1, dilation 1, in_c % 8 == 0,
// out_c % 64 == 0, optional fused MaxPool, fused residual, any clamp) whose weight is 2:4 along
// the input channels at every kernel tap (docs/SPARSITY.md: the K order (kh, kw, c) of the NHWC
// implicit GEMM).  The weights are operand A (M = output channels), compressed to half of K
// with their metadata once at construction; run() never sees the dense weight.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "kernels/cuda/conv/conv_shape.h"

namespace cnnrt::cuda {

class ConvFp16Sparse24Impl;

struct ConvFp16Sparse24Plan {
  int variant = 0;     // index of the pool tiling (0 without a pool): a stable launch id
  std::string name;    // e.g. "wgmma_sp_192x128x128_s3_pool13x13"
  long long ctas = 0;  // CTAs the launch has at the planned batch
};

class ConvFp16Sparse24 {
 public:
  // The shape rule (no device query, no weight check): the dense wgmma kernel's.
  static bool supports(const ConvShape& shape);
  // Compute capability 9.0 with the sm_90a image loaded (the dense wgmma kernel's probe).
  static bool device_supported();

  // Checks that `weight` [out_c, in_c, kh, kw] is 2:4 along in_c at every tap (throws
  // cnnrt::Error naming `layer`, the output channel, the tap and the channels when not),
  // compresses it, builds the per-thread metadata and uploads both with the bias.
  ConvFp16Sparse24(const ConvShape& shape, const float* weight, const float* bias,
                   const std::string& layer);
  ~ConvFp16Sparse24();
  ConvFp16Sparse24(const ConvFp16Sparse24&) = delete;
  ConvFp16Sparse24& operator=(const ConvFp16Sparse24&) = delete;

  ConvFp16Sparse24Plan plan(int batch) const;  // pure arithmetic; once per context
  // Tests: the launch with a PH x PW pooled block per CTA instead of the cost model's; nothing
  // when no pool is fused or the block cannot run.
  std::optional<ConvFp16Sparse24Plan> plan_pool_block(int batch, int ph, int pw) const;
  // x: [batch, in_h, in_w, in_c] fp16 NHWC; residual: y's layout or null (shape.residual);
  // y: [batch, out_h, out_w, out_c].  Launches `variant` only; no workspace.
  void forward(int variant, const void* x, const void* residual, void* y, int batch,
               cudaStream_t stream) const;
  size_t weight_bytes() const;  // kept values + metadata + bias: what the kernel reads

 private:
  std::unique_ptr<ConvFp16Sparse24Impl> impl_;
};

}  // namespace cnnrt::cuda
