// fp16 LRN across channels (PyTorch LocalResponseNorm semantics: zero padding of size/2 before
// and (size-1)/2 after the channel axis, the sum always divided by `size`).
//
// Design: one thread per output half.  The window reads `size` neighbouring channels of the same
// pixel, which in NHWC are contiguous, so a warp's loads are one or two cache lines reused from
// L1 across the window; the op is memory bound and small (AlexNet-era nets use it on two
// tensors), so a shared-memory sliding sum would be complexity without a measurable win.
// fp32 math; powf for the general beta.
#include <cuda_fp16.h>

#include <algorithm>

#include "cnnrt/error.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/lrn_fp16.h"
#include "kernels/cuda/pdl.cuh"

namespace cnnrt::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void lrn_kernel(const __half* __restrict__ x, __half* __restrict__ y, int64_t rows,
                           int channels, int stride, int before, int after, float alpha_over_size,
                           float beta, float k) {
  pdl_wait();
  const int64_t total = rows * stride;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t row = i / stride;
    const int c = static_cast<int>(i - row * stride);
    float result = 0.0f;
    if (c < channels) {
      const __half* pixel = x + row * stride;
      float square_sum = 0.0f;
      const int c_end = min(channels - 1, c + after);
      for (int cc = max(0, c - before); cc <= c_end; ++cc) {
        const float v = __half2float(pixel[cc]);
        square_sum += v * v;
      }
      result = __half2float(pixel[c]) / powf(k + alpha_over_size * square_sum, beta);
    }
    y[i] = __float2half_rn(result);
  }
}

}  // namespace

void lrn_fp16(const void* x, void* y, int64_t rows, int channels, int channel_stride,
              const LRNAttrs& attrs, cudaStream_t stream) {
  if (attrs.size < 1 || channels < 1 || channel_stride < channels)
    throw Error("lrn_fp16: invalid size / channels");
  if (x == y) throw Error("lrn_fp16: in-place LRN is not supported (reads neighbour channels)");
  const int64_t work = rows * channel_stride;
  if (work == 0) return;
  const int grid = static_cast<int>(
      std::max<int64_t>(1, std::min<int64_t>((work + kThreads - 1) / kThreads, 132 * 16)));
  launch_kernel(lrn_kernel, grid, kThreads, 0, stream, static_cast<const __half*>(x),
                static_cast<__half*>(y), rows, channels, channel_stride, attrs.size / 2,
                (attrs.size - 1) / 2, attrs.alpha / static_cast<float>(attrs.size), attrs.beta,
                attrs.k);
}

}  // namespace cnnrt::cuda
