// Exhaustive check of the int8 space-to-depth's quantiser (kernels/cuda/conv/s2d_quantise.cuh):
// for every one of the 2^32 float bit patterns v and a set of scales, a value that
// QuantiseByReciprocal does not defer must get exactly quantise_exact's bits (the conversion
// step's __float2int_rn(__fdiv_rn(v, s)) clamped to ±127), and deferred values (which the kernel
// hands to quantise_exact) must be rare among ordinary values (|v/s| <= 256) for a normal scale.
// Scales: the calibration's floor 2^-23, typical input scales, powers of two, random ones over
// 2^-23..2^10, the extremes of the proof's conditions (normal scale with normal reciprocal) and
// scales outside them (the host passes a NaN reciprocal: every value deferred).  ~2·10^10
// evaluations: well under a second on an H100.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "kernels/cuda/conv/s2d_quantise.cuh"
#include "kernels/cuda/cuda_check.h"

namespace cnnrt {
namespace {

using cuda::s2d_quantise::QuantiseByReciprocal;

struct Counts {
  unsigned long long mismatches, deferred, ordinary_deferred;  // ordinary: |v / s| <= 256
  unsigned int first_mismatch_bits;
};

__global__ void compare_all_floats(QuantiseByReciprocal quantise, Counts* counts) {
  unsigned long long mismatches = 0, deferred_count = 0, ordinary_deferred = 0;
  const uint64_t step = uint64_t(gridDim.x) * blockDim.x;
  for (uint64_t bits = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; bits < (uint64_t(1) << 32);
       bits += step) {
    const float v = __uint_as_float(static_cast<uint32_t>(bits));
    uint32_t deferred = 0;
    const uint8_t fast = quantise(v, deferred, 1u);
    const uint8_t exact =
        static_cast<uint8_t>(cuda::s2d_quantise::quantise_exact(v, quantise.scale));
    if (deferred != 0) {
      ++deferred_count;
      if (fabsf(__fdiv_rn(v, quantise.scale)) <= 256.0f) ++ordinary_deferred;
      if (quantise.exact(v) != exact) ++mismatches;
    } else if (fast != exact) {
      ++mismatches;
      atomicMin(&counts->first_mismatch_bits, static_cast<uint32_t>(bits));
    }
  }
  atomicAdd(&counts->mismatches, mismatches);
  atomicAdd(&counts->deferred, deferred_count);
  atomicAdd(&counts->ordinary_deferred, ordinary_deferred);
}

bool device_present() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

TEST(S2dQuantise, ReciprocalFilterEqualsExactDivisionOnEveryFloat) {
  if (!device_present()) GTEST_SKIP() << "no CUDA device";
  std::vector<float> scales = {1.1920928955078125e-7f,  // 2^-23, ref::kMinScale
                               0.0213f,
                               1.0f / 127.0f,
                               0.017453292f,
                               0.1f,
                               0.5f,
                               1.0f,
                               3.0f,
                               1000.0f,
                               1.17549435e-38f,  // 2^-126: smallest normal, reciprocal 2^126
                               2.0e-38f,
                               8.0e37f,   // reciprocal 1.25e-38: still normal
                               1.0e38f,   // reciprocal subnormal: all deferred
                               1.0e-39f,  // subnormal scale: all deferred
                               3.4e38f};
  std::mt19937 rng(4242);
  std::uniform_real_distribution<float> log2_scale(-23.0f, 10.0f);
  for (int i = 0; i < 8; ++i) scales.push_back(std::exp2(log2_scale(rng)));

  Counts* counts = nullptr;
  CNNRT_CUDA_CHECK(cudaMallocManaged(&counts, sizeof(Counts)));
  for (const float scale : scales) {
    const QuantiseByReciprocal quantise{scale, cuda::s2d_quantise::filter_reciprocal(scale)};
    *counts = Counts{0, 0, 0, 0xFFFFFFFFu};
    compare_all_floats<<<132 * 16, 256>>>(quantise, counts);
    CNNRT_CUDA_CHECK(cudaGetLastError());
    CNNRT_CUDA_CHECK(cudaDeviceSynchronize());
    std::printf(
        "[s2d quantise] scale %.9g (reciprocal %.9g): %llu mismatches, %llu of 2^32 "
        "deferred, %llu with |v/s| <= 256\n",
        scale, quantise.reciprocal, counts->mismatches, counts->deferred,
        counts->ordinary_deferred);
    EXPECT_EQ(counts->mismatches, 0u) << "scale " << scale << ", first mismatching float bits 0x"
                                      << std::hex << counts->first_mismatch_bits;
    // Most deferred patterns are NaN or overflow v·r to infinity (|v| > ~1e36 at typical
    // scales); of the ~2^31 patterns with |v/s| <= 256 only those within 2^-12 of a
    // half-integer are (2^12 per binade and sign: ~7·10^4).  A normal scale must defer few.
    if (std::isfinite(quantise.reciprocal))
      EXPECT_LT(counts->ordinary_deferred, uint64_t(1) << 20) << "scale " << scale;
  }
  CNNRT_CUDA_CHECK(cudaFree(counts));
}

}  // namespace
}  // namespace cnnrt
