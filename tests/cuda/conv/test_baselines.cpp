// The comparison-only conv baselines (cudnn_conv when built with cuDNN, im2col_cublas_conv)
// against ref::conv2d (+ ReLU + max-pool for fused nodes) on odd channel counts and extents.
// Inputs and weights are rounded to fp16 before the reference sees them; tolerance: relative L2
// error ≤ 2e-3 (fp32 accumulation, fp16 output and, for fused pools, fp16 pre-pool rounding).
// Outputs start as NaN bytes; padding channels must come out exactly zero.
#include <random>

#include "cuda/fp16_test_util.h"
#include "graph/ops.h"
#include "kernels/cpu/reference.h"
#include "runtime/cuda/cuda_registry.h"

namespace cnnrt {
namespace {

using test::DeviceMem;

constexpr double kTolerance = 2e-3;

const KernelRegistry& baseline_registry() {
  static KernelRegistry* registry = [] {
    auto* r = new KernelRegistry();
    cuda::register_conv_baseline_kernels(*r);
    return r;
  }();
  return *registry;
}

std::vector<std::string> baseline_names() {
  std::vector<std::string> names{"im2col_cublas_conv"};
#ifdef CNNRT_WITH_CUDNN
  names.push_back("cudnn_conv");
#endif
  return names;
}

struct ConvCase {
  int c, h, w, oc, k, stride, pad, groups, batch;
  bool bias, relu, pool;
};

Node make_conv_node(const ConvCase& cc, const std::vector<float>& weight,
                    const std::vector<float>& bias) {
  Node node;
  node.name = "conv_under_test";
  node.op = OpKind::Conv;
  ConvAttrs a;
  a.out_channels = cc.oc;
  a.kernel_h = a.kernel_w = cc.k;
  a.stride_h = a.stride_w = cc.stride;
  a.pad_h = a.pad_w = cc.pad;
  a.groups = cc.groups;
  node.attrs = a;
  node.inputs = {"input"};
  node.input_shapes = {{cc.c, cc.h, cc.w}};
  const int64_t oh = pool_output_size(cc.h, cc.k, cc.stride, cc.pad, 1, false);
  const int64_t ow = pool_output_size(cc.w, cc.k, cc.stride, cc.pad, 1, false);
  node.output_shape = {cc.oc, oh, ow};
  node.activation = cc.relu ? Activation::Relu : Activation::None;
  if (cc.pool) {
    PoolAttrs p;
    p.kernel_h = p.kernel_w = 3;
    p.stride_h = p.stride_w = 2;
    node.fused_maxpool = p;
    node.pre_pool_shape = node.output_shape;
    node.output_shape = {cc.oc, pool_output_size(oh, 3, 2, 0, 1, false),
                         pool_output_size(ow, 3, 2, 0, 1, false)};
  }
  node.params.push_back(test::make_param("weight", {cc.oc, cc.c / cc.groups, cc.k, cc.k}, weight));
  if (cc.bias) node.params.push_back(test::make_param("bias", {cc.oc}, bias));
  return node;
}

void check_case(const std::string& entry, const ConvCase& cc, uint32_t seed) {
  std::mt19937 rng(seed);
  const float scale = 1.0f / std::sqrt(static_cast<float>(cc.c / cc.groups * cc.k * cc.k));
  const auto weight = test::random_fp16_values(
      static_cast<size_t>(cc.oc) * (cc.c / cc.groups) * cc.k * cc.k, rng, -scale, scale);
  const auto bias = test::random_fp16_values(cc.oc, rng);
  const Node node = make_conv_node(cc, weight, bias);
  const auto x = test::random_fp16_values(static_cast<size_t>(cc.batch) * cc.c * cc.h * cc.w, rng);

  // Reference: conv → relu → (pool), each step in fp32; the GPU rounds the pre-pool tensor to
  // fp16, which the tolerance covers.
  const Shape& conv_shape = cc.pool ? node.pre_pool_shape : node.output_shape;
  std::vector<float> conv_out(static_cast<size_t>(cc.batch) * shape_elements(conv_shape));
  ref::conv2d(x.data(), cc.batch, cc.c, cc.h, cc.w, weight.data(), cc.bias ? bias.data() : nullptr,
              node.get<ConvAttrs>(), conv_out.data());
  if (cc.relu) ref::relu(conv_out.data(), static_cast<int64_t>(conv_out.size()), conv_out.data());
  std::vector<float> expected = conv_out;
  if (cc.pool) {
    expected.assign(static_cast<size_t>(cc.batch) * shape_elements(node.output_shape), 0.0f);
    ref::maxpool2d(conv_out.data(), cc.batch, cc.oc, static_cast<int>(conv_shape[1]),
                   static_cast<int>(conv_shape[2]), *node.fused_maxpool, expected.data());
  }

  Graph graph;
  const KernelEntry* found = baseline_registry().find(entry);
  ASSERT_NE(found, nullptr);
  EXPECT_TRUE(found->baseline);
  test::EntryRunner runner(baseline_registry(), entry, node, graph);
  DeviceMem input(test::to_nhwc(x, cc.batch, cc.c, cc.h, cc.w));
  const int oh = static_cast<int>(node.output_shape[1]),
            ow = static_cast<int>(node.output_shape[2]);
  DeviceMem output(static_cast<size_t>(cc.batch) * oh * ow * test::pad8(cc.oc) * 2);
  runner.run({input.get()}, output.get(), cc.batch);
  int64_t bad_padding = 0;
  const auto got = test::from_nhwc(output.halves(), cc.batch, cc.oc, oh, ow, &bad_padding);
  SCOPED_TRACE(entry + " C=" + std::to_string(cc.c) + " OC=" + std::to_string(cc.oc) +
               " k=" + std::to_string(cc.k) + " groups=" + std::to_string(cc.groups) +
               " batch=" + std::to_string(cc.batch) + " pool=" + std::to_string(cc.pool));
  EXPECT_LE(test::rel_l2(got, expected), kTolerance);
  EXPECT_EQ(bad_padding, 0);
}

TEST(ConvBaselines, MatchReferenceOnOddShapesIncludingFusedEpilogues) {
  CNNRT_REQUIRE_CUDA_DEVICE();
  const ConvCase cases[] = {
      // c   h   w  oc  k  s  p  g  batch bias relu pool
      {3, 31, 29, 64, 11, 4, 2, 1, 3, true, true, true},  // AlexNet conv1 shape, small image
      {1, 9, 7, 7, 3, 1, 1, 1, 1, true, false, false},
      {13, 11, 9, 37, 3, 1, 1, 1, 3, false, true, false},
      {7, 13, 13, 13, 5, 1, 2, 1, 16, true, true, true},
      {64, 7, 9, 19, 3, 2, 0, 1, 1, true, false, false},
  };
  uint32_t seed = 700;
  for (const std::string& entry : baseline_names())
    for (const ConvCase& cc : cases) check_case(entry, cc, ++seed);
}

TEST(ConvBaselines, GroupedConvOnlyWhereSupported) {
  CNNRT_REQUIRE_CUDA_DEVICE();
  const ConvCase grouped{16, 9, 9, 32, 3, 1, 1, 2, 3, true, true, false};
  std::mt19937 rng(800);
  const auto weight = test::random_fp16_values(32 * 8 * 9, rng);
  const Node node = make_conv_node(grouped, weight, test::random_fp16_values(32, rng));
  EXPECT_FALSE(baseline_registry().find("im2col_cublas_conv")->supports(node));
#ifdef CNNRT_WITH_CUDNN
  EXPECT_TRUE(baseline_registry().find("cudnn_conv")->supports(node));
  check_case("cudnn_conv", grouped, 801);
  ConvCase odd_grouped = grouped;
  odd_grouped.c = 6;  // channel padding would break the groups: refused
  const Node refused = make_conv_node(odd_grouped, test::random_fp16_values(32 * 3 * 9, rng),
                                      test::random_fp16_values(32, rng));
  EXPECT_FALSE(baseline_registry().find("cudnn_conv")->supports(refused));
#endif
}

TEST(ConvBaselines, Im2colChunksLargeBatchesWithinItsWorkspace) {
  CNNRT_REQUIRE_CUDA_DEVICE();
  // 57×57 input, 11×11 kernel, stride 2 → 24×24 outputs × 968 columns ≈ 1.1 MB per sample, so a
  // batch of 300 (≈ 330 MB) needs two chunks of the 256 MB cap.
  const ConvCase big{3, 57, 57, 13, 11, 2, 0, 1, 300, true, true, false};
  check_case("im2col_cublas_conv", big, 900);
}

}  // namespace
}  // namespace cnnrt
