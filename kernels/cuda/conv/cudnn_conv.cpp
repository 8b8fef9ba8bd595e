// cuDNN convolution baseline: what the vendor library does with the same NHWC fp16 tensors.
//
// Design: channel padding is handled by giving cuDNN the padded channel counts (pad8(C) input
// channels, pad8(OC) filters) with zero filter taps for the padding, so every tensor is a packed
// NHWC tensor — the layout cuDNN's tensor-core kernels want — and the padding lanes of the output
// come out zero by construction.  Grouped convolutions keep their real channel counts and are
// served only when C and OC are already multiples of 8.  The algorithm comes from cuDNN's
// heuristic (cudnnGetConvolutionForwardAlgorithm_v7, host-side only) in plan(batch), once per
// context; the best-ranked algorithm whose workspace fits kMaxAlgoWorkspace is taken (Find,
// which times kernels and allocates, cannot run inside a captured run()).  forward() sets up the
// batch's two tensor descriptors (host-only calls) and runs the planned algorithm.  Bias and ReLU
// follow with our per-channel affine kernel and a fused max-pool with our pool kernel, reading
// the pre-pool tensor from the workspace.  One cuDNN handle per layer; cudnnSetStream mutates
// it and an Engine's kernels are shared across contexts, so its use is serialised by a mutex
// (the handle's thread safety, not a cached decision).
#ifdef CNNRT_WITH_CUDNN

#include "kernels/cuda/conv/cudnn_conv.h"

#include <cuda_fp16.h>
#include <cudnn.h>

#include <algorithm>
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

// The x and y descriptors of one batch (host-only objects), destroyed with the holder.
struct BatchDescriptors {
  cudnnTensorDescriptor_t x = nullptr;
  cudnnTensorDescriptor_t y = nullptr;
  BatchDescriptors() = default;
  BatchDescriptors(const BatchDescriptors&) = delete;
  BatchDescriptors& operator=(const BatchDescriptors&) = delete;
  ~BatchDescriptors() {
    if (x != nullptr) cudnnDestroyTensorDescriptor(x);
    if (y != nullptr) cudnnDestroyTensorDescriptor(y);
  }
};

}  // namespace

struct CudnnConv::Impl {
  ConvShape shape;
  int c_dev = 0, oc_dev = 0;  // channel counts cuDNN sees (padded unless grouped)
  cudnnHandle_t handle = nullptr;
  cudnnFilterDescriptor_t w_desc = nullptr;
  cudnnConvolutionDescriptor_t conv_desc = nullptr;
  DeviceArray weight, scale, shift;
  mutable std::mutex handle_mutex;  // cudnnSetStream + cudnnConvolutionForward, see the note

  ~Impl() {
    if (conv_desc != nullptr) cudnnDestroyConvolutionDescriptor(conv_desc);
    if (w_desc != nullptr) cudnnDestroyFilterDescriptor(w_desc);
    if (handle != nullptr) cudnnDestroy(handle);
  }

  size_t pre_pool_bytes(int64_t batch) const {
    if (!shape.pool) return 0;
    return static_cast<size_t>(batch) * shape.conv_h * shape.conv_w * round_up8(shape.out_c) *
           sizeof(__half);
  }

  // The batch's descriptors; checks cuDNN's output extent against the graph's.
  void describe(int64_t batch, BatchDescriptors& d) const {
    CNNRT_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d.x));
    CNNRT_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d.y));
    CNNRT_CUDNN_CHECK(cudnnSetTensor4dDescriptor(d.x, CUDNN_TENSOR_NHWC, CUDNN_DATA_HALF,
                                                 static_cast<int>(batch), c_dev, shape.in_h,
                                                 shape.in_w));
    int n = 0, c = 0, h = 0, w = 0;
    CNNRT_CUDNN_CHECK(
        cudnnGetConvolution2dForwardOutputDim(conv_desc, d.x, w_desc, &n, &c, &h, &w));
    if (c != oc_dev || h != shape.conv_h || w != shape.conv_w)
      throw Error("cudnn_conv: cuDNN output " + std::to_string(h) + "x" + std::to_string(w) +
                  " differs from the graph's " + std::to_string(shape.conv_h) + "x" +
                  std::to_string(shape.conv_w));
    CNNRT_CUDNN_CHECK(
        cudnnSetTensor4dDescriptor(d.y, CUDNN_TENSOR_NHWC, CUDNN_DATA_HALF, n, c, h, w));
  }
};

bool CudnnConv::supports(const ConvShape& shape) {
  if (!conv_shape_problem(shape).empty() || !shape.conv.symmetric_padding() ||
      !shape.identity_or_relu())
    return false;
  if (shape.conv.groups == 1) return true;
  return shape.in_c % 8 == 0 && shape.out_c % 8 == 0;
}

