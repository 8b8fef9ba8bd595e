// The per-warp reduction step of the weight-streaming GEMVs (linear_fp16.cu, linear_sparse24.cu):
// each lane holds partial dot products acc[r][b] (row r, sample b) over its share of K; they are
// summed over the warp with butterfly shuffles, and lane r * B + b stores sum (r, b) to
// out[r * B + b] (R * B <= 32: one lane per output, so the stores spread over lanes instead of
// all coming from lane 0).  The block's warps then meet in shared memory.
#pragma once

namespace cnnrt::cuda {

template <int R, int B>
__device__ __forceinline__ void store_warp_sums(const float (&acc)[R][B], float* out, int lane) {
  static_assert(R * B <= 32, "one lane per output");
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int b = 0; b < B; ++b) {
      float sum = acc[r][b];
#pragma unroll
      for (int offset = 16; offset > 0; offset >>= 1)
        sum += __shfl_xor_sync(0xffffffffu, sum, offset);
      if (lane == r * B + b) out[r * B + b] = sum;
    }
}

}  // namespace cnnrt::cuda
