// fp16 fully-connected layers: a batch-≤8 GEMV and a cuBLASLt GEMM with the
// bias(+ReLU) epilogue.  Also the GEMM engine of the im2col convolution baseline, which is the
// same "y[n][m] = x[n][k] · W[m][k]ᵀ + b" product with n = output pixels.
//
// Layout: x [n][cols_pad] fp16, y [n][rows_pad] fp16 (the CUDA backend's padded vectors, see
// runtime/cuda/cuda_registry.h).  Rows beyond the real outputs carry zero weights and zero bias,
// so the padded output lanes come out as zeros without a separate pass.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "graph/ir.h"
#include "kernels/cuda/elementwise_fp16.h"
#include "kernels/cuda/linear_pack.h"

namespace cnnrt::cuda {

// The packed weights on the device: fp16 matrix, fp32 bias (GEMV) and fp16 bias (cuBLASLt's
// epilogue reads bias in the output type for fp16 outputs).
class GemmWeights {
 public:
  explicit GemmWeights(const HostGemmWeights& host);
  // The same layout and bytes, packed and rounded to fp16 in one pass over the graph's fp32
  // weight on the host's cores (linear_pack_fp16.cpp): the fast path the fp16 entries use.
  explicit GemmWeights(const LinearWeightRefs& refs);
  int rows_pad() const { return rows_pad_; }
  int cols_pad() const { return cols_pad_; }
  const void* weight() const { return weight_.get(); }
  size_t weight_matrix_bytes() const { return weight_.bytes(); }  // rows_pad x cols_pad fp16
  const float* bias_fp32() const { return static_cast<const float*>(bias_fp32_.get()); }
  const void* bias_fp16() const { return bias_fp16_.get(); }
  size_t bytes() const { return weight_.bytes() + bias_fp32_.bytes() + bias_fp16_.bytes(); }

 private:
  int rows_pad_ = 0, cols_pad_ = 0;
  DeviceArray weight_, bias_fp32_, bias_fp16_;
};

// Batch sizes the GEMV serves in one pass.  Up to 8 input vectors fit in registers next to the
// streamed weight rows; above that each weight load feeds enough math that a tensor-core GEMM
// (cuBLASLt) wins, so the default linear kernel switches there.
constexpr int kGemvMaxBatch = 8;

// y = x · Wᵀ + b (ReLU when `relu`).  Any batch: batches above kGemvMaxBatch run as several
// passes of at most kGemvMaxBatch (correct but slower than the GEMM; comparison use only).
// x and y must not alias.  `split` is how many warps share one row's K (1, 2, 4 or 8); 0 lets
// gemv_choose_split pick it from the shape and the current device's SM count (tests force each
// value to cover every reduction path).  Throws Error on any other split.  evict_first: the
// weight's loads go first out of L2 (KernelArgs::stream_evict_first).
void gemv_fp16(const GemmWeights& weights, bool relu, const void* x, void* y, int64_t batch,
               cudaStream_t stream, int split = 0, bool evict_first = false);

// The same product written as the graph output: y [batch, out_features] fp32 (dense, the rows of
// the padded weight past out_features not written), so a network's last linear layer needs no
// conversion pass after it.  Same split rule and errors; out_features in 1..rows_pad.
void gemv_fp16_to_fp32(const GemmWeights& weights, bool relu, const void* x, float* y,
                       int64_t batch, int out_features, cudaStream_t stream, int split = 0,
                       bool evict_first = false);

// The split the GEMV uses for one pass of `batch` (1..kGemvMaxBatch) vectors over a
// [rows_pad][cols_pad] weight on `sm_count` SMs: the smallest power of two ≤ 8 that gives the
// grid enough warps to keep DRAM busy, never more than the row has 512-byte chunks.
int gemv_choose_split(int rows_pad, int cols_pad, int batch, int sm_count);

// cuBLASLt fp16 GEMM, fp32 compute, bias(+ReLU) epilogue.  The matrix layouts and cuBLASLt's
// heuristic algorithm for one n are a Plan, made once per context (host calls only: never in
// run(), no cache, no lock); run() only launches, never allocates or synchronises, and can be
// captured in a CUDA graph.
class LtGemm {
 public:
  static constexpr size_t kWorkspaceBytes = size_t{8} << 20;
  struct Plan;  // layouts + algorithm for one n and pointer alignment (linear_fp16.cu)
  LtGemm(const GemmWeights& weights, bool relu);  // `weights` must outlive this object
  ~LtGemm();
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;
  // For n columns (batch rows) with x and y aligned to `alignment` bytes (a power of two, 16 to
  // 256; arena tensors are 256-aligned).  Throws Error when cuBLASLt has no algorithm.
  std::shared_ptr<const Plan> plan(int64_t n, uint32_t alignment) const;
  // workspace: at least kWorkspaceBytes bytes of device memory.  Throws Error when x or y is
  // less aligned than the plan assumed, or there is no workspace.
  void run(const Plan& plan, const void* x, void* y, void* workspace, cudaStream_t stream) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace cnnrt::cuda
