// Elementwise fp16 kernels: relu, add, per-channel affine (batchnorm / bias), copy, flatten.
//
// Design: these ops are pure bandwidth, so every thread moves one 16-byte vector (8 halves) —
// the padded layout guarantees every row length is a multiple of 8 and arena offsets are
// 256-byte aligned, so no scalar tail exists.  Math is done in fp32 and rounded once.  Grid-
// stride loops with a capped grid keep launches cheap for any size.  The one exception is the
// flatten that drops channel padding (C % 8 != 0): its output positions do not line up with
// input vectors, so it is one thread per output half (it runs once per network, on a small
// tensor).
#include <cuda_fp16.h>

#include <algorithm>
#include <memory>

#include "cnnrt/error.h"
#include "graph/host_parallel.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/elementwise_fp16.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/pdl.cuh"

namespace cnnrt::cuda {

NhwcView nhwc_view(const Shape& shape) {
  NhwcView view;
  if (shape.size() == 3) {
    view.pixels = shape[1] * shape[2];
    view.channels = static_cast<int>(shape[0]);
  } else if (shape.size() == 1) {
    view.pixels = 1;
    view.channels = static_cast<int>(shape[0]);
  } else {
    throw Error("CUDA layout defines [C, H, W] and [F] tensors only, got " +
                shape_to_string(shape));
  }
  view.channel_stride = static_cast<int>(round_up8(view.channels));
  return view;
}

// The one allocation of the kernels' weights: while planning for a described target
// (plan_only) it records the size and allocates nothing, so weight_bytes() still adds up.
DeviceArray::DeviceArray(size_t bytes) : bytes_(bytes) {
  if (bytes > 0 && !plan_only()) CNNRT_CUDA_CHECK(cudaMalloc(&ptr_, bytes));
}
DeviceArray::~DeviceArray() {
  if (ptr_ != nullptr) cudaFree(ptr_);  // destructor: nothing useful to do with an error
}
DeviceArray::DeviceArray(DeviceArray&& other) noexcept : ptr_(other.ptr_), bytes_(other.bytes_) {
  other.ptr_ = nullptr;
  other.bytes_ = 0;
}
DeviceArray& DeviceArray::operator=(DeviceArray&& other) noexcept {
  if (this != &other) {
    if (ptr_ != nullptr) cudaFree(ptr_);
    ptr_ = other.ptr_;
    bytes_ = other.bytes_;
    other.ptr_ = nullptr;
    other.bytes_ = 0;
  }
  return *this;
}
void DeviceArray::upload(const void* host, size_t bytes) {
  if (bytes > bytes_)
    throw Error("DeviceArray::upload: " + std::to_string(bytes) + " bytes into a buffer of " +
                std::to_string(bytes_));
  if (bytes > 0 && ptr_ != nullptr)  // null: plan only
    CNNRT_CUDA_CHECK(cudaMemcpy(ptr_, host, bytes, cudaMemcpyHostToDevice));
}

// fp32 → fp16 on the host's cores (host_parallel.h): a serial loop of __float2half_rn took
// most of the AlexNet build (58.6 M linear weights; issue 7).
DeviceArray upload_as_fp16(const float* values, size_t count) {
  if (plan_only()) return DeviceArray(count * sizeof(__half));  // size only, no conversion
  std::unique_ptr<__half[]> halves(new __half[count > 0 ? count : 1]);
  parallel_for(count, size_t{1} << 16, [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) halves[i] = __float2half_rn(values[i]);
  });
  DeviceArray buffer(count * sizeof(__half));
  buffer.upload(halves.get(), buffer.bytes());
  return buffer;
}

DeviceArray upload_as_fp16(const std::vector<float>& values) {
  return upload_as_fp16(values.data(), values.size());
}

DeviceArray upload_fp32(const float* values, size_t count) {
  DeviceArray buffer(count * sizeof(float));
  buffer.upload(values, buffer.bytes());
  return buffer;
}

DeviceArray upload_fp32(const std::vector<float>& values) {
  return upload_fp32(values.data(), values.size());
}

namespace {

constexpr int kThreads = 256;

// Enough blocks to fill any current GPU several times over; the loops stride past the rest.
int grid_for(int64_t work) {
  const int64_t blocks = (work + kThreads - 1) / kThreads;
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(blocks, 132 * 16)));
}

union Vec8 {
  uint4 raw;
  __half2 h2[4];
};

__device__ __forceinline__ float relu_keep_nan(float v) { return (v > 0.0f || v != v) ? v : 0.0f; }

__global__ void relu_kernel(const uint4* __restrict__ x, uint4* y, int64_t vectors) {
  pdl_wait();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < vectors;
       i += int64_t(gridDim.x) * blockDim.x) {
    Vec8 v;
    v.raw = x[i];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float2 f = __half22float2(v.h2[j]);
      v.h2[j] = __floats2half2_rn(relu_keep_nan(f.x), relu_keep_nan(f.y));
    }
    y[i] = v.raw;
  }
}

