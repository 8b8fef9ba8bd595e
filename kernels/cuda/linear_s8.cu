// int8 GEMV (design note in linear_s8.h).
//
// One warp per output feature: the lanes stream the feature's weight row in 16-byte chunks
// (coalesced, each weight byte read once per launch) and take four-way int8 dot products
// (__dp4a) against the same chunk of each sample's input (≤ 8 samples, kept in L1/L2), then the
// warp reduces each sample's int32 sum with shuffles.  Integer sums are exact, so the split of K
// over lanes cannot change a bit; lane b writes sample b through the shared epilogue.  Warps of
// the padding features (out_c <= feature < out_stride) write the zeros of the padding lanes.
#include <string>

#include "cnnrt/error.h"
#include "kernels/cuda/conv/epilogue_s8.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/linear_s8.h"

namespace cnnrt::cuda {
namespace {

constexpr int kWarps = 8;

__device__ __forceinline__ int dot16(const int4& w, const int4& x, int acc) {
  acc = __dp4a(w.x, x.x, acc);
  acc = __dp4a(w.y, x.y, acc);
  acc = __dp4a(w.z, x.z, acc);
  return __dp4a(w.w, x.w, acc);
}

__global__ void __launch_bounds__(kWarps * 32)
    gemv_s8_kernel(const S8Conv p, const int8_t* __restrict__ x, void* __restrict__ y, int batch) {
  const int lane = threadIdx.x & 31;
  const int feature = blockIdx.x * kWarps + (threadIdx.x >> 5);
  if (feature >= p.out_stride) return;
  int acc[kGemvS8MaxBatch] = {};
  if (feature < p.out_c) {
    const int8_t* w = p.weight + static_cast<int64_t>(feature) * p.k_pad;
    for (int chunk = lane; chunk * 16 < p.in_stride; chunk += 32) {
      const int4 wv = *reinterpret_cast<const int4*>(w + chunk * 16);
#pragma unroll
      for (int b = 0; b < kGemvS8MaxBatch; ++b)
        if (b < batch)
          acc[b] = dot16(wv,
                         *reinterpret_cast<const int4*>(x + static_cast<int64_t>(b) * p.in_stride +
                                                        chunk * 16),
                         acc[b]);
    }
  }
#pragma unroll
  for (int b = 0; b < kGemvS8MaxBatch; ++b)
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1)
      acc[b] += __shfl_xor_sync(0xffffffffu, acc[b], offset);
#pragma unroll
  for (int b = 0; b < kGemvS8MaxBatch; ++b) {
    if (b >= batch || lane != b) continue;
    const int64_t out = static_cast<int64_t>(b) * p.out_stride + feature;
    if (p.float_output)
      static_cast<float*>(y)[out] = s8::float_output(p, feature, acc[b]);
    else
      static_cast<int8_t*>(y)[out] = s8::int8_output(p, feature, acc[b]);
  }
}

}  // namespace

void gemv_s8(const S8Conv& linear, const void* x, void* y, int batch, cudaStream_t stream) {
  if (batch < 1) return;
  if (batch > kGemvS8MaxBatch || linear.in_stride % 16 != 0 || linear.k_pad < linear.in_stride)
    throw Error("gemv_s8: batch " + std::to_string(batch) + " or the weight packing is invalid");
  const int blocks = (linear.out_stride + kWarps - 1) / kWarps;
  gemv_s8_kernel<<<blocks, kWarps * 32, 0, stream>>>(linear, static_cast<const int8_t*>(x), y,
                                                     batch);
  CNNRT_CUDA_CHECK_LAUNCH();
}

}  // namespace cnnrt::cuda
