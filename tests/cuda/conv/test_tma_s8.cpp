// conv_int8_tma (kernels/cuda/conv/tma_s8.h): its registry rules, its shape rule, the default
// tile and the fused-or-staged MaxPool choice, which need no GPU (a described H100:
// PlanTargetScope, plan_only).  Its numbers are checked bit for bit by the kernel harness
// (tests/harness: every pinned tile entry, conv_int8_tma_<BM>x<BN> and conv_int8_tma_staged, runs
// every conv row it serves in int8 and fp32 output) and, for the fused MaxPool, by the GPU cases
// here: every tile that fuses the pool (pinned), the staged form and the default plan against the
// integer reference's conv -> requantise -> maxpool (ref::conv2d_int8, ref::maxpool2d_int8).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cuda/conv/wgmma_test_cases.h"  // REQUIRE_HOPPER, test::DeviceMem
#include "graph/ops.h"
#include "kernels/cpu/int8_ref.h"
#include "kernels/cuda/conv/tma_s8.h"
#include "kernels/cuda/device_traits.h"
#include "runtime/calibration.h"
#include "runtime/cuda/int8_layer_prep.h"  // s8_conv_of
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
  std::vector<std::string> pinned_names = ConvS8Tma::tile_names();
  pinned_names.push_back("staged");  // the staged MaxPool form (convs with a pool)
  for (const std::string& tile : pinned_names) {
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
// 256x128 where it ties 128x256 on waves (conv4 / conv5: int8's own speed for it, tma_s8.cu) and
// 192x192 where it ties 128x192 (conv2: 8 waves of 192² against 12 of 128 x 192 at 256, 2 against
// 3 at 64; its measured speed, tma_s8.cu); conv2 / conv3 (64 mod 128 channels) on paired 64-byte
// k-tile rows.
TEST(ConvTmaS8, DefaultTileOnAlexNet) {
  PlanTargetScope h100(target_traits("h100"));
  if (!ConvS8Tma::device_supported()) GTEST_SKIP() << "a build without the sm_90a image";
  struct Layer {
    S8Conv conv;
    const char* tile;
    const char* k_tile;
  };
  const Layer layers[] = {{s8conv(64, 27, 192, 5, 2), "192x192", "_k64x2_"},
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

// ---- the fused MaxPool (tma_s8.cu's design note, "Fused MaxPool", "Fused or staged") ----------

// A max-pool of `conv`'s output: window k, stride st, padding pad, floor or ceil mode.
NhwcPool pool_of(const S8Conv& conv, int k, int st, int pad = 0, bool ceil = false) {
  return NhwcPool{conv.out_c,
                  conv.out_h,
                  conv.out_w,
                  int(pool_output_size(conv.out_h, k, st, pad, 1, ceil)),
                  int(pool_output_size(conv.out_w, k, st, pad, 1, ceil)),
                  k,
                  k,
                  st,
                  st,
                  pad,
                  pad};
}

// The small-batch rule: the entry keeps the TMA conv below a full grid where one unit's K is at
// most 2560 bytes — AlexNet conv2 (5x5x64), conv3 (3x3x192) and conv5 (3x3x256), not conv4
// (3x3x384: the mma.sync split-K GEMM there) — and a 1x1 conv's K is its channel stride.
TEST(ConvTmaS8, SmallBatchesKeepTheTmaConvWhereKIsShort) {
  EXPECT_TRUE(ConvS8Tma::runs_small_batches(s8conv(64, 27, 192, 5, 2)));
  EXPECT_TRUE(ConvS8Tma::runs_small_batches(s8conv(192, 13, 384, 3, 1)));
  EXPECT_TRUE(ConvS8Tma::runs_small_batches(s8conv(256, 13, 256, 3, 1)));
  EXPECT_FALSE(ConvS8Tma::runs_small_batches(s8conv(384, 13, 256, 3, 1)));
  EXPECT_TRUE(ConvS8Tma::runs_small_batches(s8conv(2560, 7, 64, 1, 0)));
  EXPECT_FALSE(ConvS8Tma::runs_small_batches(s8conv(2576, 7, 64, 1, 0)));
}

// The 192x192 tile (three consumer warpgroups, tma_roles.h): its plan on AlexNet conv2 / conv3
// (out_c 192 and 384: whole n tiles) at 64 and 256, the default of conv2 only (conv3's last wave
// is larger on it than on 256x128: 3.4 of 4 waves against 3.84), and no fused-pool instance.
TEST(ConvTmaS8, Tile192x192PlansWholeTilesAndIsConv2sDefault) {
  PlanTargetScope h100(target_traits("h100"));
  if (!ConvS8Tma::device_supported()) GTEST_SKIP() << "a build without the sm_90a image";
  const std::vector<std::string>& tiles = ConvS8Tma::tile_names();
  const auto it = std::find(tiles.begin(), tiles.end(), "192x192");
  ASSERT_NE(it, tiles.end());
  const int tile = int(it - tiles.begin());
  struct Layer {
    S8Conv conv;
    long long units64, units256;  // ceil(batch * 27² or 13² / 192) x out_c / 192
    bool is_default;
  };
  const Layer layers[] = {{s8conv(64, 27, 192, 5, 2), 243, 972, true},
                          {s8conv(192, 13, 384, 3, 1), 57 * 2, 226 * 2, false}};
  for (const Layer& layer : layers) {
    const ConvS8Tma kernel(layer.conv);
    for (int batch : {64, 256}) {
      const ConvS8TmaPlan pinned = kernel.plan(batch, tile);
      EXPECT_EQ(pinned.name, "tma_s8_192x192_k64x2_s4") << batch;
      EXPECT_EQ(pinned.units, batch == 64 ? layer.units64 : layer.units256);
      EXPECT_EQ(pinned.ctas, std::min<long long>(pinned.units, 132));
      EXPECT_FALSE(pinned.fused_pool);
      EXPECT_EQ(kernel.plan(batch).variant == tile, layer.is_default) << batch;
    }
    EXPECT_FALSE(ConvS8Tma::tile_fuses_pool(layer.conv, pool_of(layer.conv, 3, 2), tile));
  }
}

// On a described H100: AlexNet conv5 (256 -> 256, 13x13, pool 3/2 -> 6x6) plans the fused pool
// on 256x128 at batch 64 and 256 (8 pooled rows per tile: the unpooled conv's waves, without the
// pool pass); conv2 (64 -> 192, 27x27, pool 3/2) stays staged on 192x192 (the fused 256x128 would
// compute 256 columns for 192 and recompute an eighth of the rows).
TEST(ConvTmaS8, FusedPoolIsPlannedForAlexNetConv5AndStagedForConv2) {
  PlanTargetScope h100(target_traits("h100"));
  if (!ConvS8Tma::device_supported()) GTEST_SKIP() << "a build without the sm_90a image";
  const S8Conv conv5 = s8conv(256, 13, 256, 3, 1), conv2 = s8conv(64, 27, 192, 5, 2);
  const NhwcPool pool5 = pool_of(conv5, 3, 2), pool2 = pool_of(conv2, 3, 2);
  ASSERT_EQ(pool5.out_h, 6);
  ASSERT_EQ(pool2.out_h, 13);
  const ConvS8Tma k5(conv5, 0, pool5), k2(conv2, 0, pool2);
  EXPECT_TRUE(k5.fuses_pool());
  EXPECT_TRUE(k2.fuses_pool());
  for (int batch : {64, 256}) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    const ConvS8TmaPlan fused5 = k5.plan(batch), staged5 = k5.plan_staged(batch);
    EXPECT_TRUE(fused5.fused_pool) << fused5.name;
    EXPECT_TRUE(ConvS8Tma::is_fused(fused5.variant));
    EXPECT_EQ(fused5.variant, ConvS8Tma::kFusedVariant + 3);  // tile 3 = 256x128
    EXPECT_EQ(fused5.name, "tma_s8_256x128_k128_s4_fusedpool");
    EXPECT_EQ(fused5.units, (batch / 4 * 3) * 2);  // 3 tiles per 4 images, two n tiles
    EXPECT_FALSE(staged5.fused_pool);
    EXPECT_EQ(staged5.name, "tma_s8_256x128_k128_s4");  // the unpooled default
    EXPECT_LT(fused5.estimated_us, staged5.estimated_us);

    const ConvS8TmaPlan chosen2 = k2.plan(batch), fused2 = k2.plan_fused(batch);
    EXPECT_FALSE(chosen2.fused_pool) << chosen2.name;
    EXPECT_EQ(chosen2.name, "tma_s8_192x192_k64x2_s4");
    EXPECT_EQ(chosen2.variant, k2.plan_staged(batch).variant);
    EXPECT_NE(fused2.name.find("256x128_k64x2_s4_fusedpool"), std::string::npos) << fused2.name;
    EXPECT_LT(chosen2.estimated_us, fused2.estimated_us);
  }
  // The model at batch 256 (H100; docs/kernels/conv_int8_tma.md's prediction): conv5 fused ~52
  // us against ~59 staged, conv2 staged ~167 (175 on 128x192, over 192x192's 1.05) against ~239
  // fused.
  EXPECT_NEAR(k5.plan(256).estimated_us, 52, 5);
  EXPECT_NEAR(k5.plan_staged(256).estimated_us, 59, 5);
  EXPECT_NEAR(k2.plan(256).estimated_us, 167, 10);
  EXPECT_NEAR(k2.plan_fused(256).estimated_us, 239, 10);

  // Pinned tiles fuse where they have a pooled instance (128x256, 256x128); the others, 128x128
  // (the entry's small-batch threshold) among them, plan the conv alone.
  const std::vector<std::string>& tiles = ConvS8Tma::tile_names();
  for (size_t t = 0; t < tiles.size(); ++t) {
    const bool pooled = tiles[t] == "128x256" || tiles[t] == "256x128";
    EXPECT_EQ(ConvS8Tma::tile_fuses_pool(conv5, pool5, int(t)), pooled) << tiles[t];
    EXPECT_EQ(ConvS8Tma::tile_fuses_pool(conv2, pool2, int(t)), pooled) << tiles[t];
    const ConvS8TmaPlan p = k5.plan(256, int(t));
    EXPECT_EQ(p.fused_pool, pooled) << p.name;
    EXPECT_EQ(p.name.find("_fusedpool") != std::string::npos, pooled) << p.name;
  }
  // 128x256 holds 3-4 pooled rows of conv5 (117 of 128 pixels): 427 M tiles at batch 256.
  EXPECT_EQ(k5.plan(256, 2).units, 427);

  // No pool: unchanged, and no pooled forms.  An fp32 output (the graph output) keeps the staged
  // pool: the fused reduction is on int8 bytes.
  const ConvS8Tma plain(conv5);
  EXPECT_EQ(plain.plan(256).name, "tma_s8_256x128_k128_s4");
  EXPECT_FALSE(plain.fuses_pool());
  EXPECT_ANY_THROW(plain.plan_staged(256));
  EXPECT_ANY_THROW(plain.plan_fused(256));
  S8Conv fp32_out = conv5;
  fp32_out.float_output = true;
  const ConvS8Tma k5_fp32(fp32_out, 0, pool5);
  EXPECT_FALSE(k5_fp32.fuses_pool());
  EXPECT_FALSE(k5_fp32.plan(256).fused_pool);
  EXPECT_FALSE(k5_fp32.plan(256, 3).fused_pool);
  EXPECT_FALSE(ConvS8Tma::tile_fuses_pool(fp32_out, pool5, 3));
  // A pool whose windows may hold only padding (pad > kernel / 2) is never fused.
  EXPECT_FALSE(ConvS8Tma::tile_fuses_pool(conv5, pool_of(conv5, 2, 2, 2), 3));

  // The kernel harness's pooled "fill" row (tests/harness/conv_cases.cpp: 64 -> 64, 27x27, pool
  // 3/2, batch 33, above the entry's small-batch fallback on 132 SMs) runs the default
  // conv_int8_tma fused: 256x128 on paired rows, one wave (116 M tiles), against the staged
  // 256x64's one wave plus the pool pass.
  const S8Conv fill = s8conv(64, 27, 64, 3, 1);
  const ConvS8Tma k_fill(fill, 0, pool_of(fill, 3, 2));
  const ConvS8TmaPlan fill_plan = k_fill.plan(33);
  EXPECT_EQ(fill_plan.name, "tma_s8_256x128_k64x2_s4_fusedpool");
  EXPECT_EQ(fill_plan.units, 116);
  // The entry's fallback (fallback_max_batch on 128x128's units): the mma.sync GEMM up to batch
  // 23 only.
  EXPECT_LT(k_fill.plan(23, 0).units, 132);
  EXPECT_GE(k_fill.plan(24, 0).units, 132);
}

// The registry entries on a described H100: AlexNet conv5 as a fused node (ReLU, MaxPool 3/2),
// its int8 entry at batch 256 plans the fused pool (no "+pool" pass, no pre-pool workspace);
// conv_int8_tma_staged the conv then the pass; pinned 256x128 / 128x256 fuse, and tiles without
// a pooled instance do not serve the pooled node (conv_fp16_tma's pinned tiles' rule).
TEST(ConvTmaS8, EntryPlansTheFusedPoolForAlexNetConv5) {
  PlanTargetScope h100(target_traits("h100"));
  if (!ConvS8Tma::device_supported()) GTEST_SKIP() << "a build without the sm_90a image";
  Node node;
  node.name = "conv5";
  node.op = OpKind::Conv;
  ConvAttrs a;
  a.out_channels = 256;
  a.kernel_h = a.kernel_w = 3;
  a.pad_h = a.pad_w = 1;
  node.attrs = a;
  node.inputs = {"input"};
  node.input_shapes = {{256, 13, 13}};
  node.pre_pool_shape = {256, 13, 13};
  node.output_shape = {256, 6, 6};
  node.activation = Activation::Relu;
  node.fused_maxpool = PoolAttrs{3, 3, 2, 2, 0, 0, false, true};
  Param weight;
  weight.role = "weight";
  weight.key = "conv5.weight";
  weight.value.shape = {256, 256, 3, 3};
  weight.value.data.assign(size_t(256) * 256 * 9, 0.01f);
  node.params.push_back(weight);
  Calibration calibration;
  calibration.model = "tma_s8_test";
  calibration.method = "minmax";
  calibration.tensors["input"] = {1.0f, 1.0f / 127, "minmax"};
  calibration.tensors["conv5"] = {4.0f, 4.0f / 127, "minmax"};
  Graph graph;
  graph.name = "tma_s8_test";
  auto plan_of = [&](const std::string& name, int batch) {
    const KernelEntry* entry = KernelRegistry::instance().find(name);
    if (entry == nullptr || !entry->supports(node)) return KernelPlan{};
    return entry->create({node, graph, &calibration})->prepare({batch, {int8_nhwc16(1.0f / 127)}});
  };
  const size_t pre_pool = size_t(256) * 13 * 13 * 256;
  const KernelPlan fused = plan_of("conv_int8_tma", 256);
  EXPECT_EQ(fused.variant_name, "tma_s8_256x128_k128_s4_fusedpool");
  EXPECT_LT(fused.workspace_bytes, pre_pool);
  const KernelPlan staged = plan_of("conv_int8_tma_staged", 256);
  EXPECT_EQ(staged.variant_name, "tma_s8_256x128_k128_s4+pool");
  EXPECT_GE(staged.workspace_bytes, pre_pool);
  EXPECT_NE(fused.variant, staged.variant);
  EXPECT_EQ(plan_of("conv_int8_tma_128x256", 256).variant_name, "tma_s8_128x256_k128_s4_fusedpool");
  EXPECT_EQ(plan_of("conv_int8_tma_256x128", 64).variant_name, "tma_s8_256x128_k128_s4_fusedpool");
  // At batch 1 (8 units of 128x64: SMs idle) the entry keeps the TMA conv, staged, rather than
  // the mma.sync split-K GEMM: conv5's K (2304 bytes) is short (ConvS8Tma::runs_small_batches).
  EXPECT_EQ(plan_of("conv_int8_tma", 1).variant_name, "tma_s8_128x64_k128_s8+pool");
  for (const char* tile : {"128x128", "128x192", "256x64", "128x64", "192x192"})
    EXPECT_FALSE(
        KernelRegistry::instance().find(std::string("conv_int8_tma_") + tile)->supports(node))
        << tile;
}

// ---- GPU: the fused MaxPool bit for bit -------------------------------------------------------

struct PoolCase {
  int batch, c, h, w, oc, k, stride, pad;
  ActivationBounds act;
  int pool_k, pool_s, pool_pad;
  bool ceil;
};

std::string describe(const PoolCase& t) {
  std::ostringstream s;
  s << "n" << t.batch << " c" << t.c << " " << t.h << "x" << t.w << " -> oc" << t.oc << " k" << t.k
    << " s" << t.stride << " p" << t.pad << " act [" << t.act.lo << ", " << t.act.hi << "] pool "
    << t.pool_k << "/" << t.pool_s << " p" << t.pool_pad << (t.ceil ? " ceil" : "");
  return s.str();
}

// Every tile that fuses the case's pool (pinned), the staged form (the conv, then
// maxpool_nhwc_s8, as the entry runs it) and the default plan, against the integer reference's
// conv -> requantise -> maxpool of every image, byte for byte over the whole NHWC/16 output
// (padding lanes: zeros).  The output is filled with 0x80 (-128) first: never a requantised
// value (the bounds are within ±127), so a byte the kernel does not write fails.
void check_fused_pool(const PoolCase& t, uint32_t seed) {
  SCOPED_TRACE(describe(t));
  EXPECT_TRUE(ConvS8Tma::device_supported())
      << "compute capability 9.0 device but no sm_90a image: is 90 in CMAKE_CUDA_ARCHITECTURES?";
  if (!ConvS8Tma::device_supported()) return;
  ConvShape s;
  s.in_c = t.c;
  s.in_h = t.h;
  s.in_w = t.w;
  s.out_c = t.oc;
  s.conv.out_channels = t.oc;
  s.conv.kernel_h = s.conv.kernel_w = t.k;
  s.conv.stride_h = s.conv.stride_w = t.stride;
  s.conv.pad_h = s.conv.pad_w = t.pad;
  s.activation = t.act;
  s.pool = PoolAttrs{t.pool_k, t.pool_k, t.pool_s, t.pool_s, t.pool_pad, t.pool_pad, t.ceil, true};
  s.derive();

  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> q(-127, 127);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<int8_t> x(size_t(t.batch) * t.c * t.h * t.w);
  for (int8_t& v : x) v = int8_t(q(rng));
  const int taps = t.k * t.k;
  std::vector<float> w(size_t(t.oc) * t.c * taps), bias(t.oc);
  for (float& v : w) v = u(rng);
  for (float& v : bias) v = u(rng);
  const int64_t k = int64_t(t.c) * taps;
  // The output scale from the fp32 output's max |y| (the harness's minmax rule): the int8
  // outputs span the range, clamps included.
  const ref::Int8Layer probe =
      ref::prepare_int8_layer(w.data(), bias.data(), t.oc, k, 0.02f, 0.0f, t.act);
  std::vector<float> y_probe(size_t(t.batch) * t.oc * s.conv_h * s.conv_w);
  ref::conv2d_int8(x.data(), t.batch, t.c, t.h, t.w, s.conv, probe, y_probe.data());
  float amax = 0;
  for (float v : y_probe) amax = std::max(amax, std::fabs(v));
  const ref::Int8Layer layer = ref::prepare_int8_layer(w.data(), bias.data(), t.oc, k, 0.02f,
                                                       ref::scale_from_amax(amax), t.act);
  std::vector<int8_t> conv_ref(y_probe.size());
  ref::conv2d_int8(x.data(), t.batch, t.c, t.h, t.w, s.conv, layer, conv_ref.data());
  const size_t pooled_pixels = size_t(s.out_h) * s.out_w;
  std::vector<int8_t> pooled_ref(size_t(t.batch) * t.oc * pooled_pixels);
  ref::maxpool2d_int8(conv_ref.data(), t.batch, t.oc, s.conv_h, s.conv_w, *s.pool, 1.0f,
                      pooled_ref.data());

  S8Conv conv = s8_conv_of(s, false);
  conv.lo = layer.int_bounds.lo;
  conv.hi = layer.int_bounds.hi;
  // Weight rows [out_c][k_pad]: k = (r·kw + s)·in_stride + c, zeros elsewhere.
  std::vector<int8_t> rows(size_t(t.oc) * conv.k_pad, 0);
  for (int o = 0; o < t.oc; ++o)
    for (int c = 0; c < t.c; ++c)
      for (int tap = 0; tap < taps; ++tap)
        rows[size_t(o) * conv.k_pad + tap * conv.in_stride + c] =
            layer.weight[(size_t(o) * t.c + c) * taps + tap];
  test::DeviceMem d_w(rows), d_bias(layer.bias), d_mult(layer.multiplier);
  conv.weight = static_cast<const int8_t*>(d_w.get());
  conv.bias = static_cast<const int32_t*>(d_bias.get());
  conv.multiplier = static_cast<const float*>(d_mult.get());
  // x as int8 NHWC/16 (padding lanes zero); the expected output as NHWC/16.
  std::vector<int8_t> x_nhwc(size_t(t.batch) * t.h * t.w * conv.in_stride, 0);
  for (int n = 0; n < t.batch; ++n)
    for (int c = 0; c < t.c; ++c)
      for (int p = 0; p < t.h * t.w; ++p)
        x_nhwc[(size_t(n) * t.h * t.w + p) * conv.in_stride + c] =
            x[(size_t(n) * t.c + c) * t.h * t.w + p];
  const size_t y_bytes = size_t(t.batch) * pooled_pixels * conv.out_stride;
  std::vector<int8_t> expected(y_bytes, 0);
  for (int n = 0; n < t.batch; ++n)
    for (int c = 0; c < t.oc; ++c)
      for (size_t p = 0; p < pooled_pixels; ++p)
        expected[(size_t(n) * pooled_pixels + p) * conv.out_stride + c] =
            pooled_ref[(size_t(n) * t.oc + c) * pooled_pixels + p];

  const NhwcPool pool = pool_of(conv, t.pool_k, t.pool_s, t.pool_pad, t.ceil);
  ASSERT_EQ(pool.out_h, s.out_h);
  ASSERT_EQ(pool.out_w, s.out_w);
  const ConvS8Tma kernel(conv, 0, pool);
  ASSERT_TRUE(kernel.fuses_pool());
  std::vector<ConvS8TmaPlan> plans;
  for (int tile = 0; tile < int(ConvS8Tma::tile_names().size()); ++tile)
    if (ConvS8Tma::tile_fuses_pool(conv, pool, tile)) plans.push_back(kernel.plan(t.batch, tile));
  EXPECT_GE(plans.size(), 1u);
  plans.push_back(kernel.plan_staged(t.batch));
  plans.push_back(kernel.plan(t.batch));
  test::DeviceMem d_x(x_nhwc), d_y(y_bytes),
      d_conv(size_t(t.batch) * s.conv_h * s.conv_w * conv.out_stride);
  const ConvS8TmaInput input = kernel.encode_input(d_x.get(), t.batch);
  for (const ConvS8TmaPlan& plan : plans) {
    const std::string what = "plan " + plan.name + (&plan == &plans.back() ? " (the default)" : "");
    EXPECT_EQ(plan.fused_pool, ConvS8Tma::is_fused(plan.variant)) << what;
    EXPECT_EQ(plan.fused_pool, plan.name.find("_fusedpool") != std::string::npos) << what;
    ASSERT_EQ(cudaMemset(d_y.get(), 0x80, y_bytes), cudaSuccess);
    if (plan.fused_pool) {
      kernel.forward(plan.variant, input, d_y.get(), nullptr);
    } else {
      kernel.forward(plan.variant, input, d_conv.get(), nullptr);
      maxpool_nhwc_s8(pool, d_conv.get(), d_y.get(), t.batch, nullptr);
    }
    const cudaError_t status = cudaDeviceSynchronize();
    ASSERT_EQ(status, cudaSuccess) << what;  // the context is gone: no further launch
    std::vector<int8_t> got(y_bytes);
    ASSERT_EQ(cudaMemcpy(got.data(), d_y.get(), y_bytes, cudaMemcpyDeviceToHost), cudaSuccess);
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < y_bytes; ++i)
      if (got[i] != expected[i] && bad++ == 0) first = i;
    const size_t pixel = first / conv.out_stride;
    EXPECT_EQ(bad, 0u) << what << ": " << bad << " bytes differ from the reference's conv -> "
                       << "requantise -> maxpool; first at image " << pixel / pooled_pixels
                       << " pooled pixel " << pixel % pooled_pixels << " channel "
                       << first % conv.out_stride << ": got " << int(got[first]) << ", expected "
                       << int(expected[first]) << " (-128: never written)";
  }
}

// AlexNet conv5 at batch 3 and 5 (6 pooled rows per image; 256x128 tiles of 8 pooled rows cross
// images, the last tile partial), then odd shapes: out_c not a multiple of the tile (72, 200:
// padding lanes and a half-empty n tile), pool 2/2 with a conv row and column past the last
// window, pool padding 1 (windows clipped at every edge), ceil mode (overhanging windows), the
// paired 64-byte k-tile rows (channel stride 64 and 192: an odd number of 64-byte blocks), no
// clamp (negative values pooled), ReLU6, stride 2, conv2's 27-wide rows (one pooled row per
// 128-row tile).
TEST(ConvTmaS8, FusedPoolMatchesReference) {
  REQUIRE_HOPPER();
  const ActivationBounds relu = kReluActivation, none = kIdentityActivation, relu6{0.0f, 6.0f};
  const PoolCase cases[] = {
      {3, 256, 13, 13, 256, 3, 1, 1, relu, 3, 2, 0, false},  // AlexNet conv5
      {5, 256, 13, 13, 72, 3, 1, 1, none, 3, 2, 0, false},   // out_c 72, partial last tile
      {3, 128, 9, 11, 200, 3, 1, 1, relu, 2, 2, 0, false},   // pool 2/2: row 8, column 10 unused
      {3, 64, 13, 13, 200, 3, 1, 1, relu6, 3, 2, 1, false},  // paired rows, pool padding 1
      {7, 192, 12, 14, 72, 5, 1, 2, none, 3, 2, 0, true},    // 3 blocks per tap, ceil overhang
      {2, 64, 27, 27, 96, 5, 1, 2, relu, 3, 2, 0, false},    // conv2's rows, out_c 96
      {4, 128, 15, 17, 136, 3, 2, 1, none, 2, 2, 0, false},  // stride 2: 8x9 -> 4x4
      {6, 128, 7, 9, 16, 1, 1, 0, relu, 3, 2, 1, true},      // 1x1, out_c 16, pad 1 + ceil
  };
  uint32_t seed = 500;
  for (const PoolCase& c : cases) check_fused_pool(c, seed++);
}

}  // namespace
}  // namespace cnnrt::cuda
