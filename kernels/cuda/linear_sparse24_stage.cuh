// The staged x of the 2:4 sparse GEMVs (linear_sparse24.cu, linear_sparse24_mma.cu): a block
// copies a pass's samples of x into shared memory in slot order — xs[4t + i] is element i of slot
// t's group (Sparse24Geometry, linear_sparse24.h) — so a group's 4 inputs are one 8-byte shared
// read whatever the flatten, and the flatten map runs once per block, not once per row.
//
// Why a transpose for QuadMajor with C % 8 == 0 (AlexNet's fc6: C = 256, 6 × 6 pixels): slot
// t = q·C + c holds pixels 4q..4q+3 of channel c, which sit C halves apart in the NHWC flatten.
// Read one 2-byte input at a time, a block issues 4 loads per slot (9216 per sample at fc6), each
// an L2 round trip in a thread's short loop: microseconds before the first MMA.  A (pixel quad,
// 8 channels) item instead is 4 16-byte loads (the 8 channels of each of the 4 pixels) and 8
// slots of output, transposed in registers by byte permutes: 8× fewer loads, all in flight.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/cuda/linear_sparse24.h"

namespace cnnrt::cuda::sparse24_stage {

// The half pair (a.h[j % 2], b.h[j % 2]) of 32-bit words a, b as one word (low: a's).
__device__ __forceinline__ uint32_t pair_of(uint32_t a, uint32_t b, int j) {
  return __byte_perm(a, b, (j & 1) ? 0x7632u : 0x5410u);
}
__device__ __forceinline__ uint32_t word_of(const uint4& v, int w) {  // w: a constant
  return w == 0 ? v.x : w == 1 ? v.y : w == 2 ? v.z : v.w;
}

// Copies `samples` samples of x ([samples][g.x_stride]) into xs ([samples][xs_stride] halves) in
// slot order: every slot below g.groups (Vector: the whole x_stride).  The caller's barrier
// publishes the copy.
template <Sparse24Input kInput>
__device__ __forceinline__ void stage_x(const Sparse24Geometry& g, const __half* x, __half* xs,
                                        int samples, int xs_stride) {
  const unsigned short* xb = reinterpret_cast<const unsigned short*>(x);
  unsigned short* xo = reinterpret_cast<unsigned short*>(xs);
  if constexpr (kInput == Sparse24Input::Vector) {  // the same order: 16-byte copies
    const int vectors = g.x_stride / 8;
    for (int v = threadIdx.x; v < samples * vectors; v += blockDim.x) {
      const int b = v / vectors, i = v - b * vectors;
      reinterpret_cast<uint4*>(xo + b * xs_stride)[i] =
          __ldg(reinterpret_cast<const uint4*>(xb + b * g.x_stride) + i);
    }
  } else if constexpr (kInput == Sparse24Input::QuadMajor) {
    if (g.channels % 8 == 0) {  // (pixel quad, 8 channels) items: the header's transpose
      const int octets = g.channels / 8, items = g.hw / 4 * octets;
      for (int v = threadIdx.x; v < samples * items; v += blockDim.x) {
        const int b = v / items, item = v - b * items;
        const int quad = item / octets, octet = item - quad * octets;
        const uint4* src =
            reinterpret_cast<const uint4*>(xb + b * g.x_stride + 4 * quad * g.channels) + octet;
        uint4 pixel[4];  // the 8 channels of pixels 4q .. 4q + 3
#pragma unroll
        for (int i = 0; i < 4; ++i) pixel[i] = __ldg(src + i * octets);
        // Slots q·C + 8·octet + j (j = 0..7): 64 contiguous bytes, 16-byte aligned (C % 8 == 0).
        uint4* dst =
            reinterpret_cast<uint4*>(xo + b * xs_stride + 4 * (quad * g.channels)) + 4 * octet;
#pragma unroll
        for (int w = 0; w < 4; ++w) {  // slots 2w, 2w + 1 of the octet: channel word w
          uint32_t out[4];
#pragma unroll
          for (int j = 0; j < 2; ++j) {
            out[2 * j] = pair_of(word_of(pixel[0], w), word_of(pixel[1], w), j);
            out[2 * j + 1] = pair_of(word_of(pixel[2], w), word_of(pixel[3], w), j);
          }
          dst[w] = make_uint4(out[0], out[1], out[2], out[3]);
        }
      }
    } else {  // one thread per slot: its 4 pixels' inputs (consecutive threads, channels)
      for (int v = threadIdx.x; v < samples * g.groups; v += blockDim.x) {
        const int b = v / g.groups, t = v - b * g.groups;
        const QuadMajorWalk walk(g, t);  // x_base: pixel 4q, channel c
        uint32_t h[4];
#pragma unroll
        for (int i = 0; i < 4; ++i)
          h[i] = __ldg(xb + b * g.x_stride + walk.x_base + i * g.channels);
        *reinterpret_cast<uint2*>(xo + b * xs_stride + 4 * t) =
            make_uint2(h[0] | h[1] << 16, h[2] | h[3] << 16);
      }
    }
  } else {
    for (int v = threadIdx.x; v < samples * 4 * g.groups; v += blockDim.x) {
      const int b = v / (4 * g.groups), e = v - b * 4 * g.groups;
      const int at = g.gather_x(e >> 2, e & 3);
      xo[b * xs_stride + e] = at >= 0 ? __ldg(xb + b * g.x_stride + at) : 0;
    }
  }
}

// Halves of each staged sample stage_x writes (the rest of a padded K must be zeroed).
__host__ __device__ inline int staged_halves(const Sparse24Geometry& g) {
  return g.input == Sparse24Input::Vector ? g.x_stride : 4 * g.groups;
}

}  // namespace cnnrt::cuda::sparse24_stage
