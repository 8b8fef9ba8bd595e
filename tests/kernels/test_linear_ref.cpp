// ref::linear: a hand-computed case, then linear == 1x1 conv on 1x1 spatial, and linear over a
// flattened CHW sample == a conv whose kernel covers the whole feature map (the flatten order
// AlexNet's classifier relies on).
#include <gtest/gtest.h>

#include "kernels/cpu/reference.h"
#include "random_test_util.h"

namespace cnnrt {
namespace {

using test::expect_all_near;
using test::random_int;
using test::random_vector;

TEST(RefLinear, HandComputed) {
  const std::vector<float> x = {1, 2, -3, 0.5f};                // two samples of 2 features
  const std::vector<float> weight = {1, 0, 2, -1, 0.5f, 0.5f};  // [3, 2]
  const std::vector<float> bias = {0, 1, -1};
  std::vector<float> y(6);
  ref::linear(x.data(), 2, 2, weight.data(), bias.data(), 3, y.data());
  // sample 0: [1, 2*1-2+1, 0.5+1-1] ; sample 1: [-3, -6-0.5+1, -1.5+0.25-1]
  expect_all_near(y, {1, 1, 0.5f, -3, -5.5f, -2.25f}, 0, 0);
  ref::linear(x.data(), 2, 2, weight.data(), nullptr, 3, y.data());
  expect_all_near(y, {1, 0, 1.5f, -3, -6.5f, -1.25f}, 0, 0);
}

TEST(RefLinear, EqualsConv1x1On1x1Spatial) {
  const uint32_t seed = test::fresh_seed();
  SCOPED_TRACE(test::seed_trace(seed));
  std::mt19937 rng(seed);
  for (int iteration = 0; iteration < 20; ++iteration) {
    const int n = random_int(rng, 1, 5), in = random_int(rng, 1, 37), out = random_int(rng, 1, 29);
    const auto x = random_vector(static_cast<size_t>(n) * in, rng);
    const auto weight = random_vector(static_cast<size_t>(out) * in, rng);
    const auto bias = random_vector(out, rng);
    std::vector<float> y_linear(static_cast<size_t>(n) * out), y_conv(y_linear.size());
    ref::linear(x.data(), n, in, weight.data(), bias.data(), out, y_linear.data());
    ConvAttrs a;
    a.out_channels = out;
    ref::conv2d(x.data(), n, in, 1, 1, weight.data(), bias.data(), a, y_conv.data());
    // Same products summed in the same order in double: equal to fp32 rounding.
    expect_all_near(y_linear, y_conv, 1e-6, 1e-6, "iteration " + std::to_string(iteration));
  }
}

TEST(RefLinear, FlattenedFeatureMapEqualsFullKernelConv) {
  const uint32_t seed = test::fresh_seed();
  SCOPED_TRACE(test::seed_trace(seed));
  std::mt19937 rng(seed);
  for (int iteration = 0; iteration < 10; ++iteration) {
    const int n = random_int(rng, 1, 3), c = random_int(rng, 1, 5), h = random_int(rng, 1, 7),
              w = random_int(rng, 1, 7), out = random_int(rng, 1, 11);
    const int in = c * h * w;
    const auto x = random_vector(static_cast<size_t>(n) * in, rng);
    const auto weight = random_vector(static_cast<size_t>(out) * in, rng);
    const auto bias = random_vector(out, rng);
    std::vector<float> y_linear(static_cast<size_t>(n) * out), y_conv(y_linear.size());
    ref::linear(x.data(), n, in, weight.data(), bias.data(), out, y_linear.data());
    ConvAttrs a;
    a.out_channels = out;
    a.kernel_h = h;
    a.kernel_w = w;
    ref::conv2d(x.data(), n, c, h, w, weight.data(), bias.data(), a, y_conv.data());
    expect_all_near(y_linear, y_conv, 1e-6, 1e-6, "iteration " + std::to_string(iteration));
  }
}

}  // namespace
}  // namespace cnnrt
