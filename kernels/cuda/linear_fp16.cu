// fp16 fully-connected layers: GEMV for small batches, cuBLASLt GEMM with a fused epilogue.
//
// GEMV design (batch ≤ 8, weight-bandwidth bound: AlexNet fc6 is 75 MB of fp16 weights read
// once for a handful of input vectors):
//  * one warp owns R consecutive weight rows and walks the whole row with 16-byte loads
//    (lane l reads vectors l, l+32, ...), four iterations in flight per row so each warp keeps
//    R × 2 KB of loads outstanding — what Little's law asks for at ~4 TB/s over 132 SMs;
//  * weight loads bypass L1 (ld.global.nc.L1::no_allocate): they are used once, and L1 is
//    better spent on the input vectors, which every warp re-reads (they are ≤ 8 × 18 KB, L1/L2
//    resident), so they use ordinary cached loads instead of a shared-memory staging step that
//    would need block-wide barriers;
//  * R grows with the batch (1, 2, 4) so each input vector loaded feeds R rows: at batch 8 that
//    keeps the L1 traffic for x within L1 bandwidth while 4096 rows still make 1024 warps;
//  * fp32 accumulation, one warp-shuffle reduction per (row, sample), bias + ReLU fused.
//
// cuBLASLt design: column-major view of the row-major problem.  y[n][m] row-major is Dᵀ with
// D = [m × n] column-major, ld = rows_pad; D = op(A)·B with A = W stored as a [k × m]
// column-major matrix (our row-major [m][k]) and op = T, B = x as [k × n] column-major.  The bias
// vector has D's row count, which is exactly the per-feature bias the epilogue broadcasts.
// cuBLASLt requires the bias in the output type for fp16 outputs (cublasLt.h, BIAS_DATA_TYPE:
// "same type as the elements of output matrix (Dtype)"), so an fp16 copy of the bias is kept.
#include <cuda_fp16.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "cnnrt/error.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/linear_fp16.h"

namespace cnnrt::cuda {

// --- packing ---------------------------------------------------------------------------------

HostGemmWeights pack_linear_weights(const float* weight, const float* bias, int out_features,
                                    int in_features, const Shape& flattened_source) {
  if (out_features < 1 || in_features < 1 || weight == nullptr)
    throw Error("pack_linear_weights: empty weight");
  HostGemmWeights packed;
  packed.rows = out_features;
  packed.cols = in_features;
  packed.rows_pad = static_cast<int>(round_up8(out_features));
  packed.cols_pad = static_cast<int>(round_up8(in_features));
  packed.weight.assign(static_cast<size_t>(packed.rows_pad) * packed.cols_pad, 0.0f);
  packed.bias.assign(packed.rows_pad, 0.0f);
  if (bias != nullptr) std::copy(bias, bias + out_features, packed.bias.begin());

  const bool permute = flattened_source.size() == 3;
  if (permute && shape_elements(flattened_source) != in_features)
    throw Error("pack_linear_weights: in_features " + std::to_string(in_features) +
                " does not match the flattened shape " + shape_to_string(flattened_source));
  const int64_t channels = permute ? flattened_source[0] : 0;
  const int64_t height = permute ? flattened_source[1] : 0;
  const int64_t width = permute ? flattened_source[2] : 0;
  for (int64_t o = 0; o < out_features; ++o) {
    const float* src = weight + o * in_features;
    float* dst = packed.weight.data() + o * packed.cols_pad;
    if (!permute) {
      std::copy(src, src + in_features, dst);
      continue;
    }
    // PyTorch flattens (c, h, w); the NHWC flatten produces (h, w, c).
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t h = 0; h < height; ++h)
        for (int64_t w = 0; w < width; ++w)
          dst[(h * width + w) * channels + c] = src[(c * height + h) * width + w];
  }
  return packed;
}

