// fp16 pools, relu, dropout, flatten, batchnorm, add, concat, softmax and LRN against the CPU
// reference (kernels/cpu/reference.h), through their registry entries on hand-built nodes.
// Inputs are rounded to fp16 before the reference sees them.  Tolerances: ops that only move or
// compare values (max-pool, relu, dropout, flatten, concat) must match exactly; ops with
// arithmetic allow a relative L2 error of 2e-3 (fp16 output rounding is ~3e-4 rms).  Every
// output starts as NaN bytes, and padding lanes must come out exactly zero.
#include <algorithm>
#include <random>

#include "fp16_test_util.h"
#include "graph/ops.h"
#include "kernels/cpu/reference.h"
#include "runtime/cuda/cuda_registry.h"

namespace cnnrt {
namespace {

using test::DeviceMem;
using test::EntryRunner;

constexpr double kTolerance = 2e-3;

const KernelRegistry& misc_registry() {
  static KernelRegistry* registry = [] {
    auto* r = new KernelRegistry();
    cuda::register_misc_kernels(*r);
    return r;
  }();
  return *registry;
}

Node make_node(OpKind op, std::vector<Shape> inputs, Shape output) {
  Node node;
  node.name = std::string(op_name(op)) + "_under_test";
  node.op = op;
  node.input_shapes = std::move(inputs);
  for (size_t i = 0; i < node.input_shapes.size(); ++i)
    node.inputs.push_back(i == 0 ? "input" : "input" + std::to_string(i));
  node.output_shape = std::move(output);
  return node;
}

// Shape [C, H, W] or [F] as (c, h, w).
void dims(const Shape& s, int& c, int& h, int& w) {
  c = static_cast<int>(s[0]);
  h = s.size() == 3 ? static_cast<int>(s[1]) : 1;
  w = s.size() == 3 ? static_cast<int>(s[2]) : 1;
}

struct GpuResult {
  std::vector<float> values;  // NCHW
  int64_t bad_padding = 0;
};

// Runs `entry` on NCHW fp32 inputs, returns the NCHW output.  in_place: output = inputs[0].
GpuResult run_entry(const std::string& entry, const Node& node,
                    const std::vector<std::vector<float>>& inputs, int batch,
                    bool in_place = false) {
  Graph graph;
  EntryRunner runner(misc_registry(), entry, node, graph);
  std::vector<std::unique_ptr<DeviceMem>> buffers;
  std::vector<const void*> pointers;
  for (size_t i = 0; i < inputs.size(); ++i) {
    int c, h, w;
    dims(node.input_shapes[i], c, h, w);
    buffers.push_back(std::make_unique<DeviceMem>(test::to_nhwc(inputs[i], batch, c, h, w)));
    pointers.push_back(buffers.back()->get());
  }
  int c, h, w;
  dims(node.output_shape, c, h, w);
  const size_t out_bytes = static_cast<size_t>(batch) * h * w * test::pad8(c) * 2;
  // A flattened output is [pad8(C*H*W)] regardless of the input's padded size.
  DeviceMem fresh(out_bytes);
  void* output = in_place ? buffers[0]->get() : fresh.get();
  runner.run(pointers, output, batch);
  std::vector<__half> host(out_bytes / 2);
  CNNRT_CUDA_CHECK(cudaMemcpy(host.data(), output, out_bytes, cudaMemcpyDeviceToHost));
  GpuResult result;
  result.values = test::from_nhwc(host, batch, c, h, w, &result.bad_padding);
  return result;
}

// --- pools -----------------------------------------------------------------------------------

struct PoolCase {
  int c, h, w, batch;
  PoolAttrs attrs;
};

std::vector<PoolCase> pool_cases() {
  auto attrs = [](int k, int s, int p, bool ceil, bool include_pad) {
    PoolAttrs a;
    a.kernel_h = a.kernel_w = k;
    a.stride_h = a.stride_w = s;
    a.pad_h = a.pad_w = p;
    a.ceil_mode = ceil;
    a.count_include_pad = include_pad;
    return a;
  };
  PoolAttrs rect = attrs(3, 2, 1, false, true);
  rect.kernel_w = 2;
  rect.stride_h = 1;
  rect.pad_w = 0;
  return {{1, 7, 9, 3, attrs(3, 2, 0, false, true)},    {3, 13, 13, 1, attrs(3, 2, 1, true, true)},
          {7, 11, 5, 16, attrs(3, 2, 1, true, false)},  {13, 9, 9, 3, attrs(2, 2, 0, true, true)},
          {64, 27, 27, 3, attrs(3, 2, 0, false, true)}, {13, 15, 7, 1, rect}};
}

Shape pooled(const PoolCase& pc) {
  return {pc.c,
          pool_output_size(pc.h, pc.attrs.kernel_h, pc.attrs.stride_h, pc.attrs.pad_h, 1,
                           pc.attrs.ceil_mode),
          pool_output_size(pc.w, pc.attrs.kernel_w, pc.attrs.stride_w, pc.attrs.pad_w, 1,
                           pc.attrs.ceil_mode)};
}

TEST(MiscFp16, MaxPoolMatchesReferenceExactly) {
  CNNRT_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(11);
  for (const PoolCase& pc : pool_cases()) {
    Node node = make_node(OpKind::MaxPool, {{pc.c, pc.h, pc.w}}, pooled(pc));
    node.attrs = pc.attrs;
    const auto x =
        test::random_fp16_values(static_cast<size_t>(pc.batch) * pc.c * pc.h * pc.w, rng);
    std::vector<float> expected(static_cast<size_t>(pc.batch) * shape_elements(node.output_shape));
    ref::maxpool2d(x.data(), pc.batch, pc.c, pc.h, pc.w, pc.attrs, expected.data());
    const GpuResult got = run_entry("maxpool_fp16", node, {x}, pc.batch);
    SCOPED_TRACE("C=" + std::to_string(pc.c) + " H=" + std::to_string(pc.h) +
                 " W=" + std::to_string(pc.w) + " batch=" + std::to_string(pc.batch));
    EXPECT_EQ(got.values, expected);
    EXPECT_EQ(got.bad_padding, 0);
  }
}

TEST(MiscFp16, AvgPoolFollowsPyTorchDivisorRules) {
  CNNRT_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(12);
  for (const PoolCase& pc : pool_cases()) {
    Node node = make_node(OpKind::AvgPool, {{pc.c, pc.h, pc.w}}, pooled(pc));
    node.attrs = pc.attrs;
    const auto x =
        test::random_fp16_values(static_cast<size_t>(pc.batch) * pc.c * pc.h * pc.w, rng);
    std::vector<float> expected(static_cast<size_t>(pc.batch) * shape_elements(node.output_shape));
    ref::avgpool2d(x.data(), pc.batch, pc.c, pc.h, pc.w, pc.attrs, expected.data());
    const GpuResult got = run_entry("avgpool_fp16", node, {x}, pc.batch);
    SCOPED_TRACE("C=" + std::to_string(pc.c) + " ceil=" + std::to_string(pc.attrs.ceil_mode) +
                 " include_pad=" + std::to_string(pc.attrs.count_include_pad));
    EXPECT_LE(test::rel_l2(got.values, expected), kTolerance);
    EXPECT_EQ(got.bad_padding, 0);
  }
}

TEST(MiscFp16, AdaptiveAvgPoolUsesFloorCeilWindows) {
  CNNRT_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(13);
  struct Case {
    int c, h, w, oh, ow, batch;
  };
  for (const Case& k : {Case{13, 13, 13, 6, 6, 3}, Case{3, 7, 5, 3, 4, 1}, Case{64, 5, 5, 6, 6, 16},
                        Case{1, 9, 11, 1, 1, 3}}) {
    Node node = make_node(OpKind::AdaptiveAvgPool, {{k.c, k.h, k.w}}, {k.c, k.oh, k.ow});
    node.attrs = AdaptivePoolAttrs{k.oh, k.ow};
    const auto x = test::random_fp16_values(static_cast<size_t>(k.batch) * k.c * k.h * k.w, rng);
    std::vector<float> expected(static_cast<size_t>(k.batch) * k.c * k.oh * k.ow);
    ref::adaptive_avgpool2d(x.data(), k.batch, k.c, k.h, k.w, k.oh, k.ow, expected.data());
    const GpuResult got = run_entry("adaptive_avgpool_fp16", node, {x}, k.batch);
    EXPECT_LE(test::rel_l2(got.values, expected), kTolerance) << "C=" << k.c;
    EXPECT_EQ(got.bad_padding, 0);
  }
}

// --- relu / dropout / flatten ------------------------------------------------------------------

TEST(MiscFp16, ReluOutOfPlaceAndInPlace) {
  CNNRT_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(14);
  for (const Shape& shape : {Shape{7, 5, 3}, Shape{64, 3, 3}, Shape{37}, Shape{1, 9, 9}}) {
    for (bool in_place : {false, true}) {
      const int batch = in_place ? 3 : 16;
      Node node = make_node(OpKind::Relu, {shape}, shape);
      const auto x = test::random_fp16_values(batch * shape_elements(shape), rng);
      std::vector<float> expected(x.size());
      ref::relu(x.data(), static_cast<int64_t>(x.size()), expected.data());
      const GpuResult got = run_entry("relu_fp16", node, {x}, batch, in_place);
      EXPECT_EQ(got.values, expected) << shape_to_string(shape) << " in_place=" << in_place;
      EXPECT_EQ(got.bad_padding, 0);
    }
  }
}

TEST(MiscFp16, DropoutIsIdentityCopiedOrAliased) {
  CNNRT_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(15);
  const Shape shape{13, 3, 5};
  for (bool in_place : {false, true}) {
    Node node = make_node(OpKind::Dropout, {shape}, shape);
    node.attrs = DropoutAttrs{0.5f};
    const auto x = test::random_fp16_values(3 * shape_elements(shape), rng);
    const GpuResult got = run_entry("dropout_fp16", node, {x}, 3, in_place);
    EXPECT_EQ(got.values, x);
    EXPECT_EQ(got.bad_padding, 0);
  }
}

// The GPU flatten emits (h, w, c) order (cuda_registry.h); the reference's NCHW flatten is
// (c, h, w).  So the expected vector is the input transposed per sample.
std::vector<float> hwc_order(const std::vector<float>& x, int n, int c, int h, int w) {
  std::vector<float> out(x.size());
  for (int b = 0; b < n; ++b)
    for (int ch = 0; ch < c; ++ch)
      for (int p = 0; p < h * w; ++p)
        out[(static_cast<size_t>(b) * h * w + p) * c + ch] =
            x[(static_cast<size_t>(b) * c + ch) * h * w + p];
  return out;
}

TEST(MiscFp16, FlattenDropsChannelPaddingIntoHwcOrder) {
  CNNRT_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(16);
  for (const Shape& shape : {Shape{13, 3, 5}, Shape{3, 7, 7}, Shape{64, 3, 3}, Shape{1, 5, 3}}) {
    for (bool in_place : {false, true}) {
      const int batch = 3;
      const Shape out{shape_elements(shape)};
      Node node = make_node(OpKind::Flatten, {shape}, out);
      const auto x = test::random_fp16_values(batch * shape_elements(shape), rng);
      const GpuResult got = run_entry("flatten_fp16", node, {x}, batch, in_place);
      EXPECT_EQ(got.values, hwc_order(x, batch, static_cast<int>(shape[0]),
                                      static_cast<int>(shape[1]), static_cast<int>(shape[2])))
          << shape_to_string(shape) << " in_place=" << in_place;
      EXPECT_EQ(got.bad_padding, 0);
    }
  }
}

// --- batchnorm / add ---------------------------------------------------------------------------

TEST(MiscFp16, BatchNormMatchesReference) {
  CNNRT_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(17);
  for (const Shape& shape : {Shape{13, 5, 7}, Shape{64, 3, 3}, Shape{37}, Shape{3, 9, 1}}) {
    for (bool relu : {false, true}) {
      const int c = static_cast<int>(shape[0]);
      const int64_t spatial = shape_elements(shape) / c;
      Node node = make_node(OpKind::BatchNorm, {shape}, shape);
      node.attrs = BatchNormAttrs{1e-5f};
      node.activation = relu ? Activation::Relu : Activation::None;
      const auto gamma = test::random_fp16_values(c, rng, 0.5f, 1.5f);
      const auto beta = test::random_fp16_values(c, rng);
      const auto mean = test::random_fp16_values(c, rng);
      const auto var = test::random_fp16_values(c, rng, 0.1f, 2.0f);
      node.params = {test::make_param("weight", {c}, gamma), test::make_param("bias", {c}, beta),
                     test::make_param("running_mean", {c}, mean),
                     test::make_param("running_var", {c}, var)};
      const int batch = 3;
      const auto x = test::random_fp16_values(batch * shape_elements(shape), rng, -2.0f, 2.0f);
      std::vector<float> expected(x.size());
      ref::batchnorm(x.data(), batch, c, spatial, gamma.data(), beta.data(), mean.data(),
                     var.data(), 1e-5f, expected.data());
      if (relu) ref::relu(expected.data(), static_cast<int64_t>(expected.size()), expected.data());
      const GpuResult got = run_entry("batchnorm_fp16", node, {x}, batch);
      EXPECT_LE(test::rel_l2(got.values, expected), kTolerance) << shape_to_string(shape);
      EXPECT_EQ(got.bad_padding, 0);
    }
  }
}

TEST(MiscFp16, AddMatchesReferenceIncludingInPlace) {
  CNNRT_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(18);
  for (const Shape& shape : {Shape{13, 5, 7}, Shape{1, 3, 3}, Shape{100}}) {
    for (bool in_place : {false, true}) {
      Node node = make_node(OpKind::Add, {shape, shape}, shape);
      const int batch = 16;
      const auto a = test::random_fp16_values(batch * shape_elements(shape), rng);
      const auto b = test::random_fp16_values(a.size(), rng);
      std::vector<float> expected(a.size());
      ref::add(a.data(), b.data(), static_cast<int64_t>(a.size()), expected.data());
      const GpuResult got = run_entry("add_fp16", node, {a, b}, batch, in_place);
      EXPECT_LE(test::rel_l2(got.values, expected), kTolerance) << shape_to_string(shape);
      EXPECT_EQ(got.bad_padding, 0);
    }
  }
}

// --- concat ------------------------------------------------------------------------------------

TEST(MiscFp16, ConcatInterleavesChannelsPerPixel) {
  CNNRT_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(19);
  const std::vector<std::vector<int>> channel_sets = {{3, 13, 1}, {8, 16}, {7, 64}, {64, 64, 3}};
  for (const auto& channels : channel_sets) {
    const int h = 5, w = 3, batch = 3;
    std::vector<Shape> shapes;
    std::vector<std::vector<float>> inputs;
    std::vector<const float*> pointers;
    int total = 0;
    for (int c : channels) {
      shapes.push_back({c, h, w});
      inputs.push_back(test::random_fp16_values(static_cast<size_t>(batch) * c * h * w, rng));
      total += c;
    }
    for (const auto& in : inputs) pointers.push_back(in.data());
    Node node = make_node(OpKind::Concat, shapes, {total, h, w});
    node.attrs = ConcatAttrs{};
    std::vector<float> expected(static_cast<size_t>(batch) * total * h * w);
    ref::concat_channels(pointers.data(), channels.data(), static_cast<int>(channels.size()), batch,
                         h * w, expected.data());
    const GpuResult got = run_entry("concat_fp16", node, inputs, batch);
    EXPECT_EQ(got.values, expected) << "first C=" << channels[0];
    EXPECT_EQ(got.bad_padding, 0);
  }
}

// --- softmax / LRN -----------------------------------------------------------------------------

TEST(MiscFp16, SoftmaxOverFeaturesAndChannels) {
  CNNRT_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(20);
  for (const Shape& shape : {Shape{1000}, Shape{37}, Shape{1}, Shape{13, 3, 5}, Shape{64, 1, 3}}) {
    for (int batch : {1, 16}) {
      const int c = static_cast<int>(shape[0]);
      const int64_t inner = shape_elements(shape) / c;
      Node node = make_node(OpKind::Softmax, {shape}, shape);
      node.attrs = SoftmaxAttrs{};
      // Wide range so the max subtraction matters.
      const auto x = test::random_fp16_values(batch * shape_elements(shape), rng, -8.0f, 8.0f);
      std::vector<float> expected(x.size());
      ref::softmax(x.data(), batch, c, inner, expected.data());
      const GpuResult got = run_entry("softmax_fp16", node, {x}, batch);
      EXPECT_LE(test::rel_l2(got.values, expected), kTolerance)
          << shape_to_string(shape) << " batch " << batch;
      EXPECT_EQ(got.bad_padding, 0);
    }
  }
}

TEST(MiscFp16, SoftmaxInPlace) {
  CNNRT_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(21);
  const Shape shape{1000};
  Node node = make_node(OpKind::Softmax, {shape}, shape);
  const auto x = test::random_fp16_values(3 * 1000, rng, -8.0f, 8.0f);
  std::vector<float> expected(x.size());
  ref::softmax(x.data(), 3, 1000, 1, expected.data());
  const GpuResult got = run_entry("softmax_fp16", node, {x}, 3, /*in_place=*/true);
  EXPECT_LE(test::rel_l2(got.values, expected), kTolerance);
}

TEST(MiscFp16, LrnAcrossChannelsMatchesReference) {
  CNNRT_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(22);
  for (const Shape& shape : {Shape{13, 5, 7}, Shape{64, 3, 3}, Shape{1, 3, 3}, Shape{7, 1, 1}}) {
    for (int size : {5, 2}) {
      const int c = static_cast<int>(shape[0]);
      Node node = make_node(OpKind::LRN, {shape}, shape);
      LRNAttrs attrs;
      attrs.size = size;
      attrs.alpha = 1e-2f;  // larger than AlexNet's 1e-4 so the normalisation is visible
      attrs.beta = 0.75f;
      attrs.k = 2.0f;
      node.attrs = attrs;
      const int batch = 3;
      const auto x = test::random_fp16_values(batch * shape_elements(shape), rng, -4.0f, 4.0f);
      std::vector<float> expected(x.size());
      ref::lrn(x.data(), batch, c, shape_elements(shape) / c, attrs, expected.data());
      const GpuResult got = run_entry("lrn_fp16", node, {x}, batch);
      EXPECT_LE(test::rel_l2(got.values, expected), kTolerance) << shape_to_string(shape);
      EXPECT_EQ(got.bad_padding, 0);
    }
  }
}

TEST(MiscFp16, EntriesRefuseFusedActivationsTheyDoNotImplement) {
  Node node = make_node(OpKind::MaxPool, {{3, 5, 5}}, {3, 2, 2});
  node.attrs = PoolAttrs{};
  node.activation = Activation::Relu;
  const KernelEntry* entry = misc_registry().find("maxpool_fp16");
  ASSERT_NE(entry, nullptr);
  EXPECT_FALSE(entry->supports(node));
  node.activation = Activation::None;
  EXPECT_TRUE(entry->supports(node));
}

}  // namespace
}  // namespace cnnrt
