// ref::conv2d: hand-computed small cases, then properties on random odd shapes, each checked
// through a formulation with different index code (im2col + matrix product, explicit zero
// padding, zero-inserted kernels for dilation, sub-sampling for stride, per-group slicing).
#include <gtest/gtest.h>

#include <vector>

#include "cnnrt/error.h"
#include "kernels/cpu/reference.h"
#include "random_test_util.h"

namespace cnnrt {
namespace {

using test::expect_all_near;
using test::random_int;
using test::random_vector;

int out_extent(int in, int k, int s, int p, int d) {
  return (in + 2 * p - d * (k - 1) - 1) / s + 1;
}

ConvAttrs make_attrs(int oc, int k, int s = 1, int p = 0, int d = 1, int g = 1) {
  ConvAttrs a;
  a.out_channels = oc;
  a.kernel_h = a.kernel_w = k;
  a.stride_h = a.stride_w = s;
  a.pad_h = a.pad_w = p;
  a.dilation_h = a.dilation_w = d;
  a.groups = g;
  return a;
}

std::vector<float> run_conv(const std::vector<float>& x, int n, int c, int h, int w,
                            const std::vector<float>& weight, const std::vector<float>* bias,
                            const ConvAttrs& a) {
  const int oh = out_extent(h, a.kernel_h, a.stride_h, a.pad_h, a.dilation_h);
  const int ow = out_extent(w, a.kernel_w, a.stride_w, a.pad_w, a.dilation_w);
  std::vector<float> y(static_cast<size_t>(n) * a.out_channels * oh * ow, 1e30f);
  ref::conv2d(x.data(), n, c, h, w, weight.data(), bias ? bias->data() : nullptr, a, y.data());
  return y;
}

TEST(RefConv, HandComputed2x2KernelOn3x3) {
  const std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  const std::vector<float> weight = {1, 2, 3, 4};
  const std::vector<float> bias = {0.5f};
  // y[i][j] = 1*x[i][j] + 2*x[i][j+1] + 3*x[i+1][j] + 4*x[i+1][j+1] + 0.5
  expect_all_near(run_conv(x, 1, 1, 3, 3, weight, &bias, make_attrs(1, 2)),
                  {37.5f, 47.5f, 67.5f, 77.5f}, 0, 0);
}

TEST(RefConv, HandComputedPaddingAndStride) {
  const std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  const std::vector<float> weight = {1, 2, 3, 4};
  // pad 1, stride 2: windows start at rows/cols -1 and 1.
  //  (0,0): only x00 under w11 -> 4;  (0,1): x01*3 + x02*4 = 18
  //  (1,0): x10*2 + x20*4 = 36;       (1,1): 5 + 12 + 24 + 36 = 77
  expect_all_near(run_conv(x, 1, 1, 3, 3, weight, nullptr, make_attrs(1, 2, 2, 1)), {4, 18, 36, 77},
                  0, 0);
}

TEST(RefConv, HandComputedGroupsAndDilation) {
  // Two channels, two groups, 1x1 kernels: each output channel sees only its own input channel.
  const std::vector<float> x = {1, 2, 3, 4, 10, 20, 30, 40};  // [1, 2, 2, 2]
  expect_all_near(run_conv(x, 1, 2, 2, 2, {2.0f, -1.0f}, nullptr, make_attrs(2, 1, 1, 0, 1, 2)),
                  {2, 4, 6, 8, -10, -20, -30, -40}, 0, 0);
  // 1x5 row, 1x2 kernel of ones, dilation 2: y[j] = x[j] + x[j+2].
  ConvAttrs a = make_attrs(1, 1);
  a.kernel_w = 2;
  a.dilation_w = 2;
  std::vector<float> y(3);
  const std::vector<float> row = {1, 2, 3, 4, 5}, ones = {1, 1};
  ref::conv2d(row.data(), 1, 1, 1, 5, ones.data(), nullptr, a, y.data());
  expect_all_near(y, {4, 6, 8}, 0, 0);
}

TEST(RefConv, RejectsChannelsNotDivisibleByGroups) {
  std::vector<float> x(3 * 4 * 4, 1.0f), w(4 * 3), y(64);
  EXPECT_THROW(
      ref::conv2d(x.data(), 1, 3, 4, 4, w.data(), nullptr, make_attrs(4, 1, 1, 0, 1, 2), y.data()),
      Error);
}

// Independent formulation: explicit zero-padded copy, im2col matrix, then a matrix product.
std::vector<float> conv_im2col(const std::vector<float>& x, int n, int c, int h, int w,
                               const std::vector<float>& weight, const std::vector<float>& bias,
                               const ConvAttrs& a) {
  const int hp = h + 2 * a.pad_h, wp = w + 2 * a.pad_w;
  const int oh = out_extent(h, a.kernel_h, a.stride_h, a.pad_h, a.dilation_h);
  const int ow = out_extent(w, a.kernel_w, a.stride_w, a.pad_w, a.dilation_w);
  const int cg = c / a.groups, og = a.out_channels / a.groups;
  const int patch = cg * a.kernel_h * a.kernel_w;
  std::vector<float> y;
  for (int b = 0; b < n; ++b) {
    std::vector<double> padded(static_cast<size_t>(c) * hp * wp, 0.0);
    for (int ch = 0; ch < c; ++ch)
      for (int i = 0; i < h; ++i)
        for (int j = 0; j < w; ++j)
          padded[(ch * hp + i + a.pad_h) * wp + j + a.pad_w] = x[((b * c + ch) * h + i) * w + j];
    std::vector<double> out(static_cast<size_t>(a.out_channels) * oh * ow);
    for (int g = 0; g < a.groups; ++g) {
      // columns[p][q]: p = patch element (ci, ky, kx), q = output pixel.
      std::vector<double> columns(static_cast<size_t>(patch) * oh * ow);
      int p = 0;
      for (int ci = 0; ci < cg; ++ci)
        for (int ky = 0; ky < a.kernel_h; ++ky)
          for (int kx = 0; kx < a.kernel_w; ++kx, ++p)
            for (int q = 0; q < oh * ow; ++q) {
              const int row = (q / ow) * a.stride_h + ky * a.dilation_h;
              const int col = (q % ow) * a.stride_w + kx * a.dilation_w;
              columns[static_cast<size_t>(p) * oh * ow + q] =
                  padded[((g * cg + ci) * hp + row) * wp + col];
            }
      for (int o = 0; o < og; ++o)
        for (int q = 0; q < oh * ow; ++q) {
          double sum = bias[g * og + o];
          for (int pp = 0; pp < patch; ++pp)
            sum += weight[static_cast<size_t>(g * og + o) * patch + pp] *
                   columns[static_cast<size_t>(pp) * oh * ow + q];
          out[static_cast<size_t>(g * og + o) * oh * ow + q] = sum;
        }
    }
    for (double v : out) y.push_back(static_cast<float>(v));
  }
  return y;
}

struct RandomConvCase {
  int n, c, h, w;
  ConvAttrs attrs;
};

RandomConvCase random_case(std::mt19937& rng) {
  RandomConvCase t;
  const int groups = random_int(rng, 1, 3);
  t.n = random_int(rng, 1, 3);
  t.c = groups * random_int(rng, 1, 3);
  t.attrs = make_attrs(groups * random_int(rng, 1, 3), 1, 1, 0, 1, groups);
  t.attrs.kernel_h = random_int(rng, 1, 5);
  t.attrs.kernel_w = random_int(rng, 1, 5);
  t.attrs.stride_h = random_int(rng, 1, 3);
  t.attrs.stride_w = random_int(rng, 1, 3);
  t.attrs.pad_h = random_int(rng, 0, 2);
  t.attrs.pad_w = random_int(rng, 0, 2);
  t.attrs.dilation_h = random_int(rng, 1, 2);
  t.attrs.dilation_w = random_int(rng, 1, 3);
  // Odd spatial extents at least as large as the dilated kernel.
  t.h = t.attrs.dilation_h * (t.attrs.kernel_h - 1) + 1 + 2 * random_int(rng, 0, 3) + 1;
  t.w = t.attrs.dilation_w * (t.attrs.kernel_w - 1) + 1 + 2 * random_int(rng, 0, 3);
  return t;
}

// Tolerance: the reference sums in double and rounds once; the im2col oracle sums the same
// products in double in another order, so results agree to fp32 rounding.
constexpr double kAbs = 1e-5, kRel = 1e-5;

TEST(RefConv, MatchesIm2colOnRandomOddShapes) {
  const uint32_t seed = test::fresh_seed();
  SCOPED_TRACE(test::seed_trace(seed));
  std::mt19937 rng(seed);
  for (int iteration = 0; iteration < 40; ++iteration) {
    const RandomConvCase t = random_case(rng);
    const ConvAttrs& a = t.attrs;
    const auto x = random_vector(static_cast<size_t>(t.n) * t.c * t.h * t.w, rng);
    const auto weight = random_vector(
        static_cast<size_t>(a.out_channels) * (t.c / a.groups) * a.kernel_h * a.kernel_w, rng);
    const auto bias = random_vector(a.out_channels, rng);
    expect_all_near(run_conv(x, t.n, t.c, t.h, t.w, weight, &bias, a),
                    conv_im2col(x, t.n, t.c, t.h, t.w, weight, bias, a), kAbs, kRel,
                    "iteration " + std::to_string(iteration));
  }
}

TEST(RefConv, GroupedEqualsPerGroupConvsConcatenated) {
  const uint32_t seed = test::fresh_seed();
  SCOPED_TRACE(test::seed_trace(seed));
  std::mt19937 rng(seed);
  for (int iteration = 0; iteration < 20; ++iteration) {
    RandomConvCase t = random_case(rng);
    t.attrs.groups = random_int(rng, 2, 3);
    t.c = t.attrs.groups * random_int(rng, 1, 3);
    t.attrs.out_channels = t.attrs.groups * random_int(rng, 1, 3);
    const ConvAttrs& a = t.attrs;
    const int cg = t.c / a.groups, og = a.out_channels / a.groups;
    const int kernel_size = a.kernel_h * a.kernel_w;
    const auto x = random_vector(static_cast<size_t>(t.n) * t.c * t.h * t.w, rng);
    const auto weight = random_vector(static_cast<size_t>(a.out_channels) * cg * kernel_size, rng);
    const auto bias = random_vector(a.out_channels, rng);
    const auto grouped = run_conv(x, t.n, t.c, t.h, t.w, weight, &bias, a);
    const size_t out_plane = grouped.size() / (t.n * a.out_channels);

    std::vector<float> concatenated(grouped.size());
    for (int g = 0; g < a.groups; ++g) {
      std::vector<float> xg;
      for (int b = 0; b < t.n; ++b)
        xg.insert(xg.end(), x.begin() + (static_cast<size_t>(b) * t.c + g * cg) * t.h * t.w,
                  x.begin() + (static_cast<size_t>(b) * t.c + (g + 1) * cg) * t.h * t.w);
      const std::vector<float> wg(
          weight.begin() + static_cast<size_t>(g) * og * cg * kernel_size,
          weight.begin() + static_cast<size_t>(g + 1) * og * cg * kernel_size);
      const std::vector<float> bg(bias.begin() + g * og, bias.begin() + (g + 1) * og);
      ConvAttrs single = a;
      single.groups = 1;
      single.out_channels = og;
      const auto yg = run_conv(xg, t.n, cg, t.h, t.w, wg, &bg, single);
      for (int b = 0; b < t.n; ++b)
        std::copy(
            yg.begin() + static_cast<size_t>(b) * og * out_plane,
            yg.begin() + static_cast<size_t>(b + 1) * og * out_plane,
            concatenated.begin() + (static_cast<size_t>(b) * a.out_channels + g * og) * out_plane);
    }
    expect_all_near(grouped, concatenated, 1e-6, 1e-6, "iteration " + std::to_string(iteration));
  }
}

TEST(RefConv, DilationEqualsZeroInsertedKernel) {
  const uint32_t seed = test::fresh_seed();
  SCOPED_TRACE(test::seed_trace(seed));
  std::mt19937 rng(seed);
  for (int iteration = 0; iteration < 20; ++iteration) {
    RandomConvCase t = random_case(rng);
    ConvAttrs a = t.attrs;
    a.dilation_h = random_int(rng, 2, 3);
    a.dilation_w = random_int(rng, 1, 3);
    t.h += (a.dilation_h - 1) * (a.kernel_h - 1);
    t.w += (a.dilation_w - 1) * (a.kernel_w - 1);
    const int cg = t.c / a.groups;
    const auto x = random_vector(static_cast<size_t>(t.n) * t.c * t.h * t.w, rng);
    const auto weight =
        random_vector(static_cast<size_t>(a.out_channels) * cg * a.kernel_h * a.kernel_w, rng);
    const auto bias = random_vector(a.out_channels, rng);

    ConvAttrs dense = a;
    dense.dilation_h = dense.dilation_w = 1;
    dense.kernel_h = a.dilation_h * (a.kernel_h - 1) + 1;
    dense.kernel_w = a.dilation_w * (a.kernel_w - 1) + 1;
    std::vector<float> spread(
        static_cast<size_t>(a.out_channels) * cg * dense.kernel_h * dense.kernel_w, 0.0f);
    for (int oc = 0; oc < a.out_channels * cg; ++oc)
      for (int ky = 0; ky < a.kernel_h; ++ky)
        for (int kx = 0; kx < a.kernel_w; ++kx)
          spread[(static_cast<size_t>(oc) * dense.kernel_h + ky * a.dilation_h) * dense.kernel_w +
                 kx * a.dilation_w] =
              weight[(static_cast<size_t>(oc) * a.kernel_h + ky) * a.kernel_w + kx];
    expect_all_near(run_conv(x, t.n, t.c, t.h, t.w, weight, &bias, a),
                    run_conv(x, t.n, t.c, t.h, t.w, spread, &bias, dense), 1e-6, 1e-6,
                    "iteration " + std::to_string(iteration));
  }
}

TEST(RefConv, StrideEqualsSubsampledStrideOne) {
  const uint32_t seed = test::fresh_seed();
  SCOPED_TRACE(test::seed_trace(seed));
  std::mt19937 rng(seed);
  for (int iteration = 0; iteration < 20; ++iteration) {
    RandomConvCase t = random_case(rng);
    ConvAttrs a = t.attrs;
    a.stride_h = random_int(rng, 2, 3);
    a.stride_w = random_int(rng, 1, 3);
    const auto x = random_vector(static_cast<size_t>(t.n) * t.c * t.h * t.w, rng);
    const auto weight = random_vector(
        static_cast<size_t>(a.out_channels) * (t.c / a.groups) * a.kernel_h * a.kernel_w, rng);
    const auto bias = random_vector(a.out_channels, rng);
    ConvAttrs unit = a;
    unit.stride_h = unit.stride_w = 1;
    const auto strided = run_conv(x, t.n, t.c, t.h, t.w, weight, &bias, a);
    const auto full = run_conv(x, t.n, t.c, t.h, t.w, weight, &bias, unit);
    const int oh = out_extent(t.h, a.kernel_h, a.stride_h, a.pad_h, a.dilation_h);
    const int ow = out_extent(t.w, a.kernel_w, a.stride_w, a.pad_w, a.dilation_w);
    const int fh = out_extent(t.h, a.kernel_h, 1, a.pad_h, a.dilation_h);
    const int fw = out_extent(t.w, a.kernel_w, 1, a.pad_w, a.dilation_w);
    std::vector<float> sampled;
    for (int plane = 0; plane < t.n * a.out_channels; ++plane)
      for (int i = 0; i < oh; ++i)
        for (int j = 0; j < ow; ++j)
          sampled.push_back(
              full[(static_cast<size_t>(plane) * fh + i * a.stride_h) * fw + j * a.stride_w]);
    expect_all_near(strided, sampled, 1e-6, 1e-6, "iteration " + std::to_string(iteration));
  }
}

TEST(RefConv, PaddingEqualsExplicitlyZeroPaddedInput) {
  const uint32_t seed = test::fresh_seed();
  SCOPED_TRACE(test::seed_trace(seed));
  std::mt19937 rng(seed);
  for (int iteration = 0; iteration < 20; ++iteration) {
    RandomConvCase t = random_case(rng);
    ConvAttrs a = t.attrs;
    a.pad_h = random_int(rng, 1, 3);
    a.pad_w = random_int(rng, 0, 2);
    const int hp = t.h + 2 * a.pad_h, wp = t.w + 2 * a.pad_w;
    const auto x = random_vector(static_cast<size_t>(t.n) * t.c * t.h * t.w, rng);
    std::vector<float> padded(static_cast<size_t>(t.n) * t.c * hp * wp, 0.0f);
    for (int plane = 0; plane < t.n * t.c; ++plane)
      for (int i = 0; i < t.h; ++i)
        for (int j = 0; j < t.w; ++j)
          padded[(static_cast<size_t>(plane) * hp + i + a.pad_h) * wp + j + a.pad_w] =
              x[(static_cast<size_t>(plane) * t.h + i) * t.w + j];
    const auto weight = random_vector(
        static_cast<size_t>(a.out_channels) * (t.c / a.groups) * a.kernel_h * a.kernel_w, rng);
    const auto bias = random_vector(a.out_channels, rng);
    ConvAttrs unpadded = a;
    unpadded.pad_h = unpadded.pad_w = 0;
    expect_all_near(run_conv(x, t.n, t.c, t.h, t.w, weight, &bias, a),
                    run_conv(padded, t.n, t.c, hp, wp, weight, &bias, unpadded), 1e-6, 1e-6,
                    "iteration " + std::to_string(iteration));
  }
}

TEST(RefConv, RandomPointsMatchDirectFormula) {
  // A few output points of a larger conv, each evaluated from the definition
  // y[b,o,i,j] = bias[o] + sum x[b, g*cg+ci, i*s - p + ky*d, j*s - p + kx*d] * w[o,ci,ky,kx].
  const uint32_t seed = test::fresh_seed();
  SCOPED_TRACE(test::seed_trace(seed));
  std::mt19937 rng(seed);
  const int n = 2, c = 6, h = 23, w = 19;
  const ConvAttrs a = make_attrs(9, 5, 2, 2, 2, 3);
  const int cg = c / a.groups, og = a.out_channels / a.groups;
  const int oh = out_extent(h, 5, 2, 2, 2), ow = out_extent(w, 5, 2, 2, 2);
  const auto x = random_vector(static_cast<size_t>(n) * c * h * w, rng);
  const auto weight = random_vector(static_cast<size_t>(a.out_channels) * cg * 25, rng);
  const auto bias = random_vector(a.out_channels, rng);
  const auto y = run_conv(x, n, c, h, w, weight, &bias, a);
  for (int point = 0; point < 25; ++point) {
    const int b = random_int(rng, 0, n - 1), o = random_int(rng, 0, a.out_channels - 1);
    const int i = random_int(rng, 0, oh - 1), j = random_int(rng, 0, ow - 1);
    double expected = bias[o];
    for (int ci = 0; ci < cg; ++ci)
      for (int ky = 0; ky < 5; ++ky)
        for (int kx = 0; kx < 5; ++kx) {
          const int row = i * 2 - 2 + ky * 2, col = j * 2 - 2 + kx * 2;
          if (row >= 0 && row < h && col >= 0 && col < w)
            expected += static_cast<double>(x[((b * c + (o / og) * cg + ci) * h + row) * w + col]) *
                        weight[((o * cg + ci) * 5 + ky) * 5 + kx];
        }
    EXPECT_NEAR(y[((b * a.out_channels + o) * oh + i) * ow + j], expected,
                kAbs + kRel * std::fabs(expected))
        << "point b=" << b << " o=" << o << " i=" << i << " j=" << j;
  }
}

}  // namespace
}  // namespace cnnrt
