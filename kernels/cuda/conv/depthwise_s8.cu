// int8 depthwise convolution (groups == in_c == out_c): EfficientNet-Lite0's 16 depthwise layers,
// which ran on the one-thread-per-output direct kernel (direct_s8.cu) and made its int8 engine
// 4-5x slower than fp16 (docs/PERFORMANCE.md, run 19).
//
// Design: a depthwise layer is memory bound (k·k multiply-adds per output byte), so the kernel
// is built around its loads.  One thread computes 16 consecutive channels of one output pixel:
// per tap one 16-byte load of the input row (NHWC/16: a pixel's channels are contiguous and
// 16-aligned) and one 16-byte load of the tap's weights, repacked on the host as [kh][kw][C16]
// (depthwise_s8_weights) so the 16 channels' weights of a tap are adjacent too.  Adjacent threads
// take adjacent channel groups, then adjacent pixels, so a warp's loads of one tap cover one
// contiguous run of the input (stride 1) and its stores one contiguous run of the output.  Index
// arithmetic is 32-bit (a launch takes as many samples as keep its grid below 2^30), since the
// direct kernel's 64-bit divisions per output byte cost more than its loads.
//
// The arithmetic is the integer reference's, as in every int8 kernel (conv_s8.h): the 16
// accumulators are exact int32 sums of q_x·q_w over the window's valid taps (padding taps skipped,
// so the order of terms does not matter), then epilogue_s8.cuh's int8_output / float_output per
// channel — bit for bit ref::conv2d_int8.  Padding lanes (c >= C) compute zeros and write zeros.
#include <algorithm>
#include <climits>

#include "cnnrt/error.h"
#include "kernels/cuda/conv/conv_s8.h"
#include "kernels/cuda/conv/epilogue_s8.cuh"
#include "kernels/cuda/cuda_check.h"

namespace cnnrt::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxBlocks = 1 << 20;

// Byte b of `word` as a signed value.
__device__ __forceinline__ int lane_s8(uint32_t word, int b) {
  return static_cast<int>(word << (24 - 8 * b)) >> 24;
}

__device__ __forceinline__ void multiply_add(int (&acc)[16], const uint4& x, const uint4& w) {
  const uint32_t xs[4] = {x.x, x.y, x.z, x.w}, ws[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
  for (int k = 0; k < 4; ++k)
#pragma unroll
    for (int b = 0; b < 4; ++b) acc[4 * k + b] += lane_s8(xs[k], b) * lane_s8(ws[k], b);
}

// groups16 = pad16(C) / 16 channel groups per pixel; `total` = batch·out_h·out_w·groups16.
template <bool kFloat>
__global__ void depthwise_s8_kernel(const S8Conv p, const uint4* __restrict__ x,
                                    const uint4* __restrict__ w, void* __restrict__ y, int total,
                                    int groups16) {
  for (int index = blockIdx.x * blockDim.x + threadIdx.x; index < total;
       index += gridDim.x * blockDim.x) {
    const int group = index % groups16;
    int pixel = index / groups16;
    const int ox = pixel % p.out_w;
    pixel /= p.out_w;
    const int oy = pixel % p.out_h;
    const int n = pixel / p.out_h;
    const uint4* image = x + static_cast<size_t>(n) * p.in_h * p.in_w * groups16 + group;
    int acc[16] = {};
    for (int r = 0; r < p.kh; ++r) {
      const int iy = oy * p.stride_h - p.pad_h + r * p.dil_h;
      if (iy < 0 || iy >= p.in_h) continue;
      for (int s = 0; s < p.kw; ++s) {
        const int ix = ox * p.stride_w - p.pad_w + s * p.dil_w;
        if (ix < 0 || ix >= p.in_w) continue;
        multiply_add(acc, __ldg(image + (iy * p.in_w + ix) * groups16),
                     __ldg(w + (r * p.kw + s) * groups16 + group));
      }
    }
    const int first = group * 16;
    if constexpr (kFloat) {
      // fp32 NHWC/8 rows: the last group may hold fewer than 16 lanes of the row.
      float* out = static_cast<float*>(y) + static_cast<size_t>(index / groups16) * p.out_stride;
#pragma unroll
      for (int j = 0; j < 16; ++j)
        if (first + j < p.out_stride) out[first + j] = s8::float_output(p, first + j, acc[j]);
    } else {
      uint32_t words[4];
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        uint32_t word = 0;
#pragma unroll
        for (int b = 0; b < 4; ++b) {
          const int j = 4 * k + b;
          word |= static_cast<uint32_t>(static_cast<uint8_t>(s8::int8_output(p, first + j, acc[j])))
                  << (8 * b);
        }
        words[k] = word;
      }
      static_cast<uint4*>(y)[index] = make_uint4(words[0], words[1], words[2], words[3]);
    }
  }
}

}  // namespace

