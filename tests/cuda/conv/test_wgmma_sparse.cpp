// GPU tests of the 2:4 sparse wgmma convolution (kernels/cuda/conv/wgmma_sparse.h) against the
// CPU reference run on the same pruned weights (ref::conv2d, double accumulation), and its
// weight check.
//
// The weights are random, scaled by 1/sqrt(fan-in), then pruned 2:4 by magnitude along the
// input channels (graph/passes_sparsity.h, the rule the builder checks), so half of every group
// is non-zero: a kernel that skipped a kept weight, read a dropped one, or took a wrong
// metadata nibble fails.  Tolerances and the NaN poisoning are the dense wgmma tests'
// (wgmma_test_cases.h: rel L2 <= 2e-3, per element 4e-3 |ref| + 2e-3 max|ref|).
// Shapes cover every channel tile (out_c 64/128/192/256: MI 1-4), K tails
// (in_c 8/24: one partial k-tile of 64), strides, padding, no bias / no ReLU, ReLU6, the fused
// residual, and fused 3x3/2 pools in single-pass and row-streamed tiles.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "cnnrt/error.h"
#include "cuda/conv/sparse_test_util.h"
#include "cuda/conv/wgmma_test_cases.h"
#include "cuda/fp16_test_util.h"
#include "graph/passes_sparsity.h"
#include "kernels/cpu/reference.h"
#include "kernels/cuda/conv/wgmma_sparse.h"

