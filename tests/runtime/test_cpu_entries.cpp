// CPU registry entries (runtime/cpu_entries.cpp): what is specific to them.  Every entry's
// numerics on its op's case table — shapes and batch unpacked, fused epilogues, in-place runs —
// run in the kernel test harness (tests/harness, `--gtest_filter='*/cpu_ref_*'`).  Here: every
// op has one cpu_ref_* FP32 entry; the fused conv keeps its pre-pool tensor in the workspace it
// asks for and copied its weights at creation; an activation is accepted only by the entries
// with an epilogue; malformed nodes throw Error naming the layer.
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
  const std::vector<float> values = test::random_vector(shape_elements(shape), rng);
  p.value.data.assign(values.begin(), values.end());
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
  const KernelPlan plan =
      kernel.prepare({batch, std::vector<TensorType>(inputs.size(), fp32_nchw())});
  std::vector<float> workspace(plan.workspace_bytes / sizeof(float) + 1, std::nanf(""));
  KernelArgs args;
  for (const auto* in : inputs) args.inputs.push_back(in->data());
  args.output = output.data();
  args.batch = batch;
  args.workspace = plan.workspace_bytes > 0 ? workspace.data() : nullptr;
  args.variant = plan.variant;
  args.state = plan.state.get();
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
      {OpKind::LRN, "cpu_ref_lrn"},
      {OpKind::Relu6, "cpu_ref_relu6"},
      {OpKind::Clip, "cpu_ref_clip"}};
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
  const HostVector<float> weight = node.params[0].value.data, bias = node.params[1].value.data;
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

// conv, linear, add and batchnorm apply any activation as a clamp; the others have no epilogue
// and refuse a node that carries one rather than drop it.
TEST(CpuKernels, OnlyEntriesWithAnEpilogueAcceptAnActivation) {
  const std::vector<std::pair<OpKind, Attrs>> with_epilogue = {
      {OpKind::Conv, ConvAttrs{}},
      {OpKind::Linear, LinearAttrs{}},
      {OpKind::Add, EmptyAttrs{}},
      {OpKind::BatchNorm, BatchNormAttrs{}}};
  const std::vector<std::pair<OpKind, Attrs>> without = {
      {OpKind::Relu, EmptyAttrs{}},      {OpKind::MaxPool, PoolAttrs{}},
      {OpKind::AvgPool, PoolAttrs{}},    {OpKind::AdaptiveAvgPool, AdaptivePoolAttrs{}},
      {OpKind::Flatten, EmptyAttrs{}},   {OpKind::Dropout, DropoutAttrs{}},
      {OpKind::Softmax, SoftmaxAttrs{}}, {OpKind::Concat, ConcatAttrs{}},
      {OpKind::LRN, LRNAttrs{}}};
  for (Activation activation : {Activation::Relu, Activation::Relu6, Activation::Clip}) {
    for (const auto& [op, attrs] : with_epilogue) {
      Node node = make_node("layer", op, attrs, {{4, 5, 5}, {4, 5, 5}}, {4, 5, 5});
      node.activation = activation;
      EXPECT_EQ(cpu_registry().candidates(node, Device::CPU, Precision::FP32).size(), 1u)
          << op_name(op);
    }
    for (const auto& [op, attrs] : without) {
      Node node = make_node("layer", op, attrs, {{4, 5, 5}}, {4, 5, 5});
      node.activation = activation;
      EXPECT_TRUE(cpu_registry().candidates(node, Device::CPU, Precision::FP32).empty())
          << op_name(op) << " accepted an activation it would drop";
    }
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
