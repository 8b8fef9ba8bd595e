// fp16 channel concatenation (NHWC: the inputs interleave per pixel).
//
// Design: one launch per input, each copying its slice into the output rows at its channel
// offset; the last launch also writes the output's padding channels as zeros, so the output is
// fully written without a memset.  When an input's channel count and offset are both multiples
// of 8 (every AlexNet/Inception-style concat of padded conv outputs) the copy moves 16-byte
// vectors; otherwise the slice does not line up with vectors and it copies halves.  A few
// launches instead of one kernel with a pointer table keeps the kernel trivially simple; concat
// has no arithmetic and the launches are captured in the CUDA graph anyway.
#include <cuda_fp16.h>

#include <algorithm>

#include "cnnrt/error.h"
#include "kernels/cuda/concat_fp16.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/pdl.cuh"

namespace cnnrt::cuda {
namespace {

constexpr int kThreads = 256;

// Copies `copy` elements (of type T) per row and zero-fills `zeros` more after them.
template <typename T>
__global__ void slice_kernel(const T* __restrict__ x, int in_stride, T* __restrict__ y,
                             int out_stride, int offset, int copy, int zeros, int64_t rows) {
  pdl_wait();
  const int width = copy + zeros;
  const int64_t total = rows * width;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t row = i / width;
    const int c = static_cast<int>(i - row * width);
    T value{};
    if (c < copy) value = x[row * in_stride + c];
    y[row * out_stride + offset + c] = value;
  }
}

template <typename T>
void launch_slice(const void* x, int in_stride, void* y, int out_stride, int offset, int copy,
                  int zeros, int64_t rows, cudaStream_t stream) {
  const int64_t work = rows * (copy + zeros);
  if (work == 0) return;
  const int grid = static_cast<int>(
      std::max<int64_t>(1, std::min<int64_t>((work + kThreads - 1) / kThreads, 132 * 16)));
  launch_kernel(slice_kernel<T>, grid, kThreads, 0, stream, static_cast<const T*>(x), in_stride,
                static_cast<T*>(y), out_stride, offset, copy, zeros, rows);
}

}  // namespace

void concat_channels_fp16(const std::vector<const void*>& inputs, const std::vector<int>& channels,
                          void* y, int64_t rows, cudaStream_t stream) {
  if (inputs.empty() || inputs.size() != channels.size())
    throw Error("concat_channels_fp16: inputs and channel counts differ");
  int total = 0;
  for (int c : channels) {
    if (c < 1) throw Error("concat_channels_fp16: channel count must be positive");
    total += c;
  }
  const int out_stride = (total + 7) / 8 * 8;
  int offset = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const int c = channels[i];
    const int in_stride = (c + 7) / 8 * 8;
    const int zeros = i + 1 == inputs.size() ? out_stride - total : 0;
    if (c % 8 == 0 && offset % 8 == 0 && zeros % 8 == 0)
      launch_slice<uint4>(inputs[i], in_stride / 8, y, out_stride / 8, offset / 8, c / 8, zeros / 8,
                          rows, stream);
    else
      launch_slice<__half>(inputs[i], in_stride, y, out_stride, offset, c, zeros, rows, stream);
    offset += c;
  }
}

}  // namespace cnnrt::cuda
