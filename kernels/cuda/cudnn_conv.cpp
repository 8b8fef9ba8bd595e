// cuDNN convolution baseline: what the vendor library does with the same NHWC fp16 tensors.
//
// Design: channel padding is handled by giving cuDNN the padded channel counts (pad8(C) input
// channels, pad8(OC) filters) with zero filter taps for the padding, so every tensor is a packed
// NHWC tensor — the layout cuDNN's tensor-core kernels want — and the padding lanes of the output
// come out zero by construction.  Grouped convolutions keep their real channel counts and are
// served only when C and OC are already multiples of 8.  The algorithm comes from cuDNN's
// heuristic (cudnnGetConvolutionForwardAlgorithm_v7, host-side only) per batch size, on first
// use, cached; the best-ranked algorithm whose workspace fits kMaxAlgoWorkspace is taken (Find,
// which times kernels and allocates, cannot run inside a captured run()).  Bias and ReLU follow
// with our per-channel affine kernel and a fused max-pool with our pool kernel, reading the
// pre-pool tensor from the workspace.  One cuDNN handle per layer, guarded by a mutex because
// cudnnSetStream mutates it and an Engine's kernels are shared across contexts.
#ifdef CNNRT_WITH_CUDNN

#include "kernels/cuda/cudnn_conv.h"

#include <cuda_fp16.h>
#include <cudnn.h>

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "cnnrt/error.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/elementwise_fp16.h"
#include "kernels/cuda/pool_fp16.h"

#define CNNRT_CUDNN_CHECK(call)                                                            \
  do {                                                                                     \
    cudnnStatus_t cnnrt_status_ = (call);                                                  \
    if (cnnrt_status_ != CUDNN_STATUS_SUCCESS)                                             \
      ::cnnrt::cuda::throw_cuda_error(#call, cudnnGetErrorString(cnnrt_status_), __FILE__, \
                                      __LINE__);                                           \
  } while (0)

namespace cnnrt::cuda {
namespace {

constexpr size_t kMaxAlgoWorkspace = size_t{256} << 20;
constexpr size_t kAlign = 256;
size_t align_up(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

struct CudnnPlan {
  cudnnTensorDescriptor_t x_desc = nullptr;
  cudnnTensorDescriptor_t y_desc = nullptr;
  cudnnConvolutionFwdAlgo_t algo{};
  size_t workspace = 0;
};

}  // namespace

struct CudnnConv::Impl {
  ConvProblem problem;
  int c_dev = 0, oc_dev = 0;  // channel counts cuDNN sees (padded unless grouped)
  cudnnHandle_t handle = nullptr;
  cudnnFilterDescriptor_t w_desc = nullptr;
  cudnnConvolutionDescriptor_t conv_desc = nullptr;
  DeviceArray weight, scale, shift;
  mutable std::mutex mutex;
  mutable std::map<int64_t, CudnnPlan> plans;

  ~Impl() {
    for (auto& entry : plans) {
      cudnnDestroyTensorDescriptor(entry.second.x_desc);
      cudnnDestroyTensorDescriptor(entry.second.y_desc);
    }
    if (conv_desc != nullptr) cudnnDestroyConvolutionDescriptor(conv_desc);
    if (w_desc != nullptr) cudnnDestroyFilterDescriptor(w_desc);
    if (handle != nullptr) cudnnDestroy(handle);
  }

  size_t pre_pool_bytes(int64_t batch) const {
    if (!problem.pool) return 0;
    return static_cast<size_t>(batch) * problem.conv_h * problem.conv_w * round_up8(problem.out_c) *
           sizeof(__half);
  }

