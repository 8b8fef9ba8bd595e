// relu6 and clip (graph/ops.cpp) and their fusion into conv / linear epilogues (graph/passes.cpp):
// parsing, errors naming file:line:col and the layer, the chain matcher's patterns for every
// activation (with and without a following max-pool), its preconditions, the clamp interval
// each fused node ends up with, and the `cnnrt info` label.
#include <gtest/gtest.h>

#include <cmath>

#include "graph/model_loader.h"
#include "graph/ops.h"
#include "graph/passes.h"
#include "graph_test_util.h"

namespace cnnrt {
namespace {

using test::error_of;
using test::model_text;
using Names = std::vector<std::string>;

Graph fused(const std::string& layers, const std::string& shape = "[3, 8, 8]") {
  Graph graph = parse_model(model_text(layers, shape), "m.yaml");
  bind_random_weights(graph, 5);
  run_default_passes(graph);
  return graph;
}

TEST(ActivationOps, Relu6AndClipParse) {
  const Graph graph = parse_model(model_text("  - {name: a, op: relu6}\n"
                                             "  - {name: b, op: clip, min: -1.5, max: 2}\n"
                                             "  - {name: c, op: clip, max: 3}\n"
                                             "  - {name: d, op: clip, min: 0}\n"),
                                  "m.yaml");
  EXPECT_EQ(graph.find("a")->op, OpKind::Relu6);
  EXPECT_EQ(graph.find("a")->output_shape, (Shape{3, 8, 8}));
  const ClipAttrs& b = graph.find("b")->get<ClipAttrs>();
  EXPECT_FLOAT_EQ(b.min, -1.5f);
  EXPECT_FLOAT_EQ(b.max, 2.0f);
  const ClipAttrs& c = graph.find("c")->get<ClipAttrs>();
  EXPECT_TRUE(std::isinf(c.min) && c.min < 0);  // an absent bound is unbounded
  EXPECT_FLOAT_EQ(c.max, 3.0f);
  EXPECT_TRUE(std::isinf(graph.find("d")->get<ClipAttrs>().max));
  EXPECT_DOUBLE_EQ(node_flops(*graph.find("b")), 3 * 8 * 8);  // 1 per element
  EXPECT_EQ(node_param_count(*graph.find("a")), 0);
}

TEST(ActivationOpsErrors, ClipNeedsABoundAndMinNotAboveMax) {
  const std::string none = error_of([] {
    parse_model(model_text("  - {name: a, op: relu}\n  - {name: k, op: clip}\n"), "m.yaml");
  });
  EXPECT_CONTAINS(none, "m.yaml:5:");
  EXPECT_CONTAINS(none, "layer 'k'");
  EXPECT_CONTAINS(none, "clip needs 'min', 'max' or both");
  const std::string order = error_of(
      [] { parse_model(model_text("  - {name: k, op: clip, min: 2, max: 1}\n"), "m.yaml"); });
  EXPECT_CONTAINS(order, "m.yaml:4:");
  EXPECT_CONTAINS(order, "layer 'k'");
  EXPECT_CONTAINS(order, "clip 'min' ('2') is greater than 'max' ('1')");
  EXPECT_CONTAINS(
      error_of([] { parse_model(model_text("  - {name: k, op: clip, min: low}\n"), "m.yaml"); }),
      "'min' must be a number, got 'low'");
  EXPECT_CONTAINS(
      error_of([] { parse_model(model_text("  - {name: k, op: relu6, max: 6}\n"), "m.yaml"); }),
      "unknown key 'max' for op relu6");
}

TEST(ActivationFusion, ConvRelu6MaxPoolFusesIntoOneNode) {
  const Graph graph = fused(
      "  - {name: c, op: conv, out_channels: 4, kernel: 3, padding: 1, weight: w, bias: b}\n"
      "  - {name: r, op: relu6}\n"
      "  - {name: p, op: maxpool, kernel: 2}\n");
  ASSERT_EQ(graph.nodes.size(), 1u);
  const Node& conv = graph.nodes[0];
  EXPECT_EQ(conv.activation, Activation::Relu6);
  EXPECT_EQ(conv.source_layers, (Names{"c", "r", "p"}));
  ASSERT_TRUE(conv.fused_maxpool.has_value());
  EXPECT_EQ(conv.pre_pool_shape, (Shape{4, 8, 8}));
  EXPECT_EQ(conv.output_shape, (Shape{4, 4, 4}));
  const ActivationBounds bounds = activation_bounds(conv);
  EXPECT_EQ(bounds.lo, 0.0f);
  EXPECT_EQ(bounds.hi, 6.0f);
  EXPECT_CONTAINS(describe_graph(graph), "conv+relu6+maxpool");
}

TEST(ActivationFusion, ConvClipCarriesItsBounds) {
  const Graph graph = fused(
      "  - {name: c, op: conv, out_channels: 4, kernel: 3, weight: w}\n"
      "  - {name: bn, op: batchnorm, weight: g, bias: b, running_mean: m, running_var: v}\n"
      "  - {name: k, op: clip, min: -0.5, max: 0.25}\n");
  ASSERT_EQ(graph.nodes.size(), 1u);
  const Node& conv = graph.nodes[0];
  EXPECT_EQ(conv.activation, Activation::Clip);
  EXPECT_EQ(conv.source_layers, (Names{"c", "bn", "k"}));
  EXPECT_FALSE(conv.fused_maxpool.has_value());
  EXPECT_EQ(activation_bounds(conv).lo, -0.5f);
  EXPECT_EQ(activation_bounds(conv).hi, 0.25f);
  EXPECT_CONTAINS(describe_graph(graph), "conv+clip");
}

TEST(ActivationFusion, LinearRelu6AndLinearClip) {
  const Graph graph = fused(
      "  - {name: f, op: flatten}\n"
      "  - {name: fc1, op: linear, out_features: 5, weight: w1}\n"
      "  - {name: r, op: relu6}\n"
      "  - {name: fc2, op: linear, out_features: 3, weight: w2, bias: b2}\n"
      "  - {name: k, op: clip, max: 1}\n");
  EXPECT_EQ(graph.find("fc1")->activation, Activation::Relu6);
  EXPECT_EQ(graph.find("fc1")->source_layers, (Names{"fc1", "r"}));
  const Node& fc2 = *graph.find("fc2");
  EXPECT_EQ(fc2.activation, Activation::Clip);
  EXPECT_TRUE(std::isinf(activation_bounds(fc2).lo));
  EXPECT_EQ(activation_bounds(fc2).hi, 1.0f);
  EXPECT_EQ(graph.output, "fc2");
  EXPECT_CONTAINS(describe_graph(graph), "linear+clip");
}

TEST(ActivationFusion, PreconditionsHoldForEveryActivation) {
  // conv's output feeds relu6 and a residual add: fusing would starve the add.
  const Graph shared = fused(
      "  - {name: c, op: conv, out_channels: 3, kernel: 3, padding: 1, weight: w}\n"
      "  - {name: r, op: relu6}\n"
      "  - {name: s, op: add, inputs: [c, r]}\n");
  EXPECT_EQ(shared.nodes.size(), 3u);
  EXPECT_EQ(shared.find("c")->activation, Activation::None);
  // A second activation after a fused one stays a node of its own (one epilogue per node).
  const Graph twice = fused(
      "  - {name: c, op: conv, out_channels: 3, kernel: 1, weight: w}\n"
      "  - {name: r, op: relu}\n"
      "  - {name: k, op: clip, min: 0.1, max: 0.2}\n");
  ASSERT_EQ(twice.nodes.size(), 2u);
  EXPECT_EQ(twice.find("c")->activation, Activation::Relu);
  EXPECT_EQ(twice.find("k")->op, OpKind::Clip);
  EXPECT_EQ(twice.find("k")->inputs, Names{"c"});
}

TEST(ActivationFusion, FusionKeepsTheFlopTotal) {
  Graph graph =
      parse_model(model_text("  - {name: c, op: conv, out_channels: 4, kernel: 3, weight: w}\n"
                             "  - {name: r, op: relu6}\n"
                             "  - {name: f, op: flatten}\n"
                             "  - {name: fc, op: linear, out_features: 2, weight: w2}\n"
                             "  - {name: k, op: clip, min: -1, max: 1}\n"),
                  "m.yaml");
  double before = 0;
  for (const Node& node : graph.nodes) before += node_flops(node);
  bind_random_weights(graph, 1);
  run_default_passes(graph);
  double after = 0;
  for (const Node& node : graph.nodes) after += node_flops(node);
  EXPECT_EQ(graph.nodes.size(), 3u);
  EXPECT_DOUBLE_EQ(after, before);
}

}  // namespace
}  // namespace cnnrt
