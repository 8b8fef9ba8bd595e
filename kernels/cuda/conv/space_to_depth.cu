// Space-to-depth rearrangement (from NHWC fp16, or straight from the NCHW fp32 graph input) and
// the host-side conv rewrite; see space_to_depth.h for the math and
// docs/kernels/space_to_depth.md for why and how fast.
//
// From NCHW fp32 (the graph input, AlexNet conv1's case) the tiled kernel of s2d_tile.cuh runs
// wherever s2d_tile_plan serves the shape (block <= 32, a warp tile <= 8 KB: every conv the entry
// accepts): a warp per run of consecutive blocks of one block row, coalesced row loads, each
// value rounded once into a shared-memory image of the tile, 16-byte contiguous stores.
//
// The generic kernel below serves the NHWC fp16 source and the shapes the tiled one does not:
// one thread per 8-channel chunk of one output pixel, chunks of a pixel on adjacent threads, so a
// warp writes 512 contiguous bytes with 16-byte stores.  The 8 source values come from up to 8
// pixels of one s×s block, read with 2-byte (NHWC fp16) or 4-byte (NCHW fp32) loads that L1/L2
// merge (a warp's sources are a few neighbouring pixels); the (tap, channel) decomposition of the
// chunk's first channel costs two divisions per thread, the 8 lanes then advance it by
// increments.  It is instruction-bound on the fp32 source (8 loads, bounds checks and
// conversions per 16 bytes written), hence the tiled kernel there.
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "kernels/cuda/conv/s2d_tile.cuh"
#include "kernels/cuda/conv/space_to_depth.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/pdl.cuh"

namespace cnnrt::cuda {
namespace {

struct SpaceToDepthParams {
  int in_c, in_h, in_w, in_cs;
  int block, pad_h, pad_w;
  int out_h, out_w;
  int real_c;  // block * block * in_c
  int chunks;  // out_c_stride / 8
};

// Where the source values come from.  The kernel is the same for both forms; only the load of
// real channel c of pixel (iy, ix) of sample n differs.
// The backend layout: NHWC fp16, channel stride in_cs (padding channels never read).
struct NhwcFp16Source {
  const __half* __restrict__ x;
  __device__ __forceinline__ unsigned short operator()(const SpaceToDepthParams& p, long long n,
                                                       int iy, int ix, int c) const {
    return __half_as_ushort(x[((n * p.in_h + iy) * p.in_w + ix) * p.in_cs + c]);
  }
};
// The graph input as the host gave it: NCHW fp32, rounded to nearest-even exactly as the
// layout conversion (nchw_fp32_to_nhwc_fp16) rounds, so both paths give the same bits.
struct NchwFp32Source {
  const float* __restrict__ x;
  __device__ __forceinline__ unsigned short operator()(const SpaceToDepthParams& p, long long n,
                                                       int iy, int ix, int c) const {
    return __half_as_ushort(__float2half_rn(x[((n * p.in_c + c) * p.in_h + iy) * p.in_w + ix]));
  }
};

template <typename Source>
__global__ void space_to_depth_kernel(Source source, uint4* __restrict__ y, SpaceToDepthParams p,
                                      long long total_chunks) {
  pdl_wait();
  const long long step = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long index = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
       index < total_chunks; index += step) {
    const int chunk = static_cast<int>(index % p.chunks);
    long long pixel = index / p.chunks;
    const int bx = static_cast<int>(pixel % p.out_w);
    pixel /= p.out_w;
    const int by = static_cast<int>(pixel % p.out_h);
    const long long n = pixel / p.out_h;

    const int first = chunk * 8;
    const int tap = first / p.in_c;
    int c = first - tap * p.in_c;
    int dy = tap / p.block;
    int dx = tap - dy * p.block;

    uint32_t words[4];
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      unsigned short bits = 0;  // +0 for padding channels and pixels outside the image
      if (first + i < p.real_c) {
        const int iy = by * p.block + dy - p.pad_h;
        const int ix = bx * p.block + dx - p.pad_w;
        if (iy >= 0 && iy < p.in_h && ix >= 0 && ix < p.in_w) bits = source(p, n, iy, ix, c);
      }
      if (i % 2 == 0)
        words[i / 2] = bits;
      else
        words[i / 2] |= static_cast<uint32_t>(bits) << 16;
      if (++c == p.in_c) {
        c = 0;
        if (++dx == p.block) {
          dx = 0;
          ++dy;
        }
      }
    }
    y[index] = make_uint4(words[0], words[1], words[2], words[3]);
  }
}

