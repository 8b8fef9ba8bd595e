// Layout conversion kernels: NCHW fp32 ⇄ NHWC fp16 (channels padded to 8), plus a random fill.
//
// Shape of the kernels: one thread per (sample, 8-channel group, pixel), pixel fastest.  That
// order makes the fp32 NCHW side coalesced (a warp touches 32 consecutive pixels of one channel
// plane, eight planes in turn) while the fp16 side moves one 16-byte vector per thread — the
// eight channels of a group are exactly one uint4, and pad8 makes every group 16-byte aligned.
// Channels past C in the last group are written as zeros (input side) or skipped (output side).
// For the usual 3-channel input, groups = 1 and the vector stores are fully contiguous.  These
// run once per forward on the input image and the logits, so a shared-memory transpose would buy
// little; simple grid-stride loops with 64-bit indices serve any batch.
#include <cuda_fp16.h>

#include <algorithm>
#include <string>

#include "cnnrt/error.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/layout.h"
#include "kernels/cuda/pdl.cuh"

namespace cnnrt::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 65536;  // grid-stride beyond this; plenty to fill any GPU

union Pack8 {
  uint4 vector;
  __half2 pairs[4];
};

__global__ void nchw_to_nhwc_kernel(const float* __restrict__ x, uint4* __restrict__ y,
                                    int64_t samples, int channels, int64_t pixels, int groups) {
  pdl_wait();
  const int64_t total = samples * groups * pixels;
  for (int64_t index = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; index < total;
       index += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t pixel = index % pixels;
    const int64_t rest = index / pixels;
    const int group = static_cast<int>(rest % groups);
    const int64_t sample = rest / groups;
    const int first_channel = group * 8;
    const float* source = x + (sample * channels + first_channel) * pixels + pixel;
    float values[8];
#pragma unroll
    for (int j = 0; j < 8; ++j)
      values[j] = first_channel + j < channels ? source[j * pixels] : 0.0f;
    Pack8 pack;
#pragma unroll
    for (int j = 0; j < 4; ++j) pack.pairs[j] = __floats2half2_rn(values[2 * j], values[2 * j + 1]);
    y[(sample * pixels + pixel) * groups + group] = pack.vector;
  }
}

__global__ void nhwc_to_nchw_kernel(const uint4* __restrict__ x, float* __restrict__ y,
                                    int64_t samples, int channels, int64_t pixels, int groups) {
  pdl_wait();
  const int64_t total = samples * groups * pixels;
  for (int64_t index = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; index < total;
       index += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t pixel = index % pixels;
    const int64_t rest = index / pixels;
    const int group = static_cast<int>(rest % groups);
    const int64_t sample = rest / groups;
    const int first_channel = group * 8;
    Pack8 pack;
    pack.vector = x[(sample * pixels + pixel) * groups + group];
    float* target = y + (sample * channels + first_channel) * pixels + pixel;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float2 pair = __half22float2(pack.pairs[j]);
      if (first_channel + 2 * j < channels) target[(2 * j) * pixels] = pair.x;
      if (first_channel + 2 * j + 1 < channels) target[(2 * j + 1) * pixels] = pair.y;
    }
  }
}

// Murmur-style finaliser: cheap, well mixed, stateless (any thread computes any index).
__device__ __forceinline__ uint32_t mix32(uint32_t value) {
  value ^= value >> 16;
  value *= 0x7feb352du;
  value ^= value >> 15;
  value *= 0x846ca68bu;
  value ^= value >> 16;
  return value;
}

__global__ void fill_uniform_kernel(float* __restrict__ y, int64_t count, uint32_t seed) {
  pdl_wait();
  for (int64_t index = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; index < count;
       index += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint32_t low = static_cast<uint32_t>(index);
    const uint32_t high = static_cast<uint32_t>(static_cast<uint64_t>(index) >> 32);
    const uint32_t bits = mix32(low ^ mix32(high + seed * 0x9e3779b9u + 0x632be5abu));
    y[index] = static_cast<float>(bits >> 8) * (1.0f / 8388608.0f) - 1.0f;  // [0,2) - 1
  }
}

int blocks_for(int64_t work_items) {
  return static_cast<int>(std::min<int64_t>((work_items + kThreads - 1) / kThreads, kMaxBlocks));
}

void check_shape(const char* what, int64_t n, int c, int h, int w) {
  if (n < 0 || c < 1 || h < 1 || w < 1)
    throw Error(std::string(what) + ": bad shape n=" + std::to_string(n) +
                " c=" + std::to_string(c) + " h=" + std::to_string(h) + " w=" + std::to_string(w));
}

void check_aligned(const char* what, const void* pointer) {
  if (reinterpret_cast<uintptr_t>(pointer) % 16 != 0)
    throw Error(std::string(what) + ": the NHWC fp16 buffer must be 16-byte aligned");
}

}  // namespace

void nchw_fp32_to_nhwc_fp16(const float* x, void* y, int64_t n, int c, int h, int w,
                            cudaStream_t stream) {
  check_shape("nchw_fp32_to_nhwc_fp16", n, c, h, w);
  check_aligned("nchw_fp32_to_nhwc_fp16", y);
  const int groups = (c + 7) / 8;
  const int64_t pixels = static_cast<int64_t>(h) * w;
  const int64_t work = n * groups * pixels;
  if (work == 0) return;
  launch_kernel(nchw_to_nhwc_kernel, blocks_for(work), kThreads, 0, stream, x,
                static_cast<uint4*>(y), n, c, pixels, groups);
}

void nhwc_fp16_to_nchw_fp32(const void* x, float* y, int64_t n, int c, int h, int w,
                            cudaStream_t stream) {
  check_shape("nhwc_fp16_to_nchw_fp32", n, c, h, w);
  check_aligned("nhwc_fp16_to_nchw_fp32", x);
  const int groups = (c + 7) / 8;
  const int64_t pixels = static_cast<int64_t>(h) * w;
  const int64_t work = n * groups * pixels;
  if (work == 0) return;
  launch_kernel(nhwc_to_nchw_kernel, blocks_for(work), kThreads, 0, stream,
                static_cast<const uint4*>(x), y, n, c, pixels, groups);
}

void padded_rows_fp16_to_fp32(const void* x, float* y, int64_t rows, int features,
                              cudaStream_t stream) {
  // NHWC with one pixel per sample is exactly [rows][pad8(features)], and NCHW with one pixel is
  // [rows][features]: the same kernel, its fp16 reads now fully contiguous.
  nhwc_fp16_to_nchw_fp32(x, y, rows, features, 1, 1, stream);
}

void fill_uniform_fp32(float* y, int64_t count, uint32_t seed, cudaStream_t stream) {
  if (count < 0) throw Error("fill_uniform_fp32: negative count");
  if (count == 0) return;
  launch_kernel(fill_uniform_kernel, blocks_for(count), kThreads, 0, stream, y, count, seed);
}

}  // namespace cnnrt::cuda
