// int8 direct convolution (grouped and depthwise layers) and the NHWC max-pool that completes an
// int8 conv with a fused pool (conv_s8.h).
//
// Design: correctness and generality first — one thread per output element (sample, pixel,
// channel), channels fastest so a warp reads neighbouring weights and writes one coalesced
// 32-byte run.  The inner loop is the reference's sum in int32 (exact, so the order of the terms
// does not matter) over the window's valid pixels and the group's input channels; the epilogue
// is epilogue_s8.cuh's.  Grouped convs are a small share of the work in the models cnnrt runs
// (depthwise layers are memory bound), and a dense conv takes the tensor-core GEMM
// (igemm_s8.cu), so this kernel is not tiled.
//
// The pool: a fused max-pool's pre-pool tensor is already at the output's scale, so the int8
// max is copied unchanged (multiplier 1), 16 channels per thread with per-byte SIMD maxima
// (__vmaxs4); the fp32 form (a conv that is the graph output)
// compares as ref::maxpool2d does (`v > best`, starting from -inf: padding never wins).
#include <algorithm>
#include <cmath>

#include "cnnrt/error.h"
#include "kernels/cuda/conv/conv_s8.h"
#include "kernels/cuda/conv/epilogue_s8.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/pdl.cuh"

namespace cnnrt::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 1 << 20;

int blocks_for(int64_t total) {
  return static_cast<int>(std::min<int64_t>((total + kThreads - 1) / kThreads, kMaxBlocks));
}

// Σ q_x·q_w of output channel c at output pixel (oy, ox) of one sample.
__device__ int direct_sum(const S8Conv& p, const int8_t* __restrict__ image, int c, int oy,
                          int ox) {
  const int in_per_group = p.in_c / p.groups, out_per_group = p.out_c / p.groups;
  const int first_channel = (c / out_per_group) * in_per_group;
  const int8_t* w = p.weight + static_cast<int64_t>(c) * p.kh * p.kw * in_per_group;
  int acc = 0;
  for (int r = 0; r < p.kh; ++r) {
    const int iy = oy * p.stride_h - p.pad_h + r * p.dil_h;
    if (iy < 0 || iy >= p.in_h) continue;
    for (int s = 0; s < p.kw; ++s) {
      const int ix = ox * p.stride_w - p.pad_w + s * p.dil_w;
      if (ix < 0 || ix >= p.in_w) continue;
      const int8_t* x =
          image + (static_cast<int64_t>(iy) * p.in_w + ix) * p.in_stride + first_channel;
      const int8_t* wk = w + (r * p.kw + s) * in_per_group;
      for (int ci = 0; ci < in_per_group; ++ci)
        acc += static_cast<int>(x[ci]) * static_cast<int>(wk[ci]);
    }
  }
  return acc;
}

template <bool kFloat>
__global__ void direct_s8_kernel(const S8Conv p, const int8_t* __restrict__ x, void* __restrict__ y,
                                 int64_t total) {
  pdl_wait();
  for (int64_t index = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; index < total;
       index += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int c = static_cast<int>(index % p.out_stride);
    const int64_t pixel = index / p.out_stride;
    const int ox = static_cast<int>(pixel % p.out_w);
    const int64_t rest = pixel / p.out_w;
    const int oy = static_cast<int>(rest % p.out_h);
    const int64_t n = rest / p.out_h;
    const int acc =
        c < p.out_c ? direct_sum(p, x + n * p.in_h * p.in_w * p.in_stride, c, oy, ox) : 0;
    if constexpr (kFloat)
      static_cast<float*>(y)[index] = s8::float_output(p, c, acc);
    else
      static_cast<int8_t*>(y)[index] = s8::int8_output(p, c, acc);
  }
}

// One output element of a max-pool over NHWC rows of `stride` elements.
template <typename T>
__global__ void maxpool_kernel(const NhwcPool p, int stride, const T* __restrict__ x,
                               T* __restrict__ y, int64_t total) {
  pdl_wait();
  for (int64_t index = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; index < total;
       index += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int c = static_cast<int>(index % stride);
    const int64_t pixel = index / stride;
    const int ox = static_cast<int>(pixel % p.out_w);
    const int64_t rest = pixel / p.out_w;
    const int oy = static_cast<int>(rest % p.out_h);
    const int64_t n = rest / p.out_h;
    if (c >= p.c) {
      y[index] = T(0);
      continue;
    }
    const T* image = x + n * p.h * p.w * stride;
    float best = -INFINITY;  // int8 values are exact in float; padding never wins
    for (int r = 0; r < p.kh; ++r) {
      const int iy = oy * p.stride_h - p.pad_h + r;
      if (iy < 0 || iy >= p.h) continue;
      for (int s = 0; s < p.kw; ++s) {
        const int ix = ox * p.stride_w - p.pad_w + s;
        if (ix < 0 || ix >= p.w) continue;
        const float v =
            static_cast<float>(image[(static_cast<int64_t>(iy) * p.w + ix) * stride + c]);
        if (v > best) best = v;
      }
    }
    y[index] = static_cast<T>(best);
  }
}

