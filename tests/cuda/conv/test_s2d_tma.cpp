// The space-to-depth convs' TMA form (runtime/cuda/conv_s2d_entries.cpp, conv_int8_s2d in
// runtime/cuda/int8_entries.cpp): x' at a 64-channel stride, the stride-1 conv on conv_fp16_tma /
// conv_int8_tma with their BN = 64 tiles.  What needs no GPU (a described H100: PlanTargetScope):
// the rewrite at a wider channel stride, the pinned entries' registry rules, and the default
// entries' choice — the TMA form for AlexNet conv1 at batches that fill the GPU, the old inner
// convs below.  The numbers are the kernel harness's (tests/harness: conv_fp16_s2d_tma and
// conv_int8_s2d_tma run every conv row they serve, the default entries the "s2d_tma" row whose
// batch takes the TMA form, as the last test here checks) and test_wgmma.cpp's
// ConvWgmma.SpaceToDepthEntryUsesWgmmaAndMatchesReference (the default entry at its first TMA
// batch against the reference).
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "cnnrt/cnnrt.h"
#include "graph/model_loader.h"
#include "graph/ops.h"
#include "kernels/cuda/conv/space_to_depth.h"
#include "kernels/cuda/conv/tma_conv.h"
#include "kernels/cuda/conv/tma_s8.h"
#include "kernels/cuda/conv/tma_window.h"
#include "kernels/cuda/device_traits.h"
#include "runtime/calibration.h"
#include "runtime/kernel.h"

