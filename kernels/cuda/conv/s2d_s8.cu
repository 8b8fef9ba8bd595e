// The int8 space-to-depth rearrangement (design note in conv_s8.h, S8SpaceToDepth).
//
// One thread per output byte (sample, block, channel), channels fastest: the writes are
// coalesced rows; the reads gather stride x stride pixels per block, which the L1/L2 absorb —
// the rearranged tensor is small (AlexNet at batch 256: 40 MB) next to the conv that reads it
// kh/s · kw/s times.  From fp32 NCHW the value is quantised with the conversion step's exact
// formula (convert.cu: __float2int_rn(__fdiv_rn(x, s)) clamped to ±127), so a conv that reads
// the graph input directly gives the bits it would give behind a conversion step.
#include <algorithm>

#include "kernels/cuda/conv/conv_s8.h"
#include "kernels/cuda/cuda_check.h"

namespace cnnrt::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 1 << 20;

template <bool kFp32Source>
__global__ void space_to_depth_kernel(const S8SpaceToDepth p, const void* __restrict__ x,
                                      int8_t* __restrict__ y, int64_t total) {
  const int in_stride = padded16(p.c);
  for (int64_t index = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; index < total;
       index += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int channel = static_cast<int>(index % p.out_stride);
    const int64_t block = index / p.out_stride;
    const int bx = static_cast<int>(block % p.blocks_w);
    const int64_t rest = block / p.blocks_w;
    const int by = static_cast<int>(rest % p.blocks_h);
    const int64_t n = rest / p.blocks_h;
    int8_t value = 0;
    if (channel < p.s * p.s * p.c) {
      const int c = channel % p.c, tap = channel / p.c;
      const int iy = by * p.s - p.pad_h + tap / p.s, ix = bx * p.s - p.pad_w + tap % p.s;
      if (iy >= 0 && iy < p.h && ix >= 0 && ix < p.w) {
        if constexpr (kFp32Source) {
          const float v = static_cast<const float*>(
              x)[((n * p.c + c) * p.h + iy) * static_cast<int64_t>(p.w) + ix];
          const int q = __float2int_rn(__fdiv_rn(v, p.input_scale));
          value = static_cast<int8_t>(q < -127 ? -127 : (q > 127 ? 127 : q));
        } else {
          value = static_cast<const int8_t*>(
              x)[((n * p.h + iy) * static_cast<int64_t>(p.w) + ix) * in_stride + c];
        }
      }
    }
    y[index] = value;
  }
}

}  // namespace

void space_to_depth_s8(const S8SpaceToDepth& s2d, const void* x, bool fp32_nchw_source, void* y,
                       int batch, cudaStream_t stream) {
  const int64_t total = static_cast<int64_t>(batch) * s2d.blocks_h * s2d.blocks_w * s2d.out_stride;
  if (total <= 0) return;
  const int blocks =
      static_cast<int>(std::min<int64_t>((total + kThreads - 1) / kThreads, kMaxBlocks));
  auto* out = static_cast<int8_t*>(y);
  if (fp32_nchw_source)
    space_to_depth_kernel<true><<<blocks, kThreads, 0, stream>>>(s2d, x, out, total);
  else
    space_to_depth_kernel<false><<<blocks, kThreads, 0, stream>>>(s2d, x, out, total);
  CNNRT_CUDA_CHECK_LAUNCH();
}

}  // namespace cnnrt::cuda