  // Caller holds `mutex`.
  const CudnnPlan& plan_locked(int64_t batch) const {
    auto found = plans.find(batch);
    if (found != plans.end()) return found->second;
    CudnnPlan p;
    try {
      CNNRT_CUDNN_CHECK(cudnnCreateTensorDescriptor(&p.x_desc));
      CNNRT_CUDNN_CHECK(cudnnCreateTensorDescriptor(&p.y_desc));
      CNNRT_CUDNN_CHECK(cudnnSetTensor4dDescriptor(p.x_desc, CUDNN_TENSOR_NHWC, CUDNN_DATA_HALF,
                                                   static_cast<int>(batch), c_dev, problem.in_h,
                                                   problem.in_w));
      int n = 0, c = 0, h = 0, w = 0;
      CNNRT_CUDNN_CHECK(
          cudnnGetConvolution2dForwardOutputDim(conv_desc, p.x_desc, w_desc, &n, &c, &h, &w));
      if (c != oc_dev || h != problem.conv_h || w != problem.conv_w)
        throw Error("cudnn_conv: cuDNN output " + std::to_string(h) + "x" + std::to_string(w) +
                    " differs from the graph's " + std::to_string(problem.conv_h) + "x" +
                    std::to_string(problem.conv_w));
      CNNRT_CUDNN_CHECK(
          cudnnSetTensor4dDescriptor(p.y_desc, CUDNN_TENSOR_NHWC, CUDNN_DATA_HALF, n, c, h, w));
      int max_count = 0;
      CNNRT_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(handle, &max_count));
      std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(std::max(max_count, 1));
      int returned = 0;
      CNNRT_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(
          handle, p.x_desc, w_desc, conv_desc, p.y_desc, static_cast<int>(perf.size()), &returned,
          perf.data()));
      bool chosen = false;
      for (int i = 0; i < returned && !chosen; ++i) {
        if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > kMaxAlgoWorkspace) continue;
        size_t bytes = 0;
        if (cudnnGetConvolutionForwardWorkspaceSize(handle, p.x_desc, w_desc, conv_desc, p.y_desc,
                                                    perf[i].algo, &bytes) != CUDNN_STATUS_SUCCESS ||
            bytes > kMaxAlgoWorkspace)
          continue;
        p.algo = perf[i].algo;
        p.workspace = bytes;
        chosen = true;
      }
      if (!chosen) throw Error("cudnn_conv: cuDNN offers no algorithm within the workspace cap");
    } catch (...) {
      if (p.x_desc != nullptr) cudnnDestroyTensorDescriptor(p.x_desc);
      if (p.y_desc != nullptr) cudnnDestroyTensorDescriptor(p.y_desc);
      throw;
    }
    return plans.emplace(batch, p).first->second;
  }
};

bool CudnnConv::supports(const ConvProblem& problem) {
  if (problem.conv.groups == 1) return true;
  return problem.in_c % 8 == 0 && problem.out_c % 8 == 0 &&
         problem.in_c % problem.conv.groups == 0 && problem.out_c % problem.conv.groups == 0;
}

