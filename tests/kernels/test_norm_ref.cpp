// ref::softmax / batchnorm / lrn: hand-computed cases and properties (softmax rows sum to 1 and
// are shift-invariant; batchnorm is the per-channel affine map; LRN equals
// torch.nn.LocalResponseNorm written as avg-pool over an explicitly zero-padded channel axis).
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/cpu/reference.h"
#include "random_test_util.h"

namespace cnnrt {
namespace {

using test::expect_all_near;
using test::random_int;
using test::random_vector;

TEST(RefSoftmax, HandComputed) {
  const float ln3 = std::log(3.0f);
  std::vector<float> y(2);
  const std::vector<float> x = {0.0f, ln3};
  ref::softmax(x.data(), 1, 2, 1, y.data());
  expect_all_near(y, {0.25f, 0.75f}, 1e-7, 1e-6);
  // Large logits must not overflow (max subtracted).
  const std::vector<float> big = {1000.0f, 1000.0f + ln3};
  ref::softmax(big.data(), 1, 2, 1, y.data());
  expect_all_near(y, {0.25f, 0.75f}, 1e-5, 1e-5);
  // NCHW over channels: [1, 2, 1, 2]; pixel 0 sees (0, ln3), pixel 1 sees (1, 1).
  const std::vector<float> nchw = {0.0f, 1.0f, ln3, 1.0f};
  y.resize(4);
  ref::softmax(nchw.data(), 1, 2, 2, y.data());
  expect_all_near(y, {0.25f, 0.5f, 0.75f, 0.5f}, 1e-7, 1e-6);
}

TEST(RefSoftmax, RowsSumToOneAndShiftInvariant) {
  const uint32_t seed = test::fresh_seed();
  SCOPED_TRACE(test::seed_trace(seed));
  std::mt19937 rng(seed);
  for (int iteration = 0; iteration < 20; ++iteration) {
    const int outer = random_int(rng, 1, 4), features = random_int(rng, 1, 1001),
              inner = random_int(rng, 1, 5);
    const auto x = random_vector(static_cast<size_t>(outer) * features * inner, rng, -8.0f, 8.0f);
    std::vector<float> y(x.size()), y_shifted(x.size()), x_shifted(x.size());
    const float shift = std::uniform_real_distribution<float>(-20.0f, 20.0f)(rng);
    for (size_t i = 0; i < x.size(); ++i) x_shifted[i] = x[i] + shift;
    ref::softmax(x.data(), outer, features, inner, y.data());
    ref::softmax(x_shifted.data(), outer, features, inner, y_shifted.data());
    for (int o = 0; o < outer; ++o)
      for (int i = 0; i < inner; ++i) {
        double sum = 0;
        for (int f = 0; f < features; ++f) {
          const float v = y[(static_cast<size_t>(o) * features + f) * inner + i];
          ASSERT_GT(v, 0.0f);
          ASSERT_LE(v, 1.0f);
          sum += v;
        }
        // Each of `features` values carries at most half an fp32 ulp of rounding.
        EXPECT_NEAR(sum, 1.0, 1e-6 + features * 6e-8);
      }
    // x + shift is itself rounded to fp32, so the logits differ by up to ulp(28)/2 ≈ 1e-6:
    // relative tolerance 1e-5 covers it.
    expect_all_near(y_shifted, y, 1e-9, 1e-5, "iteration " + std::to_string(iteration));
  }
}

TEST(RefBatchNorm, HandComputed) {
  const std::vector<float> x = {1, 2, 3, 4};  // [1, 2 channels, 2]
  const std::vector<float> gamma = {2, 1}, beta = {0, -1}, mean = {1, 3}, var = {4, 0.25f};
  std::vector<float> y(4);
  ref::batchnorm(x.data(), 1, 2, 2, gamma.data(), beta.data(), mean.data(), var.data(), 0.0f,
                 y.data());
  // channel 0: (x-1)/2*2 ; channel 1: (x-3)/0.5 - 1
  expect_all_near(y, {0, 1, -1, 1}, 0, 0);
}

TEST(RefBatchNorm, EqualsPerChannelAffineMap) {
  const uint32_t seed = test::fresh_seed();
  SCOPED_TRACE(test::seed_trace(seed));
  std::mt19937 rng(seed);
  const int n = 3, c = 7, spatial = 5 * 3;
  const float eps = 1e-3f;
  const auto x = random_vector(n * c * spatial, rng);
  const auto gamma = random_vector(c, rng), beta = random_vector(c, rng),
             mean = random_vector(c, rng);
  const auto var = random_vector(c, rng, 0.1f, 2.0f);
  std::vector<float> y(x.size()), expected(x.size());
  ref::batchnorm(x.data(), n, c, spatial, gamma.data(), beta.data(), mean.data(), var.data(), eps,
                 y.data());
  for (int b = 0; b < n; ++b)
    for (int ch = 0; ch < c; ++ch) {
      const double scale = gamma[ch] / std::sqrt(static_cast<double>(var[ch]) + eps);
      const double shift = beta[ch] - mean[ch] * scale;
      for (int s = 0; s < spatial; ++s) {
        const size_t i = (static_cast<size_t>(b) * c + ch) * spatial + s;
        expected[i] = static_cast<float>(x[i] * scale + shift);
      }
    }
  expect_all_near(y, expected, 1e-6, 1e-6);
}

TEST(RefLRN, HandComputed) {
  const std::vector<float> x = {1, 2, 3};  // 3 channels, spatial 1
  std::vector<float> y(3);
  LRNAttrs a;
  a.alpha = 1.0f;
  a.beta = 1.0f;
  a.k = 1.0f;
  // size 2: window [c-1, c] (pad 1 before, 0 after), divisor 1 + 1/2 * sum of squares.
  a.size = 2;
  ref::lrn(x.data(), 1, 3, 1, a, y.data());
  expect_all_near(y, {1 / 1.5f, 2 / 3.5f, 3 / 7.5f}, 0, 1e-6);
  // size 3: window [c-1, c+1]; sums of squares 5, 14, 13.
  a.size = 3;
  ref::lrn(x.data(), 1, 3, 1, a, y.data());
  expect_all_near(y, {1 / (1 + 5 / 3.0f), 2 / (1 + 14 / 3.0f), 3 / (1 + 13 / 3.0f)}, 0, 1e-6);
}

TEST(RefLRN, MatchesZeroPaddedChannelAvgPoolFormulation) {
  const uint32_t seed = test::fresh_seed();
  SCOPED_TRACE(test::seed_trace(seed));
  std::mt19937 rng(seed);
  for (int iteration = 0; iteration < 20; ++iteration) {
    LRNAttrs a;
    a.size = random_int(rng, 1, 6);
    a.alpha = std::uniform_real_distribution<float>(1e-4f, 0.5f)(rng);
    a.beta = std::uniform_real_distribution<float>(0.5f, 1.0f)(rng);
    a.k = std::uniform_real_distribution<float>(0.5f, 2.0f)(rng);
    const int n = random_int(rng, 1, 2), c = random_int(rng, 1, 9),
              spatial = random_int(rng, 1, 13);
    const auto x = random_vector(static_cast<size_t>(n) * c * spatial, rng, -2.0f, 2.0f);
    std::vector<float> y(x.size()), expected(x.size());
    ref::lrn(x.data(), n, c, spatial, a, y.data());
    // torch: div = pad(x^2, (size/2, (size-1)/2) over C); div = avg_pool(div, size) * alpha + k;
    // y = x / div^beta.
    const int before = a.size / 2, after = (a.size - 1) / 2;
    for (int b = 0; b < n; ++b)
      for (int s = 0; s < spatial; ++s) {
        std::vector<double> squares(before + c + after, 0.0);
        for (int ch = 0; ch < c; ++ch) {
          const double v = x[(static_cast<size_t>(b) * c + ch) * spatial + s];
          squares[before + ch] = v * v;
        }
        for (int ch = 0; ch < c; ++ch) {
          double window = 0;
          for (int k = 0; k < a.size; ++k) window += squares[ch + k];
          const size_t i = (static_cast<size_t>(b) * c + ch) * spatial + s;
          expected[i] =
              static_cast<float>(x[i] / std::pow(window / a.size * a.alpha + a.k, a.beta));
        }
      }
    expect_all_near(y, expected, 1e-6, 1e-5, "iteration " + std::to_string(iteration));
  }
}

}  // namespace
}  // namespace cnnrt
