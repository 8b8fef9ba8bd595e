// fp16 fully-connected layers: GEMV for small batches, cuBLASLt GEMM with a fused epilogue.
//
// GEMV design (batch ≤ 8, weight-bandwidth bound: AlexNet fc6 is 75 MB of fp16 weights read
// once for a handful of input vectors).  Time ≈ launch + one DRAM latency per *serial* round of
// loads a warp waits on + bytes / bandwidth, and the bandwidth term is only reached when the
// whole GPU keeps ~3 MB of loads in flight (Little's law: ~4.3 TB/s × ~0.7 µs), ~25 KB per SM.
//  * Previous kernel (one warp per 1/2/4 whole rows, 4 warps a block, 4 × 16-byte loads in
//    flight per row, H200 batch 1): fc6 4096 warps, 9 serial rounds → 22.1 µs (3.4 TB/s);
//    fc7 4096 warps, 4 rounds → 9.7–13 µs; fc8 only 1000 warps (7.6 per SM, ~15 KB in flight
//    per SM) each waiting 4 serial rounds → 5.8–8.5 µs, i.e. latency bound, 1.0–1.4 TB/s.
//  * Now: a block of 8 warps owns G row groups; each group's K is split over S = 8 / G warps
//    (S ∈ {1, 2, 4, 8}, chosen on the host from rows, k, batch and the SM count so the grid has
//    ≥ 24 warps per SM).  Warp s of a group reads the row's 512-byte chunks s, s+S, s+2S, ...
//    (lane l the l-th 16 bytes: coalesced), 8 / R chunks of each of its R rows in flight, i.e.
//    8 16-byte loads per thread at every batch (more pushed batch 5–8 past 128 registers and
//    one block per SM), the last partial round predicated instead of looped so a short slice
//    is one round, not several.
//    Per-warp sums go through shared memory; S partials + bias (+ReLU) become the output.
//  * Prediction (H200, batch 1): fc8 → split 4, 4000 warps, one round of loads per warp:
//    ≈ 3.5–4 µs (launch + ~1 latency + 2 µs of bytes); fc7 → split 1, 2 rounds: ≈ 9 µs;
//    fc6 → split 1, 5 rounds with twice the bytes in flight: ≈ 19.5–20 µs (~3.9 TB/s).  The
//    fixed ~2 µs launch + ramp cost is what keeps fc8 far from its 2 µs bandwidth time.
//  * Weight loads bypass L1 (ld.global.nc.L1::no_allocate): they are used once, and L1 is
//    better spent on the input vectors, which every warp re-reads.  The vectors stay on the
//    read-only L1 path rather than being staged in shared memory: at batch 8 × k 9216 they are
//    147 KB, more than a block could hold at useful occupancy, and since the weights never
//    allocate in L1 they hit there anyway.
//  * R grows with the batch (1, 2, 4) so each input vector loaded feeds R rows: at batch 8 that
//    keeps the L1 traffic for x within L1 bandwidth.
//  * fp32 accumulation, fp16 output, fp32 bias + ReLU fused; padded rows have zero weights and
//    bias, so they come out zero.  No allocation, no host sync: graph-capturable.
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
#include <string>
#include <tuple>
#include <type_traits>

#include "cnnrt/error.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/gemv_common.cuh"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/linear_fp16.h"
#include "kernels/cuda/pdl.cuh"

