// cuBLASLt's int8 GEMM for the int8 linear layer at batches above the GEMV's (docs/
// QUANTIZATION.md is the contract): int8 × int8 with int32 accumulation and an int32 output
// (CUBLAS_COMPUTE_32I: exact, so the library's internal order cannot change a bit), then the
// conv family's finishing pass adds the int32 bias and requantises / dequantises exactly as every
// int8 kernel does (conv_s8.h: finish_s8).  The layer is described by the same S8Conv as the
// GEMV and the tensor-core GEMM (weight rows of k_pad bytes; x rows of in_stride bytes).
//
// cuBLASLt's integer kernels have shape and alignment rules of their own; plan() asks its
// heuristic once per batch and returns nullptr when it offers nothing, so the caller keeps its
// own GEMM for that shape.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <memory>

#include "kernels/cuda/conv/conv_s8.h"

namespace cnnrt::cuda {

class LtGemmS8 {
 public:
  static constexpr size_t kWorkspaceBytes = size_t{4} << 20;  // cuBLASLt's own scratch
  struct Plan;
  explicit LtGemmS8(const S8Conv& linear);  // `linear`'s device arrays must outlive this object
  ~LtGemmS8();
  LtGemmS8(const LtGemmS8&) = delete;
  LtGemmS8& operator=(const LtGemmS8&) = delete;
  // The algorithm for `batch` rows, or nullptr when cuBLASLt has none (arena tensors are
  // 256-byte aligned, which the plan assumes).
  std::shared_ptr<const Plan> plan(int batch) const;
  // Bytes of device workspace run() needs at `batch`: the int32 product, then kWorkspaceBytes.
  size_t workspace_bytes(int batch) const;
  void run(const Plan& plan, const void* x, void* y, void* workspace, int batch,
           cudaStream_t stream) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace cnnrt::cuda
