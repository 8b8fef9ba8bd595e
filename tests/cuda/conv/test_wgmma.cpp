// GPU tests of the Hopper wgmma convolution (kernels/cuda/conv/wgmma.h) against the CPU
// reference (ref::conv2d -> ref::relu, double accumulation), plus its registry rules.
//
// Kernel cases skip unless the device is compute capability 9.x; on a 9.0 device the sm_90a
// image must be loaded (device_supported() true), otherwise the build is wrong and the test
// fails.  Inputs, weights and biases are fresh random values, rounded to fp16 before the
// reference sees them, so the only differences are fp32 accumulation order and the final fp16
// rounding.  Tolerances: rel L2 ||y - ref|| / ||ref|| <= 2e-3 (fp16 output rounding alone gives
// ~3e-4), and per element |y - ref| <= 4e-3 |ref| + 2e-3 max|ref| (catches a wrong tile edge or a
// swizzle slip that an L2 norm could hide).  Outputs are NaN-poisoned before the launch, so every
// element must be written; padding channels (none for out_c % 64 == 0) must be +0.
// Shapes: AlexNet conv3/conv4 at batch 1 and 3, and odd ones within supports() (H, W 7/13/17;
// in_c 8/24/192; out_c 64/192 and the narrow tiles' 32/96/160/224; kernels 1/3/5; padding 0..2;
// stride 1 and 2) — M is never a multiple of the 128-row tile, K tails are partial (in_c 8/24),
// and out_c 192 takes BN = 192, 96 BN = 96, 32/160/224 BN = 32 (1, 5 and 7 N tiles).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "cnnrt/error.h"
#include "cuda/conv/wgmma_test_cases.h"
#include "cuda/fp16_test_util.h"
#include "graph/ops.h"
#include "kernels/cpu/reference.h"
#include "kernels/cuda/conv/space_to_depth.h"
#include "kernels/cuda/conv/wgmma.h"
#include "kernels/cuda/cuda_check.h"
#include "runtime/cuda/cuda_registry.h"

