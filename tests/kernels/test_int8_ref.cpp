// Integer reference kernels (kernels/cpu/int8_ref.h) against docs/QUANTIZATION.md:
//  * the helpers on edge values: RNE ties, saturation at ±127, NaN/±inf, negative zero, the
//    scale floor of all-zero tensors and channels, the bias budget of pruned channels;
//  * the requantisation recipe pinned on hand-computed values (what a GPU kernel must match);
//  * every kernel on random shapes against the float reference of the *dequantised* operands
//    (at most 1 LSB apart: the bias' rounding and fp32 rounding only) and conv/linear also
//    against the float reference of the *unquantised* operands within the derived bound.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>

#include "cnnrt/error.h"
#include "graph/ops.h"
#include "kernels/cpu/convert_ref.h"
#include "kernels/cpu/int8_ref.h"
#include "kernels/cpu/reference.h"
#include "random_test_util.h"

namespace cnnrt {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

float amax_of(const std::vector<float>& values) {
  float amax = 0;
  for (float v : values) amax = std::max(amax, std::fabs(v));
  return amax;
}

// Largest |a - b| over two int8 tensors.
int max_lsb_difference(const std::vector<int8_t>& a, const std::vector<int8_t>& b) {
  EXPECT_EQ(a.size(), b.size());
  int worst = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    worst = std::max(worst, std::abs(int(a[i]) - int(b[i])));
  return worst;
}

TEST(Int8Helpers, QuantiseRoundsToNearestEvenAndSaturatesSymmetrically) {
  EXPECT_EQ(ref::quantize_int8(2.5f, 1.0f), 2);
  EXPECT_EQ(ref::quantize_int8(3.5f, 1.0f), 4);
  EXPECT_EQ(ref::quantize_int8(-2.5f, 1.0f), -2);
  EXPECT_EQ(ref::quantize_int8(-3.5f, 1.0f), -4);
  EXPECT_EQ(ref::quantize_int8(0.49999997f, 1.0f), 0);
  EXPECT_EQ(ref::quantize_int8(0.5f, 0.25f), 2);     // 2.0 exactly
  EXPECT_EQ(ref::quantize_int8(0.625f, 0.25f), 2);   // 2.5 → 2 (even)
  EXPECT_EQ(ref::quantize_int8(126.5f, 1.0f), 126);  // tie to even below the limit
  EXPECT_EQ(ref::quantize_int8(127.49f, 1.0f), 127);
  EXPECT_EQ(ref::quantize_int8(127.5f, 1.0f), 127);  // RNE gives 128: saturated
  EXPECT_EQ(ref::quantize_int8(1e30f, 1.0f), 127);
  EXPECT_EQ(ref::quantize_int8(-128.0f, 1.0f), -127);  // -128 is never produced
  EXPECT_EQ(ref::quantize_int8(-1e30f, 1.0f), -127);
  EXPECT_EQ(ref::quantize_int8(kInf, 0.1f), 127);
  EXPECT_EQ(ref::quantize_int8(-kInf, 0.1f), -127);
  EXPECT_EQ(ref::quantize_int8(std::nanf(""), 0.1f), 0);  // as cvt.rni.sat.s8.f32 on the GPU
  EXPECT_EQ(ref::quantize_int8(-std::nanf(""), 0.1f), 0);
  EXPECT_EQ(ref::quantize_int8(-0.0f, 0.1f), 0);
  EXPECT_EQ(ref::quantize_int8(-0.04f, 0.1f), 0);  // rounds to -0.0, stored as 0
  const float zero = ref::dequantize_int8(0, 0.1f);
  EXPECT_EQ(zero, 0.0f);
  EXPECT_FALSE(std::signbit(zero));
  EXPECT_EQ(ref::dequantize_int8(-127, 0.5f), -63.5f);
}

TEST(Int8Helpers, ScaleFloorForAllZeroTensorsAndErrorsForBadAmax) {
  EXPECT_EQ(ref::scale_from_amax(0.0f), ref::kMinScale);
  EXPECT_EQ(ref::scale_from_amax(1e-9f), ref::kMinScale);
  EXPECT_EQ(ref::scale_from_amax(127.0f), 1.0f);
  EXPECT_EQ(ref::scale_from_amax(2.54f), 2.54f / 127.0f);
  EXPECT_THROW(ref::scale_from_amax(-1.0f), Error);
  EXPECT_THROW(ref::scale_from_amax(std::nanf("")), Error);
  EXPECT_THROW(ref::scale_from_amax(kInf), Error);
  EXPECT_THROW(ref::requant_multiplier(0.0, 1.0), Error);
  EXPECT_THROW(ref::requant_multiplier(1.0, 0.0), Error);
  EXPECT_EQ(ref::requant_multiplier(0.02f, 0.02f), 1.0f);  // equal scales: exactly 1
}

TEST(Int8Helpers, RequantiseRecipeOnHandComputedValues) {
  // clamp(RNE(fp32(v) × M)): ties to even, saturation, bounds.
  EXPECT_EQ(ref::requantize(5, 0.5f), 2);    // 2.5 → 2
  EXPECT_EQ(ref::requantize(7, 0.5f), 4);    // 3.5 → 4
  EXPECT_EQ(ref::requantize(-5, 0.5f), -2);  // -2.5 → -2
  EXPECT_EQ(ref::requantize(-7, 0.5f), -4);
  EXPECT_EQ(ref::requantize(1000, 1.0f), 127);
  EXPECT_EQ(ref::requantize(-1000, 1.0f), -127);
  EXPECT_EQ(ref::requantize(std::numeric_limits<int32_t>::max(), 1e30f), 127);
  EXPECT_EQ(ref::requantize(-50, 1.0f, {0, 127}), 0);  // ReLU in the integer domain
  EXPECT_EQ(ref::requantize(90, 1.0f, {0, 60}), 60);   // ReLU6 at scale 0.1
  // fp32(v) rounds first: 16777217 → 16777216, × 2^-24 = 1.0 exactly → 1.
  EXPECT_EQ(ref::requantize(16777217, 1.0f / 16777216.0f), 1);
  // 2^24 + 3 → 16777220 (even), × 2^-23 = 2.0000002... → 2.
  EXPECT_EQ(ref::requantize(16777219, 1.0f / 8388608.0f), 2);
  for (int q = -128; q <= 127; ++q)
    EXPECT_EQ(ref::requantize(q, 1.0f), std::max(q, -127)) << q;  // M = 1 copies
  // The add: fma(b, Mb, a·Ma), one rounding of the sum.
  const int8_t a[] = {10, -10, 127, 3}, b[] = {5, 5, 127, -3};
  int8_t y[4];
  ref::add_int8(a, 0.25f, b, 0.5f, 4, y);
  EXPECT_EQ(y[0], 5);   // 2.5 + 2.5
  EXPECT_EQ(y[1], 0);   // -2.5 + 2.5
  EXPECT_EQ(y[2], 95);  // 31.75 + 63.5 = 95.25 → 95
  EXPECT_EQ(y[3], -1);  // 0.75 - 1.5 = -0.75 → -1
}

// The GPU epilogues' spelling of the same recipe (kernels/cuda/conv/epilogue_s8.cuh: clamp
// first in float, then round by adding 1.5·2^23 and keep the low byte), written here with host
// floats, equals ref::requantize on edge values and on random accumulators, multipliers and
// bounds (the GPU harness checks the device code itself bit for bit).
int8_t requantize_clamp_first(int32_t acc, float multiplier, ref::Int8Bounds bounds) {
  volatile float x = static_cast<float>(acc) * multiplier;  // one RNE multiply, no contraction
  const float clamped =
      std::fmin(std::fmax(x, static_cast<float>(bounds.lo)), static_cast<float>(bounds.hi));
  volatile float rounded = clamped + 12582912.0f;
  float r = rounded;
  uint32_t bits;
  std::memcpy(&bits, &r, sizeof bits);
  return static_cast<int8_t>(static_cast<uint8_t>(bits));
}

TEST(Int8Helpers, ClampFirstRequantisationEqualsTheReference) {
  const ref::Int8Bounds bounds[] = {{-127, 127}, {0, 127}, {0, 60}, {-128, 127}, {-5, 3}};
  const float multipliers[] = {0.5f, 1.0f, 1e-3f, 1.0f / 16777216.0f, 3.7e-5f, 1e30f, 7.0f};
  constexpr int32_t kMax = std::numeric_limits<int32_t>::max(), kMin = -kMax - 1;
  const int32_t edges[] = {
      0,        1,        -1,        2,        5,       -5,         7,
      -7,       127,      128,       -128,     -129,    254,        255,
      -255,     16777216, kMax,      kMin,     1 << 22, -(1 << 22), (1 << 22) - 1,
      16777217, 16777219, -16777217, 123456789};
  for (const ref::Int8Bounds& b : bounds)
    for (float m : multipliers)
      for (int32_t acc : edges)
        ASSERT_EQ(requantize_clamp_first(acc, m, b), ref::requantize(acc, m, b))
            << acc << " x " << m << " in [" << b.lo << ", " << b.hi << "]";
  // Random: accumulators of every magnitude (exponent drawn first), multipliers around the
  // scales calibration gives, ties made likely by multipliers of a few bits.
  std::mt19937 rng(20261202);
  std::uniform_int_distribution<int> magnitude_bits(0, 31), bound_pick(0, 4), sign(0, 1);
  std::uniform_real_distribution<float> mantissa(0.5f, 1.0f);
  std::uniform_int_distribution<int> exponent(-30, 2), few_bits(1, 15);
  for (int i = 0; i < 2000000; ++i) {
    const int bits = magnitude_bits(rng);
    int64_t v = bits == 0 ? 0 : int64_t(rng() & ((uint64_t{1} << bits) - 1));
    if (sign(rng)) v = -v;
    const int32_t acc = static_cast<int32_t>(std::clamp<int64_t>(
        v, std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()));
    const float m = i % 2 ? std::ldexp(mantissa(rng), exponent(rng))
                          : std::ldexp(float(few_bits(rng)), exponent(rng) - 4);
    const ref::Int8Bounds& b = bounds[bound_pick(rng)];
    ASSERT_EQ(requantize_clamp_first(acc, m, b), ref::requantize(acc, m, b))
        << acc << " x " << m << " in [" << b.lo << ", " << b.hi << "]";
  }
}

TEST(Int8Helpers, ActivationBoundsInTheIntegerDomain) {
  const ref::Int8Bounds none = ref::int8_bounds({-kInf, kInf}, 0.1f);
  EXPECT_EQ(none.lo, -127);
  EXPECT_EQ(none.hi, 127);
  const ref::Int8Bounds relu = ref::int8_bounds({0.0f, kInf}, 0.1f);
  EXPECT_EQ(relu.lo, 0);
  EXPECT_EQ(relu.hi, 127);
  const ref::Int8Bounds relu6 = ref::int8_bounds({0.0f, 6.0f}, 0.1f);
  EXPECT_EQ(relu6.hi, 60);
  const ref::Int8Bounds relu6_small = ref::int8_bounds({0.0f, 6.0f}, 0.01f);
  EXPECT_EQ(relu6_small.hi, 127);  // 600 saturates
  const ref::Int8Bounds clip = ref::int8_bounds({-0.25f, 0.35f}, 0.1f);
  EXPECT_EQ(clip.lo, -2);  // -2.5 → -2
  EXPECT_EQ(clip.hi, 4);   // 3.5 → 4
  EXPECT_THROW(ref::int8_bounds({1.0f, 0.0f}, 0.1f), Error);
}

TEST(Int8Helpers, PerChannelWeightsAllZeroChannelsAndPrunedBiases) {
  // Channel 0: ordinary; channel 1: all zero without bias; channel 2: all zero with a bias
  // (a pruned filter with a folded BN beta): its bias must survive exactly.
  const std::vector<float> weight = {0.5f, -1.0f, 0.25f, 0, 0, 0, 0, 0, 0};
  const std::vector<float> bias = {0.1f, 0.0f, 0.7f};
  const float s_x = 0.01f;
  const ref::Int8Layer layer =
      ref::prepare_int8_layer(weight.data(), bias.data(), 3, 3, s_x, 0.0f, {-kInf, kInf});
  EXPECT_EQ(layer.weight_scale[0], 1.0f / 127.0f);
  EXPECT_EQ(layer.weight[0], 64);  // 0.5·127 = 63.5 → 64 (even)
  EXPECT_EQ(layer.weight[1], -127);
  EXPECT_EQ(layer.weight_scale[1], ref::kMinScale);  // the floor
  EXPECT_GE(layer.weight_scale[2], 0.7 / (double(s_x) * ref::kMaxInt8Bias));
  for (int i = 3; i < 9; ++i) EXPECT_EQ(layer.weight[i], 0);
  for (int c = 0; c < 3; ++c) EXPECT_LE(std::abs(int64_t(layer.bias[c])), ref::kMaxInt8Bias);
  // fp32 output of a zero input: each channel's dequantised bias.
  const int8_t x[3] = {0, 0, 0};
  float y[3];
  ref::linear_int8(x, 1, 3, layer, y);
  EXPECT_NEAR(y[0], 0.1f, 0.5 * s_x * layer.weight_scale[0]);
  EXPECT_EQ(y[1], 0.0f);
  EXPECT_NEAR(y[2], 0.7f, 1e-6);
  // K beyond the accumulator's budget, non-finite weights: errors.
  std::vector<float> wide(ref::kMaxInt8Reduction + 1, 0.1f);
  EXPECT_THROW(
      ref::prepare_int8_layer(wide.data(), nullptr, 1, wide.size(), 1.0f, 1.0f, {-kInf, kInf}),
      Error);
  std::vector<float> bad = {1.0f, std::nanf("")};
  EXPECT_THROW(ref::prepare_int8_layer(bad.data(), nullptr, 1, 2, 1.0f, 1.0f, {-kInf, kInf}),
               Error);
}

TEST(Int8Helpers, NonFiniteWeightsAreNamedByTheirFirstIndex) {
  // Checked inside the parallel per-channel pass: the error names the first non-finite value of
  // the tensor, whichever thread saw its channel, for any count of channels.
  for (const int channels : {3, 64, 1000}) {
    std::vector<float> weight(static_cast<size_t>(channels) * 5, 0.25f);
    const int64_t first = (channels / 2) * 5 + 3;
    weight[first] = std::numeric_limits<float>::quiet_NaN();
    weight[weight.size() - 1] = kInf;  // a later one too
    try {
      ref::prepare_int8_layer(weight.data(), nullptr, channels, 5, 0.1f, 0.0f, {-kInf, kInf});
      ADD_FAILURE() << "no error for a NaN weight (" << channels << " channels)";
    } catch (const Error& error) {
      EXPECT_EQ(std::string(error.what()),
                "int8: weight value " + std::to_string(first) + " is not finite");
    }
  }
}

TEST(Int8Helpers, LayoutConversionAtOneScaleIsExact) {
  // What the GPU int8 kernels' NHWC/16 tensors are compared through: NCHW → NHWC/16 → NCHW at
  // one scale gives back every int8 value, and the padding lanes are zeros.
  std::vector<int8_t> values(2 * 5 * 3 * 4);
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = static_cast<int8_t>(int(i * 37 % 255) - 127);
  const float scale = 0.0123f;
  const TensorType nchw{DType::I8, Layout::NCHW, 1, scale},
      nhwc16{DType::I8, Layout::NHWC, 16, scale};
  const Shape shape = {5, 3, 4};
  std::vector<int8_t> padded(tensor_bytes(shape, nhwc16, 2), 99), back(values.size());
  ref::convert_tensor(values.data(), nchw, padded.data(), nhwc16, shape, 2);
  ref::convert_tensor(padded.data(), nhwc16, back.data(), nchw, shape, 2);
  EXPECT_EQ(back, values);
  for (size_t pixel = 0; pixel < 2 * 12; ++pixel)
    for (int c = 5; c < 16; ++c) EXPECT_EQ(padded[pixel * 16 + c], 0);
}

// --- conv and linear on random shapes -----------------------------------------------------

struct ConvCase {
  int n, c, h, w;
  ConvAttrs attrs;
  ActivationBounds activation;
  bool with_bias;
};

ConvCase random_conv_case(std::mt19937& rng) {
  ConvCase t;
  t.n = test::random_int(rng, 1, 2);
  const int groups_kind = test::random_int(rng, 0, 3);
  const int per_group = test::random_int(rng, 1, 4);
  int groups = groups_kind == 0 ? 1 : groups_kind == 1 ? 2 : 3;
  t.c = groups * per_group;
  t.attrs.out_channels = groups * test::random_int(rng, 1, 3);
  if (groups_kind == 3) {  // depthwise
    groups = t.c = test::random_int(rng, 2, 6);
    t.attrs.out_channels = t.c;
  }
  t.attrs.groups = groups;
  t.h = test::random_int(rng, 4, 9);
  t.w = test::random_int(rng, 4, 9);
  t.attrs.kernel_h = test::random_int(rng, 1, 3);
  t.attrs.kernel_w = test::random_int(rng, 1, 3);
  t.attrs.stride_h = test::random_int(rng, 1, 2);
  t.attrs.stride_w = test::random_int(rng, 1, 2);
  t.attrs.dilation_h = test::random_int(rng, 1, 2);
  t.attrs.dilation_w = test::random_int(rng, 1, 2);
  t.attrs.pad_h = test::random_int(rng, 0, 2);
  t.attrs.pad_w = test::random_int(rng, 0, 2);
  // Asymmetric padding: bottom/right = top/left + extra, extra in [-pad, 1].
  t.attrs.pad_h_extra = test::random_int(rng, -t.attrs.pad_h, 1);
  t.attrs.pad_w_extra = test::random_int(rng, -t.attrs.pad_w, 1);
  const int kind = test::random_int(rng, 0, 3);
  t.activation = kind == 0   ? ActivationBounds{-kInf, kInf}
                 : kind == 1 ? ActivationBounds{0.0f, kInf}
                 : kind == 2 ? ActivationBounds{0.0f, 0.6f}  // a ReLU6 at this data's scale
                             : ActivationBounds{-0.3f, 0.45f};
  t.with_bias = test::random_int(rng, 0, 3) != 0;
  const ConvAttrs& a = t.attrs;
  const bool fits = t.h + a.pad_h + a.pad_bottom() > a.dilation_h * (a.kernel_h - 1) &&
                    t.w + a.pad_w + a.pad_right() > a.dilation_w * (a.kernel_w - 1);
  return fits ? t : random_conv_case(rng);  // the dilated kernel must fit the padded input
}

// The float conv with asymmetric padding: pad the input explicitly, then a symmetric-free conv.
std::vector<float> float_conv(const std::vector<float>& x, const ConvCase& t,
                              const std::vector<float>& weight, const float* bias) {
  const ConvAttrs& a = t.attrs;
  const int ph = t.h + a.pad_h + a.pad_bottom(), pw = t.w + a.pad_w + a.pad_right();
  std::vector<float> padded(size_t(t.n) * t.c * ph * pw, 0.0f);
  for (int b = 0; b < t.n; ++b)
    for (int c = 0; c < t.c; ++c)
      for (int y = 0; y < t.h; ++y)
        for (int xx = 0; xx < t.w; ++xx)
          padded[((size_t(b) * t.c + c) * ph + y + a.pad_h) * pw + xx + a.pad_w] =
              x[((size_t(b) * t.c + c) * t.h + y) * t.w + xx];
  ConvAttrs unpadded = a;
  unpadded.pad_h = unpadded.pad_w = unpadded.pad_h_extra = unpadded.pad_w_extra = 0;
  const int oh =
      ref::conv_output_extent(t.h, a.kernel_h, a.stride_h, a.pad_h, a.pad_bottom(), a.dilation_h);
  const int ow =
      ref::conv_output_extent(t.w, a.kernel_w, a.stride_w, a.pad_w, a.pad_right(), a.dilation_w);
  std::vector<float> y(size_t(t.n) * a.out_channels * oh * ow);
  ref::conv2d(padded.data(), t.n, t.c, ph, pw, weight.data(), bias, unpadded, y.data());
  return y;
}

float clamp_to(float v, ActivationBounds b) { return std::min(std::max(v, b.lo), b.hi); }

TEST(Int8Conv, RandomShapesWithinOneLsbOfTheDequantisedFloatConvAndTheQuantisationBound) {
  const uint32_t seed = test::fresh_seed();
  SCOPED_TRACE(test::seed_trace(seed));
  std::mt19937 rng(seed);
  for (int trial = 0; trial < 60; ++trial) {
    const ConvCase t = random_conv_case(rng);
    const ConvAttrs& a = t.attrs;
    SCOPED_TRACE("trial " + std::to_string(trial) + ": c " + std::to_string(t.c) + " oc " +
                 std::to_string(a.out_channels) + " groups " + std::to_string(a.groups) + " k " +
                 std::to_string(a.kernel_h) + "x" + std::to_string(a.kernel_w) + " pads " +
                 std::to_string(a.pad_h) + "/" + std::to_string(a.pad_bottom()) + "," +
                 std::to_string(a.pad_w) + "/" + std::to_string(a.pad_right()));
    const int k = t.c / a.groups * a.kernel_h * a.kernel_w;
    const std::vector<float> x = test::random_vector(size_t(t.n) * t.c * t.h * t.w, rng);
    std::vector<float> weight = test::random_vector(size_t(a.out_channels) * k, rng, -0.5f, 0.5f);
    // One channel with much smaller weights: per-channel scales must keep it.
    for (int i = 0; i < k; ++i) weight[i] *= 0.01f;
    const std::vector<float> bias = test::random_vector(a.out_channels, rng, -0.2f, 0.2f);
    const float* bias_ptr = t.with_bias ? bias.data() : nullptr;

    const float s_x = ref::scale_from_amax(amax_of(x));
    const std::vector<int8_t> qx = ref::quantize_values(x, s_x);
    const std::vector<float> x_deq = ref::dequantize_values(qx, s_x);
    const std::vector<float> y_true = float_conv(x, t, weight, bias_ptr);
    const float s_y = ref::scale_from_amax(0.9f * amax_of(y_true));  // some saturation
    const ref::Int8Layer layer =
        ref::prepare_int8_layer(weight.data(), bias_ptr, a.out_channels, k, s_x, s_y, t.activation);
    for (float m : layer.multiplier) ASSERT_LE(m, 1.0f);  // the ≤ 1 LSB argument needs M ≤ 1

    std::vector<float> w_deq(weight.size());
    for (size_t i = 0; i < weight.size(); ++i)
      w_deq[i] = ref::dequantize_int8(layer.weight[i], layer.weight_scale[i / k]);
    const std::vector<float> y_deq = float_conv(x_deq, t, w_deq, bias_ptr);

    std::vector<int8_t> qy(y_true.size());
    ref::conv2d_int8(qx.data(), t.n, t.c, t.h, t.w, a, layer, qy.data());
    std::vector<int8_t> expected(y_deq.size());
    for (size_t i = 0; i < y_deq.size(); ++i)
      expected[i] = ref::quantize_int8(clamp_to(y_deq[i], t.activation), s_y);
    ASSERT_LE(max_lsb_difference(qy, expected), 1);

    // Against the unquantised conv: input, weight, bias and output rounding.
    const int64_t plane = y_true.size() / t.n / a.out_channels;
    std::vector<float> abs_x(x.size()), abs_w(weight.size()), ones(weight.size(), 1.0f);
    for (size_t i = 0; i < x.size(); ++i) abs_x[i] = std::fabs(x[i]);
    for (size_t i = 0; i < weight.size(); ++i) abs_w[i] = std::fabs(weight[i]);
    const std::vector<float> sum_w = float_conv(std::vector<float>(x.size(), 1.0f), t, abs_w,
                                                nullptr);  // Σ|w| over the real taps
    const std::vector<float> sum_x = float_conv(abs_x, t, ones, nullptr);
    const std::vector<float> taps =
        float_conv(std::vector<float>(x.size(), 1.0f), t, ones, nullptr);
    for (size_t i = 0; i < y_true.size(); ++i) {
      const int o = static_cast<int>(i / plane % a.out_channels);
      const double s_w = layer.weight_scale[o];
      const double bound = 0.5 * s_x * sum_w[i] + 0.5 * s_w * sum_x[i] +
                           0.25 * s_x * s_w * taps[i] + 0.5 * s_x * s_w + 0.5 * s_y +
                           1e-5 * std::fabs(y_true[i]);
      const float reference = std::clamp(clamp_to(y_true[i], t.activation), -127 * s_y, 127 * s_y);
      ASSERT_LE(std::fabs(ref::dequantize_int8(qy[i], s_y) - reference), bound) << "index " << i;
    }

    // fp32 output (the graph output's epilogue): dequantised bias rounding and fp32 only.
    const ref::Int8Layer float_layer = ref::prepare_int8_layer(
        weight.data(), bias_ptr, a.out_channels, k, s_x, 0.0f, t.activation);
    std::vector<float> yf(y_true.size());
    ref::conv2d_int8(qx.data(), t.n, t.c, t.h, t.w, a, float_layer, yf.data());
    for (size_t i = 0; i < yf.size(); ++i) {
      const int o = static_cast<int>(i / plane % a.out_channels);
      ASSERT_NEAR(yf[i], clamp_to(y_deq[i], t.activation),
                  0.5 * s_x * float_layer.weight_scale[o] + 1e-5 * std::fabs(y_deq[i]) + 1e-6);
    }
  }
}

TEST(Int8Linear, WithinOneLsbOfTheDequantisedFloatLinear) {
  const uint32_t seed = test::fresh_seed();
  SCOPED_TRACE(test::seed_trace(seed));
  std::mt19937 rng(seed);
  for (int trial = 0; trial < 20; ++trial) {
    const int n = test::random_int(rng, 1, 4), in = test::random_int(rng, 1, 300),
              out = test::random_int(rng, 1, 20);
    const auto x = test::random_vector(size_t(n) * in, rng, -3.0f, 3.0f);
    const auto weight = test::random_vector(size_t(out) * in, rng, -0.2f, 0.2f);
    const auto bias = test::random_vector(out, rng);
    const float s_x = ref::scale_from_amax(amax_of(x));
    const auto qx = ref::quantize_values(x, s_x);
    std::vector<float> y(size_t(n) * out);
    ref::linear(x.data(), n, in, weight.data(), bias.data(), out, y.data());
    const float s_y = ref::scale_from_amax(amax_of(y));
    const ref::Int8Layer layer = ref::prepare_int8_layer(weight.data(), bias.data(), out, in, s_x,
                                                         s_y, {0.0f, kInf});  // with ReLU
    std::vector<float> w_deq(weight.size());
    for (size_t i = 0; i < weight.size(); ++i)
      w_deq[i] = ref::dequantize_int8(layer.weight[i], layer.weight_scale[i / in]);
    const auto x_deq = ref::dequantize_values(qx, s_x);
    std::vector<float> y_deq(y.size());
    ref::linear(x_deq.data(), n, in, w_deq.data(), bias.data(), out, y_deq.data());
    std::vector<int8_t> qy(y.size()), expected(y.size());
    ref::linear_int8(qx.data(), n, in, layer, qy.data());
    for (size_t i = 0; i < y.size(); ++i)
      expected[i] = ref::quantize_int8(std::max(y_deq[i], 0.0f), s_y);
    EXPECT_LE(max_lsb_difference(qy, expected), 1) << "trial " << trial;
    for (int8_t q : qy) EXPECT_GE(q, 0);
  }
}

// --- pools, add, concat, activation ----------------------------------------------------------

TEST(Int8Pools, MaxAvgAndAdaptiveWithinOneLsbOfTheFloatPoolsOfTheDequantisedInput) {
  const uint32_t seed = test::fresh_seed();
  SCOPED_TRACE(test::seed_trace(seed));
  std::mt19937 rng(seed);
  for (int trial = 0; trial < 40; ++trial) {
    const int n = test::random_int(rng, 1, 2), c = test::random_int(rng, 1, 4),
              h = test::random_int(rng, 3, 11), w = test::random_int(rng, 3, 11);
    PoolAttrs p;
    p.kernel_h = test::random_int(rng, 1, 3);
    p.kernel_w = test::random_int(rng, 1, 3);
    p.stride_h = test::random_int(rng, 1, 3);
    p.stride_w = test::random_int(rng, 1, 3);
    p.pad_h = test::random_int(rng, 0, p.kernel_h / 2);
    p.pad_w = test::random_int(rng, 0, p.kernel_w / 2);
    p.ceil_mode = test::random_int(rng, 0, 1) == 1;
    p.count_include_pad = test::random_int(rng, 0, 1) == 1;
    const auto x = test::random_vector(size_t(n) * c * h * w, rng, -2.0f, 2.0f);
    const float s_x = ref::scale_from_amax(amax_of(x));
    const auto qx = ref::quantize_values(x, s_x);
    const auto x_deq = ref::dequantize_values(qx, s_x);
    const int oh =
        static_cast<int>(pool_output_size(h, p.kernel_h, p.stride_h, p.pad_h, 1, p.ceil_mode));
    const int ow =
        static_cast<int>(pool_output_size(w, p.kernel_w, p.stride_w, p.pad_w, 1, p.ceil_mode));
    const size_t count = size_t(n) * c * oh * ow;
    std::vector<float> expected_f(count);
    std::vector<int8_t> got(count), expected(count);
    for (float s_y : {s_x, 0.7f * s_x, 1.9f * s_x}) {
      ref::maxpool2d(x_deq.data(), n, c, h, w, p, expected_f.data());
      ref::maxpool2d_int8(qx.data(), n, c, h, w, p, ref::requant_multiplier(s_x, s_y), got.data());
      for (size_t i = 0; i < count; ++i) expected[i] = ref::quantize_int8(expected_f[i], s_y);
      if (s_y == s_x)
        EXPECT_EQ(got, expected) << "max pool at the input's scale is exact";
      else
        EXPECT_LE(max_lsb_difference(got, expected), 1);
      ref::avgpool2d(x_deq.data(), n, c, h, w, p, expected_f.data());
      ref::avgpool2d_int8(qx.data(), n, c, h, w, p, s_x, s_y, got.data());
      for (size_t i = 0; i < count; ++i) expected[i] = ref::quantize_int8(expected_f[i], s_y);
      EXPECT_LE(max_lsb_difference(got, expected), 1) << "avgpool trial " << trial;
    }
    const int aoh = test::random_int(rng, 1, h), aow = test::random_int(rng, 1, w);
    std::vector<float> adaptive_f(size_t(n) * c * aoh * aow);
    std::vector<int8_t> adaptive(adaptive_f.size()), adaptive_expected(adaptive_f.size());
    ref::adaptive_avgpool2d(x_deq.data(), n, c, h, w, aoh, aow, adaptive_f.data());
    ref::adaptive_avgpool2d_int8(qx.data(), n, c, h, w, aoh, aow, s_x, 0.8f * s_x, adaptive.data());
    for (size_t i = 0; i < adaptive.size(); ++i)
      adaptive_expected[i] = ref::quantize_int8(adaptive_f[i], 0.8f * s_x);
    EXPECT_LE(max_lsb_difference(adaptive, adaptive_expected), 1);
  }
}

TEST(Int8Elementwise, AddOfTwoScalesConcatAndReluWithinOneLsb) {
  const uint32_t seed = test::fresh_seed();
  SCOPED_TRACE(test::seed_trace(seed));
  std::mt19937 rng(seed);
  const size_t count = 5000;
  const auto a = test::random_vector(count, rng, -1.0f, 1.0f);
  const auto b = test::random_vector(count, rng, -4.0f, 4.0f);
  const float s_a = ref::scale_from_amax(1.0f), s_b = ref::scale_from_amax(4.0f),
              s_y = ref::scale_from_amax(4.5f);
  const auto qa = ref::quantize_values(a, s_a), qb = ref::quantize_values(b, s_b);
  std::vector<int8_t> y(count), expected(count);
  ref::add_int8(qa.data(), ref::requant_multiplier(s_a, s_y), qb.data(),
                ref::requant_multiplier(s_b, s_y), count, y.data());
  for (size_t i = 0; i < count; ++i)
    expected[i] = ref::quantize_int8(
        ref::dequantize_int8(qa[i], s_a) + ref::dequantize_int8(qb[i], s_b), s_y);
  EXPECT_LE(max_lsb_difference(y, expected), 1);

  // Concat: input i requantised by s_i / s_y; at equal scales a plain copy.
  const int channels[2] = {3, 2};
  const int64_t spatial = 7;
  const auto c0 = test::random_vector(2 * 3 * spatial, rng),
             c1 = test::random_vector(2 * 2 * spatial, rng, -3.0f, 3.0f);
  const float s0 = ref::scale_from_amax(1.0f), s1 = ref::scale_from_amax(3.0f);
  const auto q0 = ref::quantize_values(c0, s0), q1 = ref::quantize_values(c1, s1);
  const int8_t* inputs[2] = {q0.data(), q1.data()};
  const float multipliers[2] = {ref::requant_multiplier(s0, s1), 1.0f};
  std::vector<int8_t> cat(2 * 5 * spatial);
  ref::concat_channels_int8(inputs, channels, multipliers, 2, 2, spatial, cat.data());
  for (int n = 0; n < 2; ++n)
    for (int64_t i = 0; i < 3 * spatial; ++i) {
      const int want = ref::quantize_int8(ref::dequantize_int8(q0[n * 3 * spatial + i], s0), s1);
      EXPECT_LE(std::abs(cat[n * 5 * spatial + i] - want), 1);
    }
  for (int n = 0; n < 2; ++n)
    for (int64_t i = 0; i < 2 * spatial; ++i)
      EXPECT_EQ(cat[n * 5 * spatial + 3 * spatial + i], q1[n * 2 * spatial + i]);

  // ReLU in place at one scale: max(q, 0), exactly.
  std::vector<int8_t> r = qa;
  ref::activation_int8(r.data(), count, 1.0f, {0, 127}, r.data());
  for (size_t i = 0; i < count; ++i) EXPECT_EQ(r[i], std::max<int8_t>(qa[i], 0));
}

// The fused epilogue's claim: conv → clamp → max-pool → quantise equals requantise → integer
// clamp → integer max, exactly, on the same pre-activation values.
TEST(Int8Conv, IntegerClampAndMaxEqualQuantisingTheFloatEpilogue) {
  const uint32_t seed = test::fresh_seed();
  SCOPED_TRACE(test::seed_trace(seed));
  std::mt19937 rng(seed);
  const auto v = test::random_vector(6 * 9 * 9, rng, -8.0f, 8.0f);
  const float s = 0.05f;
  const ActivationBounds relu6{0.0f, 6.0f};
  const ref::Int8Bounds bounds = ref::int8_bounds(relu6, s);
  PoolAttrs pool;
  pool.kernel_h = pool.kernel_w = 3;
  pool.stride_h = pool.stride_w = 2;
  pool.ceil_mode = true;
  std::vector<float> activated(v.size());
  std::vector<int8_t> integer(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    activated[i] = clamp_to(v[i], relu6);
    integer[i] = std::clamp<int>(ref::quantize_int8(v[i], s), bounds.lo, bounds.hi);
  }
  const int o = static_cast<int>(pool_output_size(9, 3, 2, 0, 1, true));
  std::vector<float> pooled(6 * o * o);
  std::vector<int8_t> pooled_q(pooled.size()), expected(pooled.size());
  ref::maxpool2d(activated.data(), 1, 6, 9, 9, pool, pooled.data());
  ref::maxpool2d_int8(integer.data(), 1, 6, 9, 9, pool, 1.0f, pooled_q.data());
  for (size_t i = 0; i < pooled.size(); ++i) expected[i] = ref::quantize_int8(pooled[i], s);
  EXPECT_EQ(pooled_q, expected);
}

}  // namespace
}  // namespace cnnrt
