// GPU tests of the 2:4 sparse mma.sp convolution (kernels/cuda/conv/mma_sparse.h, sm_80+)
// against the CPU reference run on the same pruned weights (ref::conv2d, double accumulation),
// its shape rule and its weight check.  They skip without a compute capability 8.0+ device.
//
// The weights are random, scaled by 1/sqrt(fan-in), then pruned 2:4 by magnitude along the input
// channels (graph/passes_sparsity.h, the rule the builder checks), so half of every group is
// non-zero: a kernel that skipped a kept weight, read a dropped one, or took a wrong metadata
// nibble fails.  Tolerance: the harness's fp16 one (tests/harness/tolerance.h: rel L2 <= 2e-3,
// per element <= 4e-3 (|ref| + rms(ref))); outputs start as NaN bytes, padding channels must be
// zero.  Shapes: AlexNet conv3-conv5 at a small batch, fixed edge cases, and seeded random odd
// shapes (batch, in_c any, out_c odd-ish, kernel 1/3/5/11, stride, padding, dilation, MaxPool
// 3/2 or 2/2 (staged), ReLU / ReLU6 / none, the fused residual).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cnnrt/error.h"
#include "cuda/conv/sparse_test_util.h"
#include "cuda/fp16_test_util.h"
#include "graph/passes_sparsity.h"
#include "harness/tolerance.h"
#include "kernels/cpu/reference.h"
#include "kernels/cuda/conv/mma_sparse.h"

