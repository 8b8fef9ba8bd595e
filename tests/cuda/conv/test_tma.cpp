// conv_fp16_tma (kernels/cuda/conv/tma_conv.h): its registry rules, its shape rule, and the
// default tile choice, which needs no GPU (a described H100: PlanTargetScope, plan_only) and so
// runs on every CUDA build.  The kernel's numbers are checked by the kernel harness
// (tests/harness: every pinned tile entry runs every conv row it serves, batch 1 and 3 included,
// and conv_fp16_tma itself the rows whose grid fills the GPU) and bench/conv_tma_lab.cu; the
// 64-byte k-tile rows (in_c % 64 == 32) also here, on a Hopper GPU (skipped without one): every
// tile and epilogue form against the CPU reference with wgmma_test_cases.h's fp16 tolerances.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "cnnrt/cnnrt.h"
#include "cuda/conv/wgmma_test_cases.h"
#include "cuda/fp16_test_util.h"
#include "graph/model_loader.h"
#include "kernels/cuda/conv/tma_conv.h"
#include "kernels/cuda/device_traits.h"
#include "runtime/kernel.h"

namespace cnnrt::cuda {
namespace {

ConvShape conv(int in_c, int hw, int out_c, int k, int pad, int stride = 1) {
  ConvShape s;
  s.in_c = in_c;
  s.in_h = s.in_w = hw;
  s.out_c = out_c;
  s.conv.out_channels = out_c;
  s.conv.kernel_h = s.conv.kernel_w = k;
  s.conv.stride_h = s.conv.stride_w = stride;
  s.conv.pad_h = s.conv.pad_w = pad;
  s.activation = kReluActivation;
  s.derive();
  return s;
}

TEST(ConvTma, RegistryEntryIsPreferredOverWgmmaAndItsTilesAreCandidates) {
  const KernelRegistry& registry = KernelRegistry::instance();
  const KernelEntry* tma = registry.find("conv_fp16_tma");
  const KernelEntry* wgmma = registry.find("conv_fp16_wgmma");
  ASSERT_NE(tma, nullptr);
  ASSERT_NE(wgmma, nullptr);
  EXPECT_GT(tma->priority, wgmma->priority);
  EXPECT_TRUE(tma->residual);
  EXPECT_FALSE(tma->baseline);
  std::vector<std::string> pinned_names = ConvFp16Tma::tile_names();
  pinned_names.push_back("staged");  // the staged MaxPool form (convs with a fused pool)
  for (const std::string& tile : pinned_names) {
    const KernelEntry* pinned = registry.find("conv_fp16_tma_" + tile);
    ASSERT_NE(pinned, nullptr) << tile;
    // Timed by profile --compare, never the builder's default nor the automatic plan's choice.
    EXPECT_LT(pinned->priority, wgmma->priority) << tile;
    EXPECT_TRUE(pinned->baseline) << tile;
    EXPECT_TRUE(pinned->residual) << tile;
  }
}

TEST(ConvTma, ShapeRule) {
  EXPECT_TRUE(ConvFp16Tma::supports(conv(64, 27, 192, 5, 2)));   // AlexNet conv2 without pool
  EXPECT_TRUE(ConvFp16Tma::supports(conv(192, 13, 200, 3, 1)));  // out_c % 8, not % 64
  EXPECT_TRUE(ConvFp16Tma::supports(conv(128, 13, 8, 1, 0, 2)));
  ConvShape same = conv(128, 14, 72, 3, 0, 2);  // TF-SAME: bottom/right padding only
  same.conv.pad_h_extra = same.conv.pad_w_extra = 1;
  same.derive();
  EXPECT_TRUE(ConvFp16Tma::supports(same));
  ConvShape residual = conv(64, 13, 64, 1, 0);
  residual.residual = true;
  EXPECT_TRUE(ConvFp16Tma::supports(residual));

  // in_c % 64 == 32: 64-byte k-tile rows (channel-pruned AlexNet conv2 / conv3, a 1x1 over 160).
  EXPECT_TRUE(ConvFp16Tma::supports(conv(32, 27, 96, 5, 2)));
  EXPECT_TRUE(ConvFp16Tma::supports(conv(96, 13, 192, 3, 1)));
  EXPECT_TRUE(ConvFp16Tma::supports(conv(160, 7, 64, 1, 0)));

  EXPECT_FALSE(ConvFp16Tma::supports(conv(48, 27, 64, 3, 1)));     // in_c % 32 (conv1's s2d form)
  EXPECT_FALSE(ConvFp16Tma::supports(conv(16, 27, 64, 3, 1)));     // in_c % 32
  EXPECT_FALSE(ConvFp16Tma::supports(conv(64, 27, 12, 3, 1)));     // out_c % 8
  EXPECT_FALSE(ConvFp16Tma::supports(conv(64, 27, 64, 3, 1, 9)));  // traversal stride <= 8
  ConvShape pooled = conv(256, 13, 256, 3, 1);                     // AlexNet conv5 + MaxPool 3/2
  pooled.pool = PoolAttrs{3, 3, 2, 2, 0, 0, false, true};
  pooled.derive();
  EXPECT_TRUE(ConvFp16Tma::supports(pooled));
  const std::vector<std::string>& tiles = ConvFp16Tma::tile_names();
  for (size_t t = 0; t < tiles.size(); ++t)  // 128x128 has no pooled instance (shared memory)
    EXPECT_EQ(ConvFp16Tma::supports(pooled, int(t)), tiles[t] != "128x128") << tiles[t];
  ConvShape pooled_residual = pooled;  // the family never combines the two
  pooled_residual.residual = true;
  EXPECT_FALSE(ConvFp16Tma::supports(pooled_residual));
  ConvShape wide_pool = conv(64, 120, 64, 3, 1);  // one pooled row's windows: 3 x 120 > 256 pixels
  wide_pool.pool = PoolAttrs{3, 3, 2, 2, 0, 0, false, true};
  wide_pool.derive();
  EXPECT_FALSE(ConvFp16Tma::supports(wide_pool));
  ConvShape dilated = conv(64, 27, 64, 3, 2);
  dilated.conv.dilation_h = dilated.conv.dilation_w = 2;
  dilated.derive();
  EXPECT_FALSE(ConvFp16Tma::supports(dilated));
  ConvShape grouped = conv(128, 13, 128, 3, 1);
  grouped.conv.groups = 2;
  EXPECT_FALSE(ConvFp16Tma::supports(grouped));
}

// The wave model picks the lab's fastest tile for each AlexNet layer at batch 64 and 256 (H100,
// docs/kernels/conv_fp16_tma.md): BN 192 where out_c is 192, 256x128 for out_c 384, 128x256 for
// out_c 256.
TEST(ConvTma, DefaultTileIsTheLabsWinnerOnAlexNet) {
  PlanTargetScope h100(target_traits("h100"));
  if (!ConvFp16Tma::device_supported()) GTEST_SKIP() << "a build without the sm_90a image";
  struct Layer {
    ConvShape shape;
    const char* tile64;   // batch 64
    const char* tile256;  // batch 256
  };
  // conv_lab --tma (docs/PERFORMANCE.md runs 36d-e): the out_c 256 convs take 256x96 at batch 64
  // (two full waves of 3 n tiles; conv4 0.0350 ms against 128x256's 0.0406) and 128x256 at 256.
  const std::vector<Layer> layers = {{conv(64, 27, 192, 5, 2), "128x192", "128x192"},
                                     {conv(192, 13, 384, 3, 1), "256x128", "256x128"},
                                     {conv(384, 13, 256, 3, 1), "256x96", "128x256"},
                                     {conv(256, 13, 256, 3, 1), "256x96", "128x256"}};
  // ... and the pooled forms' fused tiles: conv2 + pool 3/2 takes 256x96 (9 conv rows of 27 per
  // tile, two exact n tiles), conv5 + pool 3/2 256x128 at batch 256 (8 pooled rows per tile, 384
  // units: 3 waves) and 128x256 at batch 64 (one wave either way, the larger tile area loses).
  ConvShape conv2 = conv(64, 27, 192, 5, 2), conv5 = conv(256, 13, 256, 3, 1);
  for (ConvShape* s : {&conv2, &conv5}) {
    s->pool = PoolAttrs{3, 3, 2, 2, 0, 0, false, true};
    s->derive();
  }
  {
    const std::vector<float> w2(size_t(192) * 64 * 25, 0.01f), w5(size_t(256) * 256 * 9, 0.01f);
    const ConvFp16Tma k2(conv2, w2.data(), nullptr), k5(conv5, w5.data(), nullptr);
    EXPECT_NE(k2.plan_fused(256).name.find("256x96"), std::string::npos) << k2.plan_fused(256).name;
    EXPECT_NE(k2.plan_fused(64).name.find("256x96"), std::string::npos) << k2.plan_fused(64).name;
    EXPECT_EQ(k2.plan_fused(256).units, 256 / 2 * 7 * 2);  // 7 tiles per 2 images, 2 n tiles
    EXPECT_NE(k5.plan_fused(256).name.find("256x128"), std::string::npos)
        << k5.plan_fused(256).name;
    EXPECT_EQ(k5.plan_fused(256).units, 256 / 4 * 3 * 2);  // 3 tiles per 4 images, 2 n tiles
    EXPECT_NE(k5.plan_fused(64).name.find("128x256"), std::string::npos) << k5.plan_fused(64).name;
  }
  for (const Layer& layer : layers) {
    const ConvShape& s = layer.shape;
    const std::vector<float> weight(size_t(s.out_c) * s.in_c * s.conv.kernel_h * s.conv.kernel_w,
                                    0.01f);
    const ConvFp16Tma kernel(s, weight.data(), nullptr);
    for (int batch : {64, 256}) {
      const ConvFp16TmaPlan plan = kernel.plan(batch);
      EXPECT_NE(plan.name.find(batch == 64 ? layer.tile64 : layer.tile256), std::string::npos)
          << "in_c " << s.in_c << " out_c " << s.out_c << " batch " << batch << ": " << plan.name;
      EXPECT_LE(plan.ctas, 132);
    }
  }
}

// Fused or staged MaxPool (tma_conv.cu's cost model) on a described H100: AlexNet conv2 (27x27,
// 19 % of the fused tiling's rows recomputed, the slower 256x96 tile) runs staged — 128x192 into
// the pre-pool workspace, then maxpool_fp16 — at batch 64 and 256; conv5 (13x13 -> 6x6: a small
// pre-pool tensor, but the fused 256x128 / 128x256 tilings lose no wave) stays fused at batch 256;
// at 64 its two forms tie (the staged one on 256x96).
TEST(ConvTma, StagedPoolIsChosenForAlexNetConv2AndFusedForConv5) {
  PlanTargetScope h100(target_traits("h100"));
  if (!ConvFp16Tma::device_supported()) GTEST_SKIP() << "a build without the sm_90a image";
  ConvShape conv2 = conv(64, 27, 192, 5, 2), conv5 = conv(256, 13, 256, 3, 1);
  for (ConvShape* s : {&conv2, &conv5}) {
    s->pool = PoolAttrs{3, 3, 2, 2, 0, 0, false, true};
    s->derive();
  }
  const std::vector<float> w2(size_t(192) * 64 * 25, 0.01f), w5(size_t(256) * 256 * 9, 0.01f);
  const ConvFp16Tma k2(conv2, w2.data(), nullptr), k5(conv5, w5.data(), nullptr);
  for (int batch : {64, 256}) {
    const ConvFp16TmaPlan staged2 = k2.plan_staged(batch), fused2 = k2.plan_fused(batch);
    EXPECT_TRUE(staged2.staged);
    EXPECT_FALSE(fused2.staged);
    EXPECT_EQ(fused2.workspace_bytes, 0u);
    EXPECT_NE(staged2.name.find("128x192"), std::string::npos) << staged2.name;
    EXPECT_NE(staged2.name.find("maxpool"), std::string::npos) << staged2.name;
    EXPECT_EQ(staged2.workspace_bytes, size_t(batch) * 27 * 27 * 192 * 2);  // the pre-pool tensor
    EXPECT_EQ(staged2.variant, ConvFp16Tma::kStagedVariant + 1);            // tile 1 = 128x192
    EXPECT_LT(staged2.estimated_us, fused2.estimated_us) << "batch " << batch;
    const ConvFp16TmaPlan chosen2 = k2.plan(batch);
    EXPECT_TRUE(chosen2.staged) << chosen2.name;
    EXPECT_EQ(chosen2.variant, staged2.variant);

    // conv5: fused at batch 256; at batch 64 the staged form on 256x96 and the fused one are
    // within 1 % in the model (27.7 vs 28.0 us) and measured (0.0333 vs 0.0331 ms, run 36e), so
    // only "the cheaper modelled form is the one chosen" is asserted there.
    const ConvFp16TmaPlan staged5 = k5.plan_staged(batch), fused5 = k5.plan_fused(batch);
    EXPECT_NE(staged5.name.find(batch == 64 ? "256x96" : "128x256"), std::string::npos)
        << staged5.name;
    const ConvFp16TmaPlan chosen5 = k5.plan(batch);
    EXPECT_EQ(chosen5.variant,
              staged5.estimated_us < fused5.estimated_us ? staged5.variant : fused5.variant);
    if (batch == 256) {
      EXPECT_LT(fused5.estimated_us, staged5.estimated_us);
      EXPECT_FALSE(chosen5.staged) << chosen5.name;
    }
  }
  // The model against the H100 measurements at batch 256 (docs/kernels/conv_fp16_tma.md, the
  // staged pool variant): fused conv2 0.251 ms, staged conv2 0.227-0.231, fused conv5 0.089,
  // staged conv5 0.096.  The model runs ~10 % low on conv2, both forms alike.
  EXPECT_NEAR(k2.plan_fused(256).estimated_us, 251, 30);
  EXPECT_NEAR(k2.plan_staged(256).estimated_us, 229, 25);
  EXPECT_NEAR(k5.plan_fused(256).estimated_us, 89, 10);
  EXPECT_NEAR(k5.plan_staged(256).estimated_us, 96, 10);
  // Unpooled convs have no staged form.
  EXPECT_ANY_THROW(ConvFp16Tma(conv(64, 27, 192, 5, 2), w2.data(), nullptr).plan_staged(64));
}

// The builder's default on a described H100: AlexNet's conv2-conv5 take conv_fp16_tma at batch
// 64, the pooled conv2 / conv5 included (the fused MaxPool).
TEST(ConvTma, IsTheH100DefaultForAlexNetsConv2ToConv5) {
  {
    PlanTargetScope h100(target_traits("h100"));
    if (!ConvFp16Tma::device_supported()) GTEST_SKIP() << "a build without the sm_90a image";
  }
  Graph graph = load_model(std::string(CNNRT_SOURCE_DIR) + "/models/alexnet.yaml");
  bind_random_weights(graph, 7);
  BuildOptions options;
  options.device = Device::CUDA;
  options.plan_target = "h100";
  const ExecutionPlan plan = Engine::build(std::move(graph), options)->plan(64);
  std::string kernels;
  for (const PlannedStep& step : plan.steps) kernels += step.name + " " + step.kernel + "\n";
  for (const PlannedStep& step : plan.steps) {
    if (step.name == "conv2" || step.name == "conv3" || step.name == "conv4" ||
        step.name == "conv5")
      EXPECT_EQ(step.kernel, "conv_fp16_tma") << kernels;
  }
  EXPECT_NE(kernels.find("conv_fp16_tma"), std::string::npos) << kernels;
}

// ---- 64-byte k-tile rows (in_c % 64 == 32) -------------------------------------------------

using wgmma_test::at_batch;
using wgmma_test::FusedCase;
using wgmma_test::WCase;

// Channel-pruned AlexNet (`cnnrt prune --channels 0.5`, compacted): conv2 32 -> 96 (5x5, pool
// 3/2) and conv3 96 -> 192 (3x3), the shapes the 64-byte rows were made for.
const WCase kPrunedConv2{1, 32, 27, 27, 96, 5, 1, 2, true, true};
const WCase kPrunedConv3{1, 96, 13, 13, 192, 3, 1, 1, true, true};

// On a described H100: the 64-byte instances' names, the model's tiles for the pruned layers at
// batch 256 (tma_conv.cu, "64-byte rows": a k-tile costs at least (bm + bn) x 1.7 ns) and the
// stored-channel rule of 32-channel blocks; the 128-byte names are unchanged.
TEST(ConvTma, Rows64PlanOnADescribedH100) {
  PlanTargetScope h100(target_traits("h100"));
  if (!ConvFp16Tma::device_supported()) GTEST_SKIP() << "a build without the sm_90a image";
  const ConvShape conv2 = wgmma_test::shape_of_case({kPrunedConv2, true});
  const ConvShape conv3 = wgmma_test::shape_of(kPrunedConv3);
  const std::vector<float> w2(size_t(96) * 32 * 25, 0.01f), w3(size_t(192) * 96 * 9, 0.01f);
  const ConvFp16Tma k2(conv2, w2.data(), nullptr), k3(conv3, w3.data(), nullptr);
  // conv2: 25 k-tiles of 32 channels; 256x96 (one exact n tile) fused — 7 tiles per 2 images,
  // 896 units, 7 waves of 25 x 352 rows x 1.7 ns = 15 us — or staged (its unpooled conv 6
  // waves + the pool pass): the model's two forms are within 5 %, so only the tile is asserted.
  const ConvFp16TmaPlan p2 = k2.plan(256);
  EXPECT_NE(p2.name.find("tma_256x96_k64_s8"), std::string::npos) << p2.name;
  EXPECT_EQ(k2.plan_fused(256).units, 256 / 2 * 7);
  EXPECT_NEAR(k2.plan_fused(256).estimated_us, 7 * 25 * 352 * 1.7e-3, 1.0);
  EXPECT_NE(k2.plan_staged(256).name.find("256x96_k64"), std::string::npos);
  EXPECT_LT(p2.estimated_us, 120);
  // conv3: 27 k-tiles (9 taps x 3 blocks); 128x192 — 338 units, 3 waves of 27 x 320 x 1.7 ns.
  const ConvFp16TmaPlan p3 = k3.plan(256);
  EXPECT_EQ(p3.name, "tma_128x192_k64_s10");
  EXPECT_NEAR(p3.estimated_us, 3 * 27 * 320 * 1.7e-3, 1.0);
  // The 128-byte instances keep their names (AlexNet conv3: in_c 192).
  const ConvShape dense3 = conv(192, 13, 384, 3, 1);
  const std::vector<float> wd(size_t(384) * 192 * 9, 0.01f);
  EXPECT_EQ(ConvFp16Tma(dense3, wd.data(), nullptr).plan(256, 3).name, "tma_256x128_s4");
  // stored_in_c: a multiple of 8 within the last 32-channel block (in_c 96: 72..96).
  EXPECT_NO_THROW(ConvFp16Tma(conv3, w3.data(), nullptr, 72));
  EXPECT_ANY_THROW(ConvFp16Tma(conv3, w3.data(), nullptr, 64));
}

// One 64-byte case on the GPU: every tile that serves it (pinned; a pooled case fused where the
// tile has a pooled instance, and the staged form) and the default plan, each checked against
// the CPU reference with NaN-poisoned output (an element never written fails).
void check_rows64(const FusedCase& fc, uint32_t seed) {
  const WCase& t = fc.conv;
  SCOPED_TRACE(wgmma_test::describe(fc));
  EXPECT_TRUE(ConvFp16Tma::device_supported())
      << "compute capability 9.0 device but no sm_90a image: is 90 in CMAKE_CUDA_ARCHITECTURES?";
  if (!ConvFp16Tma::device_supported()) return;
  const ConvShape shape = wgmma_test::shape_of_case(fc);
  ASSERT_TRUE(ConvFp16Tma::supports(shape));
  ASSERT_EQ(t.c % 64, 32) << "a 64-byte-row case";

  std::mt19937 rng(seed);
  const std::vector<float> x = test::random_fp16_values(size_t(t.batch) * t.c * t.h * t.w, rng);
  const float w_scale = 1.0f / std::sqrt(float(t.c * t.k * t.k));
  const std::vector<float> weight =
      test::random_fp16_values(size_t(t.oc) * t.c * t.k * t.k, rng, -w_scale, w_scale);
  const std::vector<float> bias = test::random_fp16_values(t.oc, rng, -0.5f, 0.5f);
  const size_t conv_image = size_t(t.oc) * shape.conv_h * shape.conv_w;
  std::vector<float> r;
  if (fc.residual) r = test::random_fp16_values(conv_image * t.batch, rng);
  const std::vector<int> images = wgmma_test::checked_images(t.batch);
  const std::vector<float> expected =
      wgmma_test::fused_reference(fc, shape, images, x, weight, bias, r);

  const ConvFp16Tma kernel(shape, weight.data(), t.bias ? bias.data() : nullptr);
  test::DeviceMem d_x(test::to_nhwc(x, t.batch, t.c, t.h, t.w));
  test::DeviceMem d_r(fc.residual ? test::to_nhwc(r, t.batch, t.oc, shape.conv_h, shape.conv_w)
                                  : std::vector<__half>(8));
  const size_t image_halves = size_t(shape.out_h) * shape.out_w * t.oc;
  const size_t y_halves = image_halves * t.batch;
  test::DeviceMem d_y(y_halves * sizeof(__half));
  std::vector<ConvFp16TmaPlan> plans;
  for (int tile = 0; tile < int(ConvFp16Tma::tile_names().size()); ++tile)
    if (ConvFp16Tma::supports(shape, tile)) plans.push_back(kernel.plan(t.batch, tile));
  if (shape.pool) plans.push_back(kernel.plan_staged(t.batch));
  const ConvFp16TmaPlan pick = kernel.plan(t.batch);
  plans.push_back(pick);
  EXPECT_GE(plans.size(), 3u);
  const ConvFp16TmaInput input = kernel.encode_input(d_x.get(), t.batch);
  for (const ConvFp16TmaPlan& plan : plans) {
    EXPECT_NE(plan.name.find("_k64_"), std::string::npos) << plan.name;
    test::DeviceMem d_ws(std::max<size_t>(plan.workspace_bytes, 16));
    ASSERT_EQ(cudaMemset(d_y.get(), 0xFF, y_halves * sizeof(__half)), cudaSuccess);
    kernel.forward(plan.variant, input, fc.residual ? d_r.get() : nullptr, d_y.get(), nullptr,
                   d_ws.get());
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << plan.name;
    wgmma_test::expect_close(wgmma_test::images_of(d_y.halves(), images, image_halves), expected,
                             int(images.size()), t.oc, shape.out_h, shape.out_w,
                             "tile " + plan.name + (&plan == &plans.back() ? " (the plan)" : ""));
  }
}

TEST(ConvTma, Rows64PrunedAlexNetMatchesReference) {
  REQUIRE_HOPPER();
  uint32_t seed = 300;
  for (int batch : {1, 3, 64}) {
    check_rows64({at_batch(kPrunedConv2, batch), true}, seed++);  // 25 k-tiles, pool 3/2
    check_rows64({at_batch(kPrunedConv3, batch)}, seed++);        // 27 k-tiles, 3 blocks per tap
  }
}

TEST(ConvTma, Rows64OddShapesMatchReference) {
  REQUIRE_HOPPER();
  const FusedCase cases[] = {
      {{5, 32, 9, 11, 64, 3, 2, 1, false, true}},   // stride 2, odd extents, boxes cross images
      {{3, 96, 11, 13, 72, 5, 2, 2, true, false}},  // 5x5 stride 2, no bias, out_c 72
      {{3, 32, 13, 11, 128, 3, 1, 1, false, true}, false, true, true},  // residual + ReLU6
      {{1, 160, 7, 9, 200, 1, 1, 0, false, true}, false, true},  // 1x1, 5 blocks, residual, 200
      {{3, 96, 13, 13, 64, 3, 1, 1, true, true}, true, false, true},  // pool 3/2 + ReLU6
      {{2, 32, 15, 17, 40, 3, 1, 1, false, true}, true},              // pool of negatives, out_c 40
      {{7, 32, 5, 7, 16, 5, 1, 2, true, true}},  // 5x5 on 5x7: taps mostly padding
  };
  uint32_t seed = 400;
  for (const FusedCase& c : cases) check_rows64(c, seed++);
}

}  // namespace
}  // namespace cnnrt::cuda