__device__ __forceinline__ uint4 max_s8x16(uint4 a, uint4 b) {
  return make_uint4(__vmaxs4(a.x, b.x), __vmaxs4(a.y, b.y), __vmaxs4(a.z, b.z), __vmaxs4(a.w, b.w));
}

// The int8 fused pool, 16 channels per thread: four __vmaxs4 (per-byte signed max) per window
// tap on 16-byte rows.  The padding lanes are zeros in the pre-pool tensor, so their max is 0.
// The outputs are taken last image first (pool_fp16.cu's pool_kernel says why: the conv before
// wrote the last images last, so they are the ones still in L2).
__global__ void maxpool_s8x16_kernel(const NhwcPool p, const uint4* __restrict__ x,
                                     uint4* __restrict__ y, int64_t total) {
  pdl_wait();
  const int groups = padded16(p.c) / 16;
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < total;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t index = total - 1 - k;
    const int group = static_cast<int>(index % groups);
    const int64_t pixel = index / groups;
    const int ox = static_cast<int>(pixel % p.out_w);
    const int64_t rest = pixel / p.out_w;
    const int oy = static_cast<int>(rest % p.out_h);
    const int64_t n = rest / p.out_h;
    const uint4* image = x + n * p.h * p.w * groups + group;
    const int y0 = max(oy * p.stride_h - p.pad_h, 0),
              y1 = min(oy * p.stride_h - p.pad_h + p.kh, p.h);
    const int x0 = max(ox * p.stride_w - p.pad_w, 0),
              x1 = min(ox * p.stride_w - p.pad_w + p.kw, p.w);
    const uint4* corner = image + (static_cast<int64_t>(y0) * p.w + x0) * groups;
    uint4 best = *corner;  // a real element
    if (y1 - y0 == 3 && x1 - x0 == 3) {
      // A whole 3x3 window (AlexNet's pools): its nine loads issued together.  The loop below
      // keeps one or two in flight per thread, and the pass is bound by loads in flight (as
      // maxpool_fp16's, docs/PERFORMANCE.md runs 38b-c).
      uint4 v[8];
#pragma unroll
      for (int t = 1; t < 9; ++t)
        v[t - 1] = corner[(static_cast<int64_t>(t / 3) * p.w + t % 3) * groups];
#pragma unroll
      for (int t = 0; t < 8; ++t) best = max_s8x16(best, v[t]);
    } else {
      for (int iy = y0; iy < y1; ++iy)
        for (int ix = x0; ix < x1; ++ix)
          best = max_s8x16(best, image[(static_cast<int64_t>(iy) * p.w + ix) * groups]);
    }
    y[index] = best;
  }
}

template <typename T>
void launch_maxpool(const NhwcPool& pool, int stride, const T* x, T* y, int batch,
                    cudaStream_t stream) {
  const int64_t total = static_cast<int64_t>(batch) * pool.out_h * pool.out_w * stride;
  if (total <= 0) return;
  launch_kernel(maxpool_kernel<T>, blocks_for(total), kThreads, 0, stream, pool, stride, x, y,
                total);
}

}  // namespace

void conv_s8_direct(const S8Conv& conv, const void* x, void* y, int batch, cudaStream_t stream) {
  if (conv.groups < 1 || conv.in_c % conv.groups != 0 || conv.out_c % conv.groups != 0)
    throw Error("conv_s8_direct: invalid groups");
  const int64_t total = static_cast<int64_t>(batch) * conv.out_h * conv.out_w * conv.out_stride;
  if (total <= 0) return;
  const auto* in = static_cast<const int8_t*>(x);
  if (conv.float_output)
    launch_kernel(direct_s8_kernel<true>, blocks_for(total), kThreads, 0, stream, conv, in, y,
                  total);
  else
    launch_kernel(direct_s8_kernel<false>, blocks_for(total), kThreads, 0, stream, conv, in, y,
                  total);
}

void maxpool_nhwc_s8(const NhwcPool& pool, const void* x, void* y, int batch, cudaStream_t stream) {
  const int64_t total =
      static_cast<int64_t>(batch) * pool.out_h * pool.out_w * (padded16(pool.c) / 16);
  if (total <= 0) return;
  launch_kernel(maxpool_s8x16_kernel, blocks_for(total), kThreads, 0, stream, pool,
                static_cast<const uint4*>(x), static_cast<uint4*>(y), total);
}

void maxpool_nhwc_f32(const NhwcPool& pool, const float* x, float* y, int batch,
                      cudaStream_t stream) {
  launch_maxpool(pool, (pool.c + 7) / 8 * 8, x, y, batch, stream);
}

}  // namespace cnnrt::cuda