namespace cnnrt::cuda {
namespace {

// AlexNet conv1 (3 -> out_c, 11x11 stride 4 pad 2 on h x w, ReLU, MaxPool 3/2) as the kernels see
// it.
ConvShape conv1_shape(int h = 224, int w = 224, int out_c = 64) {
  ConvShape s;
  s.in_c = 3;
  s.in_h = h;
  s.in_w = w;
  s.out_c = out_c;
  s.conv.out_channels = out_c;
  s.conv.kernel_h = s.conv.kernel_w = 11;
  s.conv.stride_h = s.conv.stride_w = 4;
  s.conv.pad_h = s.conv.pad_w = 2;
  s.activation = kReluActivation;
  s.pool = PoolAttrs{3, 3, 2, 2, 0, 0, false, true};
  s.derive();
  return s;
}

// The same as a fused graph node named "conv1" reading "input" (weights 0.01, no bias).
Node conv1_node(int h = 224, int w = 224, int out_c = 64) {
  Node node;
  node.name = "conv1";
  node.op = OpKind::Conv;
  ConvAttrs a;
  a.out_channels = out_c;
  a.kernel_h = a.kernel_w = 11;
  a.stride_h = a.stride_w = 4;
  a.pad_h = a.pad_w = 2;
  node.attrs = a;
  node.inputs = {"input"};
  node.input_shapes = {{3, h, w}};
  const int64_t oh = pool_output_size(h, 11, 4, 2, 1, false);
  const int64_t ow = pool_output_size(w, 11, 4, 2, 1, false);
  node.pre_pool_shape = {out_c, oh, ow};
  node.output_shape = {out_c, pool_output_size(oh, 3, 2, 0, 1, false),
                       pool_output_size(ow, 3, 2, 0, 1, false)};
  node.activation = Activation::Relu;
  node.fused_maxpool = PoolAttrs{3, 3, 2, 2, 0, 0, false, true};
  Param weight;
  weight.role = "weight";
  weight.key = "conv1.weight";
  weight.value.shape = {out_c, 3, 11, 11};
  weight.value.data.assign(size_t(out_c) * 3 * 121, 0.01f);
  node.params.push_back(weight);
  return node;
}

// The variant the registry entry `name` plans for `node` at `batch`, input as the first layer
// reads it (NCHW fp32), built for a described H100.
std::string planned_variant(const std::string& name, const Node& node, int batch,
                            const Calibration* calibration = nullptr) {
  const KernelEntry* entry = KernelRegistry::instance().find(name);
  if (entry == nullptr) return "no entry " + name;
  if (!entry->supports(node)) return name + " does not serve the node";
  Graph graph;
  graph.name = "s2d_tma_test";
  const std::unique_ptr<LayerKernel> kernel = entry->create({node, graph, calibration});
  return kernel->prepare({batch, {fp32_nchw()}}).variant_name;
}

// A calibration of the node's input and output for the int8 entries (any positive scales do).
Calibration int8_calibration() {
  Calibration calibration;
  calibration.model = "s2d_tma_test";
  calibration.method = "minmax";
  calibration.tensors["input"] = {1.0f, 1.0f / 127, "minmax"};
  calibration.tensors["conv1"] = {4.0f, 4.0f / 127, "minmax"};
  return calibration;
}

TEST(S2dTma, RewriteAtASixtyFourChannelStride) {
  const ConvShape shape = conv1_shape();
  const std::optional<SpaceToDepthConv> narrow = space_to_depth_conv(shape);
  const std::optional<SpaceToDepthConv> wide = space_to_depth_conv(shape, 64);
  ASSERT_TRUE(narrow && wide);
  EXPECT_EQ(narrow->rearrange.out_c_stride(), 48);
  EXPECT_EQ(wide->rearrange.out_c(), 48);
  EXPECT_EQ(wide->rearrange.out_c_stride(), 64);
  EXPECT_EQ(wide->transformed.in_c, 64);
  EXPECT_EQ(wide->transformed.in_h, 57);
  EXPECT_EQ(wide->transformed.conv.kernel_h, 3);
  EXPECT_EQ(wide->transformed.conv_h, 55);
  EXPECT_EQ(wide->transformed.out_h, 27);
  EXPECT_EQ(space_to_depth_bytes(wide->rearrange, 2), size_t(2) * 57 * 57 * 64 * 2);
  EXPECT_TRUE(ConvFp16Tma::supports(wide->transformed));
  EXPECT_FALSE(ConvFp16Tma::supports(narrow->transformed));  // in_c 48: not a 64-channel box

  // w' at the wide stride: the narrow one's values on channels 0..47, zeros on 48..63.
  std::vector<float> w(size_t(64) * 3 * 121);
  for (size_t i = 0; i < w.size(); ++i) w[i] = float(i % 97) - 48.0f;
  const std::vector<float> wn = space_to_depth_weights(*narrow, w.data());
  const std::vector<float> ww = space_to_depth_weights(*wide, w.data());
  ASSERT_EQ(ww.size(), size_t(64) * 64 * 9);
  size_t differ = 0, nonzero_padding = 0;
  for (int o = 0; o < 64; ++o)
    for (int c = 0; c < 64; ++c)
      for (int t = 0; t < 9; ++t) {
        const float v = ww[(size_t(o) * 64 + c) * 9 + t];
        if (c >= 48)
          nonzero_padding += v != 0.0f;
        else
          differ += v != wn[(size_t(o) * 48 + c) * 9 + t];
      }
  EXPECT_EQ(differ, 0u);
  EXPECT_EQ(nonzero_padding, 0u);

  // A stride that is not a multiple of 8, or narrower than the 48 real channels: no rewrite.
  EXPECT_FALSE(space_to_depth_conv(shape, 60).has_value());
  EXPECT_FALSE(space_to_depth_conv(shape, 40).has_value());
}

TEST(S2dTma, PinnedInnerConvsAreComparisonEntries) {
  const KernelRegistry& registry = KernelRegistry::instance();
  const KernelEntry* fp16 = registry.find("conv_fp16_s2d");
  const KernelEntry* int8 = registry.find("conv_int8_s2d");
  ASSERT_NE(fp16, nullptr);
  ASSERT_NE(int8, nullptr);
  EXPECT_FALSE(fp16->baseline);
  for (const char* name : {"conv_fp16_s2d_window", "conv_fp16_s2d_tma", "conv_fp16_s2d_wgmma",
                           "conv_int8_s2d_tma", "conv_int8_s2d_wgmma", "conv_int8_s2d_window3"}) {
    const KernelEntry* pinned = registry.find(name);
    ASSERT_NE(pinned, nullptr) << name;
    // Timed by profile --compare and run by the harness, never the builder's nor the automatic
    // plan's choice: below the default entry, marked baseline.
    EXPECT_TRUE(pinned->baseline) << name;
    EXPECT_LT(pinned->priority, (pinned->precision == Precision::INT8 ? int8 : fp16)->priority)
        << name;
  }
  EXPECT_TRUE(registry.find("conv_fp16_s2d_tma")->residual);  // as conv_fp16_s2d: the add pass
}

// The builder's default on a described H100: conv1 stays conv_fp16_s2d, whose inner conv is the
// window form at every batch (conv_fp16_window over x' at 48 channels, the staged pool).  The
// workspace holds x' and the pre-pool tensor.
TEST(S2dTma, DefaultEntryTakesTheWindowFormForAlexNetConv1OnH100) {
  {
    PlanTargetScope h100(target_traits("h100"));
    if (!ConvFp16Tma::device_supported()) GTEST_SKIP() << "a build without the sm_90a image";
  }
  Graph graph = load_model(std::string(CNNRT_SOURCE_DIR) + "/models/alexnet.yaml");
  bind_random_weights(graph, 7);
  BuildOptions options;
  options.device = Device::CUDA;
  options.plan_target = "h100";
  const std::shared_ptr<Engine> engine = Engine::build(std::move(graph), options);
  for (int batch : {1, 64, 256}) {
    const ExecutionPlan plan = engine->plan(batch);
    ASSERT_FALSE(plan.steps.empty());
    const PlannedStep& conv1 = plan.steps[0];
    EXPECT_EQ(conv1.kernel, "conv_fp16_s2d");
    // x' at its 48 channels, read by the TMA as 64 (zero fill): no 64-channel copy.
    EXPECT_EQ(conv1.variant.rfind("s2d48+window_3x3_n128+maxpool", 0), 0u)
        << "batch " << batch << ": " << conv1.variant;
    EXPECT_NE(conv1.variant.find("reads fp32 NCHW"), std::string::npos) << conv1.variant;
    const size_t rearranged = (size_t(batch) * 57 * 57 * 48 * 2 + 255) / 256 * 256;
    EXPECT_EQ(conv1.workspace_bytes,
              rearranged + (size_t(batch) * 55 * 55 * 64 * 2 + 255) / 256 * 256);
  }
}

// The TMA form's own plan for conv1 at batch 256 on an H100: the model's time (the prediction of
// docs/kernels/space_to_depth.md, "The TMA inner conv") and its tile.
TEST(S2dTma, Conv1PlanAndModelOnH100) {
  PlanTargetScope h100(target_traits("h100"));
  if (!ConvFp16Tma::device_supported()) GTEST_SKIP() << "a build without the sm_90a image";
  const std::optional<SpaceToDepthConv> wide = space_to_depth_conv(conv1_shape(), 64);
  ASSERT_TRUE(wide.has_value());
  const std::vector<float> w(size_t(64) * 64 * 9, 0.01f);
  const ConvFp16Tma conv(wide->transformed, w.data(), nullptr);
  const ConvFp16TmaPlan staged = conv.plan_staged(256), fused = conv.plan_fused(256);
  EXPECT_TRUE(staged.staged);
  EXPECT_EQ(staged.units, 3025);     // 256 x 55 x 55 rows / 256, one n tile
  EXPECT_EQ(fused.units, 256 * 27);  // one pooled row (3 conv rows of 55) per 256-row tile
  EXPECT_LT(staged.estimated_us, fused.estimated_us);
  // 23 waves of 256x64 at K 576 (speed 0.7: a guess) + the pool pass over 99 + 24 MB.
  EXPECT_NEAR(staged.estimated_us, 161, 3);
  EXPECT_EQ(conv.plan(256).variant, staged.variant);
}

// The window conv's shape rule: conv1's rewrite over x' as stored (48 channels of a 64-channel
// K) and its neighbours it must refuse.
TEST(S2dTma, WindowConvServesConv1sRewriteOnly) {
  const std::optional<SpaceToDepthConv> wide = space_to_depth_conv(conv1_shape(), 64);
  ASSERT_TRUE(wide.has_value());
  const ConvShape& s = wide->transformed;
  EXPECT_TRUE(ConvFp16Window::supports(s, 48));
  EXPECT_TRUE(ConvFp16Window::supports(s, 64));
  EXPECT_FALSE(ConvFp16Window::supports(s, 32));  // fewer than 3 k16 steps: no instance
  EXPECT_FALSE(ConvFp16Window::supports(s, 44));  // not a multiple of 8
  ConvShape padded = s;
  padded.conv.pad_h = padded.conv.pad_w = 1;
  EXPECT_FALSE(ConvFp16Window::supports(padded, 48));
  ConvShape strided = s;
  strided.conv.stride_h = strided.conv.stride_w = 2;
  EXPECT_FALSE(ConvFp16Window::supports(strided, 48));
  ConvShape wide_out = s;
  wide_out.out_c = wide_out.conv.out_channels = 96;
  EXPECT_FALSE(ConvFp16Window::supports(wide_out, 48));
  ConvShape long_rows = s;
  long_rows.in_w = 64;  // a 128-pixel window's halo past its 256-pixel slab
  EXPECT_FALSE(ConvFp16Window::supports(long_rows, 48));
  ConvShape residual = s;
  residual.residual = true;
  EXPECT_FALSE(ConvFp16Window::supports(residual, 48));
}

// conv_int8_window's shape rule with x' stored at fewer bytes than its 64-byte rows: a multiple
// of 16 from in_c to 64 (AlexNet conv1: 48 real channels, stored at 48; the TMA fills the rest).
// conv1's rewritten stride-1 conv as conv_int8_window sees it (57x57 x' at a 64-byte stride).
S8Conv conv1_window_conv() {
  S8Conv c;
  c.in_c = 48;
  c.in_stride = 64;
  c.in_h = c.in_w = 57;
  c.out_c = c.out_stride = 64;
  c.out_h = c.out_w = 55;
  c.kh = c.kw = 3;
  c.k_total = c.k_pad = 9 * 64;
  return c;
}

TEST(S2dTma, Int8WindowTakesXPrimeStoredAtItsPad16Stride) {
  const S8Conv c = conv1_window_conv();
  EXPECT_TRUE(ConvS8Window::supports(c));  // stored at in_stride
  EXPECT_TRUE(ConvS8Window::supports(c, 48));
  EXPECT_TRUE(ConvS8Window::supports(c, 64));
  EXPECT_FALSE(ConvS8Window::supports(c, 40));  // not a multiple of 16
  EXPECT_FALSE(ConvS8Window::supports(c, 32));  // fewer bytes than channels
  EXPECT_FALSE(ConvS8Window::supports(c, 80));  // past the 64-byte row
  S8Conv float_out = c;
  float_out.float_output = true;
  EXPECT_FALSE(ConvS8Window::supports(float_out, 48));
}

// The window conv's quantising form (tma_window_quantise.cuh; tests/cuda/conv/
// test_window_quantise.cpp runs it): AlexNet's conv1 rearrangement and what it refuses.
TEST(S2dTma, Int8WindowQuantisesTheFourByFourRearrangementOfThreeChannels) {
  const S8Conv c = conv1_window_conv();
  const S8SpaceToDepth s2d{3, 224, 224, 4, 2, 2, 57, 57, 48, 2.0f / 127};
  EXPECT_TRUE(ConvS8Window::quantise_serves(c, s2d));
  S8SpaceToDepth other = s2d;
  other.s = 2;
  EXPECT_FALSE(ConvS8Window::quantise_serves(c, other));
  other = s2d;
  other.input_scale = 0;
  EXPECT_FALSE(ConvS8Window::quantise_serves(c, other));
  other = s2d;
  other.pad_w = 3;  // x' columns at an odd box column: not served
  EXPECT_FALSE(ConvS8Window::quantise_serves(c, other));
  other = s2d;
  other.w = 222;  // rows of x not a multiple of 16 bytes: no TMA map
  EXPECT_FALSE(ConvS8Window::quantise_serves(c, other));
  S8Conv wide = c;
  wide.in_w = 59;  // 240 box columns: past a ring slot
  other = s2d;
  other.blocks_w = 59;
  EXPECT_FALSE(ConvS8Window::quantise_serves(wide, other));
}

// conv_int8_s2d on a described H100: its GEMM is conv_int8_window at every batch (the window
// conv's int8 instance) over x' stored at 48 bytes a pixel (the TMA fills the rest of each
// 64-byte row), on two consumer warpgroups at batch 1 (26 units: one a CTA) and three at 256;
// conv_int8_s2d_window2 / _window3 pin two / three, conv_int8_s2d_quantise the quantising form
// (the fp32 input read by the conv's producer: no x'); conv_int8_s2d_tma pins conv_int8_tma
// (paired 64-byte k-tile rows, 256x64 at 256), conv_int8_s2d_wgmma the wgmma GEMM.
TEST(S2dTma, Int8DefaultEntryTakesTheWindowConvForAlexNetConv1OnH100) {
  PlanTargetScope h100(target_traits("h100"));
  if (!ConvS8Tma::device_supported()) GTEST_SKIP() << "a build without the sm_90a image";
  const Node node = conv1_node();
  const Calibration calibration = int8_calibration();
  const std::string b1 = planned_variant("conv_int8_s2d", node, 1, &calibration);
  EXPECT_EQ(b1.rfind("quantise+s2d48+window_s8_3x3_n128+pool", 0), 0u) << b1;
  const std::string b256 = planned_variant("conv_int8_s2d", node, 256, &calibration);
  EXPECT_EQ(b256.rfind("quantise+s2d48+window_s8x3_3x3_n128+pool", 0), 0u) << b256;
  for (int batch : {1, 256}) {
    const std::string two = planned_variant("conv_int8_s2d_window2", node, batch, &calibration);
    EXPECT_EQ(two.rfind("quantise+s2d48+window_s8_3x3_n128+pool", 0), 0u) << two;
    const std::string q = planned_variant("conv_int8_s2d_quantise", node, batch, &calibration);
    EXPECT_EQ(q.rfind("quantise-s2d-in-window_s8_3x3_n128+pool", 0), 0u) << q;
  }
  const std::string pinned = planned_variant("conv_int8_s2d_tma", node, 256, &calibration);
  EXPECT_EQ(pinned.rfind("quantise+s2d64+tma_s8_256x64_k64x2_", 0), 0u) << pinned;
  const std::string pinned1 = planned_variant("conv_int8_s2d_tma", node, 1, &calibration);
  EXPECT_NE(pinned1.find("s2d64+tma_s8_"), std::string::npos) << pinned1;
  const std::string wgmma = planned_variant("conv_int8_s2d_wgmma", node, 256, &calibration);
  EXPECT_EQ(wgmma.rfind("quantise+s2d+wgmma", 0), 0u) << wgmma;
  ASSERT_TRUE(KernelRegistry::instance().find("conv_int8_s2d_window3")->supports(node));
  for (int batch : {1, 256}) {
    const std::string three = planned_variant("conv_int8_s2d_window3", node, batch, &calibration);
    EXPECT_EQ(three.rfind("quantise+s2d48+window_s8x3_3x3_n128+pool", 0), 0u) << three;
  }
}

// conv_int8_s2d_window3_pool (the window conv pooling its own output, tma_window_pool.cuh): a
// comparison entry that plans its band pool at every batch, and serves only a conv whose fused
// max-pool it can take (3x3 / 2, no padding, floor mode).
TEST(S2dTma, Int8PoolingFormServesOnlyThePoolItTakes) {
  PlanTargetScope h100(target_traits("h100"));
  if (!ConvS8Tma::device_supported()) GTEST_SKIP() << "a build without the sm_90a image";
  const Node node = conv1_node();
  const Calibration calibration = int8_calibration();
  const KernelEntry* entry = KernelRegistry::instance().find("conv_int8_s2d_window3_pool");
  ASSERT_NE(entry, nullptr);
  ASSERT_TRUE(entry->supports(node));
  for (int batch : {1, 256})
    EXPECT_EQ(planned_variant("conv_int8_s2d_window3_pool", node, batch, &calibration),
              "quantise+s2d48+window_s8x3_3x3_n128+bandpool");
  // The default entry never takes it (2x slower, docs/PERFORMANCE.md run 52).
  EXPECT_EQ(planned_variant("conv_int8_s2d", node, 256, &calibration).find("bandpool"),
            std::string::npos);
  Node no_pool = node;
  no_pool.fused_maxpool.reset();
  no_pool.output_shape = no_pool.pre_pool_shape;
  EXPECT_TRUE(KernelRegistry::instance().find("conv_int8_s2d_window3")->supports(no_pool));
  EXPECT_FALSE(entry->supports(no_pool));
  Node two_by_two = node;  // a 2x2 / 2 pool (55 -> 27): not the bands' 3x3 windows
  two_by_two.fused_maxpool = PoolAttrs{2, 2, 2, 2, 0, 0, false, true};
  two_by_two.output_shape = {64, 27, 27};
  EXPECT_TRUE(KernelRegistry::instance().find("conv_int8_s2d_window3")->supports(two_by_two));
  EXPECT_FALSE(entry->supports(two_by_two));
}

// The kernel harness's "s2d_tma" row (tests/harness/conv_cases.cpp) is there for the default
// entries' forms over a filled GPU: at its batch (and one less), on a 132-SM H100, conv_fp16_s2d
// and conv_int8_s2d plan the window conv, as at every batch; the pinned TMA forms run the row
// too.
TEST(S2dTma, HarnessRowTakesTheWindowAndTmaForms) {
  PlanTargetScope h100(target_traits("h100"));
  if (!ConvFp16Tma::device_supported()) GTEST_SKIP() << "a build without the sm_90a image";
  constexpr int kH = 224, kW = 224, kOutC = 32, kBatch = 12;  // the harness row
  const Node node = conv1_node(kH, kW, kOutC);
  const Calibration calibration = int8_calibration();
  const std::string fp16 = planned_variant("conv_fp16_s2d", node, kBatch);
  const std::string int8 = planned_variant("conv_int8_s2d", node, kBatch, &calibration);
  EXPECT_NE(fp16.find("s2d48+window_"), std::string::npos) << fp16;
  EXPECT_NE(int8.find("s2d48+window_s8x3_"), std::string::npos) << int8;  // 305 units
  const std::string fp16_below = planned_variant("conv_fp16_s2d", node, kBatch - 1);
  const std::string int8_below = planned_variant("conv_int8_s2d", node, kBatch - 1, &calibration);
  EXPECT_NE(fp16_below.find("s2d48+window_"), std::string::npos) << fp16_below;
  EXPECT_NE(int8_below.find("s2d48+window_s8x3_"), std::string::npos) << int8_below;
}

}  // namespace
}  // namespace cnnrt::cuda