namespace cnnrt::cuda {
namespace {

using namespace wgmma_test;

void check_case(const WCase& t, uint32_t seed) {
  SCOPED_TRACE(describe(t));
  ASSERT_TRUE(ConvFp16Wgmma::device_supported())
      << "compute capability 9.0 device but no sm_90a image: is 90 in CMAKE_CUDA_ARCHITECTURES?";
  const ConvShape shape = shape_of(t);
  ASSERT_TRUE(ConvFp16Wgmma::supports(shape));
  const CaseData d = make_data(t, shape, seed);
  const ConvFp16Wgmma conv(shape, d.weight.data(), t.bias ? d.bias.data() : nullptr);
  test::DeviceMem d_x(test::to_nhwc(d.x, t.batch, t.c, t.h, t.w));
  test::DeviceMem d_y(size_t(t.batch) * shape.out_h * shape.out_w * test::pad8(t.oc) *
                      sizeof(__half));
  const ConvFp16WgmmaPlan plan = conv.plan(t.batch);
  conv.forward(plan, d_x.get(), d_y.get(), t.batch, nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  expect_close(d_y.halves(), d.expected, t.batch, t.oc, shape.out_h, shape.out_w,
               "variant " + plan.name);
}

TEST(ConvWgmma, AlexNetConv3MatchesReference) {
  REQUIRE_HOPPER();
  check_case({1, 192, 13, 13, 384, 3, 1, 1, true, true}, 11);
  check_case({3, 192, 13, 13, 384, 3, 1, 1, true, true}, 12);
}

TEST(ConvWgmma, AlexNetConv4MatchesReference) {
  REQUIRE_HOPPER();
  check_case({1, 384, 13, 13, 256, 3, 1, 1, true, true}, 21);
  check_case({3, 384, 13, 13, 256, 3, 1, 1, true, true}, 22);
}

TEST(ConvWgmma, OddShapesMatchReference) {
  REQUIRE_HOPPER();
  const WCase cases[] = {
      {2, 8, 7, 7, 64, 1, 1, 0, true, true},        // K = 8: one k-tile, 7/8 of it zero
      {3, 24, 17, 17, 192, 5, 2, 2, true, true},    // BN = 64, stride 2, K tail 600 -> 640
      {1, 192, 13, 13, 64, 3, 2, 0, false, true},   // no ReLU: negative outputs survive
      {2, 8, 17, 17, 192, 3, 1, 1, true, false},    // no bias, taps cross k-tiles (in_c 8)
      {3, 24, 7, 7, 64, 5, 1, 1, true, true},       // 5x5 on 7x7, pad 1
      {1, 192, 17, 17, 192, 1, 2, 2, false, true},  // 1x1 with padding: bias-only borders
      {2, 24, 13, 13, 192, 3, 1, 2, true, true},    // pad 2 with 3x3: output 15x15
      {3, 192, 7, 7, 64, 5, 2, 2, true, true},      // K = 4800 (75 k-tiles), tiny M
      {2, 56, 13, 13, 32, 3, 1, 1, true, true},     // BN = 32, one N tile
      {3, 16, 17, 17, 96, 5, 2, 2, true, true},     // BN = 96, K tail 400 -> 448
      {1, 48, 11, 11, 160, 3, 1, 1, false, true},   // BN = 32, five N tiles, no ReLU
      {2, 64, 9, 9, 224, 1, 1, 0, true, false},     // BN = 32, seven N tiles, no bias
      {2, 32, 27, 27, 96, 5, 1, 2, true, true},     // half-channel AlexNet conv2 (no pool)
  };
  uint32_t seed = 100;
  for (const WCase& t : cases) check_case(t, seed++);
}

// ---- registry rules -------------------------------------------------------------------------

TEST(ConvWgmma, RegistryEntryIsPreferredOverIgemm) {
  const KernelEntry* entry = KernelRegistry::instance().find("conv_fp16_wgmma");
  ASSERT_NE(entry, nullptr);
  EXPECT_EQ(entry->op, OpKind::Conv);
  EXPECT_EQ(entry->device, Device::CUDA);
  EXPECT_EQ(entry->precision, Precision::FP16);
  EXPECT_FALSE(entry->baseline);
  const KernelEntry* igemm = KernelRegistry::instance().find("conv_fp16_igemm");
  ASSERT_NE(igemm, nullptr);
  // Chosen over the mma.sync kernel where both apply (measured faster on the H200, run 4).
  EXPECT_GT(entry->priority, igemm->priority);
}

TEST(ConvWgmma, AcceptsPooledRefusesGroupedOddChannelNodes) {
  const KernelEntry* entry = KernelRegistry::instance().find("conv_fp16_wgmma");
  ASSERT_NE(entry, nullptr);
  const WCase conv3{1, 192, 13, 13, 384, 3, 1, 1, true, true};
  // Shape rule (device independent): conv3 with and without a fused 3/2 pool passes, every
  // other variant below fails.
  EXPECT_TRUE(ConvFp16Wgmma::supports(shape_of(conv3)));
  ConvShape pooled = shape_of(conv3);
  pooled.pool = PoolAttrs{3, 3, 2, 2, 0, 0, false, true};
  pooled.derive();
  EXPECT_TRUE(ConvFp16Wgmma::supports(pooled));
  ConvShape huge_window = shape_of(conv3);  // 12x12 = 144 window pixels > 128 rows
  huge_window.pool = PoolAttrs{12, 12, 1, 1, 0, 0, false, true};
  huge_window.derive();
  EXPECT_FALSE(ConvFp16Wgmma::supports(huge_window));
  ConvShape bad_pad = shape_of(conv3);  // pad > kernel / 2: windows of padding only
  bad_pad.pool = PoolAttrs{2, 2, 2, 2, 2, 2, false, true};
  bad_pad.derive();
  EXPECT_FALSE(ConvFp16Wgmma::supports(bad_pad));
  ConvShape grouped = shape_of(conv3);
  grouped.conv.groups = 2;
  EXPECT_FALSE(ConvFp16Wgmma::supports(grouped));
  EXPECT_FALSE(ConvFp16Wgmma::supports(shape_of({1, 3, 13, 13, 384, 3, 1, 1, true, true})));
  EXPECT_FALSE(ConvFp16Wgmma::supports(shape_of({1, 20, 13, 13, 384, 3, 1, 1, true, true})));
  EXPECT_FALSE(ConvFp16Wgmma::supports(shape_of({1, 192, 13, 13, 40, 3, 1, 1, true, true})));
  EXPECT_FALSE(ConvFp16Wgmma::supports(shape_of({1, 192, 13, 13, 48, 3, 1, 1, true, true})));
  EXPECT_TRUE(ConvFp16Wgmma::supports(shape_of({1, 192, 13, 13, 96, 3, 1, 1, true, true})));
  // Narrow tiles only where K pads to the 64-wide k-tile by <= K / 8: K 16 and 80 (EfficientNet's
  // 1x1 expands, measured slower than igemm) are refused at 96 / 480 channels, not at 128.
  EXPECT_FALSE(ConvFp16Wgmma::supports(shape_of({1, 16, 13, 13, 96, 1, 1, 0, true, true})));
  EXPECT_FALSE(ConvFp16Wgmma::supports(shape_of({1, 80, 13, 13, 480, 1, 1, 0, true, true})));
  EXPECT_TRUE(ConvFp16Wgmma::supports(shape_of({1, 16, 13, 13, 128, 1, 1, 0, true, true})));
  EXPECT_TRUE(ConvFp16Wgmma::supports(shape_of({1, 64, 13, 13, 160, 1, 1, 0, true, true})));
  ConvShape dilated = shape_of(conv3);
  dilated.conv.dilation_h = dilated.conv.dilation_w = 2;
  dilated.derive();
  EXPECT_FALSE(ConvFp16Wgmma::supports(dilated));

  // Registry predicate: false for the refused nodes on any device ...
  EXPECT_FALSE(entry->supports(make_node(conv3, /*groups=*/2)));
  EXPECT_FALSE(entry->supports(make_node(conv3, 1, /*dilation=*/2)));
  EXPECT_FALSE(entry->supports(make_node({1, 3, 13, 13, 384, 3, 1, 1, true, true})));
  EXPECT_FALSE(entry->supports(make_node({1, 20, 13, 13, 384, 3, 1, 1, true, true})));
  EXPECT_FALSE(entry->supports(make_node({1, 192, 13, 13, 40, 3, 1, 1, true, true})));
  Node wrong_output = make_node(conv3);
  wrong_output.output_shape = {384, 12, 13};  // disagrees with the conv rule: refused
  EXPECT_FALSE(entry->supports(wrong_output));
  // ... and for plain and pooled conv3 nodes exactly when the device can run wgmma.
  EXPECT_EQ(entry->supports(make_node(conv3)), ConvFp16Wgmma::device_supported());
  EXPECT_EQ(entry->supports(make_node(conv3, 1, 1, /*pool=*/true)),
            ConvFp16Wgmma::device_supported());
}

TEST(ConvWgmma, DeviceRuleFollowsComputeCapability) {
  int device = 0, major = 0, minor = 0;
  const bool have =
      test::cuda_device_present() && cudaGetDevice(&device) == cudaSuccess &&
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess &&
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) == cudaSuccess;
  if (!have || major != 9 || minor != 0) {
    EXPECT_FALSE(ConvFp16Wgmma::device_supported());
    const ConvShape s = shape_of({1, 192, 13, 13, 384, 3, 1, 1, true, true});
    const std::vector<float> weight(size_t(384) * 192 * 9, 0.25f);
    EXPECT_THROW(ConvFp16Wgmma(s, weight.data(), nullptr), Error);
  } else {
    EXPECT_TRUE(ConvFp16Wgmma::device_supported());
  }
}

TEST(ConvWgmma, RegistryEntryRunsConv4) {
  REQUIRE_HOPPER();
  ASSERT_TRUE(ConvFp16Wgmma::device_supported());
  const WCase t{2, 384, 13, 13, 256, 3, 1, 1, true, true};
  std::mt19937 rng(7);
  const std::vector<float> x = test::random_fp16_values(size_t(t.batch) * t.c * t.h * t.w, rng);
  const float w_scale = 1.0f / std::sqrt(float(t.c * 9));
  std::vector<float> weight =
      test::random_fp16_values(size_t(t.oc) * t.c * 9, rng, -w_scale, w_scale);
  std::vector<float> bias = test::random_fp16_values(t.oc, rng, -0.5f, 0.5f);
  std::vector<float> expected(size_t(t.batch) * t.oc * 13 * 13);
  ref::conv2d(x.data(), t.batch, t.c, t.h, t.w, weight.data(), bias.data(), attrs_of(t),
              expected.data());
  ref::relu(expected.data(), int64_t(expected.size()), expected.data());

  Node node = make_node(t);
  node.params.push_back(test::make_param("weight", {t.oc, t.c, 3, 3}, weight));
  node.params.push_back(test::make_param("bias", {t.oc}, bias));
  Graph graph;
  test::EntryRunner runner(KernelRegistry::instance(), "conv_fp16_wgmma", node, graph);
  // Batch 2 leaves SMs idle: the plan is the fallback's (igemm), named.
  const std::string planned = runner.prepare(t.batch).variant_name;
  EXPECT_TRUE(planned.find("igemm") != std::string::npos ||
              planned.find("wgmma") != std::string::npos)
      << planned;
  test::DeviceMem d_x(test::to_nhwc(x, t.batch, t.c, t.h, t.w));
  test::DeviceMem d_y(size_t(t.batch) * 13 * 13 * t.oc * sizeof(__half));
  runner.run({d_x.get()}, d_y.get(), t.batch);
  int64_t bad_padding = 0;
  const std::vector<float> actual =
      test::from_nhwc(d_y.halves(), t.batch, t.oc, 13, 13, &bad_padding);
  EXPECT_EQ(bad_padding, 0);
  EXPECT_LE(test::rel_l2(actual, expected), 2e-3);
}

// ---- fused MaxPool (bias -> ReLU -> max-pool in the epilogue) --------------------------------

struct PCase {
  WCase conv;
  int pk, ps, pp;
  bool ceil;
};

std::string describe(const PCase& t) {
  std::ostringstream s;
  s << describe(t.conv) << " pool k" << t.pk << " s" << t.ps << " p" << t.pp
    << (t.ceil ? " ceil" : "");
  return s.str();
}

ConvShape shape_of(const PCase& t) {
  ConvShape s = shape_of(t.conv);
  s.pool = PoolAttrs{t.pk, t.pk, t.ps, t.ps, t.pp, t.pp, t.ceil, true};
  s.derive();
  return s;
}

// Random fp16-exact input / weight / bias and the reference conv -> relu -> maxpool output.
CaseData make_pool_data(const WCase& t, const ConvShape& shape, uint32_t seed) {
  CaseData d = make_data(t, shape_of(t), seed);  // conv (+ relu), before the pool
  std::vector<float> pooled(size_t(t.batch) * t.oc * shape.out_h * shape.out_w, 0.f);
  ref::maxpool2d(d.expected.data(), t.batch, t.oc, shape.conv_h, shape.conv_w, *shape.pool,
                 pooled.data());
  d.expected = std::move(pooled);
  return d;
}

void check_pool_case(const PCase& t, uint32_t seed) {
  SCOPED_TRACE(describe(t));
  ASSERT_TRUE(ConvFp16Wgmma::device_supported());
  const ConvShape shape = shape_of(t);
  ASSERT_TRUE(ConvFp16Wgmma::supports(shape));
  const WCase& c = t.conv;
  const CaseData d = make_pool_data(c, shape, seed);
  const ConvFp16Wgmma conv(shape, d.weight.data(), c.bias ? d.bias.data() : nullptr);
  const ConvFp16WgmmaPlan plan = conv.plan(c.batch);
  EXPECT_NE(plan.name.find("_pool"), std::string::npos) << plan.name;
  test::DeviceMem d_x(test::to_nhwc(d.x, c.batch, c.c, c.h, c.w));
  test::DeviceMem d_y(size_t(c.batch) * shape.out_h * shape.out_w * test::pad8(c.oc) *
                      sizeof(__half));
  conv.forward(plan, d_x.get(), d_y.get(), c.batch, nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  expect_close(d_y.halves(), d.expected, c.batch, c.oc, shape.out_h, shape.out_w,
               "variant " + plan.name);
}

TEST(ConvWgmma, FusedPoolAlexNetShapesMatchReference) {
  REQUIRE_HOPPER();
  for (int batch : {1, 3}) {
    // conv1 through space-to-depth: 48 -> 64, 3x3 on 57x57 -> 55x55, pool 3/2 -> 27x27.
    check_pool_case({{batch, 48, 57, 57, 64, 3, 1, 0, true, true}, 3, 2, 0, false}, 30 + batch);
    // conv2: 64 -> 192, 5x5 pad 2 on 27x27, pool 3/2 -> 13x13 (BN = 192).
    check_pool_case({{batch, 64, 27, 27, 192, 5, 1, 2, true, true}, 3, 2, 0, false}, 40 + batch);
    // conv5: 256 -> 256, 3x3 pad 1 on 13x13, pool 3/2 -> 6x6.
    check_pool_case({{batch, 256, 13, 13, 256, 3, 1, 1, true, true}, 3, 2, 0, false}, 50 + batch);
    // Half the channels (cnnrt prune --channels 0.5, compacted): conv1 48 -> 32 (BN = 32) and
    // conv2 32 -> 96 (BN = 96).
    check_pool_case({{batch, 48, 57, 57, 32, 3, 1, 0, true, true}, 3, 2, 0, false}, 60 + batch);
    check_pool_case({{batch, 32, 27, 27, 96, 5, 1, 2, true, true}, 3, 2, 0, false}, 70 + batch);
  }
}

TEST(ConvWgmma, FusedPoolOddShapesMatchReference) {
  REQUIRE_HOPPER();
  const PCase cases[] = {
      {{2, 24, 17, 17, 64, 3, 1, 1, true, true}, 2, 2, 0, false},   // 17 -> 8, last col dropped
      {{3, 16, 14, 14, 128, 3, 1, 1, true, true}, 3, 2, 0, true},   // ceil: 14 -> 7, not 6
      {{2, 8, 27, 17, 192, 3, 1, 0, true, false}, 3, 2, 1, false},  // pool pad 1, 25x15
      {{1, 32, 17, 13, 64, 5, 2, 2, true, true}, 3, 2, 1, true},    // 9x7 conv, pad + ceil
      {{3, 16, 13, 27, 64, 1, 1, 0, false, true}, 3, 3, 0, false},  // no ReLU: negative maxima
      {{2, 8, 17, 17, 128, 3, 1, 1, true, true}, 2, 1, 0, false},   // overlapping stride-1 pool
      {{1, 64, 27, 27, 192, 5, 1, 2, false, true}, 3, 2, 0, true},  // 27 -> 13, ceil, no ReLU
      {{3, 24, 14, 18, 192, 3, 1, 1, true, true}, 3, 2, 1, true},   // ceil + pad: 14 -> 8
  };
  uint32_t seed = 200;
  for (const PCase& t : cases) check_pool_case(t, seed++);
}

// ---- pool tilings: single pass vs row streaming (plan_pool_block) -----------------------------

// One pooled case, one reference, every tiling mode: the cost model's choice for this batch, the
// 1 x 1 block (single pass, many CTAs), and the row-streamed blocks that fit: the whole pooled
// image, half of its rows (bands; the last band overhangs the conv output), half of its columns,
// and a 2 x 3 block (single pass or streamed depending on the pool).  Each launch writes into a
// freshly NaN-poisoned output.  Returns how many streamed (passes > 1) launches ran.
int check_pool_tilings(const PCase& t, uint32_t seed) {
  SCOPED_TRACE(describe(t));
  const ConvShape shape = shape_of(t);
  EXPECT_TRUE(ConvFp16Wgmma::supports(shape));
  const WCase& c = t.conv;
  const CaseData d = make_pool_data(c, shape, seed);
  const ConvFp16Wgmma conv(shape, d.weight.data(), c.bias ? d.bias.data() : nullptr);
  test::DeviceMem d_x(test::to_nhwc(d.x, c.batch, c.c, c.h, c.w));
  const int oh = shape.out_h, ow = shape.out_w;
  const int blocks[][2] = {{0, 0}, {1, 1}, {oh, ow}, {(oh + 1) / 2, ow}, {oh, (ow + 1) / 2},
                           {2, 3}};
  int streamed = 0;
  for (const auto& b : blocks) {
    if (b[0] > oh || b[1] > ow) continue;
    const std::optional<ConvFp16WgmmaPlan> plan =
        b[0] == 0 ? std::optional<ConvFp16WgmmaPlan>(conv.plan(c.batch))
                  : conv.plan_pool_block(c.batch, b[0], b[1]);
    if (!plan) {
      // Only a streamed block may be refused (conv tile row over 128 pixels, or its staging
      // over the shared-memory limit); a single-pass block always fits.
      const int th = (b[0] - 1) * t.ps + t.pk, tw = (b[1] - 1) * t.ps + t.pk;
      EXPECT_GT(th * tw, 128) << "block " << b[0] << "x" << b[1] << " refused";
      continue;
    }
    const std::string what =
        "block " + std::to_string(b[0]) + "x" + std::to_string(b[1]) + " variant " + plan->name;
    SCOPED_TRACE(what);
    if (plan->passes > 1) ++streamed;
    test::DeviceMem d_y(size_t(c.batch) * oh * ow * test::pad8(c.oc) * sizeof(__half));
    conv.forward(*plan, d_x.get(), d_y.get(), c.batch, nullptr);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    expect_close(d_y.halves(), d.expected, c.batch, c.oc, oh, ow, what);
  }
  EXPECT_FALSE(conv.plan_pool_block(c.batch, oh + 1, 1).has_value());
  return streamed;
}

TEST(ConvWgmma, PoolTilingsAlexNetShapesMatchReference) {
  REQUIRE_HOPPER();
  ASSERT_TRUE(ConvFp16Wgmma::device_supported());
  for (int batch : {1, 2, 3}) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    // conv1 inner (space-to-depth form): 48 -> 64, 3x3 on 57x57 -> 55x55, pool 3/2 -> 27x27.
    EXPECT_GE(check_pool_tilings({{batch, 48, 57, 57, 64, 3, 1, 0, true, true}, 3, 2, 0, false},
                                 500 + batch),
              2);
    // conv2: 64 -> 192, 5x5 pad 2 on 27x27, pool 3/2 -> 13x13 (BN 192: the largest staging).
    EXPECT_GE(check_pool_tilings({{batch, 64, 27, 27, 192, 5, 1, 2, true, true}, 3, 2, 0, false},
                                 510 + batch),
              2);
    // conv5: 256 -> 256, 3x3 pad 1 on 13x13, pool 3/2 -> 6x6 (two N tiles).
    EXPECT_GE(check_pool_tilings({{batch, 256, 13, 13, 256, 3, 1, 1, true, true}, 3, 2, 0, false},
                                 520 + batch),
              1);
  }
}

TEST(ConvWgmma, PoolTilingsOddShapesMatchReference) {
  REQUIRE_HOPPER();
  ASSERT_TRUE(ConvFp16Wgmma::device_supported());
  const PCase cases[] = {
      {{2, 16, 13, 13, 64, 3, 1, 1, true, true}, 3, 2, 0, false},    // 13 -> 6
      {{1, 8, 17, 17, 128, 3, 1, 1, true, true}, 2, 2, 0, false},    // 17 -> 8, last row dropped
      {{3, 24, 27, 31, 192, 3, 1, 1, true, true}, 3, 2, 0, true},    // ceil: 27x31 -> 13x15
      {{2, 8, 31, 17, 64, 5, 1, 2, true, false}, 3, 2, 1, false},    // pool pad 1: 16x9
      {{1, 16, 31, 31, 128, 3, 2, 1, true, true}, 2, 2, 0, true},    // conv 16x16, ceil 2/2
      {{2, 8, 17, 27, 192, 3, 1, 0, false, true}, 3, 2, 1, true},    // no ReLU, pad + ceil
      {{3, 32, 27, 13, 64, 3, 1, 1, true, true}, 3, 1, 1, false},    // stride-1 pool, pad 1
      {{1, 8, 31, 13, 128, 1, 1, 0, true, true}, 2, 2, 0, true},     // 1x1 conv, ceil 2/2
      {{2, 32, 27, 27, 96, 5, 1, 2, true, true}, 3, 2, 0, false},    // BN = 96 staging
      {{1, 48, 29, 31, 32, 3, 1, 0, true, false}, 3, 2, 0, true},    // BN = 32 staging, ceil
      {{2, 64, 19, 17, 160, 3, 1, 1, false, true}, 2, 2, 0, false},  // BN = 32, 5 N tiles
  };
  uint32_t seed = 600;
  for (const PCase& t : cases) {
    const ConvShape shape = shape_of(t);
    const int whole = ((shape.out_h - 1) * t.ps + t.pk) * ((shape.out_w - 1) * t.ps + t.pk);
    const int streamed = check_pool_tilings(t, seed++);
    if (whole > 128) EXPECT_GE(streamed, 1) << describe(t);  // the whole image must stream
  }
}

// The cost model streams conv2 at large batches (the point of the row-streaming mode), keeps
// plan(batch).ctas >= the SM count once it got there (the registry's small-batch rule), and the
// pinned blocks report their pass count.
TEST(ConvWgmma, PoolTilingChoiceFollowsBatch) {
  REQUIRE_HOPPER();
  ASSERT_TRUE(ConvFp16Wgmma::device_supported());
  const PCase conv2{{1, 64, 27, 27, 192, 5, 1, 2, true, true}, 3, 2, 0, false};
  const ConvShape shape = shape_of(conv2);
  std::mt19937 rng(77);
  const std::vector<float> w = test::random_fp16_values(size_t(192) * 64 * 25, rng, -0.1f, 0.1f);
  const ConvFp16Wgmma conv(shape, w.data(), nullptr);
  EXPECT_EQ(conv.plan(1).passes, 1);  // small batch: single-pass tiles (more CTAs)
  EXPECT_GT(conv.plan(256).passes, 1) << conv.plan(256).name;
  EXPECT_NE(conv.plan(256).name.find("_stream"), std::string::npos) << conv.plan(256).name;
  const int sms = current_sm_count();
  bool filled = false;
  for (int b = 1; b <= 300; ++b) {
    const long long n = conv.plan(b).ctas;
    if (filled) EXPECT_GE(n, sms) << "batch " << b;
    filled = filled || n >= sms;
  }
  EXPECT_TRUE(filled);
  const std::optional<ConvFp16WgmmaPlan> whole = conv.plan_pool_block(1, 13, 13);
  ASSERT_TRUE(whole.has_value());  // 27x27 conv rows, 4 per pass
  EXPECT_EQ(whole->passes, 7);
  EXPECT_EQ(conv.plan_pool_block(2, 13, 13)->ctas, 2);
  const std::optional<ConvFp16WgmmaPlan> five = conv.plan_pool_block(1, 5, 5);
  ASSERT_TRUE(five.has_value());  // 11x11 = 121 rows: one pass
  EXPECT_EQ(five->passes, 1);
  EXPECT_EQ(five->ctas, 9);
  // The same launch id launches the same tiling at every batch (plans are stable).
  EXPECT_EQ(conv.plan_pool_block(7, 5, 5)->variant, five->variant);
}

// The registry kernel runs ConvFp16 while the wgmma grid would leave SMs idle and wgmma once it
// fills them: batch 1 and the smallest filling batch must both match the reference.
TEST(ConvWgmma, SmallBatchDispatchMatchesReference) {
  REQUIRE_HOPPER();
  ASSERT_TRUE(ConvFp16Wgmma::device_supported());
  const WCase probe{1, 64, 27, 27, 64, 3, 1, 1, true, true};
  ConvShape shape = shape_of(probe);
  shape.pool = PoolAttrs{3, 3, 2, 2, 0, 0, false, true};
  shape.derive();
  const int sms = current_sm_count();
  int fill_batch = 1;
  {
    const std::vector<float> w(size_t(64) * 64 * 9, 0.01f);
    const ConvFp16Wgmma conv(shape, w.data(), nullptr);
    ASSERT_LT(conv.plan(1).ctas, sms);  // batch 1 takes the fallback
    while (conv.plan(fill_batch).ctas < sms) ++fill_batch;
  }
  for (int batch : {1, fill_batch}) {
    WCase t = probe;
    t.batch = batch;
    SCOPED_TRACE("batch " + std::to_string(batch));
    const CaseData d = make_pool_data(t, shape, 300 + batch);
    Node node = make_node(t, 1, 1, /*pool=*/true);
    node.params.push_back(test::make_param("weight", {t.oc, t.c, 3, 3}, d.weight));
    node.params.push_back(test::make_param("bias", {t.oc}, d.bias));
    Graph graph;
    test::EntryRunner runner(KernelRegistry::instance(), "conv_fp16_wgmma", node, graph);
    // The fallback (igemm) below the batch that fills the SMs, the wgmma kernel from there on.
    const std::string variant = runner.prepare(batch).variant_name;
    EXPECT_NE(variant.find(batch < fill_batch ? "igemm" : "wgmma"), std::string::npos) << variant;
    EXPECT_EQ(runner.prepare(fill_batch * 4).workspace_bytes, 0u);  // none past the fallback
    test::DeviceMem d_x(test::to_nhwc(d.x, batch, t.c, t.h, t.w));
    test::DeviceMem d_y(size_t(batch) * shape.out_h * shape.out_w * t.oc * sizeof(__half));
    runner.run({d_x.get()}, d_y.get(), batch);
    expect_close(d_y.halves(), d.expected, batch, t.oc, shape.out_h, shape.out_w, variant);
  }
}

// AlexNet conv1 through conv_fp16_s2d: on Hopper its inner conv (48 -> 64, 3x3, pool) is the
// window form (conv_fp16_window) at every batch; conv_fp16_s2d_wgmma / _tma / _window pin their
// inner conv at every batch (igemm, the default on other GPUs, has its own tests).  Each path must
// match the reference: the default at batch 1 (26 windows of 128 virtual pixels, the last past
// the image) and 3, the wgmma fill batch (pinned wgmma), the TMA form pinned at 5.  At 64 output
// channels and at the 32 of a channel-pruned conv1 (BN = 32).
void check_s2d_entry(int out_c) {
  SCOPED_TRACE("out_c " + std::to_string(out_c));
  const WCase conv1{1, 3, 224, 224, out_c, 11, 4, 2, true, true};
  ConvShape shape = shape_of(conv1);
  shape.pool = PoolAttrs{3, 3, 2, 2, 0, 0, false, true};
  shape.derive();
  const std::optional<SpaceToDepthConv> s2d = space_to_depth_conv(shape);
  ASSERT_TRUE(s2d.has_value());
  ASSERT_TRUE(ConvFp16Wgmma::supports(s2d->transformed));
  int fill_batch = 1;
  {
    const std::vector<float> w(size_t(out_c) * 3 * 121, 0.01f);
    const ConvFp16Wgmma inner(s2d->transformed, space_to_depth_weights(*s2d, w.data()).data(),
                              nullptr);
    while (inner.plan(fill_batch).ctas < current_sm_count()) ++fill_batch;
  }
  struct Run {
    const char* entry;
    int batch;
    const char* inner;
  };
  for (const Run& run :
       {Run{"conv_fp16_s2d", 1, "window_"}, Run{"conv_fp16_s2d", 3, "window_"},
        Run{"conv_fp16_s2d_wgmma", fill_batch, "wgmma"}, Run{"conv_fp16_s2d_tma", 5, "tma_"}}) {
    WCase t = conv1;
    Node node = make_node(t, 1, 1, /*pool=*/true);
    const int batch = run.batch;
    t.batch = batch;
    SCOPED_TRACE(std::string(run.entry) + " batch " + std::to_string(batch));
    const CaseData d = make_pool_data(t, shape, 400 + out_c + batch);
    node.params.push_back(test::make_param("weight", {t.oc, t.c, t.k, t.k}, d.weight));
    node.params.push_back(test::make_param("bias", {t.oc}, d.bias));
    Graph graph;
    test::EntryRunner runner(KernelRegistry::instance(), run.entry, node, graph);
    const std::string variant = runner.prepare(batch).variant_name;
    EXPECT_NE(variant.find(run.inner), std::string::npos) << variant;
    // The inner conv's K is 7 k-tiles on a narrow tile: the 3-stage instance (wgmma.cu).
    if (std::string(run.inner) == "wgmma")
      EXPECT_NE(variant.find("_s3"), std::string::npos) << variant;
    test::DeviceMem d_x(test::to_nhwc(d.x, batch, t.c, t.h, t.w));
    test::DeviceMem d_y(size_t(batch) * shape.out_h * shape.out_w * t.oc * sizeof(__half));
    runner.run({d_x.get()}, d_y.get(), batch);
    expect_close(d_y.halves(), d.expected, batch, t.oc, shape.out_h, shape.out_w, variant);
  }
}

TEST(ConvWgmma, SpaceToDepthEntryUsesWgmmaAndMatchesReference) {
  REQUIRE_HOPPER();
  ASSERT_TRUE(ConvFp16Wgmma::device_supported());
  check_s2d_entry(64);
  check_s2d_entry(32);
}

}  // namespace
}  // namespace cnnrt::cuda
