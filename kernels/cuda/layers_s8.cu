// The int8 CUDA layers without weights (design note in layers_s8.h).
#include <algorithm>

#include "cnnrt/error.h"
#include "kernels/cuda/conv/conv_s8.h"
#include "kernels/cuda/conv/epilogue_s8.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/layers_s8.h"
#include "kernels/cuda/pdl.cuh"

namespace cnnrt::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 1 << 20;

int blocks_for(int64_t total) {
  return static_cast<int>(std::min<int64_t>((total + kThreads - 1) / kThreads, kMaxBlocks));
}

// The window of output (oy, ox) as [ya, yb) x [xa, xb) of valid pixels, and its divisor.
struct Window {
  int ya, yb, xa, xb, divisor;
};

__device__ Window window_of(const S8Pool& p, int oy, int ox) {
  Window win;
  if (p.kind == S8Pool::Kind::Adaptive) {
    win.ya = static_cast<int>((static_cast<int64_t>(oy) * p.h) / p.out_h);
    win.yb = static_cast<int>((static_cast<int64_t>(oy + 1) * p.h + p.out_h - 1) / p.out_h);
    win.xa = static_cast<int>((static_cast<int64_t>(ox) * p.w) / p.out_w);
    win.xb = static_cast<int>((static_cast<int64_t>(ox + 1) * p.w + p.out_w - 1) / p.out_w);
    win.divisor = (win.yb - win.ya) * (win.xb - win.xa);
    return win;
  }
  const int y0 = oy * p.stride_h - p.pad_h, x0 = ox * p.stride_w - p.pad_w;
  if (p.kind == S8Pool::Kind::Max) {  // the kernel's taps within the map
    win.ya = max(y0, 0);
    win.yb = min(y0 + p.kh, p.h);
    win.xa = max(x0, 0);
    win.xb = min(x0 + p.kw, p.w);
    win.divisor = 0;
    return win;
  }
  // Average: the reference's padded extent and PyTorch's divisor (pool_ref.cpp).
  const int y1_padded = min(y0 + p.kh, p.h + p.pad_h), x1_padded = min(x0 + p.kw, p.w + p.pad_w);
  win.ya = max(y0, 0);
  win.yb = min(y1_padded, p.h);
  win.xa = max(x0, 0);
  win.xb = min(x1_padded, p.w);
  win.divisor = p.count_include_pad ? (y1_padded - y0) * (x1_padded - x0)
                                    : (win.yb - win.ya) * (win.xb - win.xa);
  return win;
}

__global__ void pool_s8_kernel(const S8Pool p, const int8_t* __restrict__ x, int8_t* __restrict__ y,
                               int64_t total) {
  pdl_wait();
  const int stride = padded16(p.c);
  for (int64_t index = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; index < total;
       index += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int c = static_cast<int>(index % stride);
    const int64_t pixel = index / stride;
    const int ox = static_cast<int>(pixel % p.out_w);
    const int64_t rest = pixel / p.out_w;
    const int oy = static_cast<int>(rest % p.out_h);
    const int64_t n = rest / p.out_h;
    if (c >= p.c) {
      y[index] = 0;
      continue;
    }
    const int8_t* image = x + n * p.h * p.w * stride + c;
    const Window win = window_of(p, oy, ox);
    int value = p.kind == S8Pool::Kind::Max ? -129 : 0;  // max: padding never wins
    for (int iy = win.ya; iy < win.yb; ++iy)
      for (int ix = win.xa; ix < win.xb; ++ix) {
        const int v = image[(static_cast<int64_t>(iy) * p.w + ix) * stride];
        value = p.kind == S8Pool::Kind::Max ? max(value, v) : value + v;
      }
    y[index] = s8::requantize(value, p.multipliers[win.divisor], -127, 127);
  }
}

__global__ void requantize_s8_kernel(const int8_t* x, int8_t* y, int64_t count, float multiplier,
                                     int lo, int hi) {
  pdl_wait();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] = s8::requantize(x[i], multiplier, lo, hi);
}