namespace cnnrt::cuda {
namespace {

using namespace wgmma_test;

// The fused epilogue forms of wgmma_test_cases.h, and a forced pool block.
struct SparseCase {
  WCase conv;
  bool pool = false, residual = false, relu6 = false;
  int block = 0;  // > 0: force a block x block pooled tile (plan_pool_block), else the cost model
  FusedCase fused() const { return {conv, pool, residual, relu6}; }
};

// Returns the launch's name (which pool tiling ran).
std::string check_case(const SparseCase& sc, uint32_t seed) {
  const WCase& t = sc.conv;
  SCOPED_TRACE(describe(sc.fused()));
  EXPECT_TRUE(ConvFp16Sparse24::device_supported())
      << "compute capability 9.0 device but no sm_90a image: is 90 in CMAKE_CUDA_ARCHITECTURES?";
  if (!ConvFp16Sparse24::device_supported()) return "";
  const ConvShape shape = shape_of_case(sc.fused());
  EXPECT_TRUE(ConvFp16Sparse24::supports(shape));

  // Random data (make_data's own expected output, unpooled, is recomputed below on the pruned
  // weights).
  CaseData d = make_data(t, shape_of(t), seed);
  sparsity::prune_magnitude(d.weight.data(), sparsity::WeightShape{t.oc, t.c, t.k * t.k});
  EXPECT_EQ(sparsity::first_violation(d.weight.data(), {t.oc, t.c, t.k * t.k}), "");
  std::mt19937 rng(seed + 7);
  std::vector<float> r;
  if (sc.residual)
    r = test::random_fp16_values(size_t(t.batch) * t.oc * shape.conv_h * shape.conv_w, rng);
  const std::vector<float> expected = sparse_test::fused_conv_reference(
      shape, t.batch, d.x.data(), d.weight.data(), t.bias ? d.bias.data() : nullptr, r);

  const ConvFp16Sparse24 kernel(shape, d.weight.data(), t.bias ? d.bias.data() : nullptr, "conv");
  // What the kernel reads: kept values (fp16, half of K padded to 64), metadata (4 bits per
  // group of 4, i.e. 1/8 of the value bytes) and the fp32 bias.
  const size_t w_k = (size_t(t.k) * t.k * t.c + 63) / 64 * 64;
  EXPECT_EQ(kernel.weight_bytes(), t.oc * w_k + t.oc * w_k / 8 + 4 * size_t(t.oc));
  test::DeviceMem d_x(test::to_nhwc(d.x, t.batch, t.c, t.h, t.w));
  test::DeviceMem d_r(sc.residual ? test::to_nhwc(r, t.batch, t.oc, shape.conv_h, shape.conv_w)
                                  : std::vector<__half>(8));
  test::DeviceMem d_y(size_t(t.batch) * shape.out_h * shape.out_w * test::pad8(t.oc) *
                      sizeof(__half));
  ConvFp16Sparse24Plan plan = kernel.plan(t.batch);
  if (sc.block > 0) {
    const std::optional<ConvFp16Sparse24Plan> forced =
        kernel.plan_pool_block(t.batch, sc.block, sc.block);
    EXPECT_TRUE(forced.has_value()) << "no " << sc.block << "x" << sc.block << " pool block";
    if (forced) plan = *forced;
  }
  kernel.forward(plan.variant, d_x.get(), sc.residual ? d_r.get() : nullptr, d_y.get(), t.batch,
                 nullptr);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  expect_close(d_y.halves(), expected, t.batch, t.oc, shape.out_h, shape.out_w,
               "variant " + plan.name);
  return plan.name;
}

TEST(ConvSparse24Wgmma, AlexNetShapesMatchReference) {
  REQUIRE_HOPPER();
  check_case({{3, 64, 27, 27, 192, 5, 1, 2, true, true}, true}, 1);   // conv2 + pool, MI 3
  check_case({{2, 192, 13, 13, 384, 3, 1, 1, true, true}}, 2);        // conv3, MI 3, 2 tiles
  check_case({{3, 384, 13, 13, 256, 3, 1, 1, true, true}}, 3);        // conv4, MI 4
  check_case({{2, 256, 13, 13, 256, 3, 1, 1, true, true}, true}, 4);  // conv5 + pool
}

TEST(ConvSparse24Wgmma, OddShapesMatchReference) {
  REQUIRE_HOPPER();
  const SparseCase cases[] = {
      {{2, 8, 7, 7, 64, 1, 1, 0, true, true}},       // K = 8: one k-tile, mostly zero
      {{3, 24, 17, 17, 192, 5, 2, 2, true, true}},   // MI 3, stride 2, K 600 -> 640
      {{1, 192, 13, 13, 64, 3, 2, 0, false, true}},  // no ReLU: negative outputs survive
      {{2, 8, 17, 17, 128, 3, 1, 1, true, false}},   // MI 2, no bias, taps cross k-tiles
      {{3, 24, 7, 7, 320, 5, 1, 1, true, true}},     // 320 = 5 x 64: MI 1, five tiles
      {{1, 32, 17, 17, 256, 1, 2, 2, false, true}},  // 1x1 with padding: bias-only borders
      {{5, 40, 9, 11, 128, 3, 1, 1, false, true}, false, false, true},  // ReLU6
      {{3, 48, 11, 13, 192, 3, 1, 1, true, true}, false, true},         // fused residual
      {{2, 16, 15, 15, 64, 3, 1, 1, true, true}, true},                 // pool, MI 1
  };
  uint32_t seed = 100;
  for (const SparseCase& c : cases) check_case(c, seed++);
}

TEST(ConvSparse24Wgmma, RowStreamedPoolMatchesReference) {
  REQUIRE_HOPPER();
  // The whole 27 x 27 pooled image per CTA: 55 conv rows in passes of 2, the staging ring reused
  // ~27 times (AlexNet conv2's dense kernel streams the same way at batch 256).
  const std::string name =
      check_case({{2, 64, 55, 55, 64, 5, 1, 2, true, true}, true, false, false, 27}, 9);
  EXPECT_NE(name.find("_stream"), std::string::npos) << name;
  // conv2 itself, 13 x 13 pooled per CTA (27 conv rows, 4 per pass).
  const std::string conv2 =
      check_case({{2, 64, 27, 27, 192, 5, 1, 2, true, true}, true, false, false, 13}, 10);
  EXPECT_NE(conv2.find("_stream"), std::string::npos) << conv2;
}

TEST(ConvSparse24Wgmma, RejectsWeightThatIsNot24) {
  REQUIRE_HOPPER();
  const WCase t{1, 16, 9, 9, 64, 3, 1, 1, true, true};
  const ConvShape shape = shape_of(t);
  std::mt19937 rng(5);
  std::vector<float> w = test::random_fp16_values(size_t(t.oc) * t.c * 9, rng, 0.1f, 0.2f);
  sparse_test::expect_rejects_dense_weight(
      [&] { const ConvFp16Sparse24 kernel(shape, w.data(), nullptr, "conv7"); });
}

}  // namespace
}  // namespace cnnrt::cuda
