// The int8 epilogue of every int8 conv / linear kernel, on one int32 accumulator: the one
// rounding step of docs/QUANTIZATION.md, spelt with the `_rn` intrinsics so nvcc cannot contract
// or reorder it (measured bit-exact against the CPU reference: bench/int8_recipe_check.cu).
// Separate from epilogue.cuh (the fp16 family's) on purpose: nothing here is shared with fp16.
#pragma once

#include <cstdint>

#include "kernels/cuda/conv/conv_s8.h"

namespace cnnrt::cuda::s8 {

// 1.5·2^23: a float in [2^23, 2^24) has an ulp of 1, so x + kMagic rounds x to an integer (RNE,
// cvt.rni's ties-to-even: kMagic is even) and, for |x| < 2^22, holds it in its low mantissa bits.
constexpr float kMagic = 12582912.0f;

// acc already holds bias_q[c].  clamp(RNE(fp32(acc) × M)) as the reference computes it, with the
// clamp taken first in float and the rounding by kMagic: lo and hi are integers and RNE is
// monotonic, so clamp(RNE(x)) == RNE(clamp(x)) (x = ±inf included), and RNE of x in [-128, 127]
// is the low byte of (x + kMagic)'s bits.  Why not __float2int_rn and an integer clamp: int <->
// float conversions issue at a fraction of the FP32 rate on sm_80-90 (the programming guide's
// throughput table) and this epilogue ran two per output; fmaxf / fminf / fadd are FP32 ops.
// tests/kernels/test_int8_ref.cpp (ClampFirstRequantisationEqualsTheReference) checks the
// identity against the CPU reference on the host; the GPU harness checks every int8 kernel.
// The bounds come as floats (exact: integers in [-128, 127]), so hot epilogues convert them once
// per thread, not per output; the int overload converts them per call.
__device__ __forceinline__ int8_t requantize(int acc, float multiplier, float lo, float hi) {
  const float x = __fmul_rn(__int2float_rn(acc), multiplier);
  const float clamped = fminf(fmaxf(x, lo), hi);
  return static_cast<int8_t>(static_cast<uint8_t>(__float_as_uint(__fadd_rn(clamped, kMagic))));
}
__device__ __forceinline__ int8_t requantize(int acc, float multiplier, int lo, int hi) {
  return requantize(acc, multiplier, __int2float_rn(lo), __int2float_rn(hi));
}

// requantize() without the int<->float conversion instructions (they issue at a quarter of the
// FP32 rate on sm_80-90, which bounds an epilogue-heavy narrow conv), for layers whose every
// |acc + bias| is below kSmallSumLimit = 2^22 (the host proves it from the weights and biases:
// narrow_s8_small_sums).  Bit for bit requantize(): with m = 1.5·2^23 (0x4B400000),
//   fp32(v)    = float_bits(v + 0x4B400000) − m: exact, the mantissa holds v (|v| < 2^22);
//   × M        = the same __fmul_rn;
//   clamp      first, in float, to the integer bounds: RNE is monotonic and lo, hi are
//              integers, so clamp(RNE(x)) == RNE(clamp(x));
//   RNE        = x + m, whose ulp is 1 (2^23 <= x + m < 2^24) and whose parity is x's (m is
//              even): ties go to even as cvt.rni does.  The int8 result is the low byte of the
//              sum's bits (m's low mantissa bits are zero).
// `biased_acc` is acc + small_sum_bias(bias_q[c]); the result's low byte is the int8 output.
constexpr int64_t kSmallSumLimit = int64_t{1} << 22;
__host__ __device__ constexpr int small_sum_bias(int bias) { return bias + 0x4B400000; }
__device__ __forceinline__ uint32_t requantize_small(int biased_acc, float multiplier, float lo,
                                                     float hi) {
  const float v = __fsub_rn(__int_as_float(biased_acc), kMagic);
  const float x = fminf(fmaxf(__fmul_rn(v, multiplier), lo), hi);
  return __float_as_uint(__fadd_rn(x, kMagic));
}

// fp32(acc) × D, then std::min(std::max(v, lo), hi) exactly as the reference writes it.
__device__ __forceinline__ float dequantize(int acc, float multiplier, float lo, float hi) {
  float v = __fmul_rn(__int2float_rn(acc), multiplier);
  v = v < lo ? lo : v;
  return hi < v ? hi : v;
}

// Output element of channel c from its accumulator (bias not yet added); padding lanes zero.
__device__ __forceinline__ int8_t int8_output(const S8Conv& p, int c, int acc) {
  return c < p.out_c ? requantize(acc + p.bias[c], p.multiplier[c], p.lo, p.hi) : int8_t{0};
}
__device__ __forceinline__ float float_output(const S8Conv& p, int c, int acc) {
  return c < p.out_c ? dequantize(acc + p.bias[c], p.multiplier[c], p.float_lo, p.float_hi) : 0.0f;
}

}  // namespace cnnrt::cuda::s8
