// fp16 NHWC pooling: max, average, adaptive average, and global average (adaptive to 1x1).
//
// Design: one thread per (output pixel, group of 8 channels).  In NHWC the 8 channels of a pixel
// are one 16-byte vector, so every window tap is a single aligned load and neighbouring threads
// read neighbouring vectors (coalesced).  Windows are tiny (AlexNet: 3×3), so no shared-memory
// tiling: the overlapping taps of adjacent windows hit L1/L2.  Accumulation is fp32 (average) or
// an fp32 compare that lets NaN win (max, as PyTorch).  Padding channels (c >= C) are written as
// zeros explicitly rather than trusting the input's padding.  The same kernel body serves
// fixed windows and adaptive ones through a small window-policy functor.
//
// Global average pooling (adaptive to 1x1: the head of ResNet, MobileNet, EfficientNet) has few
// outputs and long windows (batch x C/8 vectors, 49 pixels each at 7x7), so one thread per
// output leaves most SMs idle and walks its window serially.  It gets its own kernel: a block of
// 32 chunk lanes x 8 pixel lanes per (image, 32 chunks); each thread sums every 8th pixel of its
// chunk (a warp reads 32 neighbouring 16-byte vectors of one pixel: 512 contiguous bytes), and
// the 8 partial sums meet in shared memory.
#include <cuda_fp16.h>

#include <algorithm>
#include <limits>

#include "cnnrt/error.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/pdl.cuh"
#include "kernels/cuda/pool_fp16.h"

namespace cnnrt::cuda {
namespace {

constexpr int kThreads = 256;

union Vec8 {
  uint4 raw;
  __half h[8];
};

struct Geometry {
  int64_t batch;
  int c, c_stride, h, w, oh, ow;
};

// Window of output (oy, ox) in input coordinates, clipped to the input, plus the divisor.
struct FixedWindow {
  int kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w;
  bool count_include_pad;
  __device__ void operator()(const Geometry& g, int oy, int ox, int& y0, int& y1, int& x0, int& x1,
                             int& divisor) const {
    const int py = oy * stride_h - pad_h, px = ox * stride_w - pad_w;
    // Clipped to the padded input first (a ceil_mode window may hang past the right padding).
    const int py1 = min(py + kernel_h, g.h + pad_h), px1 = min(px + kernel_w, g.w + pad_w);
    y0 = max(py, 0);
    x0 = max(px, 0);
    y1 = min(py1, g.h);
    x1 = min(px1, g.w);
    divisor = count_include_pad ? (py1 - py) * (px1 - px) : (y1 - y0) * (x1 - x0);
  }
};

struct AdaptiveWindow {
  __device__ void operator()(const Geometry& g, int oy, int ox, int& y0, int& y1, int& x0, int& x1,
                             int& divisor) const {
    y0 = static_cast<int>((static_cast<int64_t>(oy) * g.h) / g.oh);
    y1 = static_cast<int>((static_cast<int64_t>(oy + 1) * g.h + g.oh - 1) / g.oh);
    x0 = static_cast<int>((static_cast<int64_t>(ox) * g.w) / g.ow);
    x1 = static_cast<int>((static_cast<int64_t>(ox + 1) * g.w + g.ow - 1) / g.ow);
    divisor = (y1 - y0) * (x1 - x0);
  }
};

// One tap into the running max (an fp32 compare that lets NaN win, as PyTorch) or sum.
template <bool kMax>
__device__ __forceinline__ void accumulate(float (&acc)[8], const Vec8& v) {
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const float f = __half2float(v.h[j]);
    if (kMax) {
      if (f > acc[j] || f != f) acc[j] = (acc[j] != acc[j]) ? acc[j] : f;
    } else {
      acc[j] += f;
    }
  }
}

// Outputs are taken in reverse order, last image first.  A pool pass reads the tensor the layer
// before has just written in increasing order: read in that order too, it starts on the oldest
// lines, long evicted from L2, and its own misses then evict the newest before it gets to them —
// the pool after AlexNet's int8 conv2 read all of its 36 MB input from DRAM with a 50 MB L2
// (ncu, docs/PERFORMANCE.md run 52).  Backwards it starts on the lines still in L2.
template <bool kMax, typename Window>
__global__ void pool_kernel(const uint4* __restrict__ x, uint4* __restrict__ y, Geometry g,
                            Window window) {
  pdl_wait();
  const int groups = g.c_stride / 8;
  const int64_t total = g.batch * g.oh * g.ow * groups;
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < total;
       k += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = total - 1 - k;
    const int group = static_cast<int>(i % groups);
    int64_t rest = i / groups;
    const int ox = static_cast<int>(rest % g.ow);
    rest /= g.ow;
    const int oy = static_cast<int>(rest % g.oh);
    const int64_t n = rest / g.oh;
    int y0, y1, x0, x1, divisor;
    window(g, oy, ox, y0, y1, x0, x1, divisor);

    float acc[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[j] = kMax ? -INFINITY : 0.0f;
    const uint4* plane = x + n * g.h * g.w * groups + group;
    if (y1 - y0 == 3 && x1 - x0 == 3) {
      // A whole 3x3 window (AlexNet's, ResNet's stem): its nine loads issued together.  The
      // general loop below keeps one or two in flight per thread, and the pass is bound by loads
      // in flight (docs/PERFORMANCE.md run 38b/38c).
      Vec8 v[9];
      const uint4* tap = plane + (static_cast<int64_t>(y0) * g.w + x0) * groups;
#pragma unroll
      for (int t = 0; t < 9; ++t)
        v[t].raw = tap[(static_cast<int64_t>(t / 3) * g.w + t % 3) * groups];
#pragma unroll
      for (int t = 0; t < 9; ++t) accumulate<kMax>(acc, v[t]);
    } else {
      for (int iy = y0; iy < y1; ++iy)
        for (int ix = x0; ix < x1; ++ix) {
          Vec8 v;
          v.raw = plane[(static_cast<int64_t>(iy) * g.w + ix) * groups];
          accumulate<kMax>(acc, v);
        }
    }
    Vec8 out;
    const float inv = kMax ? 1.0f : 1.0f / static_cast<float>(divisor);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const bool real = group * 8 + j < g.c;
      out.h[j] = __float2half_rn(real ? (kMax ? acc[j] : acc[j] * inv) : 0.0f);
    }
    y[i] = out.raw;
  }
}