CudnnConv::CudnnConv(const ConvProblem& problem, const float* weight, const float* bias)
    : impl_(std::make_unique<Impl>()) {
  if (!supports(problem))
    throw Error("cudnn_conv: grouped convolution needs channel counts that are multiples of 8");
  Impl& s = *impl_;
  s.problem = problem;
  const ConvAttrs& a = problem.conv;
  const int groups = a.groups;
  s.c_dev = static_cast<int>(round_up8(problem.in_c));
  s.oc_dev = static_cast<int>(round_up8(problem.out_c));
  const int c_per_group = s.c_dev / groups, c_real_per_group = problem.in_c / groups;

  // Filter [oc_dev][kh][kw][c_per_group] (NHWC filter layout), zeros for padding.
  std::vector<float> packed(static_cast<size_t>(s.oc_dev) * a.kernel_h * a.kernel_w * c_per_group,
                            0.0f);
  for (int o = 0; o < problem.out_c; ++o)
    for (int ci = 0; ci < c_real_per_group; ++ci)
      for (int y = 0; y < a.kernel_h; ++y)
        for (int x = 0; x < a.kernel_w; ++x)
          packed[((static_cast<size_t>(o) * a.kernel_h + y) * a.kernel_w + x) * c_per_group + ci] =
              weight[((static_cast<size_t>(o) * c_real_per_group + ci) * a.kernel_h + y) *
                         a.kernel_w +
                     x];
  s.weight = upload_as_fp16(packed);
  std::vector<float> scale(s.oc_dev, 0.0f), shift(s.oc_dev, 0.0f);
  for (int o = 0; o < problem.out_c; ++o) {
    scale[o] = 1.0f;
    shift[o] = bias != nullptr ? bias[o] : 0.0f;
  }
  s.scale = upload_fp32(scale);
  s.shift = upload_fp32(shift);

  CNNRT_CUDNN_CHECK(cudnnCreate(&s.handle));
  CNNRT_CUDNN_CHECK(cudnnCreateFilterDescriptor(&s.w_desc));
  CNNRT_CUDNN_CHECK(cudnnSetFilter4dDescriptor(s.w_desc, CUDNN_DATA_HALF, CUDNN_TENSOR_NHWC,
                                               s.oc_dev, c_per_group, a.kernel_h, a.kernel_w));
  CNNRT_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&s.conv_desc));
  CNNRT_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(s.conv_desc, a.pad_h, a.pad_w, a.stride_h,
                                                    a.stride_w, a.dilation_h, a.dilation_w,
                                                    CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  CNNRT_CUDNN_CHECK(cudnnSetConvolutionGroupCount(s.conv_desc, groups));
  CNNRT_CUDNN_CHECK(cudnnSetConvolutionMathType(s.conv_desc, CUDNN_TENSOR_OP_MATH));
}

CudnnConv::~CudnnConv() = default;

size_t CudnnConv::workspace_bytes(int64_t batch) const {
  const Impl& s = *impl_;
  std::lock_guard<std::mutex> lock(s.mutex);
  const CudnnPlan& p = s.plan_locked(std::max<int64_t>(batch, 1));
  return align_up(s.pre_pool_bytes(batch)) + p.workspace;
}

void CudnnConv::forward(const void* x, void* y, int64_t batch, void* workspace,
                        cudaStream_t stream) const {
  const Impl& s = *impl_;
  const ConvProblem& pr = s.problem;
  if (batch == 0) return;
  std::lock_guard<std::mutex> lock(s.mutex);
  const CudnnPlan& p = s.plan_locked(batch);
  char* ws = static_cast<char*>(workspace);
  if (ws == nullptr && (pr.pool || p.workspace > 0)) throw Error("cudnn_conv: no workspace");
  void* conv_out = pr.pool ? static_cast<void*>(ws) : y;
  void* algo_ws = p.workspace > 0 ? ws + align_up(s.pre_pool_bytes(batch)) : nullptr;
  CNNRT_CUDNN_CHECK(cudnnSetStream(s.handle, stream));
  const float alpha = 1.0f, beta = 0.0f;
  CNNRT_CUDNN_CHECK(cudnnConvolutionForward(s.handle, &alpha, p.x_desc, x, s.w_desc, s.weight.get(),
                                            s.conv_desc, p.algo, algo_ws, p.workspace, &beta,
                                            p.y_desc, conv_out));
  channel_affine_fp16(conv_out, conv_out, batch * pr.conv_h * pr.conv_w, s.oc_dev,
                      static_cast<const float*>(s.scale.get()),
                      static_cast<const float*>(s.shift.get()), pr.relu, stream);
  if (pr.pool)
    maxpool_fp16(conv_out, y, batch, pr.out_c, pr.conv_h, pr.conv_w, *pr.pool, pr.out_h, pr.out_w,
                 stream);
}

size_t CudnnConv::weight_bytes() const {
  return impl_->weight.bytes() + impl_->scale.bytes() + impl_->shift.bytes();
}

}  // namespace cnnrt::cuda

#endif  // CNNRT_WITH_CUDNN
