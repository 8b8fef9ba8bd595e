// fp16 softmax over channels / features.
//
// Design: one warp per row (a sample's [F] vector, or the C channels of one NHWC pixel).  The
// row is read three times (max, sum of exponentials, write) with 16-byte loads; after the first
// pass it sits in L1, so the kernel costs about one read and one write of the tensor.  Warp
// shuffles do the reductions, so no shared memory and no block-level synchronisation.  fp32
// math with the row max subtracted (numerically stable); expf rather than __expf because the
// output feeds top-k class probabilities where relative accuracy matters more than a few
// cycles.  Rows are short (1000 classes → 125 vectors → 4 per lane) so a block per row would
// only add synchronisation.  Each lane owns the same vectors in all passes, so x == y is safe.
#include <cuda_fp16.h>

#include <algorithm>

#include "cnnrt/error.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/pdl.cuh"
#include "kernels/cuda/softmax_fp16.h"

namespace cnnrt::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;

union Vec8 {
  uint4 raw;
  __half h[8];
};

__device__ __forceinline__ float warp_max(float v) {
  for (int offset = 16; offset > 0; offset >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__global__ void softmax_kernel(const uint4* x, uint4* y, int64_t rows, int channels,
                               int vectors_per_row) {
  pdl_wait();
  const int lane = threadIdx.x & 31;
  const int64_t warps = int64_t(gridDim.x) * kWarpsPerBlock;
  for (int64_t row = blockIdx.x * int64_t(kWarpsPerBlock) + threadIdx.x / 32; row < rows;
       row += warps) {
    const uint4* in = x + row * vectors_per_row;
    uint4* out = y + row * vectors_per_row;
    float row_max = -INFINITY;
    for (int v = lane; v < vectors_per_row; v += 32) {
      Vec8 vec;
      vec.raw = in[v];
#pragma unroll
      for (int j = 0; j < 8; ++j)
        if (v * 8 + j < channels) row_max = fmaxf(row_max, __half2float(vec.h[j]));
    }
    row_max = warp_max(row_max);
    float sum = 0.0f;
    for (int v = lane; v < vectors_per_row; v += 32) {
      Vec8 vec;
      vec.raw = in[v];
#pragma unroll
      for (int j = 0; j < 8; ++j)
        if (v * 8 + j < channels) sum += expf(__half2float(vec.h[j]) - row_max);
    }
    const float inv_sum = 1.0f / warp_sum(sum);
    for (int v = lane; v < vectors_per_row; v += 32) {
      Vec8 vec;
      vec.raw = in[v];
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const float p =
            v * 8 + j < channels ? expf(__half2float(vec.h[j]) - row_max) * inv_sum : 0.0f;
        vec.h[j] = __float2half_rn(p);
      }
      out[v] = vec.raw;
    }
  }
}

}  // namespace

void softmax_fp16(const void* x, void* y, int64_t rows, int channels, int channel_stride,
                  cudaStream_t stream) {
  if (channels < 1 || channel_stride < channels || channel_stride % 8 != 0)
    throw Error("softmax_fp16: invalid channels " + std::to_string(channels) + " / stride " +
                std::to_string(channel_stride));
  if (rows == 0) return;
  const int64_t blocks = (rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
  const int grid = static_cast<int>(std::min<int64_t>(blocks, 132 * 32));
  launch_kernel(softmax_kernel, grid, kWarpsPerBlock * 32, 0, stream, static_cast<const uint4*>(x),
                static_cast<uint4*>(y), rows, channels, channel_stride / 8);
}

}  // namespace cnnrt::cuda
