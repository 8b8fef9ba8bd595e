// conv_fp16_tma (kernels/cuda/conv/tma_conv.h): its registry rules, its shape rule, and the
// default tile choice, which needs no GPU (a described H100: PlanTargetScope, plan_only) and so
// runs on every CUDA build.  The kernel's numbers are checked by the kernel harness
// (tests/harness: every pinned tile entry runs every conv row it serves, batch 1 and 3 included,
// and conv_fp16_tma itself the rows whose grid fills the GPU) and bench/conv_tma_lab.cu.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cnnrt/cnnrt.h"
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

  EXPECT_FALSE(ConvFp16Tma::supports(conv(48, 27, 64, 3, 1)));     // in_c % 64 (conv1's s2d form)
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

}  // namespace
}  // namespace cnnrt::cuda
