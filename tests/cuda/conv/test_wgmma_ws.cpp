// GPU tests of the warp-specialised Hopper wgmma convolution (kernels/cuda/conv/wgmma_ws.h)
// against the CPU reference (ref::conv2d -> ref::relu, double accumulation), plus its registry
// rules.
//
// Kernel cases skip unless the device is compute capability 9.x; on a 9.0 device the sm_90a image
// must be loaded (device_supported() true), otherwise the build is wrong and the test fails.
// Every case runs once per tile config (plan_tile: 128x128 s6, 128x256 s4, 256x128 s4) and once
// with the cost model's choice.  Inputs, weights and biases are fresh random fp16-representable
// values, so the only differences from the reference are fp32 accumulation order and the final
// fp16 rounding.  Tolerances (wgmma_test_cases.h, shared with test_wgmma.cpp): rel L2 <=
// 2e-3 and per element |y - ref| <= 4e-3 |ref| + 2e-3 max|ref|.  Outputs are NaN-poisoned
// before each launch, so every element must be written.
// Shapes: AlexNet conv3/conv4 at batch 1 and 3 (conv4: 54 k-tiles, the 4-slot ring wraps 13
// times, so the mbarrier phase bookkeeping flips many times), odd ones (H, W 7/13/17; in_c
// 8/24/192/384; out_c 64/192/256/320 — BN not dividing out_c reads the zero-padded weight rows
// and must not store past out_c; kernels 1/3/5; pad 0..2; stride 1 and 2; K = 8, one k-tile,
// fewer than the producer's lag), and a multi-wave grid.
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
#include "kernels/cuda/conv/wgmma_ws.h"
#include "kernels/cuda/cuda_check.h"
#include "runtime/cuda/cuda_registry.h"

