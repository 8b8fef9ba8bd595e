// conv_fp16_sparse24_tma (kernels/cuda/conv/tma_sparse.h), the 2:4 sparse instance of the TMA
// conv mainloop: GPU cases against the CPU reference on the same pruned weights (ref::conv2d,
// double accumulation), and the rules that need no GPU (shape rule, registry entry, tile choice,
// weight bytes and the 2:4 check on a described H100).
//
// The weights are random, scaled by 1/sqrt(fan-in), then pruned 2:4 by magnitude along the input
// channels (graph/passes_sparsity.h, the rule the builder checks), so half of every group is
// non-zero: a kernel that skipped a kept weight, read a dropped one, took a wrong metadata nibble
// or a stale metadata register fails.  Tolerances and NaN poisoning are the dense wgmma tests'
// (wgmma_test_cases.h: rel L2 <= 2e-3, per element 4e-3 |ref| + 2e-3 max|ref|; the harness's fp16
// tolerance, tests/harness/tolerance.h).  Every case runs every tile (pinned) and the default
// plan: BM 128 and 256 channel tiles (two and four metadata blocks per bulk copy), BN 128 and 256
// pixels (one and two im2col boxes per stage).  At batch 64 the reference is computed for three
// images (first, middle, last; the GPU computes all 64): the CPU reference of the whole batch
// takes minutes.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "cnnrt/error.h"
#include "cuda/conv/sparse_test_util.h"
#include "cuda/conv/wgmma_test_cases.h"
#include "cuda/fp16_test_util.h"
#include "graph/passes_sparsity.h"
#include "kernels/cpu/reference.h"
#include "kernels/cuda/conv/tma_sparse.h"
#include "kernels/cuda/device_traits.h"
#include "runtime/kernel.h"

