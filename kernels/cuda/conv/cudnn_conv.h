// cuDNN convolution baseline (compiled only with CNNRT_WITH_CUDNN): NHWC fp16 tensors, fp32
// compute, tensor-op math; then bias(+ReLU) and the fused max-pool with our own kernels so it
// produces exactly what the fused conv node produces.  Comparison-only, never a default.
// No cuDNN types in this header: the cuDNN include path is private to the kernels library.
#pragma once

#ifdef CNNRT_WITH_CUDNN

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "kernels/cuda/conv/conv_shape.h"

namespace cnnrt::cuda {

// The per-batch decision, made once per context: cuDNN's algorithm and the workspace.
struct CudnnConvPlan {
  int algo = 0;                // cudnnConvolutionFwdAlgo_t
  size_t workspace_bytes = 0;  // pre-pool tensor (when pooling) + the algorithm's workspace
};

class CudnnConv {
 public:
  // groups == 1, or grouped with in_c and out_c multiples of 8 (channel padding would break the
  // group structure; cuDNN then sees the real channel counts); symmetric padding (cuDNN's
  // descriptor has one pad per axis); identity or ReLU (what the bias pass can apply).
  static bool supports(const ConvShape& shape);
  // weight [out_c, in_c/groups, kh, kw] fp32, bias [out_c] or nullptr.
  CudnnConv(const ConvShape& shape, const float* weight, const float* bias);
  ~CudnnConv();
  // cuDNN's heuristic choice for `batch` (host-side query, no GPU work): call once per context.
  CudnnConvPlan plan(int64_t batch) const;
  // Runs algorithm `algo` (a plan's); workspace: >= that plan's workspace_bytes for this batch.
  void forward(int algo, const void* x, void* y, int64_t batch, void* workspace,
               cudaStream_t stream) const;
  size_t weight_bytes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace cnnrt::cuda

#endif  // CNNRT_WITH_CUDNN
