// ref::relu / clamp / add / concat_channels: small hand-computed cases (in place included).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kernels/cpu/reference.h"
#include "random_test_util.h"

namespace cnnrt {
namespace {

using test::expect_all_near;

TEST(RefRelu, HandComputedOutOfPlaceAndInPlace) {
  std::vector<float> x = {-1.5f,   0.0f, 2.5f,
                          -1e-30f, 7.0f, std::numeric_limits<float>::quiet_NaN()};
  std::vector<float> y(x.size(), 99.0f);
  ref::relu(x.data(), 5, y.data());
  EXPECT_EQ(y[5], 99.0f) << "wrote past count";
  y.pop_back();
  expect_all_near(y, {0, 0, 2.5f, 0, 7}, 0, 0);
  ref::relu(x.data(), static_cast<int64_t>(x.size()), x.data());
  EXPECT_TRUE(std::isnan(x[5])) << "NaN must propagate like torch.relu";
  x.pop_back();
  expect_all_near(x, {0, 0, 2.5f, 0, 7}, 0, 0);
}

TEST(RefClamp, Relu6ClipAndOneSidedBoundsHandComputed) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const std::vector<float> x = {-7.0f, -0.5f, 0.0f, 3.25f, 6.0f, 6.5f, 1e30f};
  std::vector<float> y(x.size());
  ref::clamp(x.data(), 7, 0.0f, 6.0f, y.data());  // relu6
  expect_all_near(y, {0, 0, 0, 3.25f, 6, 6, 6}, 0, 0);
  ref::clamp(x.data(), 7, -1.0f, 0.5f, y.data());  // clip
  expect_all_near(y, {-1, -0.5f, 0, 0.5f, 0.5f, 0.5f, 0.5f}, 0, 0);
  ref::clamp(x.data(), 7, -kInf, 4.0f, y.data());  // clip with max only
  expect_all_near(y, {-7, -0.5f, 0, 3.25f, 4, 4, 4}, 0, 0);
  ref::clamp(x.data(), 7, 0.0f, kInf, y.data());  // relu as a clamp
  std::vector<float> relu(x.size());
  ref::relu(x.data(), 7, relu.data());
  expect_all_near(y, relu, 0, 0);
}

TEST(RefClamp, InPlaceAndNaNPropagates) {
  std::vector<float> x = {-2.0f, 9.0f, std::numeric_limits<float>::quiet_NaN(), 99.0f};
  ref::clamp(x.data(), 3, 0.0f, 6.0f, x.data());
  EXPECT_EQ(x[0], 0.0f);
  EXPECT_EQ(x[1], 6.0f);
  EXPECT_TRUE(std::isnan(x[2])) << "NaN must propagate like torch.clamp";
  EXPECT_EQ(x[3], 99.0f) << "wrote past count";
}

TEST(RefAdd, HandComputed) {
  const std::vector<float> a = {1, -2, 3.5f}, b = {0.5f, 2, -4};
  std::vector<float> y(3);
  ref::add(a.data(), b.data(), 3, y.data());
  expect_all_near(y, {1.5f, 0, -0.5f}, 0, 0);
}

TEST(RefConcat, HandComputedTwoSamples) {
  const std::vector<float> a = {1, 2, 3, 4};                 // [2, 1, 2]
  const std::vector<float> b = {5, 6, 7, 8, 9, 10, 11, 12};  // [2, 2, 2]
  const std::vector<float> c = {-1, -2, -3, -4};             // [2, 1, 2]
  const float* inputs[] = {a.data(), b.data(), c.data()};
  const int channels[] = {1, 2, 1};
  std::vector<float> y(16);
  ref::concat_channels(inputs, channels, 3, 2, 2, y.data());
  expect_all_near(y, {1, 2, 5, 6, 7, 8, -1, -2, 3, 4, 9, 10, 11, 12, -3, -4}, 0, 0);
}

}  // namespace
}  // namespace cnnrt