constexpr int kGapChunks = 32, kGapPixelLanes = 8;

// grid = (ceil(chunks / 32), batch); block = (32, 8).
__global__ void global_avgpool_kernel(const uint4* __restrict__ x, uint4* __restrict__ y,
                                      Geometry g) {
  pdl_wait();
  __shared__ float partial[kGapPixelLanes][kGapChunks][8];
  const int groups = g.c_stride / 8, pixels = g.h * g.w;
  const int lane = threadIdx.x, pixel_lane = threadIdx.y;
  const int group = blockIdx.x * kGapChunks + lane;
  const int64_t n = blockIdx.y;
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  if (group < groups) {
    const uint4* plane = x + n * pixels * groups + group;
    for (int p = pixel_lane; p < pixels; p += kGapPixelLanes) {
      Vec8 v;
      v.raw = plane[static_cast<int64_t>(p) * groups];
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[j] += __half2float(v.h[j]);
    }
  }
#pragma unroll
  for (int j = 0; j < 8; ++j) partial[pixel_lane][lane][j] = acc[j];
  __syncthreads();
  if (pixel_lane != 0 || group >= groups) return;
  const float inv = 1.0f / static_cast<float>(pixels);
  Vec8 out;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    float sum = 0.0f;
#pragma unroll
    for (int q = 0; q < kGapPixelLanes; ++q) sum += partial[q][lane][j];
    out.h[j] = __float2half_rn(group * 8 + j < g.c ? sum * inv : 0.0f);
  }
  y[n * groups + group] = out.raw;
}

Geometry make_geometry(int64_t batch, int c, int h, int w, int oh, int ow) {
  if (batch < 0 || c < 1 || h < 1 || w < 1 || oh < 1 || ow < 1)
    throw Error("pool_fp16: invalid extents");
  return Geometry{batch, c, (c + 7) / 8 * 8, h, w, oh, ow};
}

int grid_for(const Geometry& g) {
  const int64_t work = g.batch * g.oh * g.ow * (g.c_stride / 8);
  const int64_t blocks = (work + kThreads - 1) / kThreads;
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(blocks, 132 * 16)));
}

FixedWindow fixed_window(const PoolAttrs& a) {
  if (a.kernel_h < 1 || a.kernel_w < 1 || a.stride_h < 1 || a.stride_w < 1 || a.pad_h < 0 ||
      a.pad_w < 0)
    throw Error("pool_fp16: invalid pool attributes");
  return FixedWindow{a.kernel_h, a.kernel_w, a.stride_h,         a.stride_w,
                     a.pad_h,    a.pad_w,    a.count_include_pad};
}

template <bool kMax, typename Window>
void launch(const void* x, void* y, const Geometry& g, const Window& window, cudaStream_t stream) {
  if (g.batch == 0) return;
  launch_kernel(pool_kernel<kMax, Window>, grid_for(g), kThreads, 0, stream,
                static_cast<const uint4*>(x), static_cast<uint4*>(y), g, window);
}

}  // namespace

void maxpool_fp16(const void* x, void* y, int64_t batch, int c, int h, int w,
                  const PoolAttrs& attrs, int oh, int ow, cudaStream_t stream) {
  launch<true>(x, y, make_geometry(batch, c, h, w, oh, ow), fixed_window(attrs), stream);
}

void avgpool_fp16(const void* x, void* y, int64_t batch, int c, int h, int w,
                  const PoolAttrs& attrs, int oh, int ow, cudaStream_t stream) {
  launch<false>(x, y, make_geometry(batch, c, h, w, oh, ow), fixed_window(attrs), stream);
}

void adaptive_avgpool_fp16(const void* x, void* y, int64_t batch, int c, int h, int w, int oh,
                           int ow, cudaStream_t stream) {
  if (oh == 1 && ow == 1) {
    const Geometry g = make_geometry(batch, c, h, w, oh, ow);
    if (g.batch == 0) return;
    if (g.batch > 65535) throw Error("pool_fp16: global average pool batch over 65535");
    const dim3 grid((g.c_stride / 8 + kGapChunks - 1) / kGapChunks, static_cast<unsigned>(g.batch));
    launch_kernel(global_avgpool_kernel, grid, dim3(kGapChunks, kGapPixelLanes), 0, stream,
                  static_cast<const uint4*>(x), static_cast<uint4*>(y), g);
    return;
  }
  launch<false>(x, y, make_geometry(batch, c, h, w, oh, ow), AdaptiveWindow{}, stream);
}

}  // namespace cnnrt::cuda
