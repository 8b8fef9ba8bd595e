// int8 GEMV (design note in linear_s8.h).
//
// One warp per output feature: the lanes stream the feature's weight row in 16-byte chunks
// (coalesced, each weight byte read once per launch, not allocated in L1) and take four-way int8
// dot products (__dp4a) against the same chunk of each sample's input (≤ 8 samples, kept in
// L1/L2), then the warp reduces each sample's int32 sum with shuffles.  Integer sums are exact, so
// the split of K over lanes cannot change a bit; lane b writes sample b through the shared
// epilogue.  Warps of the padding features (out_c <= feature < out_stride) write the zeros of the
// padding lanes.
//
// Bytes in flight.  The first version issued one 16-byte weight load per lane and consumed it
// at once, so a warp had 512 bytes in flight and waited a DRAM round trip per chunk; AlexNet int8
// at batch 1 ran only 1.04x its fp16 engine (docs/PERFORMANCE.md run 20) although its linears
// stream half the bytes.  Now, as the fp16 GEMV (linear_fp16.cu), a lane issues kUnroll chunks
// (8 at batch ≤ 2, 4 up to 4, 2 above) before their dot products, and the batch is a template
// parameter (the sample loop unrolled exactly, no per-sample guard).  Predicted: fc6 (37.7 MB)
// from ~1 DRAM round trip per 512 B per warp towards the fp16 GEMV's 2.5 TB/s, ~15 µs.
// Measured (H100, docs/PERFORMANCE.md run 26): fc6 17.4 µs (2.17 TB/s), fc7 10.2, fc8 6.6; the
// int8 engine at batch 1 0.0964 → 0.0870 ms.
#include <string>

#include "cnnrt/error.h"
#include "kernels/cuda/conv/epilogue_s8.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/gemv_common.cuh"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/linear_s8.h"
#include "kernels/cuda/pdl.cuh"

namespace cnnrt::cuda {
namespace {

constexpr int kWarps = 8;

constexpr int unroll_for(int batch) { return batch <= 2 ? 8 : (batch <= 4 ? 4 : 2); }

__device__ __forceinline__ int dot16(const uint4& w, const int4& x, int acc) {
  acc = __dp4a(static_cast<int>(w.x), x.x, acc);
  acc = __dp4a(static_cast<int>(w.y), x.y, acc);
  acc = __dp4a(static_cast<int>(w.z), x.z, acc);
  return __dp4a(static_cast<int>(w.w), x.w, acc);
}

// kUnroll chunks of this lane from `chunk` on, 32 apart (kGuarded: only those < chunks).  A
// sample of x is `chunks` 16-byte vectors too (in_stride bytes, the weight row's real part).
template <int kBatch, int kUnroll, bool kGuarded>
__device__ __forceinline__ void gemv_s8_round(const uint4* w, const int4* x, int chunks, int chunk,
                                              uint64_t policy, int (&acc)[kBatch]) {
  uint4 wv[kUnroll];
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    wv[u] = make_uint4(0u, 0u, 0u, 0u);
    if (!kGuarded || chunk + 32 * u < chunks) wv[u] = load_streaming(w + chunk + 32 * u, policy);
  }
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    if (kGuarded && chunk + 32 * u >= chunks) break;
#pragma unroll
    for (int b = 0; b < kBatch; ++b)
      acc[b] = dot16(wv[u], __ldg(x + static_cast<int64_t>(b) * chunks + chunk + 32 * u), acc[b]);
  }
}

template <int kBatch>
__global__ void __launch_bounds__(kWarps * 32)
    gemv_s8_kernel(const S8Conv p, const int8_t* __restrict__ x, void* __restrict__ y,
                   bool evict_first) {
  constexpr int kUnroll = unroll_for(kBatch);
  const int lane = threadIdx.x & 31;
  const int feature = blockIdx.x * kWarps + (threadIdx.x >> 5);
  // The warp's first round of weight chunks into L2 before the wait (pdl.cuh): one lane per
  // 128-byte line.
  if (feature < p.out_c && (lane & 7) == 0)
    for (int u = 0; u < kUnroll && lane + 32 * u < p.in_stride / 16; ++u)
      prefetch_l2(p.weight + static_cast<int64_t>(feature) * p.k_pad + (lane + 32 * u) * 16);
  pdl_wait();
  if (feature >= p.out_stride) return;
  int acc[kBatch] = {};
  if (feature < p.out_c) {
    const uint4* w =
        reinterpret_cast<const uint4*>(p.weight + static_cast<int64_t>(feature) * p.k_pad);
    const int4* xv = reinterpret_cast<const int4*>(x);
    const int chunks = p.in_stride / 16;
    const uint64_t policy = stream_l2_policy(evict_first);
    int chunk = lane;
    for (; chunk + 32 * (kUnroll - 1) < chunks; chunk += 32 * kUnroll)
      gemv_s8_round<kBatch, kUnroll, false>(w, xv, chunks, chunk, policy, acc);
    if (chunk < chunks) gemv_s8_round<kBatch, kUnroll, true>(w, xv, chunks, chunk, policy, acc);
  }
#pragma unroll
  for (int b = 0; b < kBatch; ++b)
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1)
      acc[b] += __shfl_xor_sync(0xffffffffu, acc[b], offset);
#pragma unroll
  for (int b = 0; b < kBatch; ++b) {
    if (lane != b) continue;
    const int64_t out = static_cast<int64_t>(b) * p.out_stride + feature;
    if (p.float_output)
      static_cast<float*>(y)[out] = s8::float_output(p, feature, acc[b]);
    else
      static_cast<int8_t*>(y)[out] = s8::int8_output(p, feature, acc[b]);
  }
}

template <int kBatch>
void launch(const S8Conv& linear, const void* x, void* y, bool evict_first, cudaStream_t stream) {
  const int blocks = (linear.out_stride + kWarps - 1) / kWarps;
  launch_kernel(gemv_s8_kernel<kBatch>, blocks, kWarps * 32, 0, stream, linear,
                static_cast<const int8_t*>(x), y, evict_first);
}

}  // namespace

void gemv_s8(const S8Conv& linear, const void* x, void* y, int batch, cudaStream_t stream,
             bool evict_first) {
  if (batch < 1) return;
  if (batch > kGemvS8MaxBatch || linear.in_stride % 16 != 0 || linear.k_pad < linear.in_stride)
    throw Error("gemv_s8: batch " + std::to_string(batch) + " or the weight packing is invalid");
  switch (batch) {
    case 1:
      launch<1>(linear, x, y, evict_first, stream);
      break;
    case 2:
      launch<2>(linear, x, y, evict_first, stream);
      break;
    case 3:
      launch<3>(linear, x, y, evict_first, stream);
      break;
    case 4:
      launch<4>(linear, x, y, evict_first, stream);
      break;
    case 5:
      launch<5>(linear, x, y, evict_first, stream);
      break;
    case 6:
      launch<6>(linear, x, y, evict_first, stream);
      break;
    case 7:
      launch<7>(linear, x, y, evict_first, stream);
      break;
    default:
      launch<8>(linear, x, y, evict_first, stream);
      break;
  }
}

}  // namespace cnnrt::cuda
