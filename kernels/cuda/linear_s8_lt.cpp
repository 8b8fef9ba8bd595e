// cuBLASLt int8 GEMM + the exact int8 epilogue (design note in linear_s8_lt.h).
//
// Layouts (cuBLASLt is column-major): the weight [out][k_pad] row-major is a k_pad × out
// column-major matrix used transposed (op(A) = out × K, lda = k_pad); the activations
// [batch][in_stride] are in_stride × batch (op(B) = K × batch, ldb = in_stride); the int32
// product [batch][out_stride] is out × batch with ldd = out_stride.  K = in_stride (the padding
// lanes of x are zero, and so are the weight's columns there).  The "TN" form is the one
// cuBLASLt's integer kernels take.
#include "kernels/cuda/linear_s8_lt.h"

#include <cublasLt.h>

#include <string>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_traits.h"

namespace cnnrt::cuda {

struct LtGemmS8::Plan {
  int batch = 0;
  cublasLtMatrixLayout_t b_layout = nullptr;
  cublasLtMatrixLayout_t d_layout = nullptr;
  cublasLtMatmulAlgo_t algo{};
  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    if (b_layout != nullptr) cublasLtMatrixLayoutDestroy(b_layout);
    if (d_layout != nullptr) cublasLtMatrixLayoutDestroy(d_layout);
  }
};

struct LtGemmS8::Impl {
  S8Conv linear;
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a_layout = nullptr;
  // Planning for a described target (`cnnrt plan --target`, device_traits.h): no handle, and
  // every batch is assumed to have a kernel, as on the GPUs it describes for real layer shapes.
  bool plan_only = false;
  ~Impl() {
    if (a_layout != nullptr) cublasLtMatrixLayoutDestroy(a_layout);
    if (desc != nullptr) cublasLtMatmulDescDestroy(desc);
    if (handle != nullptr) cublasLtDestroy(handle);
  }
};

LtGemmS8::LtGemmS8(const S8Conv& linear) : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.linear = linear;
  s.plan_only = plan_only();
  if (s.plan_only) return;
  CNNRT_CUBLAS_CHECK(cublasLtCreate(&s.handle));
  CNNRT_CUBLAS_CHECK(cublasLtMatmulDescCreate(&s.desc, CUBLAS_COMPUTE_32I, CUDA_R_32I));
  const cublasOperation_t transpose = CUBLAS_OP_T, no_transpose = CUBLAS_OP_N;
  CNNRT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(s.desc, CUBLASLT_MATMUL_DESC_TRANSA, &transpose,
                                                    sizeof(transpose)));
  CNNRT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(s.desc, CUBLASLT_MATMUL_DESC_TRANSB,
                                                    &no_transpose, sizeof(no_transpose)));
  CNNRT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&s.a_layout, CUDA_R_8I, linear.in_stride,
                                                linear.out_c, linear.k_pad));
}

LtGemmS8::~LtGemmS8() = default;

size_t LtGemmS8::workspace_bytes(int batch) const {
  const size_t product = static_cast<size_t>(batch) * impl_->linear.out_stride * sizeof(int32_t);
  return (product + 255) / 256 * 256 + kWorkspaceBytes;
}

std::shared_ptr<const LtGemmS8::Plan> LtGemmS8::plan(int batch) const {
  const Impl& s = *impl_;
  auto p = std::make_shared<Plan>();
  p->batch = batch;
  if (s.plan_only) return p;
  cublasLtMatmulPreference_t pref = nullptr;
  try {
    CNNRT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->b_layout, CUDA_R_8I, s.linear.in_stride,
                                                  batch, s.linear.in_stride));
    CNNRT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->d_layout, CUDA_R_32I, s.linear.out_c, batch,
                                                  s.linear.out_stride));
    CNNRT_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const uint64_t workspace = kWorkspaceBytes;
    CNNRT_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof(workspace)));
    cublasLtMatmulHeuristicResult_t result{};
    int count = 0;
    const cublasStatus_t status =
        cublasLtMatmulAlgoGetHeuristic(s.handle, s.desc, s.a_layout, p->b_layout, p->d_layout,
                                       p->d_layout, pref, 1, &result, &count);
    cublasLtMatmulPreferenceDestroy(pref);
    pref = nullptr;
    // No integer kernel for this shape (or an unsupported combination): the caller's own GEMM.
    if (status != CUBLAS_STATUS_SUCCESS || count == 0) return nullptr;
    p->algo = result.algo;
  } catch (...) {
    if (pref != nullptr) cublasLtMatmulPreferenceDestroy(pref);
    throw;
  }
  return p;
}

void LtGemmS8::run(const Plan& p, const void* x, void* y, void* workspace, int batch,
                   cudaStream_t stream) const {
  const Impl& s = *impl_;
  if (batch != p.batch) throw Error("LtGemmS8: run at a batch the plan was not made for");
  if (workspace == nullptr) throw Error("LtGemmS8: run without its workspace");
  if (s.plan_only) throw Error("LtGemmS8: an engine planned for a described target cannot run");
  auto* product = static_cast<int32_t*>(workspace);
  char* scratch = static_cast<char*>(workspace) + (workspace_bytes(batch) - kWorkspaceBytes);
  const int32_t alpha = 1, beta = 0;
  CNNRT_CUBLAS_CHECK(cublasLtMatmul(s.handle, s.desc, &alpha, s.linear.weight, s.a_layout, x,
                                    p.b_layout, &beta, product, p.d_layout, product, p.d_layout,
                                    &p.algo, scratch, kWorkspaceBytes, stream));
  finish_s8(s.linear, product, batch, y, stream);
}

}  // namespace cnnrt::cuda
