// ref::maxpool2d / avgpool2d / adaptive_avgpool2d against hand-computed PyTorch results
// (padding, ceil_mode incl. the dropped last window, count_include_pad divisors), the output
// extent against graph/ops.h pool_output_size, and random odd shapes against formulations with
// an explicitly padded buffer.
#include <gtest/gtest.h>

#include <limits>

#include "graph/ops.h"
#include "kernels/cpu/reference.h"
#include "random_test_util.h"

namespace cnnrt {
namespace {

using test::expect_all_near;
using test::random_int;
using test::random_vector;

constexpr float kSentinel = 1234.5f;

PoolAttrs pool(int kh, int kw, int sh, int sw, int ph = 0, int pw = 0, bool ceil = false,
               bool include_pad = true) {
  PoolAttrs a;
  a.kernel_h = kh;
  a.kernel_w = kw;
  a.stride_h = sh;
  a.stride_w = sw;
  a.pad_h = ph;
  a.pad_w = pw;
  a.ceil_mode = ceil;
  a.count_include_pad = include_pad;
  return a;
}

// Runs a 1-row pool over `row` into a buffer one longer than `expected`, so writing a value too
// many is caught by the sentinel, and writing one too few leaves a sentinel among the first
// `expected_count` (inputs lie in [-1, 1], so no real output equals it).
std::vector<float> pool_row(bool is_max, const std::vector<float>& row, const PoolAttrs& a,
                            size_t expected_count) {
  std::vector<float> y(expected_count + 1, kSentinel);
  if (is_max)
    ref::maxpool2d(row.data(), 1, 1, 1, static_cast<int>(row.size()), a, y.data());
  else
    ref::avgpool2d(row.data(), 1, 1, 1, static_cast<int>(row.size()), a, y.data());
  EXPECT_EQ(y.back(), kSentinel) << "pool wrote more than " << expected_count << " outputs";
  y.pop_back();
  for (size_t i = 0; i < y.size(); ++i)
    EXPECT_NE(y[i], kSentinel) << "pool left output " << i << " of " << expected_count
                               << " unwritten";
  return y;
}

TEST(RefMaxPool, HandComputed2x2Stride2) {
  const std::vector<float> x = {1, 5, 2, 0, 3, -1, 4, 8, -2, 6, 7, 1, 0, 9, 3, 2};
  std::vector<float> y(4);
  ref::maxpool2d(x.data(), 1, 1, 4, 4, pool(2, 2, 2, 2), y.data());
  expect_all_near(y, {5, 8, 9, 7}, 0, 0);
}

TEST(RefMaxPool, PaddingActsAsMinusInfinity) {
  // All inputs negative: a zero-padding bug would show up as 0 in the border outputs.
  const std::vector<float> x = {-1, -2, -3, -4};
  std::vector<float> y(9);
  ref::maxpool2d(x.data(), 1, 1, 2, 2, pool(2, 2, 1, 1, 1, 1), y.data());
  expect_all_near(y, {-1, -1, -2, -1, -1, -2, -3, -3, -4}, 0, 0);
}

TEST(RefMaxPool, CeilModeKeepsPartialWindowAndDropsOneStartingInPadding) {
  expect_all_near(pool_row(true, {1, 2, 3, 4, 5}, pool(1, 2, 1, 2, 0, 0, true), 3), {2, 4, 5}, 0,
                  0);
  expect_all_near(pool_row(true, {1, 2, 3, 4, 5}, pool(1, 2, 1, 2, 0, 0, false), 2), {2, 4}, 0, 0);
  // in 3, kernel 2, stride 2, pad 1: ceil would give 3 windows, but the third would start at
  // index 3 = in + pad - 1 + 1, i.e. inside the right padding, so PyTorch drops it.
  expect_all_near(pool_row(true, {1, 2, 3}, pool(1, 2, 1, 2, 0, 1, true), 2), {1, 3}, 0, 0);
}

TEST(RefMaxPool, PropagatesNaN) {
  const std::vector<float> x = {1, std::numeric_limits<float>::quiet_NaN(), 3, 2};
  const auto y = pool_row(true, x, pool(1, 2, 1, 2), 2);
  EXPECT_TRUE(std::isnan(y[0]));
  EXPECT_EQ(y[1], 3.0f);
}

TEST(RefAvgPool, HandComputedCeilModeDivisors) {
  // PyTorch avg_pool1d([1,2,3,4,5], 2, 2, ceil_mode=True) = [1.5, 3.5, 5]: the last window is
  // clipped to the (unpadded) input, so it divides by 1.
  expect_all_near(pool_row(false, {1, 2, 3, 4, 5}, pool(1, 2, 1, 2, 0, 0, true), 3),
                  {1.5f, 3.5f, 5}, 0, 0);
  // [1,2,3,4], kernel 3, stride 2, pad 1, ceil: windows [-1,2) [1,4) [3,6)->[3,5).
  //   count_include_pad: divisors 3, 3, 2 -> [3/3, 9/3, 4/2]
  //   exclude pad:       divisors 2, 3, 1 -> [3/2, 9/3, 4/1]
  expect_all_near(pool_row(false, {1, 2, 3, 4}, pool(1, 3, 1, 2, 0, 1, true, true), 3), {1, 3, 2},
                  0, 1e-7);
  expect_all_near(pool_row(false, {1, 2, 3, 4}, pool(1, 3, 1, 2, 0, 1, true, false), 3),
                  {1.5f, 3, 4}, 0, 1e-7);
  expect_all_near(pool_row(false, {1, 2, 3, 4}, pool(1, 3, 1, 2, 0, 1, false, true), 2), {1, 3}, 0,
                  1e-7);
  // Dropped last window (see the max-pool case): [-1,1) -> 1/2 with the pad counted.
  expect_all_near(pool_row(false, {1, 2, 3}, pool(1, 2, 1, 2, 0, 1, true, true), 2), {0.5f, 2.5f},
                  0, 0);
}

TEST(RefPool, OutputExtentMatchesGraphPoolOutputSize) {
  const uint32_t seed = test::fresh_seed();
  SCOPED_TRACE(test::seed_trace(seed));
  std::mt19937 rng(seed);
  for (int iteration = 0; iteration < 300; ++iteration) {
    const int k = random_int(rng, 1, 6), s = random_int(rng, 1, 4), p = random_int(rng, 0, k / 2);
    const int in = random_int(rng, std::max(1, k - 2 * p), 17);
    const bool ceil = random_int(rng, 0, 1) == 1;
    const int64_t expected = pool_output_size(in, k, s, p, 1, ceil);
    ASSERT_GE(expected, 1);
    const auto x = random_vector(in, rng);
    SCOPED_TRACE("in " + std::to_string(in) + " k " + std::to_string(k) + " s " +
                 std::to_string(s) + " p " + std::to_string(p) + " ceil " + std::to_string(ceil));
    pool_row(true, x, pool(1, k, 1, s, 0, p, ceil), expected);
    pool_row(false, x, pool(1, k, 1, s, 0, p, ceil), expected);
  }
}

// Oracles on an explicitly padded copy: -inf padding for max; for avg, the divisor counts the
// window's cells inside the padded input (count_include_pad) or inside the real input.
void pool_oracle(const std::vector<float>& x, int planes, int h, int w, const PoolAttrs& a,
                 std::vector<float>& max_out, std::vector<float>& avg_out) {
  const int oh =
      static_cast<int>(pool_output_size(h, a.kernel_h, a.stride_h, a.pad_h, 1, a.ceil_mode));
  const int ow =
      static_cast<int>(pool_output_size(w, a.kernel_w, a.stride_w, a.pad_w, 1, a.ceil_mode));
  // Padded far enough right/bottom that ceil-mode windows stay inside the buffer.
  const int hp = std::max((oh - 1) * a.stride_h + a.kernel_h, h + 2 * a.pad_h);
  const int wp = std::max((ow - 1) * a.stride_w + a.kernel_w, w + 2 * a.pad_w);
  max_out.clear();
  avg_out.clear();
  for (int plane = 0; plane < planes; ++plane) {
    std::vector<double> padded(static_cast<size_t>(hp) * wp,
                               -std::numeric_limits<double>::infinity());
    for (int i = 0; i < h; ++i)
      for (int j = 0; j < w; ++j)
        padded[(i + a.pad_h) * wp + j + a.pad_w] = x[(plane * h + i) * w + j];
    for (int i = 0; i < oh; ++i)
      for (int j = 0; j < ow; ++j) {
        double best = -std::numeric_limits<double>::infinity(), sum = 0;
        int cells_in_padded = 0, cells_real = 0;
        for (int di = 0; di < a.kernel_h; ++di)
          for (int dj = 0; dj < a.kernel_w; ++dj) {
            const int r = i * a.stride_h + di, c = j * a.stride_w + dj;  // padded coordinates
            const double v = padded[r * wp + c];
            best = std::max(best, v);
            if (r < h + 2 * a.pad_h && c < w + 2 * a.pad_w) ++cells_in_padded;
            if (v != -std::numeric_limits<double>::infinity()) {
              sum += v;
              ++cells_real;
            }
          }
        max_out.push_back(static_cast<float>(best));
        avg_out.push_back(
            static_cast<float>(sum / (a.count_include_pad ? cells_in_padded : cells_real)));
      }
  }
}

TEST(RefPool, RandomOddShapesMatchPaddedBufferOracle) {
  const uint32_t seed = test::fresh_seed();
  SCOPED_TRACE(test::seed_trace(seed));
  std::mt19937 rng(seed);
  for (int iteration = 0; iteration < 200; ++iteration) {
    PoolAttrs a = pool(random_int(rng, 1, 5), random_int(rng, 1, 5), random_int(rng, 1, 3),
                       random_int(rng, 1, 3));
    a.pad_h = random_int(rng, 0, a.kernel_h / 2);
    a.pad_w = random_int(rng, 0, a.kernel_w / 2);
    a.ceil_mode = random_int(rng, 0, 1) == 1;
    a.count_include_pad = random_int(rng, 0, 1) == 1;
    const int n = random_int(rng, 1, 2), c = random_int(rng, 1, 3);
    // Any extent the padded input can hold, odd and even, so ceil-mode windows overhang.
    const int h = std::max(1, a.kernel_h - 2 * a.pad_h) + random_int(rng, 0, 8);
    const int w = std::max(1, a.kernel_w - 2 * a.pad_w) + random_int(rng, 0, 8);
    // Strictly negative inputs so padding treated as 0 would be visible in max-pool.
    const auto x = random_vector(static_cast<size_t>(n) * c * h * w, rng, -3.0f, -0.5f);
    std::vector<float> max_expected, avg_expected;
    pool_oracle(x, n * c, h, w, a, max_expected, avg_expected);
    std::vector<float> max_actual(max_expected.size()), avg_actual(avg_expected.size());
    ref::maxpool2d(x.data(), n, c, h, w, a, max_actual.data());
    ref::avgpool2d(x.data(), n, c, h, w, a, avg_actual.data());
    const std::string what = "iteration " + std::to_string(iteration);
    expect_all_near(max_actual, max_expected, 0, 0, what + " max");
    // Averages of at most 25 values, both summed in double: fp32 rounding only.
    expect_all_near(avg_actual, avg_expected, 1e-6, 1e-6, what + " avg");
    for (float v : max_actual) ASSERT_LT(v, 0.0f) << what;
  }
}

TEST(RefAdaptiveAvgPool, HandComputedUnevenWindows) {
  std::vector<float> y(3);
  const std::vector<float> row5 = {1, 2, 3, 4, 5};
  // out 3 of in 5: windows [0,2) [1,4) [3,5).
  ref::adaptive_avgpool2d(row5.data(), 1, 1, 1, 5, 1, 3, y.data());
  expect_all_near(y, {1.5f, 3, 4.5f}, 0, 0);
  // out 5 of in 3 (upsampling): windows [0,1) [0,2) [1,2) [1,3) [2,3).
  const std::vector<float> row3 = {1, 2, 3};
  y.resize(5);
  ref::adaptive_avgpool2d(row3.data(), 1, 1, 1, 3, 1, 5, y.data());
  expect_all_near(y, {1, 1.5f, 2, 2.5f, 3}, 0, 0);
}

TEST(RefAdaptiveAvgPool, DivisibleSizesEqualAvgPoolAndOneIsGlobalMean) {
  const uint32_t seed = test::fresh_seed();
  SCOPED_TRACE(test::seed_trace(seed));
  std::mt19937 rng(seed);
  for (int iteration = 0; iteration < 20; ++iteration) {
    const int n = random_int(rng, 1, 2), c = random_int(rng, 1, 4);
    const int oh = random_int(rng, 1, 4), ow = random_int(rng, 1, 4);
    const int fh = random_int(rng, 1, 3), fw = random_int(rng, 1, 3);
    const int h = oh * fh, w = ow * fw;
    const auto x = random_vector(static_cast<size_t>(n) * c * h * w, rng);
    std::vector<float> adaptive(static_cast<size_t>(n) * c * oh * ow), plain(adaptive.size());
    ref::adaptive_avgpool2d(x.data(), n, c, h, w, oh, ow, adaptive.data());
    ref::avgpool2d(x.data(), n, c, h, w, pool(fh, fw, fh, fw), plain.data());
    expect_all_near(adaptive, plain, 1e-6, 1e-6, "iteration " + std::to_string(iteration));

    std::vector<float> global(static_cast<size_t>(n) * c);
    ref::adaptive_avgpool2d(x.data(), n, c, h, w, 1, 1, global.data());
    for (int plane = 0; plane < n * c; ++plane) {
      double mean = 0;
      for (int k = 0; k < h * w; ++k) mean += x[static_cast<size_t>(plane) * h * w + k];
      mean /= h * w;
      EXPECT_NEAR(global[plane], mean, 1e-6 + 1e-6 * std::fabs(mean));
    }
  }
}

}  // namespace
}  // namespace cnnrt