namespace cnnrt::cuda {

// --- device weights ----------------------------------------------------------------------

GemmWeights::GemmWeights(const HostGemmWeights& host)
    : rows_pad_(host.rows_pad),
      cols_pad_(host.cols_pad),
      weight_(upload_as_fp16(host.weight.data(), host.weight.size())),
      bias_fp32_(upload_fp32(host.bias)),
      bias_fp16_(upload_as_fp16(host.bias)) {
  if (host.weight.size() != static_cast<size_t>(rows_pad_) * cols_pad_ ||
      host.bias.size() != static_cast<size_t>(rows_pad_) || rows_pad_ % 8 != 0 ||
      cols_pad_ % 8 != 0)
    throw Error("GemmWeights: inconsistent packed sizes");
}

// --- GEMV --------------------------------------------------------------------------------------

namespace {

constexpr int kGemvBlockWarps = 8;  // warps per block; the S warps of a row group are in it
constexpr int kGemvMaxSplit = kGemvBlockWarps;
constexpr int kGemvTargetWarpsPerSm = 24;  // ≥ ~25 KB of loads in flight per SM, see above

// Rows per warp and 512-byte chunks in flight per row, by batch.
constexpr int gemv_rows_per_warp(int batch) { return batch <= 2 ? 1 : (batch <= 4 ? 2 : 4); }
constexpr int gemv_unroll(int rows) { return 8 / rows; }

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

// One round: kUnroll chunks (stride apart) of kRows rows, all loads issued before any math.
// kGuarded predicates each chunk on v < k_vectors (the last, partial round of a slice).
template <int kBatch, int kRows, int kUnroll, bool kGuarded>
__device__ __forceinline__ void gemv_round(const uint4* w_rows, const uint4* x, int k_vectors,
                                           int v, int stride, uint64_t policy,
                                           float (&acc)[kRows][kBatch]) {
  uint4 w[kUnroll][kRows];
#pragma unroll
  for (int u = 0; u < kUnroll; ++u)
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int idx = v + stride * u;
      w[u][r] = make_uint4(0u, 0u, 0u, 0u);
      if (!kGuarded || idx < k_vectors)
        w[u][r] = load_streaming(w_rows + static_cast<int64_t>(r) * k_vectors + idx, policy);
    }
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const int idx = v + stride * u;
    if (!kGuarded || idx < k_vectors) gemv_step<kBatch, kRows>(w[u], x, k_vectors, idx, acc);
  }
}

// Block: kGemvBlockWarps warps = (kGemvBlockWarps / split) row groups × split K slices; group g
// owns rows [row0, row0 + kRows).  rows (a multiple of 8) is a multiple of kRows ∈ {1, 2, 4},
// so a row group is wholly inside or wholly past the matrix.  Every warp reaches the barrier.
// Out: __half (a padded fp16 vector of rows values per sample, y_stride == rows) or float (the
// graph output as fp32 [batch, y_stride], y_stride = the real out features: the rows past it,
// padding, are not written).
template <int kBatch, typename Out>
__global__ void __launch_bounds__(kGemvBlockWarps * 32)
    gemv_kernel(const uint4* __restrict__ weight, const float* __restrict__ bias,
                const uint4* __restrict__ x, Out* __restrict__ y, int rows, int y_stride,
                int k_vectors, int split, bool relu, bool evict_first) {
  constexpr int kRows = gemv_rows_per_warp(kBatch);
  constexpr int kUnroll = gemv_unroll(kRows);
  constexpr int kOutputs = kRows * kBatch;  // ≤ 32: one lane per (row, sample) below
  __shared__ float partial[kGemvBlockWarps][kOutputs];

  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int groups = kGemvBlockWarps / split;
  const int slice = warp % split;
  const int row0 = (blockIdx.x * groups + warp / split) * kRows;
  // The warp's first round of weight chunks into L2 before the wait (pdl.cuh): one lane per
  // 128-byte line.
  if (row0 < rows && (lane & 7) == 0)
    for (int u = 0; u < kUnroll; ++u)
      for (int r = 0; r < kRows; ++r) {
        const int idx = slice * 32 + lane + 32 * split * u;
        if (idx < k_vectors) prefetch_l2(weight + static_cast<int64_t>(row0 + r) * k_vectors + idx);
      }
  pdl_wait();

  float acc[kRows][kBatch];
#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int b = 0; b < kBatch; ++b) acc[r][b] = 0.0f;

  if (row0 < rows) {
    const uint4* w_rows = weight + static_cast<int64_t>(row0) * k_vectors;
    const int stride = 32 * split;  // 16-byte vectors between this warp's consecutive chunks
    const uint64_t policy = stream_l2_policy(evict_first);
    int v = slice * 32 + lane;
    for (; v + stride * (kUnroll - 1) < k_vectors; v += stride * kUnroll)
      gemv_round<kBatch, kRows, kUnroll, false>(w_rows, x, k_vectors, v, stride, policy, acc);
    // Fewer than kUnroll chunks left for this lane: one predicated round.
    if (v < k_vectors)
      gemv_round<kBatch, kRows, kUnroll, true>(w_rows, x, k_vectors, v, stride, policy, acc);
  }

  store_warp_sums(acc, partial[warp], lane);
  __syncthreads();

  // Thread t finishes output (group t / kOutputs, row r, sample b): groups × kOutputs ≤ 256.
  const int t = threadIdx.x;
  if (t >= groups * kOutputs) return;
  const int group = t / kOutputs, i = t % kOutputs;
  const int row = (blockIdx.x * groups + group) * kRows + i / kBatch;
  if (row >= rows || row >= y_stride) return;
  float out = bias[row];
  for (int s = 0; s < split; ++s) out += partial[group * split + s][i];
  if (relu) out = (out > 0.0f || out != out) ? out : 0.0f;  // keeps NaN (a NaN input must show)
  Out* const at = y + static_cast<int64_t>(i % kBatch) * y_stride + row;
  if constexpr (std::is_same_v<Out, float>)
    *at = out;
  else
    *at = __float2half_rn(out);
}