CudnnConv::CudnnConv(const ConvShape& shape_in, const float* weight, const float* bias)
    : impl_(std::make_unique<Impl>()) {
  if (!supports(shape_in))
    throw Error(
        "cudnn_conv: needs symmetric padding, an identity or ReLU activation, and channel counts "
        "that are multiples of 8 when grouped");
  Impl& s = *impl_;
  s.shape = shape_in;
  s.shape.derive();
  const ConvShape& shape = s.shape;
  const ConvAttrs& a = shape.conv;
  const int groups = a.groups;
  s.c_dev = static_cast<int>(round_up8(shape.in_c));
  s.oc_dev = static_cast<int>(round_up8(shape.out_c));
  const int c_per_group = s.c_dev / groups, c_real_per_group = shape.in_c / groups;

  // Filter [oc_dev][kh][kw][c_per_group] (NHWC filter layout), zeros for padding.
  std::vector<float> packed(static_cast<size_t>(s.oc_dev) * a.kernel_h * a.kernel_w * c_per_group,
                            0.0f);
  for (int o = 0; o < shape.out_c; ++o)
    for (int ci = 0; ci < c_real_per_group; ++ci)
      for (int y = 0; y < a.kernel_h; ++y)
        for (int x = 0; x < a.kernel_w; ++x)
          packed[((static_cast<size_t>(o) * a.kernel_h + y) * a.kernel_w + x) * c_per_group + ci] =
              weight[((static_cast<size_t>(o) * c_real_per_group + ci) * a.kernel_h + y) *
                         a.kernel_w +
                     x];
  s.weight = upload_as_fp16(packed);
  std::vector<float> scale(s.oc_dev, 0.0f), shift(s.oc_dev, 0.0f);
  for (int o = 0; o < shape.out_c; ++o) {
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

CudnnConvPlan CudnnConv::plan(int64_t batch) const {
  const Impl& s = *impl_;
  BatchDescriptors d;
  s.describe(std::max<int64_t>(batch, 1), d);
  std::lock_guard<std::mutex> lock(s.handle_mutex);
  int max_count = 0;
  CNNRT_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(s.handle, &max_count));
  std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(std::max(max_count, 1));
  int returned = 0;
  CNNRT_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(s.handle, d.x, s.w_desc, s.conv_desc,
                                                           d.y, static_cast<int>(perf.size()),
                                                           &returned, perf.data()));
  for (int i = 0; i < returned; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > kMaxAlgoWorkspace) continue;
    size_t bytes = 0;
    if (cudnnGetConvolutionForwardWorkspaceSize(s.handle, d.x, s.w_desc, s.conv_desc, d.y,
                                                perf[i].algo, &bytes) != CUDNN_STATUS_SUCCESS ||
        bytes > kMaxAlgoWorkspace)
      continue;
    CudnnConvPlan p;
    p.algo = static_cast<int>(perf[i].algo);
    p.workspace_bytes = align_up(s.pre_pool_bytes(batch)) + bytes;
    return p;
  }
  throw Error("cudnn_conv: cuDNN offers no algorithm within the workspace cap");
}

void CudnnConv::forward(int algo, const void* x, void* y, int64_t batch, void* workspace,
                        cudaStream_t stream) const {
  const Impl& s = *impl_;
  const ConvShape& shape = s.shape;
  if (batch == 0) return;
  const auto fwd_algo = static_cast<cudnnConvolutionFwdAlgo_t>(algo);
  BatchDescriptors d;
  s.describe(batch, d);
  const bool pooled = shape.pool.has_value();
  char* ws = static_cast<char*>(workspace);
  void* conv_out = pooled ? static_cast<void*>(ws) : y;
  {
    std::lock_guard<std::mutex> lock(s.handle_mutex);
    size_t algo_bytes = 0;  // the planned algorithm's need at this batch (a host-side query)
    CNNRT_CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(s.handle, d.x, s.w_desc, s.conv_desc,
                                                              d.y, fwd_algo, &algo_bytes));
    if (ws == nullptr && (pooled || algo_bytes > 0)) throw Error("cudnn_conv: no workspace");
    void* algo_ws = algo_bytes > 0 ? ws + align_up(s.pre_pool_bytes(batch)) : nullptr;
    CNNRT_CUDNN_CHECK(cudnnSetStream(s.handle, stream));
    const float alpha = 1.0f, beta = 0.0f;
    CNNRT_CUDNN_CHECK(cudnnConvolutionForward(s.handle, &alpha, d.x, x, s.w_desc, s.weight.get(),
                                              s.conv_desc, fwd_algo, algo_ws, algo_bytes, &beta,
                                              d.y, conv_out));
  }
  channel_affine_fp16(conv_out, conv_out, batch * shape.conv_h * shape.conv_w, s.oc_dev,
                      static_cast<const float*>(s.scale.get()),
                      static_cast<const float*>(s.shift.get()), shape.clamps(), stream);
  if (shape.pool)
    maxpool_fp16(conv_out, y, batch, shape.out_c, shape.conv_h, shape.conv_w, *shape.pool,
                 shape.out_h, shape.out_w, stream);
}

size_t CudnnConv::weight_bytes() const {
  return impl_->weight.bytes() + impl_->scale.bytes() + impl_->shift.bytes();
}

}  // namespace cnnrt::cuda

#endif  // CNNRT_WITH_CUDNN
