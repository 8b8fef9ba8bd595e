// ref::conv2d with asymmetric padding ([top, left, bottom, right], TF "SAME"): a hand-computed
// case, then random odd shapes checked against a different formulation — copy the input into an
// explicitly zero-padded buffer (top/left/bottom/right apart), then convolve it unpadded.
#include <gtest/gtest.h>

#include <vector>

#include "graph/ops.h"
#include "kernels/cpu/reference.h"
#include "random_test_util.h"

namespace cnnrt {
namespace {

using test::expect_all_near;
using test::random_int;
using test::random_vector;

TEST(RefConvPadding, HandComputedTopLeftBottomRight) {
  // 1x1x2x2 input, 2x2 kernel of ones, padding top 0, left 1, bottom 1, right 0:
  // padded (3x3) = [[0, 1, 2], [0, 3, 4], [0, 0, 0]] -> 2x2 output of window sums.
  const std::vector<float> x = {1, 2, 3, 4}, ones = {1, 1, 1, 1};
  ConvAttrs a;
  a.out_channels = 1;
  a.kernel_h = a.kernel_w = 2;
  a.pad_h = 0;
  a.pad_w = 1;
  a.pad_h_extra = 1;   // bottom 1
  a.pad_w_extra = -1;  // right 0
  std::vector<float> y(4, 1e30f);
  ref::conv2d(x.data(), 1, 1, 2, 2, ones.data(), nullptr, a, y.data());
  expect_all_near(y, {4, 10, 3, 7}, 0, 0);
}

TEST(RefConvPadding, UnresolvedSameIsResolvedFromTheInput) {
  // 3x3 stride 2 on 4x4 `same`: out 2x2, pads top/left 0, bottom/right 1.  Kernel picks the
  // centre tap only, so y[i][j] = x[2i + 1][2j + 1].
  std::vector<float> x(16);
  for (int i = 0; i < 16; ++i) x[i] = static_cast<float>(i);
  std::vector<float> centre(9, 0.0f);
  centre[4] = 1.0f;
  ConvAttrs a;
  a.out_channels = 1;
  a.kernel_h = a.kernel_w = 3;
  a.stride_h = a.stride_w = 2;
  a.pad_same = true;  // pads left at 0: conv2d must resolve them itself
  std::vector<float> y(4, 1e30f);
  ref::conv2d(x.data(), 1, 1, 4, 4, centre.data(), nullptr, a, y.data());
  expect_all_near(y, {5, 7, 13, 15}, 0, 0);
}

// The independent formulation: explicit zero padding with the four pads apart, then an
// unpadded conv (which the symmetric tests in test_conv_ref.cpp already pin).
std::vector<float> conv_on_padded_copy(const std::vector<float>& x, int n, int c, int h, int w,
                                       const std::vector<float>& weight, const ConvAttrs& a) {
  const int hp = h + a.pad_h + a.pad_bottom(), wp = w + a.pad_w + a.pad_right();
  std::vector<float> padded(static_cast<size_t>(n) * c * hp * wp, 0.0f);
  for (int b = 0; b < n * c; ++b)
    for (int i = 0; i < h; ++i)
      for (int j = 0; j < w; ++j)
        padded[(static_cast<size_t>(b) * hp + i + a.pad_h) * wp + j + a.pad_w] =
            x[(static_cast<size_t>(b) * h + i) * w + j];
  ConvAttrs unpadded = a;
  unpadded.pad_h = unpadded.pad_w = unpadded.pad_h_extra = unpadded.pad_w_extra = 0;
  const int oh = static_cast<int>(conv_output_size(hp, a.kernel_h, a.stride_h, 0, 0, a.dilation_h));
  const int ow = static_cast<int>(conv_output_size(wp, a.kernel_w, a.stride_w, 0, 0, a.dilation_w));
  std::vector<float> y(static_cast<size_t>(n) * a.out_channels * oh * ow);
  ref::conv2d(padded.data(), n, c, hp, wp, weight.data(), nullptr, unpadded, y.data());
  return y;
}

TEST(RefConvPadding, AsymmetricEqualsExplicitlyPaddedInputOnRandomShapes) {
  const uint32_t seed = test::fresh_seed();
  SCOPED_TRACE(test::seed_trace(seed));
  std::mt19937 rng(seed);
  for (int iteration = 0; iteration < 40; ++iteration) {
    ConvAttrs a;
    a.groups = random_int(rng, 1, 2);
    const int n = random_int(rng, 1, 2), c = a.groups * random_int(rng, 1, 2);
    a.out_channels = a.groups * random_int(rng, 1, 3);
    a.kernel_h = random_int(rng, 1, 5);
    a.kernel_w = random_int(rng, 1, 5);
    a.stride_h = random_int(rng, 1, 3);
    a.stride_w = random_int(rng, 1, 3);
    a.dilation_h = random_int(rng, 1, 2);
    a.dilation_w = random_int(rng, 1, 2);
    const int h = a.dilation_h * (a.kernel_h - 1) + 1 + random_int(rng, 0, 6);
    const int w = a.dilation_w * (a.kernel_w - 1) + 1 + random_int(rng, 0, 6);
    if (iteration % 2 == 0) {
      resolve_same_padding(a, h, w);
    } else {
      a.pad_h = random_int(rng, 0, 3);
      a.pad_w = random_int(rng, 0, 3);
      a.pad_h_extra = random_int(rng, 0, 3) - a.pad_h;
      a.pad_w_extra = random_int(rng, 0, 3) - a.pad_w;
    }
    const auto x = random_vector(static_cast<size_t>(n) * c * h * w, rng);
    const auto weight = random_vector(
        static_cast<size_t>(a.out_channels) * (c / a.groups) * a.kernel_h * a.kernel_w, rng);
    const int oh = static_cast<int>(
        conv_output_size(h, a.kernel_h, a.stride_h, a.pad_h, a.pad_bottom(), a.dilation_h));
    const int ow = static_cast<int>(
        conv_output_size(w, a.kernel_w, a.stride_w, a.pad_w, a.pad_right(), a.dilation_w));
    std::vector<float> y(static_cast<size_t>(n) * a.out_channels * oh * ow, 1e30f);
    ref::conv2d(x.data(), n, c, h, w, weight.data(), nullptr, a, y.data());
    // Same taps, same double accumulation order per output: identical to fp32 rounding.
    expect_all_near(y, conv_on_padded_copy(x, n, c, h, w, weight, a), 1e-6, 1e-6,
                    "iteration " + std::to_string(iteration));
  }
}

}  // namespace
}  // namespace cnnrt