namespace cnnrt::cuda {
namespace {

using namespace wgmma_test;

// The tiles the kernel builds; {0, 0}: the cost model.
const std::pair<int, int> kTiles[] = {{128, 128}, {128, 256}, {256, 128}, {0, 0}};

// Runs `t` with every tile forced and with the cost model; one reference for all.
void check_case(const WCase& t, uint32_t seed) {
  SCOPED_TRACE(describe(t));
  ASSERT_TRUE(ConvFp16WgmmaWs::device_supported())
      << "compute capability 9.0 device but no sm_90a image: is 90 in CMAKE_CUDA_ARCHITECTURES?";
  const ConvShape shape = shape_of(t);
  ASSERT_TRUE(ConvFp16WgmmaWs::supports(shape));
  const CaseData d = make_data(t, shape, seed);
  const ConvFp16WgmmaWs conv(shape, d.weight.data(), t.bias ? d.bias.data() : nullptr);
  const test::DeviceMem d_x(test::to_nhwc(d.x, t.batch, t.c, t.h, t.w));
  for (const auto& tile : kTiles) {
    const std::optional<ConvFp16WgmmaWsPlan> plan =
        tile.first == 0 ? std::optional<ConvFp16WgmmaWsPlan>(conv.plan(t.batch))
                        : conv.plan_tile(t.batch, tile.first, tile.second);
    ASSERT_TRUE(plan.has_value());
    const std::string what = "variant " + plan->name;
    test::DeviceMem d_y(size_t(t.batch) * shape.out_h * shape.out_w * t.oc * sizeof(__half));
    conv.forward(*plan, d_x.get(), d_y.get(), t.batch, nullptr);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
    expect_close(d_y.halves(), d.expected, t.batch, t.oc, shape.out_h, shape.out_w, what);
  }
}

TEST(ConvWgmmaWs, AlexNetConv3MatchesReferenceEveryTile) {
  REQUIRE_HOPPER();
  check_case({1, 192, 13, 13, 384, 3, 1, 1, true, true}, 11);
  check_case({3, 192, 13, 13, 384, 3, 1, 1, true, true}, 12);
}

TEST(ConvWgmmaWs, AlexNetConv4MatchesReferenceEveryTile) {
  REQUIRE_HOPPER();
  check_case({1, 384, 13, 13, 256, 3, 1, 1, true, true}, 21);
  check_case({3, 384, 13, 13, 256, 3, 1, 1, true, true}, 22);
}

TEST(ConvWgmmaWs, OddShapesMatchReferenceEveryTile) {
  REQUIRE_HOPPER();
  const WCase cases[] = {
      {2, 8, 7, 7, 64, 1, 1, 0, true, true},        // K = 8: one k-tile < the producer's lag
      {3, 24, 17, 17, 192, 5, 2, 2, true, true},    // stride 2, K tail 600 -> 640, N padding
      {1, 192, 13, 13, 64, 3, 2, 0, false, true},   // no ReLU: negative outputs survive
      {2, 8, 17, 17, 320, 3, 1, 1, true, false},    // no bias, taps cross k-tiles, oc 320
      {3, 24, 7, 7, 256, 5, 1, 1, true, true},      // 5x5 on 7x7, pad 1
      {1, 192, 17, 17, 192, 1, 2, 2, false, true},  // 1x1 with padding: bias-only borders
      {2, 24, 13, 13, 320, 3, 1, 2, true, true},    // pad 2 with 3x3: output 15x15
      {3, 192, 7, 7, 64, 5, 2, 2, true, true},      // K = 4800 (75 k-tiles), tiny M
  };
  uint32_t seed = 100;
  for (const WCase& t : cases) check_case(t, seed++);
}

// Long K (in_c 384, 3x3: 54 k-tiles; in_c 384, 5x5: 150) on a grid of several CTAs per SM-wave:
// the ring wraps 9-37 times per CTA, so a wrong full/empty parity deadlocks or reads a stale slot.
TEST(ConvWgmmaWs, LongKWrapsTheRingManyTimes) {
  REQUIRE_HOPPER();
  check_case({6, 384, 15, 15, 256, 3, 1, 1, true, true}, 31);  // M = 1350: 11 tiles of 128
  check_case({2, 384, 9, 9, 128, 5, 1, 2, false, true}, 32);
}

// Cost model sanity: the choice never launches more CTAs than the 128x128 tile; plan_tile
// accepts exactly the built tiles; on a 132-SM part conv4 at batch 64 (M = 10816) takes 128x256
// (85 CTAs of twice the work beat 170 CTAs in two waves).
TEST(ConvWgmmaWs, TileChoiceFollowsBatch) {
  REQUIRE_HOPPER();
  ASSERT_TRUE(ConvFp16WgmmaWs::device_supported());
  const WCase conv4{1, 384, 13, 13, 256, 3, 1, 1, true, true};
  const std::vector<float> w(size_t(256) * 384 * 9, 0.01f);
  const ConvFp16WgmmaWs conv(shape_of(conv4), w.data(), nullptr);
  for (int b : {1, 7, 64, 256}) {
    EXPECT_LE(conv.plan(b).ctas, conv.max_ctas(b)) << "batch " << b;
    EXPECT_GT(conv.plan(b).ctas, 0);
  }
  EXPECT_EQ(conv.max_ctas(64), (64LL * 169 + 127) / 128 * 2);
  if (current_sm_count() == 132) EXPECT_EQ(conv.plan(64).name, "wgmma_ws_128x256x64_s4");
  EXPECT_FALSE(conv.plan_tile(64, 64, 64).has_value());
  EXPECT_FALSE(conv.plan_tile(64, 256, 256).has_value());
  const std::optional<ConvFp16WgmmaWsPlan> tall = conv.plan_tile(64, 256, 128);
  ASSERT_TRUE(tall.has_value());
  EXPECT_EQ(tall->name, "wgmma_ws_256x128x64_s4");
  EXPECT_EQ(tall->ctas, (64LL * 169 + 255) / 256 * 2);  // M tiles x 2 N tiles of 128
  EXPECT_EQ(conv.plan_tile(7, 128, 128)->name, "wgmma_ws_128x128x64_s6");
  // A launch id means the same tile at every batch.
  EXPECT_EQ(conv.plan_tile(7, 256, 128)->variant, tall->variant);
}

// ---- registry rules -------------------------------------------------------------------------

TEST(ConvWgmmaWs, RegistryEntryIsFp16ConvBelowWgmma) {
  const KernelEntry* entry = KernelRegistry::instance().find("conv_fp16_wgmma_ws");
  ASSERT_NE(entry, nullptr);
  EXPECT_EQ(entry->op, OpKind::Conv);
  EXPECT_EQ(entry->device, Device::CUDA);
  EXPECT_EQ(entry->precision, Precision::FP16);
  EXPECT_FALSE(entry->baseline);
  const KernelEntry* wgmma = KernelRegistry::instance().find("conv_fp16_wgmma");
  ASSERT_NE(wgmma, nullptr);
  // A candidate only until measured: the existing wgmma kernel stays the default.
  EXPECT_LT(entry->priority, wgmma->priority);
  EXPECT_EQ(entry->priority, 14);
}

TEST(ConvWgmmaWs, RefusesPooledGroupedDilatedOddChannelNodes) {
  const KernelEntry* entry = KernelRegistry::instance().find("conv_fp16_wgmma_ws");
  ASSERT_NE(entry, nullptr);
  const WCase conv3{1, 192, 13, 13, 384, 3, 1, 1, true, true};
  EXPECT_TRUE(ConvFp16WgmmaWs::supports(shape_of(conv3)));
  ConvShape pooled = shape_of(conv3);
  pooled.pool = PoolAttrs{3, 3, 2, 2, 0, 0, false, true};
  pooled.derive();
  EXPECT_FALSE(ConvFp16WgmmaWs::supports(pooled));  // fused pools stay with conv_fp16_wgmma
  ConvShape grouped = shape_of(conv3);
  grouped.conv.groups = 2;
  EXPECT_FALSE(ConvFp16WgmmaWs::supports(grouped));
  ConvShape dilated = shape_of(conv3);
  dilated.conv.dilation_h = dilated.conv.dilation_w = 2;
  dilated.derive();
  EXPECT_FALSE(ConvFp16WgmmaWs::supports(dilated));
  EXPECT_FALSE(ConvFp16WgmmaWs::supports(shape_of({1, 3, 13, 13, 384, 3, 1, 1, true, true})));
  EXPECT_FALSE(ConvFp16WgmmaWs::supports(shape_of({1, 20, 13, 13, 384, 3, 1, 1, true, true})));
  EXPECT_FALSE(ConvFp16WgmmaWs::supports(shape_of({1, 192, 13, 13, 96, 3, 1, 1, true, true})));
  EXPECT_TRUE(ConvFp16WgmmaWs::supports(shape_of({1, 8, 7, 7, 320, 1, 1, 0, false, false})));

  EXPECT_FALSE(entry->supports(make_node(conv3, 1, 1, /*pool=*/true)));
  EXPECT_FALSE(entry->supports(make_node(conv3, /*groups=*/2)));
  EXPECT_FALSE(entry->supports(make_node(conv3, 1, /*dilation=*/2)));
  EXPECT_FALSE(entry->supports(make_node({1, 20, 13, 13, 384, 3, 1, 1, true, true})));
  EXPECT_FALSE(entry->supports(make_node({1, 192, 13, 13, 96, 3, 1, 1, true, true})));
  Node wrong_output = make_node(conv3);
  wrong_output.output_shape = {384, 12, 13};  // disagrees with the conv rule: refused
  EXPECT_FALSE(entry->supports(wrong_output));
  // Plain conv3: exactly when the device can run wgmma.
  EXPECT_EQ(entry->supports(make_node(conv3)), ConvFp16WgmmaWs::device_supported());
}

// A node with a missing weight is refused at build time with the layer named.
TEST(ConvWgmmaWs, CreateNamesLayerOnMissingWeight) {
  REQUIRE_HOPPER();
  const KernelEntry* entry = KernelRegistry::instance().find("conv_fp16_wgmma_ws");
  ASSERT_NE(entry, nullptr);
  Node node = make_node({1, 192, 13, 13, 384, 3, 1, 1, true, true});
  Graph graph;
  try {
    entry->create(KernelBuildContext{node, graph});
    FAIL() << "expected cnnrt::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("conv_under_test"), std::string::npos) << e.what();
  }
}

// The registry kernel runs ConvFp16 while even 128x128 tiles would leave SMs idle and the
// warp-specialised kernel from the first batch that fills them: both must match the reference.
TEST(ConvWgmmaWs, SmallBatchDispatchMatchesReference) {
  REQUIRE_HOPPER();
  ASSERT_TRUE(ConvFp16WgmmaWs::device_supported());
  const WCase probe{1, 64, 13, 13, 128, 3, 1, 1, true, true};
  const ConvShape shape = shape_of(probe);
  const int sms = current_sm_count();
  int fill_batch = 1;
  {
    const std::vector<float> w(size_t(128) * 64 * 9, 0.01f);
    const ConvFp16WgmmaWs conv(shape, w.data(), nullptr);
    ASSERT_LT(conv.max_ctas(1), sms);  // batch 1 takes the fallback
    while (conv.max_ctas(fill_batch) < sms) ++fill_batch;
  }
  for (int batch : {1, fill_batch}) {
    WCase t = probe;
    t.batch = batch;
    SCOPED_TRACE("batch " + std::to_string(batch));
    const CaseData d = make_data(t, shape, 300 + batch);
    Node node = make_node(t);
    node.params.push_back(test::make_param("weight", {t.oc, t.c, 3, 3}, d.weight));
    node.params.push_back(test::make_param("bias", {t.oc}, d.bias));
    Graph graph;
    test::EntryRunner runner(KernelRegistry::instance(), "conv_fp16_wgmma_ws", node, graph);
    // The fallback (igemm) below the batch that fills the SMs, the ws kernel from there on.
    const std::string variant = runner.prepare(batch).variant_name;
    EXPECT_NE(variant.find(batch < fill_batch ? "igemm" : "wgmma_ws"), std::string::npos)
        << variant;
    EXPECT_EQ(runner.prepare(fill_batch * 4).workspace_bytes, 0u);  // none past the fallback
    test::DeviceMem d_x(test::to_nhwc(d.x, batch, t.c, t.h, t.w));
    test::DeviceMem d_y(size_t(batch) * shape.out_h * shape.out_w * t.oc * sizeof(__half));
    runner.run({d_x.get()}, d_y.get(), batch);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    expect_close(d_y.halves(), d.expected, batch, t.oc, shape.out_h, shape.out_w, variant);
  }
}

}  // namespace
}  // namespace cnnrt::cuda
