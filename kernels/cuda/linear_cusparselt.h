// cuSPARSELt 2:4 fp16 linear (compiled only with CNNRT_WITH_CUSPARSELT): the vendor library's
// structured-sparse GEMM on the same tensors as the fp16 linears, as the comparison baseline of
// the project's own 2:4 kernels (docs/SPARSITY.md).  Comparison-only, never a default.
//
// y[batch][pad8(out)] = act(x[batch][pad8(in)] · Wᵀ + b) in the CUDA backend layout
// (runtime/cuda/cuda_registry.h), i.e. D = W · Xᵀ with the weight W [out, in] as cuSPARSELt's
// structured operand A (row-major, op N: 2:4 along `in`, the K of the product; docs/SPARSITY.md
// "Which operand is sparse"), x as B (row-major [batch][in], op T), fp16 operands, fp32 compute,
// bias and ReLU in cuSPARSELt's epilogue.  Design note in the .cpp.
// No cuSPARSELt types in this header: its include folder is private to the kernels library.
#pragma once

#ifdef CNNRT_WITH_CUSPARSELT

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "graph/ir.h"

namespace cnnrt::cuda {

class LinearCusparseLt {
 public:
  struct Plan;  // cuSPARSELt's descriptors and plan for one batch (linear_cusparselt.cpp)

  // The per-batch decision, made once per context (plan()): run() only launches.
  struct Prepared {
    std::shared_ptr<const Plan> plan;
    size_t workspace_bytes = 0;  // staging buffers (see the .cpp) + cuSPARSELt's workspace
    std::string name;            // what plans and profiles print
    // cuSPARSELt's algorithm configuration (CUSPARSELT_MATMUL_ALG_CONFIG_ID) of the plan and the
    // largest one it offers for this problem; -1 for a plan without library state or where
    // cuSPARSELt does not report them.
    int config_id = -1, max_config_id = -1;
  };

  // What search() found: the configuration it kept and the workspace the plan now needs.
  struct SearchResult {
    size_t workspace_bytes = 0;        // staging + cuSPARSELt's workspace of the searched plan
    int config_id = -1, split_k = -1;  // -1: not reported by cuSPARSELt
  };

  // Shapes cuSPARSELt takes as given here: the fp16 structured matrix needs rows and columns
  // that are multiples of 16, and the padded layout has pad8(out) rows and pad8(in) columns
  // (no further padding fits in the backend's buffers).  Other shapes are refused, not padded.
  static bool supports(int in_features, int out_features);
  // "0.10.0": the library loaded at run time (cusparseLtGetProperty; no device needed).
  static std::string library_version();

  // weight [out, in] fp32 (PyTorch layout), 2:4 along `in` in that order; bias [out] or
  // nullptr.  flattened_source: the [C, H, W] an NHWC flatten feeding the layer flattened, or
  // {}: the backend hands such a layer its features in (h, w, c) order, which would break the
  // (c, h, w) groups, so run() first transposes them back (cublasLtMatrixTransform).  Checks the
  // 2:4 structure (Error naming the row and the group), converts to fp16, compresses once
  // (cusparseLtSpMMACompress2) and keeps only the compressed form.  Before compressing,
  // cuSPARSELt checks the fp16 weight in its own grouping (cusparseLtSpMMAPruneCheck on the
  // product's matmul descriptor); when it disagrees, the Error says where cuSPARSELt's own
  // pruning would change the weight.  Throws Error on an unsupported shape or a failed library
  // call (the function and its status).
  LinearCusparseLt(const float* weight, const float* bias, int out_features, int in_features,
                   bool relu, const Shape& flattened_source = {});
  ~LinearCusparseLt();
  LinearCusparseLt(const LinearCusparseLt&) = delete;
  LinearCusparseLt& operator=(const LinearCusparseLt&) = delete;

  // Descriptors, algorithm (cuSPARSELt's default) and workspace for `batch` rows: host calls
  // only, once per context.  x and y are assumed 16-byte aligned (arena tensors are 256).
  // buffers_hold_padded_batch: x and y hold round_up8(batch) rows, so no staging is needed for a
  // batch that is not a multiple of 8 (the kernel lab's buffers; an arena's do not).
  // config_id >= 0 (kernel lab): that algorithm configuration instead of the default one
  // (Error when above the plan's max_config_id, or when cuSPARSELt refuses it).
  Prepared plan(int64_t batch, bool buffers_hold_padded_batch = false, int config_id = -1) const;
  // workspace: at least the plan's workspace_bytes of device memory (nullptr when 0).
  void run(const Plan& plan, const void* x, void* y, void* workspace, cudaStream_t stream) const;
  // Kernel lab only (bench/cusparselt_gemm.cpp): cusparseLtMatmulSearch times every algorithm
  // configuration on these buffers and keeps the fastest in `plan` (it launches and
  // synchronises: never inside a context).  workspace: workspace_bytes of device memory, at
  // least the plan's workspace_bytes; the part past the staging buffers is handed to the search
  // (give it more than the default plan needs: it may try configurations that need more).  Throws
  // Error naming the call and its status when the search fails; the plan may then be left in
  // any state, so search a plan made for the purpose, not one still in use.
  SearchResult search(const Prepared& plan, const void* x, void* y, void* workspace,
                      size_t workspace_bytes, cudaStream_t stream) const;

  // Compressed weight + bias on the device.
  size_t weight_bytes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace cnnrt::cuda

#endif  // CNNRT_WITH_CUSPARSELT
