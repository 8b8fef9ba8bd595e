// Baseline convolution: im2col into the workspace, then one cuBLASLt GEMM with the bias(+ReLU)
// epilogue, then the fused max-pool when the node has one.  Comparison-only (`cnnrt profile
// --compare`): it shows what a straightforward GEMM lowering costs next to the fused implicit
// GEMM.  Also home of ConvProblem, the per-sample conv description both baselines share.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include "graph/ir.h"

namespace cnnrt::cuda {

// A (possibly fused) conv node, per sample.  conv_h/conv_w: conv output before the fused pool;
// out_h/out_w: the node's output.
struct ConvProblem {
  int in_c = 0, in_h = 0, in_w = 0;
  int out_c = 0, conv_h = 0, conv_w = 0, out_h = 0, out_w = 0;
  ConvAttrs conv;
  bool relu = false;
  std::optional<PoolAttrs> pool;
};
// From a conv node with inferred shapes; throws Error naming the layer when they are missing.
ConvProblem conv_problem(const Node& node);

class Im2colGemmConv {
 public:
  static bool supports(const ConvProblem& problem);  // groups == 1
  // weight [out_c, in_c, kh, kw] fp32, bias [out_c] or nullptr.
  Im2colGemmConv(const ConvProblem& problem, const float* weight, const float* bias);
  ~Im2colGemmConv();
  // Pre-pool tensor (when pooling) + one im2col chunk + the cuBLASLt workspace.
  size_t workspace_bytes(int64_t batch) const;
  // x: [batch, in_h, in_w, pad8(in_c)]; y: [batch, out_h, out_w, pad8(out_c)] fp16.
  void forward(const void* x, void* y, int64_t batch, void* workspace, cudaStream_t stream) const;
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
