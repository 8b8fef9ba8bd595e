// The int8 epilogue of every int8 conv / linear kernel, on one int32 accumulator: the one
// rounding step of docs/QUANTIZATION.md, spelt with the `_rn` intrinsics so nvcc cannot contract
// or reorder it (measured bit-exact against the CPU reference: bench/int8_recipe_check.cu).
// Separate from epilogue.cuh (the fp16 family's) on purpose: nothing here is shared with fp16.
#pragma once

#include <cstdint>

#include "kernels/cuda/conv/conv_s8.h"

namespace cnnrt::cuda::s8 {

// acc already holds bias_q[c].  clamp(RNE(fp32(acc) × M)); __float2int_rn saturates to the int32
// range, so the integer clamp maps out-of-range values as the reference's float clamp does.
__device__ __forceinline__ int8_t requantize(int acc, float multiplier, int lo, int hi) {
  const int q = __float2int_rn(__fmul_rn(__int2float_rn(acc), multiplier));
  return static_cast<int8_t>(q < lo ? lo : (q > hi ? hi : q));
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
