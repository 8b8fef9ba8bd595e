// The bulk-copy GEMV (kernels/cuda/gemv_bulk.h) against the CPU reference: odd row counts (rows
// dealt to blocks unevenly, fewer rows than SMs), K of one 16-byte vector, rows cut into
// several chunks (k 4104 and fc6's 9216: 2 and 3 pieces), 1 and 2 samples, bias and ReLU on
// and off, both output forms; the default linear entry takes it at batch 1-2 on Hopper.  The
// harness's linear table runs the default entry too (tests/harness, `--gtest_filter='linear/*'`).
// Inputs and weights are rounded to fp16 before the reference sees them; tolerance: the fp16
// one of harness/tolerance.h (relative L2); outputs start as NaN bytes.
#include <cstring>
#include <random>

#include "fp16_test_util.h"
#include "harness/tolerance.h"
#include "kernels/cpu/reference.h"
#include "kernels/cuda/gemv_bulk.h"

namespace cnnrt {
namespace {

using test::DeviceMem;

const double kTolerance = harness::tolerance_for(Precision::FP16).rel_l2;

bool bulk_device() { return cuda::gemv_bulk_supported(8, 8, 1); }

TEST(GemvBulk, MatchesReferenceOnOddShapes) {
  CNNRT_REQUIRE_CUDA_DEVICE();
  if (!bulk_device()) GTEST_SKIP() << "the bulk GEMV needs a compute capability 9.0 device";
  struct Shape2 {
    int rows, k;
  };
  const Shape2 shapes[] = {{1, 8}, {7, 72}, {37, 4104}, {1000, 9216}, {4096, 4096}, {131, 16384}};
  uint32_t seed = 900;
  for (const Shape2& s : shapes) {
    ++seed;
    const bool with_bias = seed % 2 == 0, relu = seed % 3 != 0;
    std::mt19937 rng(seed);
    const float scale = 1.0f / std::sqrt(static_cast<float>(s.k));
    const auto weight =
        test::random_fp16_values(static_cast<size_t>(s.rows) * s.k, rng, -scale, scale);
    const auto bias = test::random_fp16_values(s.rows, rng);
    const auto x = test::random_fp16_values(static_cast<size_t>(cuda::kBulkMaxBatch) * s.k, rng);
    std::vector<float> expected(static_cast<size_t>(cuda::kBulkMaxBatch) * s.rows);
    ref::linear(x.data(), cuda::kBulkMaxBatch, s.k, weight.data(),
                with_bias ? bias.data() : nullptr, s.rows, expected.data());
    if (relu) ref::relu(expected.data(), static_cast<int64_t>(expected.size()), expected.data());
    const cuda::GemmWeights weights(cuda::pack_linear_weights(
        weight.data(), with_bias ? bias.data() : nullptr, s.rows, s.k, Shape{}));
    ASSERT_TRUE(cuda::gemv_bulk_supported(weights.rows_pad(), weights.cols_pad(), 1));
    DeviceMem input(test::linear_gpu_input(x, cuda::kBulkMaxBatch, s.k, {}));
    for (int batch = 1; batch <= cuda::kBulkMaxBatch; ++batch) {
      SCOPED_TRACE("rows=" + std::to_string(s.rows) + " k=" + std::to_string(s.k) +
                   " batch=" + std::to_string(batch) + " bias=" + std::to_string(with_bias) +
                   " relu=" + std::to_string(relu));
      const std::vector<float> want(expected.begin(),
                                    expected.begin() + static_cast<size_t>(batch) * s.rows);
      DeviceMem output(static_cast<size_t>(batch) * test::pad8(s.rows) * 2);  // NaN bytes
      cuda::gemv_bulk_fp16(weights, relu, input.get(), output.get(), batch, nullptr);
      CNNRT_CUDA_CHECK(cudaDeviceSynchronize());
      int64_t bad_padding = 0;
      const auto got = test::from_nhwc(output.halves(), batch, s.rows, 1, 1, &bad_padding);
      EXPECT_LE(test::rel_l2(got, want), kTolerance);
      EXPECT_EQ(bad_padding, 0);

      // The graph-output form: exactly [batch, rows] fp32, nothing written past it.
      constexpr size_t kGuard = 64;
      const size_t count = static_cast<size_t>(batch) * s.rows;
      DeviceMem output32((count + kGuard) * sizeof(float));
      cuda::gemv_bulk_fp16_to_fp32(weights, relu, input.get(), static_cast<float*>(output32.get()),
                                   batch, s.rows, nullptr);
      CNNRT_CUDA_CHECK(cudaDeviceSynchronize());
      std::vector<float> got32(count + kGuard);
      CNNRT_CUDA_CHECK(cudaMemcpy(got32.data(), output32.get(), got32.size() * sizeof(float),
                                  cudaMemcpyDeviceToHost));
      EXPECT_LE(test::rel_l2(std::vector<float>(got32.begin(), got32.begin() + count), want),
                kTolerance);
      int64_t touched = 0;
      for (size_t i = count; i < got32.size(); ++i) {
        uint32_t bits;
        std::memcpy(&bits, &got32[i], sizeof(bits));
        touched += bits != 0xFFFFFFFFu;
      }
      EXPECT_EQ(touched, 0) << "values written past [batch, rows]";
    }
  }
}

// Where it does not serve, it says so and throws instead of launching.
TEST(GemvBulk, RefusesWhatItDoesNotServe) {
  EXPECT_FALSE(cuda::gemv_bulk_supported(16, 16, 0));
  EXPECT_FALSE(cuda::gemv_bulk_supported(16, 16, cuda::kBulkMaxBatch + 1));
  EXPECT_FALSE(cuda::gemv_bulk_supported(16, cuda::kGemvBulkMaxCols + 8, 1));
  EXPECT_FALSE(cuda::gemv_bulk_supported(16, 12, 1));  // not a multiple of 8
  CNNRT_REQUIRE_CUDA_DEVICE();
  if (!bulk_device()) GTEST_SKIP() << "the bulk GEMV needs a compute capability 9.0 device";
  std::mt19937 rng(910);
  const auto weight = test::random_fp16_values(16 * 24, rng);
  const cuda::GemmWeights weights(
      cuda::pack_linear_weights(weight.data(), nullptr, 16, 24, Shape{}));
  DeviceMem input(24 * 2 * 4), output(16 * 2 * 4);
  EXPECT_THROW(cuda::gemv_bulk_fp16(weights, false, input.get(), output.get(), 3, nullptr), Error);
  EXPECT_THROW(cuda::gemv_bulk_fp16(weights, false, input.get(), input.get(), 1, nullptr), Error);
  EXPECT_THROW(cuda::gemv_bulk_fp16_to_fp32(weights, false, input.get(),
                                            static_cast<float*>(output.get()), 1, 17, nullptr),
               Error);
}

}  // namespace
}  // namespace cnnrt
