// Generic CUDA tensor conversion (design note in convert.h).
#include <cuda_fp16.h>

#include <algorithm>
#include <string>

#include "cnnrt/error.h"
#include "kernels/cuda/convert.h"
#include "kernels/cuda/cuda_check.h"

namespace cnnrt::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 65536;

// Where channel c of pixel p of sample n lives for one type (as ref::convert_tensor's
// Addressing): maps follow the layout, vectors are rows of `channels`.
struct Addressing {
  int64_t channels = 1, pixels = 1, stride = 1;
  bool nhwc = true;
  __host__ __device__ int64_t sample_elements() const { return stride * pixels; }
  __device__ int64_t offset(int64_t n, int64_t c, int64_t p) const {
    const int64_t sample = n * sample_elements();
    return nhwc ? sample + p * stride + c : sample + c * pixels + p;
  }
};

Addressing addressing(const Shape& shape, const TensorType& type) {
  Addressing a;
  const int64_t align = type.channel_align > 1 ? type.channel_align : 1;
  if (shape.size() == 3) {
    a.channels = shape[0];
    a.pixels = shape[1] * shape[2];
    a.nhwc = type.layout == Layout::NHWC;
  } else {
    a.channels = shape.back();
    for (size_t i = 0; i + 1 < shape.size(); ++i) a.pixels *= shape[i];
    a.nhwc = true;
  }
  a.stride = (a.channels + align - 1) / align * align;
  return a;
}

__device__ __forceinline__ float load_value(const float* x, int64_t i) { return x[i]; }
__device__ __forceinline__ float load_value(const __half* x, int64_t i) {
  return __half2float(x[i]);
}
__device__ __forceinline__ void store_value(float* y, int64_t i, float v) { y[i] = v; }
__device__ __forceinline__ void store_value(__half* y, int64_t i, float v) {
  y[i] = __float2half_rn(v);
}

// One thread per output element; padding lanes (channel >= channels) get zeros.
template <typename In, typename Out>
__global__ void convert_kernel(const In* __restrict__ x, Out* __restrict__ y, int64_t total,
                               Addressing in, Addressing out) {
  for (int64_t index = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; index < total;
       index += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t n = index / out.sample_elements();
    const int64_t within = index - n * out.sample_elements();
    const int64_t c = out.nhwc ? within % out.stride : within / out.pixels;
    const int64_t p = out.nhwc ? within / out.stride : within % out.pixels;
    const float value = c < out.channels ? load_value(x, in.offset(n, c, p)) : 0.0f;
    store_value(y, index, value);
  }
}

template <typename In, typename Out>
void launch(const void* x, void* y, int64_t total, const Addressing& in, const Addressing& out,
            cudaStream_t stream) {
  const int blocks =
      static_cast<int>(std::min<int64_t>((total + kThreads - 1) / kThreads, kMaxBlocks));
  convert_kernel<In, Out><<<blocks, kThreads, 0, stream>>>(static_cast<const In*>(x),
                                                           static_cast<Out*>(y), total, in, out);
  CNNRT_CUDA_CHECK_LAUNCH();
}

}  // namespace

bool cuda_convertible(const TensorType& type) {
  return (type.dtype == DType::F32 || type.dtype == DType::F16) && type.channel_align >= 1;
}

void convert_tensor_cuda(const void* x, const TensorType& from, void* y, const TensorType& to,
                         const Shape& shape, int64_t batch, cudaStream_t stream) {
  if (!cuda_convertible(from) || !cuda_convertible(to))
    throw Error("convert_tensor_cuda: cannot convert " + to_string(from) + " to " + to_string(to));
  if (shape.empty() || shape_elements(shape) < 1 || batch < 0)
    throw Error("convert_tensor_cuda: bad shape " + shape_to_string(shape));
  if (x == y) throw Error("convert_tensor_cuda: x and y must not alias");
  const Addressing in = addressing(shape, from), out = addressing(shape, to);
  const int64_t total = batch * out.sample_elements();
  if (total == 0) return;
  const bool in_f32 = from.dtype == DType::F32, out_f32 = to.dtype == DType::F32;
  if (in_f32 && out_f32) launch<float, float>(x, y, total, in, out, stream);
  if (in_f32 && !out_f32) launch<float, __half>(x, y, total, in, out, stream);
  if (!in_f32 && out_f32) launch<__half, float>(x, y, total, in, out, stream);
  if (!in_f32 && !out_f32) launch<__half, __half>(x, y, total, in, out, stream);
}

}  // namespace cnnrt::cuda
