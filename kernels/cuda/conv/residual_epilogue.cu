// The unfused residual epilogue (residual_epilogue.h) — design note.
//
// Pure bandwidth, like kernels/cuda/elementwise_fp16.cu: one 16-byte vector (8 channels) per
// thread step, a grid-stride loop with a capped grid, fp32 math rounded once.  It costs what the
// separate add layer cost before the fusion pass (read conv output and residual, write the
// sum), so a kernel served through it is never slower than the unfused graph; a native
// epilogue (as the depthwise kernel has) removes that pass.  The clamp is the conv family's
// (fminf/fmaxf, kernels/cuda/conv/epilogue.cuh); padding lanes are written as +0 because a Clip
// whose min is above 0 would otherwise lift them.
#include <cuda_fp16.h>

#include <algorithm>

#include "cnnrt/error.h"
#include "kernels/cuda/conv/residual_epilogue.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/pdl.cuh"

namespace cnnrt::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void residual_add_kernel(uint4* y, const uint4* __restrict__ r, int64_t vectors,
                                    int vectors_per_pixel, int channels, EpilogueClamp clamp) {
  pdl_wait();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < vectors;
       i += int64_t(gridDim.x) * blockDim.x) {
    uint4 a = y[i];
    const uint4 b = r[i];
    __half2* ha = reinterpret_cast<__half2*>(&a);
    const __half2* hb = reinterpret_cast<const __half2*>(&b);
    const int c0 = static_cast<int>(i % vectors_per_pixel) * 8;
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const float2 fa = __half22float2(ha[q]), fb = __half22float2(hb[q]);
      float s0 = fa.x + fb.x, s1 = fa.y + fb.y;
      if (clamp.on) {
        s0 = fminf(fmaxf(s0, clamp.lo), clamp.hi);
        s1 = fminf(fmaxf(s1, clamp.lo), clamp.hi);
      }
      ha[q] = __floats2half2_rn(c0 + 2 * q < channels ? s0 : 0.0f,
                                c0 + 2 * q + 1 < channels ? s1 : 0.0f);
    }
    y[i] = a;
  }
}

}  // namespace

void residual_add_fp16(void* y, const void* r, int64_t pixels, int channels, int channel_stride,
                       const EpilogueClamp& clamp, cudaStream_t stream) {
  if (channel_stride % 8 != 0 || channels > channel_stride)
    throw Error("residual_add_fp16: channel stride must be a multiple of 8 and >= channels");
  const int64_t vectors = pixels * (channel_stride / 8);
  if (vectors == 0) return;
  const int blocks =
      static_cast<int>(std::min<int64_t>((vectors + kThreads - 1) / kThreads, 132 * 16));
  launch_kernel(residual_add_kernel, blocks, kThreads, 0, stream, static_cast<uint4*>(y),
                static_cast<const uint4*>(r), vectors, channel_stride / 8, channels, clamp);
}

}  // namespace cnnrt::cuda