GemmWeights::GemmWeights(const HostGemmWeights& host)
    : rows_pad_(host.rows_pad),
      cols_pad_(host.cols_pad),
      weight_(upload_as_fp16(host.weight)),
      bias_fp32_(upload_fp32(host.bias)),
      bias_fp16_(upload_as_fp16(host.bias)) {
  if (host.weight.size() != static_cast<size_t>(rows_pad_) * cols_pad_ ||
      host.bias.size() != static_cast<size_t>(rows_pad_) || rows_pad_ % 8 != 0 ||
      cols_pad_ % 8 != 0)
    throw Error("GemmWeights: inconsistent packed sizes");
}

// --- GEMV --------------------------------------------------------------------------------------

namespace {

constexpr int kGemvWarps = 4;  // warps per block: small blocks spread rows evenly over SMs
constexpr int kGemvUnroll = 4;

__device__ __forceinline__ uint4 load_streaming(const uint4* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
}

__device__ __forceinline__ void unpack8(const uint4& raw, float (&out)[8]) {
  const __half2* h2 = reinterpret_cast<const __half2*>(&raw);
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float2 f = __half22float2(h2[j]);
    out[2 * j] = f.x;
    out[2 * j + 1] = f.y;
  }
}

template <int kBatch, int kRows>
__device__ __forceinline__ void gemv_step(const uint4 (&w)[kRows], const uint4* x, int k_vectors,
                                          int v, float (&acc)[kRows][kBatch]) {
  float wf[kRows][8];
#pragma unroll
  for (int r = 0; r < kRows; ++r) unpack8(w[r], wf[r]);
#pragma unroll
  for (int b = 0; b < kBatch; ++b) {
    float xf[8];
    unpack8(x[static_cast<int64_t>(b) * k_vectors + v], xf);
#pragma unroll
    for (int r = 0; r < kRows; ++r)
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[r][b] = fmaf(wf[r][j], xf[j], acc[r][b]);
  }
}

// rows (a multiple of 8) is a multiple of kRows for kRows ∈ {1, 2, 4}: no row bound checks
// inside the loop.
template <int kBatch, int kRows>
__global__ void __launch_bounds__(kGemvWarps * 32)
    gemv_kernel(const uint4* __restrict__ weight, const float* __restrict__ bias,
                const uint4* __restrict__ x, __half* __restrict__ y, int rows, int k_vectors,
                bool relu) {
  const int lane = threadIdx.x & 31;
  const int row0 = (blockIdx.x * kGemvWarps + threadIdx.x / 32) * kRows;
  if (row0 >= rows) return;
  const uint4* w_rows = weight + static_cast<int64_t>(row0) * k_vectors;

  float acc[kRows][kBatch];
#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int b = 0; b < kBatch; ++b) acc[r][b] = 0.0f;

  int v = lane;
  // Main loop: issue all kGemvUnroll × kRows weight loads before any math.
  for (; v + 32 * (kGemvUnroll - 1) < k_vectors; v += 32 * kGemvUnroll) {
    uint4 w[kGemvUnroll][kRows];
#pragma unroll
    for (int u = 0; u < kGemvUnroll; ++u)
#pragma unroll
      for (int r = 0; r < kRows; ++r)
        w[u][r] = load_streaming(w_rows + static_cast<int64_t>(r) * k_vectors + v + 32 * u);
#pragma unroll
    for (int u = 0; u < kGemvUnroll; ++u) gemv_step<kBatch, kRows>(w[u], x, k_vectors, v + 32 * u, acc);
  }
  for (; v < k_vectors; v += 32) {
    uint4 w[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r)
      w[r] = load_streaming(w_rows + static_cast<int64_t>(r) * k_vectors + v);
    gemv_step<kBatch, kRows>(w, x, k_vectors, v, acc);
  }

#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      float sum = acc[r][b];
#pragma unroll
      for (int offset = 16; offset > 0; offset >>= 1)
        sum += __shfl_xor_sync(0xffffffffu, sum, offset);
      // Every lane holds the sum; spread the stores over lanes.
      if (lane == (r * kBatch + b) % 32) {
        float out = sum + bias[row0 + r];
        if (relu) out = (out > 0.0f || out != out) ? out : 0.0f;
        y[static_cast<int64_t>(b) * rows + row0 + r] = __float2half_rn(out);
      }
    }
}