template <int kBatch, typename Out>
void launch_gemv(const GemmWeights& wts, bool relu, const void* x, void* y, int y_stride, int split,
                 bool evict_first, cudaStream_t stream) {
  constexpr int kRows = gemv_rows_per_warp(kBatch);
  const int rows = wts.rows_pad();
  const int rows_per_block = kGemvBlockWarps / split * kRows;
  const int blocks = (rows + rows_per_block - 1) / rows_per_block;
  launch_kernel(gemv_kernel<kBatch, Out>, blocks, kGemvBlockWarps * 32, 0, stream,
                static_cast<const uint4*>(wts.weight()), wts.bias_fp32(),
                static_cast<const uint4*>(x), static_cast<Out*>(y), rows, y_stride,
                wts.cols_pad() / 8, split, relu, evict_first);
}

}  // namespace

int gemv_choose_split(int rows_pad, int cols_pad, int batch, int sm_count) {
  if (rows_pad < 1 || cols_pad < 1 || batch < 1 || batch > kGemvMaxBatch || sm_count < 1)
    throw Error("gemv_choose_split: invalid shape rows=" + std::to_string(rows_pad) +
                " cols=" + std::to_string(cols_pad) + " batch=" + std::to_string(batch));
  const int64_t row_warps = (rows_pad + gemv_rows_per_warp(batch) - 1) / gemv_rows_per_warp(batch);
  const int64_t chunks = (cols_pad / 8 + 31) / 32;  // 512-byte chunks per row
  const int64_t target = static_cast<int64_t>(sm_count) * kGemvTargetWarpsPerSm;
  int split = 1;
  while (split < kGemvMaxSplit && row_warps * split < target && split * 2 <= chunks) split *= 2;
  return split;
}