bool depthwise_s8_serves(const S8Conv& conv) {
  return conv.groups == conv.in_c && conv.in_c == conv.out_c && conv.in_c > 0 &&
         conv.in_stride == padded16(conv.in_c) &&
         (conv.float_output ? conv.out_stride == (conv.out_c + 7) / 8 * 8
                            : conv.out_stride == padded16(conv.out_c));
}

std::vector<int8_t> depthwise_s8_weights(const int8_t* weight, int channels, int kh, int kw) {
  const int stride = padded16(channels);
  std::vector<int8_t> packed(static_cast<size_t>(kh) * kw * stride, 0);
  for (int c = 0; c < channels; ++c)
    for (int tap = 0; tap < kh * kw; ++tap)
      packed[static_cast<size_t>(tap) * stride + c] =
          weight[static_cast<size_t>(c) * kh * kw + tap];
  return packed;
}

void conv_s8_depthwise(const S8Conv& conv, const void* x, void* y, int batch, cudaStream_t stream) {
  if (!depthwise_s8_serves(conv)) throw Error("conv_s8_depthwise: not a depthwise int8 conv");
  const int groups16 = conv.in_stride / 16;
  const int64_t per_sample = static_cast<int64_t>(conv.out_h) * conv.out_w * groups16;
  const int64_t in_per_sample = static_cast<int64_t>(conv.in_h) * conv.in_w * groups16;
  if (batch <= 0 || per_sample <= 0) return;
  if (per_sample > INT_MAX / 2 || in_per_sample > INT_MAX)
    throw Error("conv_s8_depthwise: one sample exceeds 32-bit indexing");
  // 32-bit indices within a launch: as many samples per launch as keep the grid below 2^30 (so
  // the grid-stride loop's index + stride stays below 2^31 too).
  const int chunk =
      static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(batch, (INT_MAX / 2) / per_sample)));
  const auto* w = reinterpret_cast<const uint4*>(conv.weight);
  const size_t out_bytes = static_cast<size_t>(conv.out_h) * conv.out_w * conv.out_stride *
                           (conv.float_output ? sizeof(float) : 1);
  for (int first = 0; first < batch; first += chunk) {
    const int samples = std::min(chunk, batch - first);
    const int total = static_cast<int>(samples * per_sample);
    const int blocks = static_cast<int>(
        std::min<int64_t>((static_cast<int64_t>(total) + kThreads - 1) / kThreads, kMaxBlocks));
    const auto* in = static_cast<const uint4*>(x) + first * in_per_sample;
    void* out = static_cast<char*>(y) + first * out_bytes;
    if (conv.float_output)
      depthwise_s8_kernel<true><<<blocks, kThreads, 0, stream>>>(conv, in, w, out, total, groups16);
    else
      depthwise_s8_kernel<false>
          <<<blocks, kThreads, 0, stream>>>(conv, in, w, out, total, groups16);
    CNNRT_CUDA_CHECK_LAUNCH();
  }
}

}  // namespace cnnrt::cuda
