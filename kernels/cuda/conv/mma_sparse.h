// 2:4 sparse implicit-GEMM fp16 convolution on warp-level sparse tensor cores (mma.sp, sm_80+:
// A100, L4 / L40S (sm_89), H100 (sm_90)) — interface.  Design note: mma_sparse_kernel.cuh;
// docs/SPARSITY.md.
//
// Serves every groups-1 conv (any in_c: channels are padded to 8 with zero weights; any out_c;
// any kernel, stride, padding, dilation) whose weight is 2:4 along the input channels at every
// kernel tap, with bias, any clamp (ReLU, ReLU6, Clip), the fused residual, and a MaxPool run
// staged (the conv into the workspace, then maxpool_fp16).  The weights are operand A
// (M = output channels), compressed to half of K with per-thread metadata once at construction;
// run() never sees the dense weight.  The Hopper kernels (wgmma_sparse.h, tma_sparse.h) are the
// faster choice on sm_90; this one is the sparse conv of sm_80 / sm_89.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <string>

#include "kernels/cuda/conv/conv_shape.h"

namespace cnnrt::cuda {

class ConvFp16Sparse24MmaImpl;

struct ConvFp16Sparse24MmaPlan {
  int variant = 0;             // one launch form per layer: always 0
  std::string name;            // "mma_sp_128x128x64_s4", "+maxpool" when the pool is staged
  long long ctas = 0;          // CTAs of the conv launch at the planned batch
  size_t workspace_bytes = 0;  // the pre-pool tensor of a pooled layer, else 0
};

class ConvFp16Sparse24Mma {
 public:
  // The shape rule (no device query, no weight check): a valid conv with groups 1; a pool only
  // without a residual and with padding at most half its window (what maxpool_fp16 serves).
  static bool supports(const ConvShape& shape);
  // Compute capability 8.0 or later (the device, or the described target of a plan).
  static bool device_supported();

  // Checks that `weight` [out_c, in_c, kh, kw] is 2:4 along in_c at every tap (throws
  // cnnrt::Error naming `layer`, the output channel, the tap and the channels when not),
  // compresses it, builds the per-thread metadata and uploads both with the bias.
  ConvFp16Sparse24Mma(const ConvShape& shape, const float* weight, const float* bias,
                      const std::string& layer);
  ~ConvFp16Sparse24Mma();
  ConvFp16Sparse24Mma(const ConvFp16Sparse24Mma&) = delete;
  ConvFp16Sparse24Mma& operator=(const ConvFp16Sparse24Mma&) = delete;

  ConvFp16Sparse24MmaPlan plan(int batch) const;  // pure arithmetic; once per context
  // x: [batch, in_h, in_w, pad8(in_c)] fp16 NHWC; residual: y's layout or null (shape.residual);
  // y: [batch, out_h, out_w, pad8(out_c)]; workspace: >= plan(batch).workspace_bytes (a pooled
  // layer), else may be null.  One or two kernels on `stream`.
  void forward(int variant, const void* x, const void* residual, void* y, int batch,
               cudaStream_t stream, void* workspace) const;
  size_t weight_bytes() const;  // kept values + metadata + bias: what the kernel reads

 private:
  std::unique_ptr<ConvFp16Sparse24MmaImpl> impl_;
};

}  // namespace cnnrt::cuda
