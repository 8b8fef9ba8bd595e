// Device steps the weight-streaming linears share: the GEMVs (linear_fp16.cu, linear_sparse24.cu,
// linear_sparse24_mma.cu, linear_s8.cu) and, for its evict-first weight stream, the TMA linear
// (conv/tma_ptx.cuh).
//
// store_warp_sums: the per-warp reduction step: each lane holds partial dot products acc[r][b] (row
// r, sample b) over its share of K; they are summed over the warp with butterfly shuffles, and lane
// r * B + b stores sum (r, b) to out[r * B + b] (R * B <= 32: one lane per output, so the stores
// spread over lanes instead of all coming from lane 0).  The block's warps then meet in shared
// memory.
#pragma once

#include <cstdint>

namespace cnnrt::cuda {

// An L2 cache policy that evicts the lines it loads first: for a weight read once per forward.
__device__ __forceinline__ uint64_t l2_evict_first_policy() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
  return policy;
}

// The L2 policy of a GEMV's weight loads: evict-first where the context prefetched a later
// layer's weights into L2 (KernelArgs::stream_evict_first: this stream, read once, must not push
// them out), else evict-normal, a plain load's.  Made once per thread, before the loop.
__device__ __forceinline__ uint64_t stream_l2_policy(bool evict_first) {
  if (evict_first) return l2_evict_first_policy();
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}

// A 16-byte weight load under `policy` (stream_l2_policy) that bypasses L1 allocation: each
// weight byte is read once per launch, so caching it would only evict the inputs every row
// re-reads.
__device__ __forceinline__ uint4 load_streaming(const uint4* p, uint64_t policy) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p), "l"(policy));
  return v;
}

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