// The tiled kernel's conversion: the same rounding as NchwFp32Source's.
struct RoundToHalf {
  using Bits = uint16_t;
  static constexpr bool kMayDefer = false;
  __device__ __forceinline__ Bits operator()(float v, uint32_t&, uint32_t) const {
    return __half_as_ushort(__float2half_rn(v));
  }
};

S2dTileShape tile_shape(const SpaceToDepthShape& shape) {
  S2dTileShape t;
  t.c = shape.in_c;
  t.h = shape.in_h;
  t.w = shape.in_w;
  t.block = shape.block;
  t.pad_h = shape.pad_h;
  t.pad_w = shape.pad_w;
  t.out_h = shape.out_h;
  t.out_w = shape.out_w;
  t.out_stride = shape.out_c_stride();
  t.out_bytes = sizeof(__half);
  return t;
}

int ceil_div(int a, int b) { return (a + b - 1) / b; }

}  // namespace

size_t space_to_depth_bytes(const SpaceToDepthShape& shape, int batch) {
  return static_cast<size_t>(batch) * shape.out_h * shape.out_w * shape.out_c_stride() *
         sizeof(__half);
}

namespace {

// Checks the arguments of either entry point; false when there is nothing to do (batch 0).
bool check_launch(const void* x, const void* y, const SpaceToDepthShape& shape, int batch) {
  if (shape.in_c <= 0 || shape.in_h <= 0 || shape.in_w <= 0 || shape.block <= 0 ||
      shape.out_h <= 0 || shape.out_w <= 0 || batch < 0)
    throw Error("space_to_depth: bad shape (C " + std::to_string(shape.in_c) + ", block " +
                std::to_string(shape.block) + ", batch " + std::to_string(batch) + ")");
  if (batch == 0) return false;
  if (x == nullptr || y == nullptr) throw Error("space_to_depth: null tensor pointer");
  if (reinterpret_cast<uintptr_t>(y) % 16 != 0)
    throw Error("space_to_depth: output pointer is not 16-byte aligned");
  return true;
}

template <typename Source>
void launch(Source source, void* y, const SpaceToDepthShape& shape, int batch,
            cudaStream_t stream) {
  SpaceToDepthParams p;
  p.in_c = shape.in_c;
  p.in_h = shape.in_h;
  p.in_w = shape.in_w;
  p.in_cs = padded_channels(shape.in_c);
  p.block = shape.block;
  p.pad_h = shape.pad_h;
  p.pad_w = shape.pad_w;
  p.out_h = shape.out_h;
  p.out_w = shape.out_w;
  p.real_c = shape.out_c();
  p.chunks = shape.out_c_stride() / 8;
  const long long total = static_cast<long long>(batch) * shape.out_h * shape.out_w * p.chunks;
  constexpr int kThreads = 256;
  // The grid-stride loop covers anything past this cap; 2^20 CTAs is far beyond a full wave.
  const long long blocks = std::min<long long>((total + kThreads - 1) / kThreads, 1LL << 20);
  launch_kernel(space_to_depth_kernel<Source>, static_cast<unsigned>(blocks), kThreads, 0, stream,
                source, static_cast<uint4*>(y), p, total);
}

}  // namespace

void space_to_depth_fp16(const void* x, void* y, const SpaceToDepthShape& shape, int batch,
                         cudaStream_t stream) {
  if (!check_launch(x, y, shape, batch)) return;
  launch(NhwcFp16Source{static_cast<const __half*>(x)}, y, shape, batch, stream);
}

