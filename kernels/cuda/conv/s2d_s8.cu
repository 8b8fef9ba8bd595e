// The int8 space-to-depth rearrangement (design note in conv_s8.h, S8SpaceToDepth).
//
// From fp32 NCHW (the graph input: the quantising first layer, AlexNet conv1) the tiled kernel of
// s2d_tile.cuh runs wherever s2d_tile_plan serves the shape (block <= 32, a warp tile <= 8 KB:
// every shape conv_int8_s2d accepts, s·s·C <= 64): coalesced row loads, each input value
// quantised exactly once into a shared-memory image of the warp's tile, 16-byte contiguous
// stores.  Values are quantised to the conversion step's exact bits (convert.cu:
// __float2int_rn(__fdiv_rn(x, s)) clamped to ±127; the generic kernel with that formula, the
// tiled one with a reciprocal multiply that falls back to it wherever it could differ:
// s2d_quantise.cuh has the proof), so a conv that reads the graph input directly gives the bits
// it would give behind a conversion step.
//
// The generic kernel below serves the int8 NHWC/16 source and the shapes the tiled kernel does
// not: one thread per 16-byte channel group of a block, blocks fastest, each byte with its own
// (tap, channel) index math and a scattered load; a warp's reads of one channel and tap are
// neighbouring pixels, merged by L1/L2.  Instruction-bound on the fp32 source (hence the tiled
// kernel there), and with 16 bytes per thread a batch-1 AlexNet launch gets only 39 CTAs.
#include <algorithm>

#include "kernels/cuda/conv/conv_s8.h"
#include "kernels/cuda/conv/s2d_quantise.cuh"
#include "kernels/cuda/conv/s2d_tile.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/pdl.cuh"

namespace cnnrt::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 1 << 20;

// One rearranged byte: channel `channel` of block (by, bx) of sample n.
template <bool kFp32Source>
__device__ __forceinline__ int8_t s2d_value(const S8SpaceToDepth& p, const void* x, int64_t n,
                                            int by, int bx, int channel, int in_stride) {
  if (channel >= p.s * p.s * p.c) return 0;
  const int c = channel % p.c, tap = channel / p.c;
  const int iy = by * p.s - p.pad_h + tap / p.s, ix = bx * p.s - p.pad_w + tap % p.s;
  if (iy < 0 || iy >= p.h || ix < 0 || ix >= p.w) return 0;
  if constexpr (kFp32Source) {
    const float v =
        static_cast<const float*>(x)[((n * p.c + c) * p.h + iy) * static_cast<int64_t>(p.w) + ix];
    return s2d_quantise::quantise_exact(v, p.input_scale);
  } else {
    return static_cast<const int8_t*>(
        x)[((n * p.h + iy) * static_cast<int64_t>(p.w) + ix) * in_stride + c];
  }
}

// One thread per 16-byte group of one block: neighbouring threads are neighbouring blocks, so
// the (scattered per thread) reads are coalesced across the warp, and each write is a uint4.
template <bool kFp32Source>
__global__ void space_to_depth_kernel(const S8SpaceToDepth p, const void* __restrict__ x,
                                      uint4* __restrict__ y, int64_t total) {
  pdl_wait();
  const int in_stride = padded16(p.c), groups = p.out_stride / 16;
  for (int64_t index = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; index < total;
       index += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t block = index % (static_cast<int64_t>(p.blocks_h) * p.blocks_w);
    const int64_t rest = index / (static_cast<int64_t>(p.blocks_h) * p.blocks_w);
    const int group = static_cast<int>(rest % groups);
    const int64_t n = rest / groups;
    const int bx = static_cast<int>(block % p.blocks_w), by = static_cast<int>(block / p.blocks_w);
    uint32_t words[4];
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      uint32_t word = 0;
#pragma unroll
      for (int b = 0; b < 4; ++b)
        word |= static_cast<uint32_t>(static_cast<uint8_t>(
                    s2d_value<kFp32Source>(p, x, n, by, bx, group * 16 + w * 4 + b, in_stride)))
                << (8 * b);
      words[w] = word;
    }
    y[((n * p.blocks_h * p.blocks_w) + block) * groups + group] =
        make_uint4(words[0], words[1], words[2], words[3]);
  }
}

}  // namespace

void space_to_depth_s8(const S8SpaceToDepth& s2d, const void* x, bool fp32_nchw_source, void* y,
                       int batch, cudaStream_t stream, S2dKernel kernel) {
  const int64_t total =
      static_cast<int64_t>(batch) * s2d.blocks_h * s2d.blocks_w * (s2d.out_stride / 16);
  if (total <= 0) return;
  if (fp32_nchw_source && kernel == S2dKernel::Auto) {
    S2dTileShape shape;
    shape.c = s2d.c;
    shape.h = s2d.h;
    shape.w = s2d.w;
    shape.block = s2d.s;
    shape.pad_h = s2d.pad_h;
    shape.pad_w = s2d.pad_w;
    shape.out_h = s2d.blocks_h;
    shape.out_w = s2d.blocks_w;
    shape.out_stride = s2d.out_stride;
    shape.out_bytes = 1;
    const S2dTilePlan plan = s2d_tile_plan(shape, batch, reinterpret_cast<uintptr_t>(x));
    if (plan.tiled) {
      const s2d_quantise::QuantiseByReciprocal quantise{
          s2d.input_scale, s2d_quantise::filter_reciprocal(s2d.input_scale)};
      s2d_tile::launch(static_cast<const float*>(x), y, shape, plan, quantise, stream);
      return;
    }
  }
  const int blocks =
      static_cast<int>(std::min<int64_t>((total + kThreads - 1) / kThreads, kMaxBlocks));
  auto* out = static_cast<uint4*>(y);
  if (fp32_nchw_source)
    launch_kernel(space_to_depth_kernel<true>, blocks, kThreads, 0, stream, s2d, x, out, total);
  else
    launch_kernel(space_to_depth_kernel<false>, blocks, kThreads, 0, stream, s2d, x, out, total);
}

}  // namespace cnnrt::cuda
