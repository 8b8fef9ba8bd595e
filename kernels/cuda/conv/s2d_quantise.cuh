// The int8 space-to-depth's quantisation of the fp32 graph input (s2d_s8.cu), bit for bit the
// conversion step's (convert.cu, store_value(int8_t*)):
//
//   q = clamp(__float2int_rn(__fdiv_rn(v, scale)), -127, 127)      (NaN → 0)
//
// quantise_exact is that formula.  QuantiseByReciprocal gives the same bits for every float v
// but runs the division only where it could change the result: the correctly rounded division
// is ~16 instructions with its slow-path call, the tiled kernel's whole budget at DRAM speed ~50
// per value (AlexNet conv1, batch 256, H100).  It computes t = RN(v·r), r = RN(1/s), stores
// clamp(RNE(t), ±127), and defers v to quantise_exact unless t is more than kMargin = 2^-12 from
// every half-integer (the kernel redoes deferred values after its batch).  Proof that a value it
// does not defer gets the exact bits, for a scale s > 0 that is a normal float with a normal r
// (otherwise the host passes r = NaN: t is NaN and every value is deferred):
//
//   Let z = v/s (real), d = RN(z) = __fdiv_rn(v, s), u = 2^-24.  r = (1/s)(1 + e1) and
//   t = v·r·(1 + e2) + η with |e1|, |e2| <= u, |η| <= 2^-150 (underflow), so
//   |t − z| <= |z|(2u + u²) + 2^-150, |d − z| <= |z|·u + 2^-150, hence
//   |t − d| <= |z|(3u + u²) + 2^-149; and r > 0, so t, z and d share their signs.
//   * |t| > 256 (finite): |z| > 255, so |d| > 254: clamp(RNE(d)) = ±127 = clamp(RNE(t)).
//   * |t| <= 256: |z| < 256.01, so |t − d| < 4.6e-5.  With k = rint(t) (RNE), e = t − k is exact
//     (k = 0, or t and k within a factor of 2: Sterbenz) and 1/2 − |e|, t's distance to the
//     nearest half-integer, is exact when |e| >= 1/4 (Sterbenz) and above 1/4 otherwise.  When
//     it exceeds kMargin > 4.6e-5, d lies in the same open interval (k − 1/2, k + 1/2) as t:
//     RNE(d) = k with no tie, and clamp(RNE(d)) = clamp(k).
//   * t = ±inf (v·r overflows: |v| > ~7e36 at s = 0.02) gives e = NaN, and v = NaN gives
//     t = NaN: both deferred, like values within 2^-12 of a boundary (~0.05% of values spread
//     over the int8 range: a warp's batch of 32 × 24 values holds one about a third of the time).
// __fmul_rn / __fsub_rn keep the compiler from contracting t into an FMA (t must be rounded).
// tests/cuda/conv/test_s2d_quantise.cu compares the two on all 2^32 floats for a set of scales.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <limits>

namespace cnnrt::cuda::s2d_quantise {

__device__ __forceinline__ int8_t quantise_exact(float v, float scale) {
  const int q = __float2int_rn(__fdiv_rn(v, scale));
  return static_cast<int8_t>(q < -127 ? -127 : (q > 127 ? 127 : q));
}

// The reciprocal QuantiseByReciprocal may use for `scale`: RN(1/scale) when scale and it are
// positive normal floats (the proof's conditions), else NaN (every value takes the exact path).
inline float filter_reciprocal(float scale) {
  const float reciprocal = 1.0f / scale;  // IEEE single division on the host: RN
  if (scale > 0 && std::isnormal(scale) && std::isnormal(reciprocal)) return reciprocal;
  return std::numeric_limits<float>::quiet_NaN();
}

// The tiled kernel's int8 conversion (s2d_tile.cuh's Convert): the fast result is branch-free;
// the values it cannot vouch for (NaN, or within kMargin of a rounding boundary) are deferred to
// exact(), which the kernel runs after the batch in the warps that need it.
struct QuantiseByReciprocal {
  using Bits = uint8_t;
  static constexpr bool kMayDefer = true;
  static constexpr float kMargin = 1.0f / 4096.0f;  // 2^-12
  float scale, reciprocal;                          // reciprocal = filter_reciprocal(scale)
  __device__ __forceinline__ Bits operator()(float v, uint32_t& deferred, uint32_t bit) const {
    const float t = __fmul_rn(v, reciprocal);
    const float boundary_distance = __fsub_rn(0.5f, fabsf(__fsub_rn(t, rintf(t))));
    if (!(boundary_distance > kMargin)) deferred |= bit;  // NaN and ±inf t too
    // RNE of t clamped to ±127 = clamp of RNE(t) (the bounds are integers).
    return static_cast<Bits>(__float2int_rn(fminf(fmaxf(t, -127.0f), 127.0f)));
  }
  __device__ __forceinline__ Bits exact(float v) const {
    return static_cast<Bits>(quantise_exact(v, scale));
  }
};

}  // namespace cnnrt::cuda::s2d_quantise