// One thread per 4 bytes (a 16-byte row stride keeps them in one row): one 32-bit load of each
// input, one store.  The arithmetic, per byte, is ref::add_int8's and activation_int8's with
// multiplier 1: the product a·M_a rounded once, the fma rounded once, RNE to an integer,
// clamped to [-127, 127], then to the activation's [lo, hi].
__global__ void add_s8_kernel(const uint32_t* a, float multiplier_a, const uint32_t* b,
                              float multiplier_b, uint32_t* y, int64_t words, int c, int stride,
                              int lo, int hi) {
  pdl_wait();
  for (int64_t index = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; index < words;
       index += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint32_t wa = a[index], wb = b[index];
    const int first = static_cast<int>((index * 4) % stride);  // channel of the first byte
    uint32_t out = 0;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int qa = static_cast<int8_t>(wa >> (8 * k)), qb = static_cast<int8_t>(wb >> (8 * k));
      const float a_part = __fmul_rn(__int2float_rn(qa), multiplier_a);
      int q = __float2int_rn(__fmaf_rn(__int2float_rn(qb), multiplier_b, a_part));
      q = q < -127 ? -127 : (q > 127 ? 127 : q);
      q = q < lo ? lo : (q > hi ? hi : q);
      if (first + k >= c) q = 0;  // padding lanes
      out |= static_cast<uint32_t>(static_cast<uint8_t>(q)) << (8 * k);
    }
    y[index] = out;
  }
}

__global__ void flatten_s8_kernel(const int8_t* __restrict__ x, int8_t* __restrict__ y,
                                  int64_t total, int c, int pixels, int in_stride, int out_stride) {
  pdl_wait();
  for (int64_t index = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; index < total;
       index += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t n = index / out_stride;
    const int feature = static_cast<int>(index - n * out_stride);
    const int pixel = feature / c, channel = feature - pixel * c;
    y[index] = pixel < pixels ? x[(n * pixels + pixel) * static_cast<int64_t>(in_stride) + channel]
                              : int8_t{0};
  }
}

}  // namespace

void pool_s8(const S8Pool& pool, const void* x, void* y, int batch, cudaStream_t stream) {
  const int64_t total = static_cast<int64_t>(batch) * pool.out_h * pool.out_w * padded16(pool.c);
  if (total <= 0) return;
  if (pool.multipliers == nullptr) throw Error("pool_s8: no multiplier table");
  launch_kernel(pool_s8_kernel, blocks_for(total), kThreads, 0, stream, pool,
                static_cast<const int8_t*>(x), static_cast<int8_t*>(y), total);
}

void requantize_s8(const void* x, void* y, int64_t count, float multiplier, int lo, int hi,
                   cudaStream_t stream) {
  if (count <= 0) return;
  launch_kernel(requantize_s8_kernel, blocks_for(count), kThreads, 0, stream,
                static_cast<const int8_t*>(x), static_cast<int8_t*>(y), count, multiplier, lo, hi);
}

void add_s8(const void* a, float multiplier_a, const void* b, float multiplier_b, void* y,
            int64_t rows, int c, int lo, int hi, cudaStream_t stream) {
  const int stride = padded16(c);
  const int64_t words = rows * stride / 4;
  if (words <= 0) return;
  launch_kernel(add_s8_kernel, blocks_for(words), kThreads, 0, stream,
                static_cast<const uint32_t*>(a), multiplier_a, static_cast<const uint32_t*>(b),
                multiplier_b, static_cast<uint32_t*>(y), words, c, stride, lo, hi);
}

void flatten_nhwc_s8(const void* x, void* y, int64_t batch, int c, int h, int w,
                     cudaStream_t stream) {
  const int out_stride = padded16(c * h * w);
  const int64_t total = batch * out_stride;
  if (total <= 0) return;
  launch_kernel(flatten_s8_kernel, blocks_for(total), kThreads, 0, stream,
                static_cast<const int8_t*>(x), static_cast<int8_t*>(y), total, c, h * w,
                padded16(c), out_stride);
}

}  // namespace cnnrt::cuda