template <int kBatch>
void launch_gemv(const GemmWeights& wts, bool relu, const void* x, void* y, cudaStream_t stream) {
  constexpr int kRows = kBatch <= 2 ? 1 : (kBatch <= 4 ? 2 : 4);
  const int rows = wts.rows_pad();
  const int warps = (rows + kRows - 1) / kRows;
  const int blocks = (warps + kGemvWarps - 1) / kGemvWarps;
  gemv_kernel<kBatch, kRows><<<blocks, kGemvWarps * 32, 0, stream>>>(
      static_cast<const uint4*>(wts.weight()), wts.bias_fp32(), static_cast<const uint4*>(x),
      static_cast<__half*>(y), rows, wts.cols_pad() / 8, relu);
  CNNRT_CUDA_CHECK_LAUNCH();
}

}  // namespace

void gemv_fp16(const GemmWeights& weights, bool relu, const void* x, void* y, int64_t batch,
               cudaStream_t stream) {
  if (x == y) throw Error("gemv_fp16: input and output must not alias");
  const auto* x_bytes = static_cast<const char*>(x);
  auto* y_bytes = static_cast<char*>(y);
  const size_t x_row = static_cast<size_t>(weights.cols_pad()) * sizeof(__half);
  const size_t y_row = static_cast<size_t>(weights.rows_pad()) * sizeof(__half);
  for (int64_t done = 0; done < batch; done += kGemvMaxBatch) {
    const int chunk = static_cast<int>(std::min<int64_t>(kGemvMaxBatch, batch - done));
    const void* xc = x_bytes + done * x_row;
    void* yc = y_bytes + done * y_row;
    switch (chunk) {
      case 1: launch_gemv<1>(weights, relu, xc, yc, stream); break;
      case 2: launch_gemv<2>(weights, relu, xc, yc, stream); break;
      case 3: launch_gemv<3>(weights, relu, xc, yc, stream); break;
      case 4: launch_gemv<4>(weights, relu, xc, yc, stream); break;
      case 5: launch_gemv<5>(weights, relu, xc, yc, stream); break;
      case 6: launch_gemv<6>(weights, relu, xc, yc, stream); break;
      case 7: launch_gemv<7>(weights, relu, xc, yc, stream); break;
      default: launch_gemv<8>(weights, relu, xc, yc, stream); break;
    }
  }
}

// --- cuBLASLt ----------------------------------------------------------------------------------

namespace {

struct LtPlan {
  cublasLtMatrixLayout_t b_layout = nullptr;  // x: [k × n] column-major
  cublasLtMatrixLayout_t d_layout = nullptr;  // y: [m × n] column-major
  cublasLtMatmulAlgo_t algo{};
};

// Alignment cuBLASLt may assume for x / y; arena offsets are 256-aligned, but a caller slicing a
// tensor (the im2col baseline's chunks) may hand in less, so both cases get their own plan.
uint32_t pointer_alignment(const void* p) {
  const auto address = reinterpret_cast<uintptr_t>(p);
  uint32_t alignment = 256;
  while (alignment > 1 && address % alignment != 0) alignment /= 2;
  return alignment;
}

}  // namespace

struct LtGemm::Impl {
  const GemmWeights& weights;
  bool relu = false;
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a_layout = nullptr;
  mutable std::mutex mutex;  // guards plans: an Engine's kernels are shared across contexts
  mutable std::map<std::tuple<int64_t, uint32_t, bool>, LtPlan> plans;

  Impl(const GemmWeights& w, bool r) : weights(w), relu(r) {}

  ~Impl() {
    for (auto& entry : plans) {
      cublasLtMatrixLayoutDestroy(entry.second.b_layout);
      cublasLtMatrixLayoutDestroy(entry.second.d_layout);
    }
    if (a_layout != nullptr) cublasLtMatrixLayoutDestroy(a_layout);
    if (desc != nullptr) cublasLtMatmulDescDestroy(desc);
    if (handle != nullptr) cublasLtDestroy(handle);
  }