namespace {

// Both output forms: y_stride values per sample of type Out (see gemv_kernel).
template <typename Out>
void gemv_passes(const GemmWeights& weights, bool relu, const void* x, void* y, int64_t batch,
                 int y_stride, cudaStream_t stream, int split, bool evict_first, const char* what) {
  if (x == y) throw Error(std::string(what) + ": input and output must not alias");
  if (split != 0 && split != 1 && split != 2 && split != 4 && split != 8)
    throw Error(std::string(what) + ": split must be 0 (auto), 1, 2, 4 or 8, got " +
                std::to_string(split));
  if (y_stride < 1 || y_stride > weights.rows_pad())
    throw Error(std::string(what) + ": " + std::to_string(y_stride) +
                " outputs per sample, the weight has " + std::to_string(weights.rows_pad()));
  if (batch <= 0) return;
  const int sm_count = split == 0 ? current_sm_count() : 0;
  const auto* x_bytes = static_cast<const char*>(x);
  auto* y_bytes = static_cast<char*>(y);
  const size_t x_row = static_cast<size_t>(weights.cols_pad()) * sizeof(__half);
  const size_t y_row = static_cast<size_t>(y_stride) * sizeof(Out);
  for (int64_t done = 0; done < batch; done += kGemvMaxBatch) {
    const int chunk = static_cast<int>(std::min<int64_t>(kGemvMaxBatch, batch - done));
    const int s = split != 0
                      ? split
                      : gemv_choose_split(weights.rows_pad(), weights.cols_pad(), chunk, sm_count);
    const void* xc = x_bytes + done * x_row;
    void* yc = y_bytes + done * y_row;
    switch (chunk) {
      case 1:
        launch_gemv<1, Out>(weights, relu, xc, yc, y_stride, s, evict_first, stream);
        break;
      case 2:
        launch_gemv<2, Out>(weights, relu, xc, yc, y_stride, s, evict_first, stream);
        break;
      case 3:
        launch_gemv<3, Out>(weights, relu, xc, yc, y_stride, s, evict_first, stream);
        break;
      case 4:
        launch_gemv<4, Out>(weights, relu, xc, yc, y_stride, s, evict_first, stream);
        break;
      case 5:
        launch_gemv<5, Out>(weights, relu, xc, yc, y_stride, s, evict_first, stream);
        break;
      case 6:
        launch_gemv<6, Out>(weights, relu, xc, yc, y_stride, s, evict_first, stream);
        break;
      case 7:
        launch_gemv<7, Out>(weights, relu, xc, yc, y_stride, s, evict_first, stream);
        break;
      default:
        launch_gemv<8, Out>(weights, relu, xc, yc, y_stride, s, evict_first, stream);
        break;
    }
  }
}

}  // namespace

void gemv_fp16(const GemmWeights& weights, bool relu, const void* x, void* y, int64_t batch,
               cudaStream_t stream, int split, bool evict_first) {
  gemv_passes<__half>(weights, relu, x, y, batch, weights.rows_pad(), stream, split, evict_first,
                      "gemv_fp16");
}

void gemv_fp16_to_fp32(const GemmWeights& weights, bool relu, const void* x, float* y,
                       int64_t batch, int out_features, cudaStream_t stream, int split,
                       bool evict_first) {
  gemv_passes<float>(weights, relu, x, y, batch, out_features, stream, split, evict_first,
                     "gemv_fp16_to_fp32");
}

// --- cuBLASLt ----------------------------------------------------------------------------------

struct LtGemm::Plan {
  int64_t n = 0;
  uint32_t alignment = 0;
  cublasLtMatrixLayout_t b_layout = nullptr;  // x: [k × n] column-major
  cublasLtMatrixLayout_t d_layout = nullptr;  // y: [m × n] column-major
  cublasLtMatmulAlgo_t algo{};
  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    if (b_layout != nullptr) cublasLtMatrixLayoutDestroy(b_layout);
    if (d_layout != nullptr) cublasLtMatrixLayoutDestroy(d_layout);
  }
};

namespace {

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
  // Built while planning for a described target: no handle, and plan() picks no algorithm
  // (cuBLASLt's heuristic needs the device; the plan names the kernel only).
  bool plan_only = false;

  Impl(const GemmWeights& w, bool r) : weights(w), relu(r) {}

  ~Impl() {
    if (a_layout != nullptr) cublasLtMatrixLayoutDestroy(a_layout);
    if (desc != nullptr) cublasLtMatmulDescDestroy(desc);
    if (handle != nullptr) cublasLtDestroy(handle);
  }
};

