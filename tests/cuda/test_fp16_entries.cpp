// fp16 pools, relu, dropout, flatten, batchnorm, add, concat, softmax and LRN: what is specific
// to these registry entries.  Their numerics on every case of their op tables run in the kernel
// test harness (tests/harness, `--gtest_filter='*_fp16__*'`); here, host-only checks of what
// each entry declares: the epilogues it refuses rather than compute wrongly, and which entries
// may run in place.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/cuda/cuda_registry.h"

namespace cnnrt {
namespace {

const KernelRegistry& misc_registry() {
  static KernelRegistry* registry = [] {
    auto* r = new KernelRegistry();
    cuda::register_fp16_layer_kernels(*r);
    return r;
  }();
  return *registry;
}

Node make_node(OpKind op, std::vector<Shape> inputs, Shape output, Attrs attrs = EmptyAttrs{}) {
  Node node;
  node.name = std::string(op_name(op)) + "_under_test";
  node.op = op;
  node.attrs = std::move(attrs);
  node.input_shapes = std::move(inputs);
  for (size_t i = 0; i < node.input_shapes.size(); ++i)
    node.inputs.push_back(i == 0 ? "input" : "input" + std::to_string(i));
  node.output_shape = std::move(output);
  return node;
}

const KernelEntry& entry(const char* name) {
  const KernelEntry* found = misc_registry().find(name);
  if (found == nullptr) throw Error(std::string("no entry ") + name);
  return *found;
}

// The kernels implement a ReLU epilogue (add, batchnorm) or none: relu6 and clip (the fp32
// family computes those) and any activation on the other ops must be refused.
TEST(MiscFp16, EntriesRefuseEpiloguesTheyDoNotImplement) {
  Node pool = make_node(OpKind::MaxPool, {{3, 5, 5}}, {3, 2, 2}, PoolAttrs{});
  EXPECT_TRUE(entry("maxpool_fp16").supports(pool));
  pool.activation = Activation::Relu;
  EXPECT_FALSE(entry("maxpool_fp16").supports(pool));

  Node add = make_node(OpKind::Add, {{13, 5, 7}, {13, 5, 7}}, {13, 5, 7});
  Node bn = make_node(OpKind::BatchNorm, {{13, 5, 7}}, {13, 5, 7}, BatchNormAttrs{});
  for (Node* node : {&add, &bn}) {
    const KernelEntry& e = entry(node->op == OpKind::Add ? "add_fp16" : "batchnorm_fp16");
    for (Activation activation : {Activation::None, Activation::Relu}) {
      node->activation = activation;
      EXPECT_TRUE(e.supports(*node)) << e.name;
    }
    for (Activation activation : {Activation::Relu6, Activation::Clip}) {
      node->activation = activation;
      EXPECT_FALSE(e.supports(*node)) << e.name << " accepted an epilogue it does not compute";
    }
  }
}

// relu, dropout and a flatten that moves nothing (C % 8 == 0, or a vector) may write over their
// input; a flatten that drops channel padding cannot compact in place, and must say so.
TEST(MiscFp16, InPlaceOnlyWhereTheKernelAllowsIt) {
  Graph graph;
  auto in_place = [&](const char* name, const Node& node) {
    return entry(name).create({node, graph})->prepare({3, {fp16_nhwc8()}}).in_place;
  };
  EXPECT_TRUE(in_place("relu_fp16", make_node(OpKind::Relu, {{7, 5, 3}}, {7, 5, 3})));
  EXPECT_TRUE(
      in_place("dropout_fp16", make_node(OpKind::Dropout, {{37}}, {37}, DropoutAttrs{0.5f})));
  EXPECT_TRUE(in_place("flatten_fp16", make_node(OpKind::Flatten, {{64, 3, 3}}, {576})));
  EXPECT_TRUE(in_place("flatten_fp16", make_node(OpKind::Flatten, {{37}}, {37})));
  EXPECT_FALSE(in_place("flatten_fp16", make_node(OpKind::Flatten, {{13, 3, 5}}, {195})));
}

}  // namespace
}  // namespace cnnrt
