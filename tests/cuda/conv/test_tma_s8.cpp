// conv_int8_tma (kernels/cuda/conv/tma_s8.h): its registry rules, its shape rule and the default
// tile, which need no GPU (a described H100: PlanTargetScope, plan_only).  Its numbers are
// checked bit for bit by the kernel harness (tests/harness: every pinned tile entry,
// conv_int8_tma_<BM>x<BN>, runs every conv row it serves in int8 and fp32 output).
#include <gtest/gtest.h>

#include <string>

#include "kernels/cuda/conv/tma_s8.h"
#include "kernels/cuda/device_traits.h"
#include "runtime/kernel.h"

namespace cnnrt::cuda {
namespace {

// An int8 GEMM conv as the int8 entries describe it (NHWC/16, rows of k_pad bytes).
S8Conv s8conv(int in_c, int hw, int out_c, int k, int pad, int stride = 1) {
  S8Conv c;
  c.in_c = in_c;
  c.in_h = c.in_w = hw;
  c.in_stride = padded16(in_c);
  c.out_c = out_c;
  c.out_h = c.out_w = (hw + 2 * pad - k) / stride + 1;
  c.out_stride = padded16(out_c);
  c.kh = c.kw = k;
  c.stride_h = c.stride_w = stride;
  c.pad_h = c.pad_w = pad;
  c.k_total = k * k * c.in_stride;
  c.k_pad = (c.k_total + 63) / 64 * 64;
  return c;
}

TEST(ConvTmaS8, RegistryEntryIsPreferredOverWgmmaAndNarrowAndItsTilesAreCandidates) {
  const KernelRegistry& registry = KernelRegistry::instance();
  const KernelEntry* tma = registry.find("conv_int8_tma");
  const KernelEntry* wgmma = registry.find("conv_int8_wgmma");
  const KernelEntry* narrow = registry.find("conv_int8_narrow");
  const KernelEntry* igemm = registry.find("conv_int8_igemm");
  ASSERT_NE(tma, nullptr);
  ASSERT_NE(wgmma, nullptr);
  ASSERT_NE(narrow, nullptr);
  ASSERT_NE(igemm, nullptr);
  EXPECT_EQ(tma->precision, Precision::INT8);
  EXPECT_GT(tma->priority, wgmma->priority);
  EXPECT_GT(tma->priority, narrow->priority);
  for (const std::string& tile : ConvS8Tma::tile_names()) {
    const KernelEntry* pinned = registry.find("conv_int8_tma_" + tile);
    ASSERT_NE(pinned, nullptr) << tile;
    EXPECT_LT(pinned->priority, igemm->priority) << tile << ": never a default";
    EXPECT_TRUE(pinned->baseline) << tile << ": nor the automatic plan's choice";
  }
}

TEST(ConvTmaS8, ShapeRule) {
  EXPECT_TRUE(
      tma_s8_serves(s8conv(64, 27, 192, 5, 2)));  // AlexNet conv2 (paired 64-byte k-tile rows)
  EXPECT_TRUE(tma_s8_serves(s8conv(192, 13, 384, 3, 1)));  // conv3 (paired 64-byte k-tile rows)
  EXPECT_TRUE(tma_s8_serves(s8conv(384, 13, 256, 3, 1)));  // conv4 (128-byte k-tiles)
  EXPECT_TRUE(tma_s8_serves(s8conv(192, 13, 200, 3, 1)));  // out_c with padding lanes
  EXPECT_TRUE(tma_s8_serves(s8conv(128, 13, 16, 1, 0, 2)));
  S8Conv same = s8conv(128, 14, 72, 3, 0, 2);  // TF-SAME: out 7 implies bottom/right padding 1
  same.out_h = same.out_w = 7;
  EXPECT_TRUE(tma_s8_serves(same));
  S8Conv fp32_out = s8conv(64, 13, 20, 3, 1);
  fp32_out.float_output = true;
  fp32_out.out_stride = 24;  // pad8
  EXPECT_TRUE(tma_s8_serves(fp32_out));

  EXPECT_FALSE(tma_s8_serves(s8conv(48, 27, 64, 3, 1)));     // channel stride 48: not % 64
  EXPECT_FALSE(tma_s8_serves(s8conv(40, 27, 64, 3, 1)));     // stride 48 again
  EXPECT_FALSE(tma_s8_serves(s8conv(64, 27, 64, 3, 1, 9)));  // traversal stride <= 8
  S8Conv dilated = s8conv(64, 27, 64, 3, 2);
  dilated.dil_h = dilated.dil_w = 2;
  EXPECT_FALSE(tma_s8_serves(dilated));
  S8Conv grouped = s8conv(128, 13, 128, 3, 1);
  grouped.groups = 2;
  EXPECT_FALSE(tma_s8_serves(grouped));
  S8Conv bad_stride = s8conv(64, 13, 20, 3, 1);
  bad_stride.out_stride = 20;  // int8 output stride must be pad16
  EXPECT_FALSE(tma_s8_serves(bad_stride));
}

// The wave model's tiles for AlexNet at batch 64 and 256 on an H100: conv_fp16_tma's, but
// 256x128 where it ties 128x256 on waves (conv4 / conv5: int8's own speed for it, tma_s8.cu);
// conv2 / conv3 (64 mod 128 channels) on paired 64-byte k-tile rows.
TEST(ConvTmaS8, DefaultTileOnAlexNet) {
  PlanTargetScope h100(target_traits("h100"));
  if (!ConvS8Tma::device_supported()) GTEST_SKIP() << "a build without the sm_90a image";
  struct Layer {
    S8Conv conv;
    const char* tile;
    const char* k_tile;
  };
  const Layer layers[] = {{s8conv(64, 27, 192, 5, 2), "128x192", "_k64x2_"},
                          {s8conv(192, 13, 384, 3, 1), "256x128", "_k64x2_"},
                          {s8conv(384, 13, 256, 3, 1), "256x128", "_k128_"},
                          {s8conv(256, 13, 256, 3, 1), "256x128", "_k128_"}};
  for (const Layer& layer : layers) {
    const ConvS8Tma kernel(layer.conv);
    for (int batch : {64, 256}) {
      const ConvS8TmaPlan plan = kernel.plan(batch);
      EXPECT_NE(plan.name.find(layer.tile), std::string::npos) << plan.name;
      EXPECT_NE(plan.name.find(layer.k_tile), std::string::npos) << plan.name;
      EXPECT_LE(plan.ctas, 132);
    }
  }
}

}  // namespace
}  // namespace cnnrt::cuda