void space_to_depth_nchw_fp32(const float* x, void* y, const SpaceToDepthShape& shape, int batch,
                              cudaStream_t stream, S2dKernel kernel) {
  if (!check_launch(x, y, shape, batch)) return;
  const S2dTileShape tiled = tile_shape(shape);
  const S2dTilePlan plan = kernel == S2dKernel::Auto
                               ? s2d_tile_plan(tiled, batch, reinterpret_cast<uintptr_t>(x))
                               : S2dTilePlan{};
  if (plan.tiled)
    s2d_tile::launch(x, y, tiled, plan, RoundToHalf{}, stream);
  else
    launch(NchwFp32Source{x}, y, shape, batch, stream);
}

std::optional<SpaceToDepthConv> space_to_depth_conv(const ConvShape& shape, int channel_stride) {
  const ConvAttrs& a = shape.conv;
  if (shape.in_c <= 0 || shape.in_h <= 0 || shape.in_w <= 0 || shape.out_c <= 0) return {};
  if (a.groups != 1 || a.dilation_h != 1 || a.dilation_w != 1) return {};
  if (a.stride_h != a.stride_w || a.stride_h < 1 || a.kernel_h < 1 || a.kernel_w < 1 ||
      a.pad_h < 0 || a.pad_w < 0)
    return {};
  const int s = a.stride_h;
  // Keep every derived size comfortably inside int (C' is a channel count of the new conv).
  if (static_cast<long long>(s) * s * shape.in_c > (1 << 16) || channel_stride > (1 << 16))
    return {};
  if (channel_stride != 0 && (channel_stride % 8 != 0 || channel_stride < s * s * shape.in_c))
    return {};

  SpaceToDepthConv result;
  result.original = shape;
  result.original.conv.out_channels = shape.out_c;
  result.original.derive();
  const ConvShape& o = result.original;
  if (o.conv_h <= 0 || o.conv_w <= 0 || o.out_h <= 0 || o.out_w <= 0) return {};

  const int kh = ceil_div(a.kernel_h, s), kw = ceil_div(a.kernel_w, s);
  SpaceToDepthShape& r = result.rearrange;
  r.in_c = shape.in_c;
  r.in_h = shape.in_h;
  r.in_w = shape.in_w;
  r.block = s;
  r.pad_h = a.pad_h;
  r.pad_w = a.pad_w;
  r.out_h = o.conv_h + kh - 1;
  r.out_w = o.conv_w + kw - 1;
  r.channel_stride = channel_stride;

  ConvShape& t = result.transformed;
  t.in_c = r.out_c_stride();  // declared padded: weights are zero there, and C' > 4 → vector path
  t.in_h = r.out_h;
  t.in_w = r.out_w;
  t.out_c = shape.out_c;
  t.conv = ConvAttrs{};
  t.conv.out_channels = shape.out_c;
  t.conv.kernel_h = kh;
  t.conv.kernel_w = kw;
  t.activation = shape.activation;
  t.pool = shape.pool;
  t.derive();
  if (t.conv_h != o.conv_h || t.conv_w != o.conv_w || t.out_h != o.out_h || t.out_w != o.out_w)
    return {};
  return result;
}

std::vector<float> space_to_depth_weights(const SpaceToDepthConv& conv, const float* weight) {
  if (weight == nullptr) throw Error("space_to_depth: weight is null");
  const ConvShape& o = conv.original;
  const ConvShape& t = conv.transformed;
  const int s = conv.rearrange.block, c_count = o.in_c;
  const int kh = o.conv.kernel_h, kw = o.conv.kernel_w;
  const int tkh = t.conv.kernel_h, tkw = t.conv.kernel_w, tc = t.in_c;
  std::vector<float> out(static_cast<size_t>(o.out_c) * tc * tkh * tkw, 0.0f);
  // Every original tap lands on exactly one transformed tap; the rest stay zero.
  for (int oc = 0; oc < o.out_c; ++oc)
    for (int c = 0; c < c_count; ++c)
      for (int ky = 0; ky < kh; ++ky)
        for (int kx = 0; kx < kw; ++kx) {
          const int channel = ((ky % s) * s + kx % s) * c_count + c;
          out[((static_cast<size_t>(oc) * tc + channel) * tkh + ky / s) * tkw + kx / s] =
              weight[((static_cast<size_t>(oc) * c_count + c) * kh + ky) * kw + kx];
        }
  return out;
}

}  // namespace cnnrt::cuda