__global__ void add_kernel(const uint4* a, const uint4* b, uint4* y, int64_t vectors, bool relu) {
  pdl_wait();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < vectors;
       i += int64_t(gridDim.x) * blockDim.x) {
    Vec8 va, vb;
    va.raw = a[i];
    vb.raw = b[i];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float2 fa = __half22float2(va.h2[j]);
      const float2 fb = __half22float2(vb.h2[j]);
      float s0 = fa.x + fb.x, s1 = fa.y + fb.y;
      if (relu) {
        s0 = relu_keep_nan(s0);
        s1 = relu_keep_nan(s1);
      }
      va.h2[j] = __floats2half2_rn(s0, s1);
    }
    y[i] = va.raw;
  }
}

__global__ void channel_affine_kernel(const uint4* x, uint4* y, int64_t vectors,
                                      int vectors_per_row, const float* __restrict__ scale,
                                      const float* __restrict__ shift, bool relu) {
  pdl_wait();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < vectors;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int c0 = static_cast<int>(i % vectors_per_row) * 8;
    Vec8 v;
    v.raw = x[i];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float2 f = __half22float2(v.h2[j]);
      float r0 = f.x * scale[c0 + 2 * j] + shift[c0 + 2 * j];
      float r1 = f.y * scale[c0 + 2 * j + 1] + shift[c0 + 2 * j + 1];
      if (relu) {
        r0 = relu_keep_nan(r0);
        r1 = relu_keep_nan(r1);
      }
      v.h2[j] = __floats2half2_rn(r0, r1);
    }
    y[i] = v.raw;
  }
}

// One thread per output half of one sample's padded vector.
__global__ void flatten_kernel(const __half* __restrict__ x, __half* __restrict__ y, int64_t batch,
                               int c, int64_t pixels, int c_stride, int64_t out_stride) {
  pdl_wait();
  const int64_t total = batch * out_stride;
  const int64_t real = pixels * c;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t n = i / out_stride;
    const int64_t f = i - n * out_stride;
    __half value = __float2half(0.0f);
    if (f < real) {
      const int64_t pixel = f / c;
      const int64_t channel = f - pixel * c;
      value = x[(n * pixels + pixel) * c_stride + channel];
    }
    y[i] = value;
  }
}

void check_vector_count(int64_t count, const char* what) {
  if (count % 8 != 0)
    throw Error(std::string(what) + ": element count " + std::to_string(count) +
                " is not a multiple of 8 (padded layout expected)");
}

}  // namespace

void relu_fp16(const void* x, void* y, int64_t count, cudaStream_t stream) {
  check_vector_count(count, "relu_fp16");
  const int64_t vectors = count / 8;
  if (vectors == 0) return;
  launch_kernel(relu_kernel, grid_for(vectors), kThreads, 0, stream, static_cast<const uint4*>(x),
                static_cast<uint4*>(y), vectors);
}

void add_fp16(const void* a, const void* b, void* y, int64_t count, bool relu,
              cudaStream_t stream) {
  check_vector_count(count, "add_fp16");
  const int64_t vectors = count / 8;
  if (vectors == 0) return;
  launch_kernel(add_kernel, grid_for(vectors), kThreads, 0, stream, static_cast<const uint4*>(a),
                static_cast<const uint4*>(b), static_cast<uint4*>(y), vectors, relu);
}

void channel_affine_fp16(const void* x, void* y, int64_t rows, int channel_stride,
                         const float* scale, const float* shift, bool relu, cudaStream_t stream) {
  check_vector_count(channel_stride, "channel_affine_fp16");
  const int64_t vectors = rows * (channel_stride / 8);
  if (vectors == 0) return;
  launch_kernel(channel_affine_kernel, grid_for(vectors), kThreads, 0, stream,
                static_cast<const uint4*>(x), static_cast<uint4*>(y), vectors, channel_stride / 8,
                scale, shift, relu);
}

void copy_fp16(const void* x, void* y, size_t bytes, cudaStream_t stream) {
  if (x == y || bytes == 0) return;
  CNNRT_CUDA_CHECK(cudaMemcpyAsync(y, x, bytes, cudaMemcpyDeviceToDevice, stream));
}

void flatten_nhwc_fp16(const void* x, void* y, int64_t batch, int c, int h, int w,
                       cudaStream_t stream) {
  const int64_t pixels = static_cast<int64_t>(h) * w;
  const int64_t out_stride = round_up8(pixels * c);
  const int64_t total = batch * out_stride;
  if (total == 0) return;
  launch_kernel(flatten_kernel, grid_for(total), kThreads, 0, stream, static_cast<const __half*>(x),
                static_cast<__half*>(y), batch, c, pixels, static_cast<int>(round_up8(c)),
                out_stride);
}

}  // namespace cnnrt::cuda