LtGemm::LtGemm(const GemmWeights& weights, bool relu)
    : impl_(std::make_unique<Impl>(weights, relu)) {
  Impl& s = *impl_;
  s.plan_only = cnnrt::cuda::plan_only();
  if (s.plan_only) return;
  CNNRT_CUBLAS_CHECK(cublasLtCreate(&s.handle));
  CNNRT_CUBLAS_CHECK(cublasLtMatmulDescCreate(&s.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t transpose = CUBLAS_OP_T, no_transpose = CUBLAS_OP_N;
  CNNRT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(s.desc, CUBLASLT_MATMUL_DESC_TRANSA, &transpose,
                                                    sizeof(transpose)));
  CNNRT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(s.desc, CUBLASLT_MATMUL_DESC_TRANSB,
                                                    &no_transpose, sizeof(no_transpose)));
  const cublasLtEpilogue_t epilogue = relu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
  CNNRT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(s.desc, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                                    &epilogue, sizeof(epilogue)));
  const void* bias = weights.bias_fp16();
  CNNRT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(s.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                    &bias, sizeof(bias)));
  const int32_t bias_type = CUDA_R_16F;
  CNNRT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(s.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                                                    &bias_type, sizeof(bias_type)));
  const uint64_t m = weights.rows_pad(), k = weights.cols_pad();
  CNNRT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&s.a_layout, CUDA_R_16F, k, m, k));
}

LtGemm::~LtGemm() = default;

std::shared_ptr<const LtGemm::Plan> LtGemm::plan(int64_t n, uint32_t alignment) const {
  const Impl& s = *impl_;
  auto p = std::make_shared<Plan>();
  p->n = n;
  p->alignment = alignment;
  if (n == 0 || s.plan_only) return p;
  const uint64_t m = s.weights.rows_pad(), k = s.weights.cols_pad();
  cublasLtMatmulPreference_t pref = nullptr;
  try {
    CNNRT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->b_layout, CUDA_R_16F, k, n, k));
    CNNRT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->d_layout, CUDA_R_16F, m, n, m));
    CNNRT_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const uint64_t workspace = kWorkspaceBytes;
    CNNRT_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof(workspace)));
    for (auto attr :
         {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
          CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
      CNNRT_CUBLAS_CHECK(
          cublasLtMatmulPreferenceSetAttribute(pref, attr, &alignment, sizeof(alignment)));
    cublasLtMatmulHeuristicResult_t result{};
    int count = 0;
    CNNRT_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(s.handle, s.desc, s.a_layout, p->b_layout,
                                                      p->d_layout, p->d_layout, pref, 1, &result,
                                                      &count));
    if (count == 0)
      throw Error("cuBLASLt found no algorithm for an fp16 GEMM of m=" + std::to_string(m) +
                  " n=" + std::to_string(n) + " k=" + std::to_string(k));
    p->algo = result.algo;
  } catch (...) {
    if (pref != nullptr) cublasLtMatmulPreferenceDestroy(pref);
    throw;
  }
  cublasLtMatmulPreferenceDestroy(pref);
  return p;
}

void LtGemm::run(const Plan& p, const void* x, void* y, void* workspace,
                 cudaStream_t stream) const {
  if (p.n == 0) return;
  if (std::min(pointer_alignment(x), pointer_alignment(y)) < p.alignment)
    throw Error("LtGemm: activations are less aligned than the plan assumed (" +
                std::to_string(p.alignment) + " bytes)");
  if (workspace == nullptr) throw Error("LtGemm: run without its workspace");
  const float alpha = 1.0f, beta = 0.0f;
  CNNRT_CUBLAS_CHECK(cublasLtMatmul(impl_->handle, impl_->desc, &alpha, impl_->weights.weight(),
                                    impl_->a_layout, x, p.b_layout, &beta, y, p.d_layout, y,
                                    p.d_layout, &p.algo, workspace, kWorkspaceBytes, stream));
}

}  // namespace cnnrt::cuda
