// CPU registry entries (runtime/cpu_kernels.cpp): every op has a cpu_ref_* FP32 entry; each
// kernel unpacks the node's per-sample shapes and the batch correctly (checked against direct
// calls of the reference functions); the fused conv epilogue is conv + bias → ReLU → max-pool
// with the pre-pool tensor in the workspace; relu/flatten/dropout work in and out of place;
// weights are copied at creation; malformed nodes throw Error naming the layer.
#include <gtest/gtest.h>

#include <random>

#include "cnnrt/error.h"
#include "kernels/cpu/reference.h"
#include "random_test_util.h"
#include "runtime/kernel.h"

namespace cnnrt {
namespace {

Param make_param(const std::string& role, Shape shape, std::mt19937& rng) {
  Param p;
  p.role = role;
  p.key = "test." + role;
  p.value.shape = shape;
  p.value.data = test::random_vector(shape_elements(shape), rng);
  return p;
}

Node make_node(const std::string& name, OpKind op, Attrs attrs, std::vector<Shape> inputs,
               Shape output) {
  Node node;
  node.name = name;
  node.op = op;
  node.attrs = std::move(attrs);
  for (size_t i = 0; i < inputs.size(); ++i) node.inputs.push_back("in" + std::to_string(i));
  node.input_shapes = std::move(inputs);
  node.output_shape = std::move(output);
  node.source_layers = {name};
  return node;
}

const KernelRegistry& cpu_registry() {
  static KernelRegistry* registry = [] {
    auto* r = new KernelRegistry();
    register_cpu_kernels(*r);
    return r;
  }();
  return *registry;
}

std::unique_ptr<LayerKernel> create_kernel(const Node& node) {
  const auto candidates = cpu_registry().candidates(node, Device::CPU, Precision::FP32);
  if (candidates.size() != 1) throw Error("expected exactly one CPU candidate for " + node.name);
  Graph graph;
  return candidates[0]->create(KernelBuildContext{node, graph});
}

// Runs `kernel` on inputs, with the workspace it asks for; output pre-filled with NaN.
std::vector<float> run_kernel(LayerKernel& kernel,
                              const std::vector<const std::vector<float>*>& inputs,
                              size_t output_elements, int batch) {
  std::vector<float> output(output_elements, std::nanf(""));
  const KernelPlan plan = kernel.prepare({batch, std::vector<TensorType>(inputs.size(), fp32_nchw())});
  std::vector<float> workspace(plan.workspace_bytes / sizeof(float) + 1, std::nanf(""));
  KernelArgs args;
  for (const auto* in : inputs) args.inputs.push_back(in->data());
  args.output = output.data();
  args.batch = batch;
  args.workspace = plan.workspace_bytes > 0 ? workspace.data() : nullptr;
  args.variant = plan.variant;
  kernel.run(args);
  return output;
}

void expect_equal(const std::vector<float>& actual, const std::vector<float>& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  // The kernels call the same reference code on the same data: results must be identical.
  for (size_t i = 0; i < actual.size(); ++i) ASSERT_EQ(actual[i], expected[i]) << "index " << i;
}

TEST(CpuKernels, EveryOpHasOneFp32ReferenceEntry) {
  const std::vector<std::pair<OpKind, std::string>> expected = {
      {OpKind::Conv, "cpu_ref_conv"},
      {OpKind::Relu, "cpu_ref_relu"},
      {OpKind::MaxPool, "cpu_ref_maxpool"},
      {OpKind::AvgPool, "cpu_ref_avgpool"},
      {OpKind::AdaptiveAvgPool, "cpu_ref_adaptive_avgpool"},
      {OpKind::Linear, "cpu_ref_linear"},
      {OpKind::Flatten, "cpu_ref_flatten"},
      {OpKind::Dropout, "cpu_ref_dropout"},
      {OpKind::Softmax, "cpu_ref_softmax"},
      {OpKind::BatchNorm, "cpu_ref_batchnorm"},
      {OpKind::Add, "cpu_ref_add"},
      {OpKind::Concat, "cpu_ref_concat"},
      {OpKind::LRN, "cpu_ref_lrn"}};
  EXPECT_EQ(cpu_registry().entries().size(), expected.size());
  for (const auto& [op, name] : expected) {
    const KernelEntry* entry = cpu_registry().find(name);
    ASSERT_NE(entry, nullptr) << name;
    EXPECT_EQ(entry->op, op) << name;
    EXPECT_EQ(entry->device, Device::CPU) << name;
    EXPECT_EQ(entry->precision, Precision::FP32) << name;
    EXPECT_FALSE(entry->baseline) << name;
  }
}

TEST(CpuKernels, FusedConvReluMaxPoolUsesWorkspaceAndMatchesUnfusedReference) {
  std::mt19937 rng(std::random_device{}());
  const int batch = 3, c = 4, h = 13, w = 11;
  ConvAttrs conv;
  conv.out_channels = 6;
  conv.kernel_h = conv.kernel_w = 3;
  conv.pad_h = conv.pad_w = 1;
  conv.groups = 2;
  PoolAttrs pool;
  pool.kernel_h = pool.kernel_w = 3;
  pool.stride_h = pool.stride_w = 2;
  Node node = make_node("conv1", OpKind::Conv, conv, {{c, h, w}}, {6, 6, 5});
  node.params = {make_param("weight", {6, 2, 3, 3}, rng), make_param("bias", {6}, rng)};
  node.activation = Activation::Relu;
  node.fused_maxpool = pool;
  node.pre_pool_shape = {6, 13, 11};
  node.source_layers = {"conv1", "relu1", "pool1"};

  auto kernel = create_kernel(node);
  EXPECT_EQ(kernel->prepare({batch, {fp32_nchw()}}).workspace_bytes,
            sizeof(float) * 6 * 13 * 11 * batch);
  EXPECT_EQ(kernel->weight_bytes(), sizeof(float) * (6 * 2 * 9 + 6));
  const auto x = test::random_vector(batch * c * h * w, rng);

  // Weights were copied at creation: changing the node afterwards must not matter.
  const std::vector<float> weight = node.params[0].value.data, bias = node.params[1].value.data;
  node.params[0].value.data.assign(weight.size(), 0.0f);
  const auto y = run_kernel(*kernel, {&x}, batch * 6 * 6 * 5, batch);

  std::vector<float> pre(batch * 6 * 13 * 11), expected(batch * 6 * 6 * 5);
  ref::conv2d(x.data(), batch, c, h, w, weight.data(), bias.data(), conv, pre.data());
  ref::relu(pre.data(), static_cast<int64_t>(pre.size()), pre.data());
  ref::maxpool2d(pre.data(), batch, 6, 13, 11, pool, expected.data());
  expect_equal(y, expected);

  KernelArgs no_workspace;
  no_workspace.inputs = {x.data()};
  std::vector<float> out(expected.size());
  no_workspace.output = out.data();
  no_workspace.batch = batch;
  EXPECT_THROW(kernel->run(no_workspace), Error);
}

TEST(CpuKernels, ConvWithoutEpilogueAndLinearWithRelu) {
  std::mt19937 rng(std::random_device{}());
  const int batch = 2;
  ConvAttrs conv;
  conv.out_channels = 5;
  conv.kernel_h = 3;
  conv.kernel_w = 2;
  conv.stride_h = 2;
  Node conv_node = make_node("conv", OpKind::Conv, conv, {{3, 9, 7}}, {5, 4, 6});
  conv_node.params = {make_param("weight", {5, 3, 3, 2}, rng)};  // no bias
  auto conv_kernel = create_kernel(conv_node);
  EXPECT_EQ(conv_kernel->prepare({batch, {fp32_nchw()}}).workspace_bytes, 0u);
  const auto x = test::random_vector(batch * 3 * 9 * 7, rng);
  std::vector<float> expected(batch * 5 * 4 * 6);
  ref::conv2d(x.data(), batch, 3, 9, 7, conv_node.params[0].value.data.data(), nullptr, conv,
              expected.data());
  expect_equal(run_kernel(*conv_kernel, {&x}, expected.size(), batch), expected);

  LinearAttrs linear;
  linear.out_features = 7;
  Node fc = make_node("fc", OpKind::Linear, linear, {{13}}, {7});
  fc.params = {make_param("weight", {7, 13}, rng), make_param("bias", {7}, rng)};
  fc.activation = Activation::Relu;
  auto fc_kernel = create_kernel(fc);
  const auto features = test::random_vector(batch * 13, rng);
  std::vector<float> fc_expected(batch * 7);
  ref::linear(features.data(), batch, 13, fc.params[0].value.data.data(),
              fc.params[1].value.data.data(), 7, fc_expected.data());
  ref::relu(fc_expected.data(), batch * 7, fc_expected.data());
  expect_equal(run_kernel(*fc_kernel, {&features}, fc_expected.size(), batch), fc_expected);
}

TEST(CpuKernels, ReluFlattenDropoutInPlaceAndOutOfPlace) {
  std::mt19937 rng(std::random_device{}());
  const int batch = 3;
  const std::vector<std::pair<OpKind, Attrs>> ops = {{OpKind::Relu, EmptyAttrs{}},
                                                     {OpKind::Flatten, EmptyAttrs{}},
                                                     {OpKind::Dropout, DropoutAttrs{}}};
  for (const auto& [op, attrs] : ops) {
    const Shape out_shape = op == OpKind::Flatten ? Shape{5 * 3 * 7} : Shape{5, 3, 7};
    const Node node = make_node("layer", op, attrs, {{5, 3, 7}}, out_shape);
    auto kernel = create_kernel(node);
    const auto x = test::random_vector(batch * 5 * 3 * 7, rng);
    std::vector<float> expected = x;
    if (op == OpKind::Relu) ref::relu(x.data(), static_cast<int64_t>(x.size()), expected.data());
    SCOPED_TRACE(op_name(op));
    expect_equal(run_kernel(*kernel, {&x}, x.size(), batch), expected);  // out of place
    std::vector<float> in_place = x;
    KernelArgs args;
    args.inputs = {in_place.data()};
    args.output = in_place.data();
    args.batch = batch;
    kernel->run(args);
    expect_equal(in_place, expected);
  }
}

TEST(CpuKernels, PoolNormAndMultiInputOpsUnpackShapes) {
  std::mt19937 rng(std::random_device{}());
  const int batch = 2, c = 3, h = 9, w = 7;
  const auto x = test::random_vector(batch * c * h * w, rng);
  const auto x2 = test::random_vector(batch * c * h * w, rng);
  const auto x3 = test::random_vector(batch * 2 * h * w, rng);

  PoolAttrs pool;
  pool.kernel_h = 3;
  pool.kernel_w = 2;
  pool.stride_h = 2;
  pool.stride_w = 2;
  pool.pad_h = 1;
  pool.ceil_mode = true;
  pool.count_include_pad = false;
  // ceil((9+2-3)/2)+1 = 5, ceil((7-2)/2)+1 = 4
  {
    std::vector<float> expected(batch * c * 5 * 4);
    ref::maxpool2d(x.data(), batch, c, h, w, pool, expected.data());
    auto kernel = create_kernel(make_node("pool", OpKind::MaxPool, pool, {{c, h, w}}, {c, 5, 4}));
    expect_equal(run_kernel(*kernel, {&x}, expected.size(), batch), expected);
    ref::avgpool2d(x.data(), batch, c, h, w, pool, expected.data());
    kernel = create_kernel(make_node("avg", OpKind::AvgPool, pool, {{c, h, w}}, {c, 5, 4}));
    expect_equal(run_kernel(*kernel, {&x}, expected.size(), batch), expected);
  }
  {
    AdaptivePoolAttrs adaptive;
    adaptive.out_h = 4;
    adaptive.out_w = 3;
    std::vector<float> expected(batch * c * 4 * 3);
    ref::adaptive_avgpool2d(x.data(), batch, c, h, w, 4, 3, expected.data());
    auto kernel =
        create_kernel(make_node("gap", OpKind::AdaptiveAvgPool, adaptive, {{c, h, w}}, {c, 4, 3}));
    expect_equal(run_kernel(*kernel, {&x}, expected.size(), batch), expected);
  }
  {
    std::vector<float> expected(x.size());
    ref::softmax(x.data(), batch, c, h * w, expected.data());
    auto kernel =
        create_kernel(make_node("sm", OpKind::Softmax, SoftmaxAttrs{}, {{c, h, w}}, {c, h, w}));
    expect_equal(run_kernel(*kernel, {&x}, expected.size(), batch), expected);

    LRNAttrs lrn;
    lrn.size = 3;
    ref::lrn(x.data(), batch, c, h * w, lrn, expected.data());
    kernel = create_kernel(make_node("lrn", OpKind::LRN, lrn, {{c, h, w}}, {c, h, w}));
    expect_equal(run_kernel(*kernel, {&x}, expected.size(), batch), expected);

    ref::add(x.data(), x2.data(), static_cast<int64_t>(x.size()), expected.data());
    kernel = create_kernel(
        make_node("add", OpKind::Add, EmptyAttrs{}, {{c, h, w}, {c, h, w}}, {c, h, w}));
    expect_equal(run_kernel(*kernel, {&x, &x2}, expected.size(), batch), expected);
  }
  {
    Node bn = make_node("bn", OpKind::BatchNorm, BatchNormAttrs{}, {{c, h, w}}, {c, h, w});
    bn.params = {make_param("weight", {c}, rng), make_param("bias", {c}, rng),
                 make_param("running_mean", {c}, rng), make_param("running_var", {c}, rng)};
    for (float& v : bn.params[3].value.data) v = std::fabs(v) + 0.1f;
    std::vector<float> expected(x.size());
    ref::batchnorm(x.data(), batch, c, h * w, bn.params[0].value.data.data(),
                   bn.params[1].value.data.data(), bn.params[2].value.data.data(),
                   bn.params[3].value.data.data(), 1e-5f, expected.data());
    expect_equal(run_kernel(*create_kernel(bn), {&x}, expected.size(), batch), expected);
  }
  {
    const float* inputs[] = {x.data(), x3.data()};
    const int channels[] = {c, 2};
    std::vector<float> expected(batch * (c + 2) * h * w);
    ref::concat_channels(inputs, channels, 2, batch, h * w, expected.data());
    auto kernel = create_kernel(
        make_node("cat", OpKind::Concat, ConcatAttrs{}, {{c, h, w}, {2, h, w}}, {c + 2, h, w}));
    expect_equal(run_kernel(*kernel, {&x, &x3}, expected.size(), batch), expected);
  }
}

TEST(CpuKernels, MalformedNodesThrowErrorNamingTheLayer) {
  std::mt19937 rng(std::random_device{}());
  ConvAttrs conv;
  conv.out_channels = 4;
  conv.kernel_h = conv.kernel_w = 3;
  Node node = make_node("bad_conv", OpKind::Conv, conv, {{3, 8, 8}}, {4, 6, 6});
  node.params = {make_param("weight", {4, 3, 3, 2}, rng)};  // wrong kernel width
  try {
    create_kernel(node);
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bad_conv"), std::string::npos) << e.what();
  }
  node.params.clear();  // weight missing entirely
  EXPECT_THROW(create_kernel(node), Error);

  Node bn = make_node("bad_bn", OpKind::BatchNorm, BatchNormAttrs{}, {{3, 4, 4}}, {3, 4, 4});
  bn.params = {make_param("running_mean", {3}, rng)};  // running_var missing
  EXPECT_THROW(create_kernel(bn), Error);
}

}  // namespace
}  // namespace cnnrt
