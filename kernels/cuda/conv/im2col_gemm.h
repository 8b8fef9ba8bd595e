// Baseline convolution: im2col into the workspace, then one cuBLASLt GEMM with the bias(+ReLU)
// epilogue, then the fused max-pool when the node has one.  Comparison-only (`cnnrt profile
// --compare`): it shows what a straightforward GEMM lowering costs next to the fused implicit
// GEMM.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "kernels/cuda/conv/conv_shape.h"

namespace cnnrt::cuda {

class Im2colGemmConv {
 public:
  // groups == 1, identity or ReLU (the cuBLASLt epilogue), a valid shape.
  static bool supports(const ConvShape& shape);
  // weight [out_c, in_c, kh, kw] fp32, bias [out_c] or nullptr.
  Im2colGemmConv(const ConvShape& shape, const float* weight, const float* bias);
  ~Im2colGemmConv();
  // Pre-pool tensor (when pooling) + one im2col chunk + the cuBLASLt workspace, for `batch`
  // (a workspace planned for a batch serves every smaller one).  No other per-batch decision.
  size_t workspace_bytes(int64_t batch) const;
  // The cuBLASLt plans of `batch` (the full chunk and the last one), made once per context.
  std::shared_ptr<const void> plan(int64_t batch) const;
  // x: [batch, in_h, in_w, pad8(in_c)]; y: [batch, out_h, out_w, pad8(out_c)] fp16; plan: what
  // plan(batch) returned.
  void forward(const void* x, void* y, int64_t batch, void* workspace, const void* plan,
               cudaStream_t stream) const;
  size_t weight_bytes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// x: [batch, h, w, pad8(c)] → cols: [batch*oh*ow, kh*kw*pad8(c)] fp16 in (kh, kw, c) order, zeros
// where the window leaves the input.
void im2col_nhwc_fp16(const void* x, void* cols, int64_t batch, int c, int h, int w,
                      const ConvAttrs& conv, int oh, int ow, cudaStream_t stream);

}  // namespace cnnrt::cuda
