// Generic CUDA tensor conversion (design note in convert.h).
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "cnnrt/error.h"
#include "kernels/cuda/convert.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/pdl.cuh"

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

// `scale` is the int8 type's (real = scale × q); the float types ignore it.
__device__ __forceinline__ float load_value(const float* x, int64_t i, float) { return x[i]; }
__device__ __forceinline__ float load_value(const __half* x, int64_t i, float) {
  return __half2float(x[i]);
}
// Dequantise: one RNE fp32 multiply (docs/QUANTIZATION.md).
__device__ __forceinline__ float load_value(const int8_t* x, int64_t i, float scale) {
  return __fmul_rn(scale, static_cast<float>(x[i]));
}
__device__ __forceinline__ void store_value(float* y, int64_t i, float v, float) { y[i] = v; }
__device__ __forceinline__ void store_value(__half* y, int64_t i, float v, float) {
  y[i] = __float2half_rn(v);
}
// Quantise: RNE(x / s) with a correctly rounded division, saturated to [-127, 127];
// __float2int_rn gives 0 for NaN and saturates ±inf to the int32 range, which the clamp maps as
// ref::quantize_int8 does.
__device__ __forceinline__ void store_value(int8_t* y, int64_t i, float v, float scale) {
  const int q = __float2int_rn(__fdiv_rn(v, scale));
  y[i] = static_cast<int8_t>(q < -127 ? -127 : (q > 127 ? 127 : q));
}

// One thread per output element; padding lanes (channel >= channels) get zeros.
template <typename In, typename Out>
__global__ void convert_kernel(const In* __restrict__ x, Out* __restrict__ y, int64_t total,
                               Addressing in, Addressing out, float in_scale, float out_scale) {
  pdl_wait();
  for (int64_t index = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; index < total;
       index += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t n = index / out.sample_elements();
    const int64_t within = index - n * out.sample_elements();
    const int64_t c = out.nhwc ? within % out.stride : within / out.pixels;
    const int64_t p = out.nhwc ? within / out.stride : within % out.pixels;
    const float value = c < out.channels ? load_value(x, in.offset(n, c, p), in_scale) : 0.0f;
    store_value(y, index, value, out_scale);
  }
}

template <typename In, typename Out>
void launch(const void* x, void* y, int64_t total, const Addressing& in, const Addressing& out,
            float in_scale, float out_scale, cudaStream_t stream) {
  const int blocks =
      static_cast<int>(std::min<int64_t>((total + kThreads - 1) / kThreads, kMaxBlocks));
  launch_kernel(convert_kernel<In, Out>, blocks, kThreads, 0, stream, static_cast<const In*>(x),
                static_cast<Out*>(y), total, in, out, in_scale, out_scale);
}

// The output type's dispatch, the input's already fixed.
template <typename In>
void launch_to(const void* x, void* y, int64_t total, const Addressing& in, const Addressing& out,
               const TensorType& from, const TensorType& to, cudaStream_t stream) {
  switch (to.dtype) {
    case DType::F32:
      return launch<In, float>(x, y, total, in, out, from.scale, to.scale, stream);
    case DType::F16:
      return launch<In, __half>(x, y, total, in, out, from.scale, to.scale, stream);
    case DType::I8:
      return launch<In, int8_t>(x, y, total, in, out, from.scale, to.scale, stream);
  }
}

}  // namespace

bool cuda_convertible(const TensorType& type) {
  if (type.channel_align < 1) return false;
  if (type.dtype == DType::I8) return type.scale > 0 && std::isfinite(type.scale);
  return type.dtype == DType::F32 || type.dtype == DType::F16;
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
  switch (from.dtype) {
    case DType::F32:
      return launch_to<float>(x, y, total, in, out, from, to, stream);
    case DType::F16:
      return launch_to<__half>(x, y, total, in, out, from, to, stream);
    case DType::I8:
      return launch_to<int8_t>(x, y, total, in, out, from, to, stream);
  }
}

}  // namespace cnnrt::cuda