namespace cnnrt::cuda {
namespace {

bool sm80_present() {
  if (!test::cuda_device_present()) return false;
  int device = 0, major = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess)
    return false;
  return major >= 8;
}

#define REQUIRE_SM80() \
  if (!sm80_present()) GTEST_SKIP() << "no compute capability 8.0+ device"

enum class Act { None, Relu, Relu6 };

struct SpCase {
  int batch, c, h, w, oc, k, stride, pad, dilation = 1;
  Act act = Act::Relu;
  bool bias = true;
  int pool = 0;  // 0: none, 3: MaxPool 3/2, 2: MaxPool 2/2
  bool residual = false;
  int pad_extra = 0;  // asymmetric padding: bottom / right = pad + pad_extra
};

std::string describe(const SpCase& t) {
  std::ostringstream s;
  s << "n" << t.batch << " c" << t.c << " " << t.h << "x" << t.w << " -> oc" << t.oc << " k" << t.k
    << " s" << t.stride << " p" << t.pad << " d" << t.dilation
    << (t.act == Act::Relu    ? " relu"
        : t.act == Act::Relu6 ? " relu6"
                              : "")
    << (t.bias ? " bias" : "") << (t.pool ? " pool" + std::to_string(t.pool) : "")
    << (t.residual ? " residual" : "")
    << (t.pad_extra ? " pad+" + std::to_string(t.pad_extra) : "");
  return s.str();
}

ConvShape shape_of(const SpCase& t) {
  ConvShape s = sparse_test::square_conv_shape(t.c, t.h, t.w, t.oc, t.k, t.stride, t.pad);
  s.conv.pad_h_extra = s.conv.pad_w_extra = t.pad_extra;
  s.conv.dilation_h = s.conv.dilation_w = t.dilation;
  s.activation = t.act == Act::Relu    ? kReluActivation
                 : t.act == Act::Relu6 ? ActivationBounds{0.f, 6.f}
                                       : kIdentityActivation;
  if (t.pool) {
    PoolAttrs p;
    p.kernel_h = p.kernel_w = t.pool;
    p.stride_h = p.stride_w = 2;
    s.pool = p;
  }
  s.residual = t.residual;
  s.derive();
  return s;
}

// The harness's fp16 bounds (tolerance.h), and zero padding channels.
void expect_close(const std::vector<__half>& y, const std::vector<float>& expected, int batch,
                  int oc, int oh, int ow, const std::string& what) {
  int64_t bad_padding = 0;
  const std::vector<float> actual = test::from_nhwc(y, batch, oc, oh, ow, &bad_padding);
  const harness::Tolerance tol = harness::tolerance_for(Precision::FP16);
  EXPECT_EQ(bad_padding, 0) << what;
  EXPECT_LE(test::rel_l2(actual, expected), tol.rel_l2) << what;
  double sq = 0.0;
  for (float v : expected) sq += double(v) * v;
  const double rms = expected.empty() ? 0.0 : std::sqrt(sq / double(expected.size()));
  int64_t bad = 0;
  size_t first_bad = 0;
  for (size_t i = 0; i < actual.size(); ++i)
    if (!(std::fabs(actual[i] - expected[i]) <= tol.element * (std::fabs(expected[i]) + rms)) &&
        bad++ == 0)  // NaN fails too
      first_bad = i;
  EXPECT_EQ(bad, 0) << what << ": first bad element " << first_bad << " (NCHW) of " << actual.size()
                    << ": got " << actual[first_bad] << ", expected " << expected[first_bad];
}

// How a case's weight is made 2:4: by magnitude (the builder's rule), or keeping channels 0 and 1
// of every group (nibble 0b0100 everywhere: isolates the value path from the metadata layout).
enum class Prune { Magnitude, FirstTwo };

void check_case(const SpCase& t, uint32_t seed, Prune prune = Prune::Magnitude) {
  SCOPED_TRACE(describe(t));
  const ConvShape shape = shape_of(t);
  ASSERT_TRUE(ConvFp16Sparse24Mma::supports(shape));
  ASSERT_TRUE(ConvFp16Sparse24Mma::device_supported());
  std::mt19937 rng(seed);
  const int taps = t.k * t.k;
  std::vector<float> x = test::random_fp16_values(size_t(t.batch) * t.c * t.h * t.w, rng);
  const float w_scale = 1.0f / std::sqrt(float(t.c * taps));
  std::vector<float> weight =
      test::random_fp16_values(size_t(t.oc) * t.c * taps, rng, -w_scale, w_scale);
  std::vector<float> bias = test::random_fp16_values(t.oc, rng, -0.5f, 0.5f);
  if (prune == Prune::Magnitude) {
    sparsity::prune_magnitude(weight.data(), sparsity::WeightShape{t.oc, t.c, taps});
  } else {
    for (int o = 0; o < t.oc; ++o)
      for (int c = 0; c < t.c; ++c)
        if (c % 4 >= 2)
          for (int tap = 0; tap < taps; ++tap) weight[(size_t(o) * t.c + c) * taps + tap] = 0.f;
  }
  ASSERT_EQ(sparsity::first_violation(weight.data(), {t.oc, t.c, taps}), "");

  std::vector<float> r;
  if (t.residual)
    r = test::random_fp16_values(size_t(t.batch) * t.oc * shape.conv_h * shape.conv_w, rng);
  const std::vector<float> expected = sparse_test::fused_conv_reference(
      shape, t.batch, x.data(), weight.data(), t.bias ? bias.data() : nullptr, r);

  const ConvFp16Sparse24Mma kernel(shape, weight.data(), t.bias ? bias.data() : nullptr, "conv");
  // What the kernel reads: kept values (fp16, K over channels padded to 8, padded to 64, rows to
  // 128), metadata (1/8 of the value bytes) and the fp32 bias (rows to 128).
  const size_t w_k = (size_t(taps) * test::pad8(t.c) + 63) / 64 * 64;
  const size_t rows = (size_t(t.oc) + 127) / 128 * 128;
  EXPECT_EQ(kernel.weight_bytes(), rows * w_k + rows * w_k / 8 + 4 * rows);

  test::DeviceMem d_x(test::to_nhwc(x, t.batch, t.c, t.h, t.w));
  test::DeviceMem d_r(t.residual ? test::to_nhwc(r, t.batch, t.oc, shape.conv_h, shape.conv_w)
                                 : std::vector<__half>(8));
  test::DeviceMem d_y(size_t(t.batch) * shape.out_h * shape.out_w * test::pad8(t.oc) *
                      sizeof(__half));
  const ConvFp16Sparse24MmaPlan plan = kernel.plan(t.batch);
  EXPECT_EQ(plan.workspace_bytes > 0, t.pool > 0) << plan.name;
  test::DeviceMem d_ws(std::max<size_t>(plan.workspace_bytes, 16));
  kernel.forward(plan.variant, d_x.get(), t.residual ? d_r.get() : nullptr, d_y.get(), t.batch,
                 nullptr, plan.workspace_bytes > 0 ? d_ws.get() : nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  expect_close(d_y.halves(), expected, t.batch, t.oc, shape.out_h, shape.out_w,
               "variant " + plan.name);
}

TEST(ConvSparse24Mma, FixedIndicesIsolateMetadata) {
  REQUIRE_SM80();
  // Every nibble 0b0100: if this passes and the magnitude-pruned cases fail, the values and the
  // fragments are right and the metadata layout (kernel design note) is what is wrong.
  check_case({1, 64, 8, 8, 128, 1, 1, 0}, 1, Prune::FirstTwo);
  check_case({2, 64, 9, 9, 128, 3, 1, 1}, 2, Prune::FirstTwo);
}

TEST(ConvSparse24Mma, OneTileMatchesReference) {
  REQUIRE_SM80();
  // One CTA, one k-tile: K = 64 (1x1, 64 channels), 128 channels x 128 pixels (2 x 8 x 8).
  check_case({2, 64, 8, 8, 128, 1, 1, 0, 1, Act::None}, 3);
}

TEST(ConvSparse24Mma, AlexNetShapesMatchReference) {
  REQUIRE_SM80();
  check_case({2, 192, 13, 13, 384, 3, 1, 1}, 11);                         // conv3
  check_case({2, 384, 13, 13, 256, 3, 1, 1}, 12);                         // conv4
  check_case({2, 256, 13, 13, 256, 3, 1, 1, 1, Act::Relu, true, 3}, 13);  // conv5 + pool
  check_case({1, 64, 27, 27, 192, 5, 1, 2, 1, Act::Relu, true, 3}, 14);   // conv2 + pool
}

TEST(ConvSparse24Mma, EdgeShapesMatchReference) {
  REQUIRE_SM80();
  const SpCase cases[] = {
      {1, 3, 31, 31, 64, 11, 4, 2},                       // AlexNet conv1's form: 3 channels -> 8
      {2, 8, 7, 7, 8, 1, 1, 0},                           // K = 8: one k-tile, mostly tail
      {3, 24, 17, 17, 200, 5, 2, 2},                      // 2 channel tiles, the second partial
      {1, 13, 9, 9, 21, 3, 1, 1, 1, Act::None},           // in_c 13 (pad 16), out_c 21 (pad 24)
      {2, 40, 15, 15, 72, 3, 1, 2, 2},                    // dilation 2
      {2, 16, 10, 10, 40, 3, 1, 1, 1, Act::Relu, false},  // no bias
      {1, 32, 12, 12, 64, 1, 2, 2},                       // 1x1 with padding: bias-only borders
      {3, 48, 11, 13, 96, 3, 1, 1, 1, Act::Relu, true, 0, true},      // fused residual
      {2, 40, 9, 11, 130, 3, 1, 1, 1, Act::Relu6, true, 0, true},     // residual + ReLU6
      {2, 16, 15, 15, 64, 3, 1, 1, 1, Act::Relu, true, 2},            // pool 2/2
      {2, 24, 10, 11, 48, 3, 2, 0, 1, Act::Relu, true, 0, false, 1},  // asymmetric padding
  };
  uint32_t seed = 100;
  for (const SpCase& c : cases) check_case(c, seed++);
}

TEST(ConvSparse24Mma, RandomOddShapesMatchReference) {
  REQUIRE_SM80();
  std::mt19937 rng(2024);
  auto pick = [&](std::initializer_list<int> v) {
    return *(v.begin() + std::uniform_int_distribution<int>(0, int(v.size()) - 1)(rng));
  };
  for (int i = 0; i < 24; ++i) {
    SpCase t{};
    t.batch = pick({1, 2, 3, 5});
    t.c = pick({3, 5, 8, 12, 20, 36, 64, 100});
    t.oc = pick({7, 24, 33, 96, 129, 200, 256});
    t.k = pick({1, 3, 5, 11});
    t.stride = pick({1, 1, 2, 4});
    t.pad = std::uniform_int_distribution<int>(0, t.k / 2)(rng);
    t.dilation = t.k <= 3 ? pick({1, 1, 2}) : 1;
    const int span = (t.k - 1) * t.dilation + 1;
    t.h = span + pick({0, 3, 8, 14});
    t.w = span + pick({1, 5, 9});
    t.act = Act(pick({0, 1, 1, 2}));
    t.bias = pick({0, 1, 1}) == 1;
    const ConvShape conv = shape_of(t);
    t.pool = conv.conv_h >= 3 && conv.conv_w >= 3 ? pick({0, 0, 3, 2}) : 0;
    t.residual = t.pool == 0 && pick({0, 0, 1}) == 1;
    // Keep the double-precision reference to ~2e8 MACs (seconds on one core).
    const double macs = double(t.batch) * conv.conv_h * conv.conv_w * t.oc * t.c * t.k * t.k;
    if (macs > 2e8) t.batch = 1;
    check_case(t, 1000 + i);
  }
}

TEST(ConvSparse24Mma, ShapeRule) {
  SpCase t{1, 16, 9, 9, 64, 3, 1, 1};
  EXPECT_TRUE(ConvFp16Sparse24Mma::supports(shape_of(t)));
  ConvShape grouped = shape_of(t);
  grouped.conv.groups = 2;
  EXPECT_FALSE(ConvFp16Sparse24Mma::supports(grouped));
  t.pool = 3;
  ConvShape pool_residual = shape_of(t);
  pool_residual.residual = true;
  EXPECT_FALSE(ConvFp16Sparse24Mma::supports(pool_residual));
}

TEST(ConvSparse24Mma, RejectsWeightThatIsNot24) {
  REQUIRE_SM80();
  const SpCase t{1, 16, 9, 9, 64, 3, 1, 1};
  std::mt19937 rng(5);
  std::vector<float> w = test::random_fp16_values(size_t(t.oc) * t.c * 9, rng, 0.1f, 0.2f);
  sparse_test::expect_rejects_dense_weight(
      [&] { const ConvFp16Sparse24Mma kernel(shape_of(t), w.data(), nullptr, "conv7"); });
}

}  // namespace
}  // namespace cnnrt::cuda