namespace cnnrt::cuda {
namespace {

using namespace wgmma_test;

// The fused epilogue forms (wgmma_test_cases.h); a pool runs staged here.
using SparseCase = FusedCase;

// Runs every tile and the default plan on one case; returns the default plan's name.
std::string check_case(const SparseCase& sc, uint32_t seed) {
  const WCase& t = sc.conv;
  SCOPED_TRACE(describe(sc));
  EXPECT_TRUE(ConvFp16Sparse24Tma::device_supported())
      << "compute capability 9.0 device but no sm_90a image: is 90 in CMAKE_CUDA_ARCHITECTURES?";
  if (!ConvFp16Sparse24Tma::device_supported()) return "";
  const ConvShape shape = shape_of_case(sc);
  EXPECT_TRUE(ConvFp16Sparse24Tma::supports(shape));

  std::mt19937 rng(seed);
  const std::vector<float> x = test::random_fp16_values(size_t(t.batch) * t.c * t.h * t.w, rng);
  const float w_scale = 1.0f / std::sqrt(float(t.c * t.k * t.k));
  std::vector<float> weight =
      test::random_fp16_values(size_t(t.oc) * t.c * t.k * t.k, rng, -w_scale, w_scale);
  const std::vector<float> bias = test::random_fp16_values(t.oc, rng, -0.5f, 0.5f);
  const sparsity::WeightShape ws{t.oc, t.c, t.k * t.k};
  sparsity::prune_magnitude(weight.data(), ws);
  EXPECT_EQ(sparsity::first_violation(weight.data(), ws), "");
  const size_t conv_image = size_t(t.oc) * shape.conv_h * shape.conv_w;
  std::vector<float> r;
  if (sc.residual) r = test::random_fp16_values(conv_image * t.batch, rng);

  // The reference of the checked images (NCHW), conv -> bias -> (+ r) -> clamp -> pool.
  const std::vector<int> images = checked_images(t.batch);
  const std::vector<float> expected = fused_reference(sc, shape, images, x, weight, bias, r);

  const ConvFp16Sparse24Tma kernel(shape, weight.data(), t.bias ? bias.data() : nullptr, "conv");
  test::DeviceMem d_x(test::to_nhwc(x, t.batch, t.c, t.h, t.w));
  test::DeviceMem d_r(sc.residual ? test::to_nhwc(r, t.batch, t.oc, shape.conv_h, shape.conv_w)
                                  : std::vector<__half>(8));
  const size_t y_halves = size_t(t.batch) * shape.out_h * shape.out_w * test::pad8(t.oc);
  test::DeviceMem d_y(y_halves * sizeof(__half));
  const ConvFp16Sparse24TmaPlan pick = kernel.plan(t.batch);
  EXPECT_EQ(pick.staged, sc.pool);
  const ConvFp16TmaInput input = kernel.encode_input(d_x.get(), t.batch);
  const size_t image_halves = size_t(shape.out_h) * shape.out_w * t.oc;
  for (int tile = 0; tile < int(ConvFp16Sparse24Tma::tile_names().size()); ++tile) {
    const ConvFp16Sparse24TmaPlan plan = kernel.plan(t.batch, tile);
    test::DeviceMem d_ws(std::max<size_t>(plan.workspace_bytes, 16));
    // NaN bytes: an element the kernel never writes fails the comparison.
    EXPECT_EQ(cudaMemset(d_y.get(), 0xFF, y_halves * sizeof(__half)), cudaSuccess);
    kernel.forward(plan.variant, input, sc.residual ? d_r.get() : nullptr, d_y.get(), nullptr,
                   d_ws.get());
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess) << plan.name;
    expect_close(images_of(d_y.halves(), images, image_halves), expected, int(images.size()), t.oc,
                 shape.out_h, shape.out_w,
                 "tile " + plan.name + (plan.variant == pick.variant ? " (the plan's pick)" : ""));
  }
  return pick.name;
}

const WCase kConv2{1, 64, 27, 27, 192, 5, 1, 2, true, true};
const WCase kConv3{1, 192, 13, 13, 384, 3, 1, 1, true, true};
const WCase kConv4{1, 384, 13, 13, 256, 3, 1, 1, true, true};
const WCase kConv5{1, 256, 13, 13, 256, 3, 1, 1, true, true};

TEST(ConvSparse24Tma, AlexNetShapesMatchReference) {
  REQUIRE_HOPPER();
  uint32_t seed = 1;
  for (int batch : {1, 3, 64}) {
    check_case({at_batch(kConv2, batch), true}, seed++);  // conv2 + pool (staged): out_c 192
    check_case({at_batch(kConv3, batch)}, seed++);        // 27 k-tiles: an odd count
    check_case({at_batch(kConv4, batch)}, seed++);        // 54 k-tiles
    check_case({at_batch(kConv5, batch), true}, seed++);  // conv5 + pool (staged)
  }
}

TEST(ConvSparse24Tma, OddShapesMatchReference) {
  REQUIRE_HOPPER();
  const SparseCase cases[] = {
      {{2, 64, 7, 9, 8, 3, 1, 1, true, true}, false, false, true},  // out_c 8: rows past it zero
      {{3, 128, 11, 13, 72, 5, 2, 2, false, true}},                 // stride 2, no ReLU, out_c 72
      {{1, 64, 13, 13, 320, 1, 2, 0, true, true}},                  // 1x1: one k-tile; 2.5 BM 128
      {{3, 64, 9, 9, 128, 1, 1, 0, false, false}},                  // one k-tile, no bias
      {{2, 192, 9, 11, 136, 3, 1, 1, true, true}},                  // 27 k-tiles, 136 channels
      {{3, 128, 11, 13, 192, 3, 1, 1, true, true}, false, true},    // fused residual + ReLU
      {{2, 64, 15, 17, 64, 3, 1, 1, false, true}, false, true},     // residual, no clamp
      {{5, 64, 9, 11, 128, 3, 1, 1, false, true}, false, false, true},  // ReLU6; boxes cross images
      {{2, 64, 15, 15, 64, 3, 1, 1, true, true}, true},                 // pool (staged), out_c 64
      {{1, 64, 12, 12, 64, 7, 1, 3, true, true}},                       // 7x7: 49 k-tiles, pad 3
  };
  uint32_t seed = 100;
  for (const SparseCase& c : cases) check_case(c, seed++);
}

TEST(ConvSparse24Tma, RejectsWeightThatIsNot24) {
  // Runs on a described H100 too: the check comes before any device work.
  PlanTargetScope h100(target_traits("h100"));
  if (!ConvFp16Sparse24Tma::device_supported()) GTEST_SKIP() << "a build without the sm_90a image";
  const WCase t{1, 64, 9, 9, 64, 3, 1, 1, true, true};
  std::mt19937 rng(5);
  std::vector<float> w = test::random_fp16_values(size_t(t.oc) * t.c * 9, rng, 0.1f, 0.2f);
  sparse_test::expect_rejects_dense_weight(
      [&] { const ConvFp16Sparse24Tma kernel(shape_of(t), w.data(), nullptr, "conv7"); });
}

TEST(ConvSparse24Tma, ShapeRule) {
  EXPECT_TRUE(ConvFp16Sparse24Tma::supports(shape_of(kConv3)));
  EXPECT_TRUE(ConvFp16Sparse24Tma::supports(shape_of({1, 64, 13, 13, 8, 3, 1, 1, true, true})));
  EXPECT_TRUE(ConvFp16Sparse24Tma::supports(shape_of_case({kConv2, true})));  // staged pool
  EXPECT_TRUE(ConvFp16Sparse24Tma::supports(shape_of_case({kConv4, false, true})));
  EXPECT_FALSE(ConvFp16Sparse24Tma::supports(shape_of({1, 48, 13, 13, 64, 3, 1, 1, true, true})));
  EXPECT_FALSE(ConvFp16Sparse24Tma::supports(shape_of({1, 64, 13, 13, 12, 3, 1, 1, true, true})));
  EXPECT_FALSE(ConvFp16Sparse24Tma::supports(shape_of({1, 64, 27, 27, 64, 3, 9, 1, true, true})));
  EXPECT_FALSE(ConvFp16Sparse24Tma::supports(shape_of_case({kConv5, true, true})));  // pool + res
  ConvShape dilated = shape_of(kConv5);
  dilated.conv.dilation_h = dilated.conv.dilation_w = 2;
  dilated.derive();
  EXPECT_FALSE(ConvFp16Sparse24Tma::supports(dilated));
}

TEST(ConvSparse24Tma, RegistryEntryBesideTheWgmmaSparseConv) {
  const KernelRegistry& registry = KernelRegistry::instance();
  const KernelEntry* tma = registry.find("conv_fp16_sparse24_tma");
  const KernelEntry* wgmma = registry.find("conv_fp16_sparse24_wgmma");
  ASSERT_NE(tma, nullptr);
  ASSERT_NE(wgmma, nullptr);
  EXPECT_TRUE(tma->sparse_2_4);
  EXPECT_TRUE(tma->residual);
  EXPECT_FALSE(tma->baseline);
  EXPECT_EQ(tma->priority, wgmma->priority);  // same priority, registered first: the default
  EXPECT_LT(tma - registry.entries().data(), wgmma - registry.entries().data());
  // Offered for AlexNet conv3 only when its weight is 2:4 (KernelRegistry::add's rule).
  PlanTargetScope h100(target_traits("h100"));
  if (!ConvFp16Sparse24Tma::device_supported()) GTEST_SKIP() << "a build without the sm_90a image";
  Node node = make_node(kConv3);
  EXPECT_FALSE(tma->supports(node));
  node.weight_2_4 = true;
  EXPECT_TRUE(tma->supports(node));
  EXPECT_EQ(tma->supports(node), wgmma->supports(node));
  Node narrow = make_node({1, 32, 13, 13, 64, 3, 1, 1, true, true});  // in_c % 64: wgmma only
  narrow.weight_2_4 = true;
  EXPECT_FALSE(tma->supports(narrow));
  EXPECT_TRUE(wgmma->supports(narrow));
}

// On a described H100 (no GPU needed): the weight bytes the kernel reads, and the tile the wave
// model picks for AlexNet conv2-conv5 at batch 256 (the channel tile that divides out_c).
TEST(ConvSparse24Tma, PlanOnADescribedH100) {
  PlanTargetScope h100(target_traits("h100"));
  if (!ConvFp16Sparse24Tma::device_supported()) GTEST_SKIP() << "a build without the sm_90a image";
  struct Layer {
    SparseCase c;
    const char* tile;
  };
  const Layer layers[] = {{{kConv2, true}, "128x256"},
                          {{kConv3}, "128x256"},
                          {{kConv4}, "128x256"},
                          {{kConv5, true}, "128x256"}};
  for (const Layer& l : layers) {
    const WCase& t = l.c.conv;
    SCOPED_TRACE(describe(l.c));
    std::vector<float> w(size_t(t.oc) * t.c * t.k * t.k, 0.f);
    for (size_t i = 0; i < w.size(); i += 2) w[i] = 0.01f;  // 2:4: every other channel
    const ConvFp16Sparse24Tma kernel(shape_of_case(l.c), w.data(), nullptr, "conv");
    const size_t k = size_t(t.k) * t.k * t.c, k_tiles = k / 64, blocks = (t.oc + 255) / 256 * 4;
    EXPECT_EQ(kernel.weight_bytes(), t.oc * k + k_tiles * blocks * 512 + 4 * size_t(t.oc));
    const ConvFp16Sparse24TmaPlan plan = kernel.plan(256);
    EXPECT_NE(plan.name.find(std::string("tma_sp_") + l.tile), std::string::npos) << plan.name;
    EXPECT_EQ(plan.staged, l.c.pool);
    EXPECT_EQ(plan.ctas, 132);
    EXPECT_GT(plan.estimated_us, 0);
  }
}

}  // namespace
}  // namespace cnnrt::cuda