  const LtPlan& plan(int64_t n, uint32_t alignment, bool with_workspace) const {
    std::lock_guard<std::mutex> lock(mutex);
    const auto key = std::make_tuple(n, alignment, with_workspace);
    auto found = plans.find(key);
    if (found != plans.end()) return found->second;

    const uint64_t m = weights.rows_pad(), k = weights.cols_pad();
    LtPlan p;
    cublasLtMatmulPreference_t pref = nullptr;
    try {
      CNNRT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b_layout, CUDA_R_16F, k, n, k));
      CNNRT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.d_layout, CUDA_R_16F, m, n, m));
      CNNRT_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
      const uint64_t workspace = with_workspace ? kWorkspaceBytes : 0;
      CNNRT_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
          pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof(workspace)));
      for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
        CNNRT_CUBLAS_CHECK(
            cublasLtMatmulPreferenceSetAttribute(pref, attr, &alignment, sizeof(alignment)));
      cublasLtMatmulHeuristicResult_t result{};
      int count = 0;
      CNNRT_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(handle, desc, a_layout, p.b_layout,
                                                        p.d_layout, p.d_layout, pref, 1, &result,
                                                        &count));
      if (count == 0)
        throw Error("cuBLASLt found no algorithm for an fp16 GEMM of m=" + std::to_string(m) +
                    " n=" + std::to_string(n) + " k=" + std::to_string(k));
      p.algo = result.algo;
      cublasLtMatmulPreferenceDestroy(pref);
    } catch (...) {
      if (pref != nullptr) cublasLtMatmulPreferenceDestroy(pref);
      if (p.b_layout != nullptr) cublasLtMatrixLayoutDestroy(p.b_layout);
      if (p.d_layout != nullptr) cublasLtMatrixLayoutDestroy(p.d_layout);
      throw;
    }
    return plans.emplace(key, p).first->second;
  }
};

LtGemm::LtGemm(const GemmWeights& weights, bool relu)
    : impl_(std::make_unique<Impl>(weights, relu)) {
  Impl& s = *impl_;
  CNNRT_CUBLAS_CHECK(cublasLtCreate(&s.handle));
  CNNRT_CUBLAS_CHECK(cublasLtMatmulDescCreate(&s.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t transpose = CUBLAS_OP_T, no_transpose = CUBLAS_OP_N;
  CNNRT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(s.desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                                    &transpose, sizeof(transpose)));
  CNNRT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(s.desc, CUBLASLT_MATMUL_DESC_TRANSB,
                                                    &no_transpose, sizeof(no_transpose)));
  const cublasLtEpilogue_t epilogue = relu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
  CNNRT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(s.desc, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                                    &epilogue, sizeof(epilogue)));
  const void* bias = weights.bias_fp16();
  CNNRT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(s.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                    &bias, sizeof(bias)));
  const int32_t bias_type = CUDA_R_16F;
  CNNRT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
      s.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type)));
  const uint64_t m = weights.rows_pad(), k = weights.cols_pad();
  CNNRT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&s.a_layout, CUDA_R_16F, k, m, k));
}

LtGemm::~LtGemm() = default;

void LtGemm::run(const void* x, void* y, int64_t n, void* workspace, size_t workspace_bytes,
                 cudaStream_t stream) const {
  if (n == 0) return;
  const bool with_workspace = workspace != nullptr && workspace_bytes >= kWorkspaceBytes;
  const uint32_t alignment = std::min(pointer_alignment(x), pointer_alignment(y));
  if (alignment < 16)
    throw Error("LtGemm: activations must be 16-byte aligned (padded fp16 layout)");
  const LtPlan& p = impl_->plan(n, alignment, with_workspace);
  const float alpha = 1.0f, beta = 0.0f;
  CNNRT_CUBLAS_CHECK(cublasLtMatmul(impl_->handle, impl_->desc, &alpha, impl_->weights.weight(),
                                    impl_->a_layout, x, p.b_layout, &beta, y, p.d_layout, y,
                                    p.d_layout, &p.algo, with_workspace ? workspace : nullptr,
                                    with_workspace ? kWorkspaceBytes : 0, stream));
}

}  // namespace cnnrt::cuda
