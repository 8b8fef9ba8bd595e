// Elementwise fp16 kernels on the CUDA backend layout (relu, add, per-channel affine, copy,
// flatten) and the small layout helpers the other fp16 kernel families share.
//
// Layout (runtime/cuda/cuda_registry.h): feature maps NHWC with channel stride pad8(C), vectors
// [N][pad8(F)]; padding lanes hold zeros and every kernel here writes zeros into them.  All
// functions only enqueue on `stream`: no allocation, no synchronisation, CUDA-graph capturable.
// Host-only header (no nvcc needed) so registry .cpp files can include it.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "graph/ir.h"

namespace cnnrt::cuda {

inline int64_t round_up8(int64_t value) { return (value + 7) / 8 * 8; }

// How a per-sample shape lies in memory: `pixels` rows of `channel_stride` halves of which the
// first `channels` are real.  [C, H, W] → {H*W, C, pad8(C)}; [F] → {1, F, pad8(F)}.
struct NhwcView {
  int64_t pixels = 0;
  int channels = 0;
  int channel_stride = 0;
  int64_t sample_elements() const { return pixels * channel_stride; }
};
// Throws Error for shapes the CUDA layout does not define (rank other than 1 or 3).
NhwcView nhwc_view(const Shape& shape);

// Owned device memory, freed on destruction.  Only constructors/factories allocate.
class DeviceArray {
 public:
  DeviceArray() = default;
  explicit DeviceArray(size_t bytes);
  ~DeviceArray();
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  DeviceArray(DeviceArray&& other) noexcept;
  DeviceArray& operator=(DeviceArray&& other) noexcept;
  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  // Synchronous upload (build time only).
  void upload(const void* host, size_t bytes);
  // Hands the allocation to the caller (who cudaFree()s it); the array is empty afterwards.
  void* release() {
    void* ptr = ptr_;
    ptr_ = nullptr;
    bytes_ = 0;
    return ptr;
  }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// fp32 host values → fp16 device buffer (round to nearest even, __float2half_rn, converted on
// the host's cores; build time only: synchronous).
DeviceArray upload_as_fp16(const float* values, size_t count);
DeviceArray upload_as_fp16(const std::vector<float>& values);
DeviceArray upload_fp32(const float* values, size_t count);
DeviceArray upload_fp32(const std::vector<float>& values);

// y = max(x, 0) over `count` halves (count a multiple of 8; x == y allowed; NaN stays NaN as in
// PyTorch).
void relu_fp16(const void* x, void* y, int64_t count, cudaStream_t stream);

// y = a + b (then ReLU when `relu`), `count` a multiple of 8; y may alias a or b.
void add_fp16(const void* a, const void* b, void* y, int64_t count, bool relu, cudaStream_t stream);

// y[r, c] = x[r, c] * scale[c] + shift[c] (then ReLU), for `rows` rows of `channel_stride`
// halves.  scale/shift are device fp32 arrays of channel_stride entries (zeros in the padding so
// the padding lanes come out zero).  Serves standalone batchnorm and the cuDNN baseline's bias.
void channel_affine_fp16(const void* x, void* y, int64_t rows, int channel_stride,
                         const float* scale, const float* shift, bool relu, cudaStream_t stream);

// Device-to-device copy; a no-op when x == y.
void copy_fp16(const void* x, void* y, size_t bytes, cudaStream_t stream);

// Flatten of [C, H, W] NHWC (channel stride pad8(C)) into [pad8(C*H*W)] vectors in (h, w, c)
// order, dropping the channel padding and zero-filling the tail.  x and y must not alias.
void flatten_nhwc_fp16(const void* x, void* y, int64_t batch, int c, int h, int w,
                       cudaStream_t stream);

}  // namespace cnnrt::cuda
