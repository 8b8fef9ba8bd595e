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

#include "kernels/cuda/im2col_gemm.h"  // ConvProblem

namespace cnnrt::cuda {

class CudnnConv {
 public:
  // groups == 1, or grouped with in_c and out_c multiples of 8 (channel padding would break the
  // group structure; cuDNN then sees the real channel counts).
  static bool supports(const ConvProblem& problem);
  // weight [out_c, in_c/groups, kh, kw] fp32, bias [out_c] or nullptr.
  CudnnConv(const ConvProblem& problem, const float* weight, const float* bias);
  ~CudnnConv();
  // Pre-pool tensor (when pooling) + the chosen algorithm's workspace at this batch.  Picks and
  // caches the algorithm for `batch` (host-side heuristic query).
  size_t workspace_bytes(int64_t batch) const;
  void forward(const void* x, void* y, int64_t batch, void* workspace, cudaStream_t stream) const;
  size_t weight_bytes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace cnnrt::cuda

#endif  // CNNRT_WITH_CUDNN
